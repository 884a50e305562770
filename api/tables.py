"""Tables and play (role ``dealer``): open and close tables, run rounds decision by decision.

Every decision answers with what it recorded and the round as the terminal may see it: the
dealer's face-down card stays ``hidden`` until revealed (R-G2), the shoe never shows, and
``round.legal`` lists the decisions somebody may make now.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from marshmallow import Schema
from werkzeug.exceptions import Forbidden

from api.auth import AUDITOR, DEALER, MANAGER, current_principal
from api.schemas import (
    AnswerSchema,
    BoxBettorSchema,
    DecisionResponseSchema,
    HandDecisionSchema,
    InsuranceSchema,
    NoBodySchema,
    OpenTableSchema,
    ReasonSchema,
    ReopenSchema,
    RoundCommandHeaderSchema,
    RoundIdsSchema,
    RoundStateSchema,
    StakeSchema,
    SurrenderSchema,
    TableRoundsQuerySchema,
    TableSchema,
)
from api.services import ledger
from api.views import Blueprint, actor, guard
from ledger.application import GameLedger
from ledger.errors import RuleSetInvalid
from ledger.rules import RATIO_FIELDS, RuleSet, TableLimits, preset, preset_clash

blp = Blueprint("tables", __name__, description="Tables and play (dealer).")
rounds = Blueprint("rounds", __name__, description="Rounds, decision by decision (dealer).")

VIEWERS = (DEALER, MANAGER, AUDITOR)
_NO_BODY = NoBodySchema()  # one instance: given a class, webargs builds one per request


_LIMITS = frozenset(f.name for f in dataclasses.fields(TableLimits))
_RULES = frozenset(f.name for f in dataclasses.fields(RuleSet))


@contextlib.contextmanager
def settings_named() -> Iterator[None]:
    """A refused setting named as the request holds it: ``limits.table_max``, ``overrides.
    decks`` (the ledger names the setting alone; the top-level ``name`` is the table's)."""
    try:
        yield
    except RuleSetInvalid as error:
        member = "limits" if error.field in _LIMITS else (
            "overrides" if error.field in _RULES else None)
        if member is None:
            raise
        raise RuleSetInvalid(f"{member}.{error.field}", error.reason, error.rule) from None


def rules_from(body: dict[str, Any]) -> RuleSet:
    """A preset with its overrides (validated as the rule set is built). Rules that differ
    from the preset carry a name or version of their own: a round records the rule set by
    name, version and content hash (R-S1), and the first two must tell rule sets apart."""
    overrides = {k: tuple(v) if k in RATIO_FIELDS else v
                 for k, v in (body.get("overrides") or {}).items()}
    rules = preset(body["preset"]).evolve(**overrides)
    clash = preset_clash(rules)
    if clash is not None:  # the ledger refuses it too; here the field at fault is named
        raise RuleSetInvalid("overrides", clash)
    return rules


# --- tables ----------------------------------------------------------------------------------


@blp.route("/tables", methods=["POST"])
@guard(blp, DEALER, MANAGER, mutating=True)
@blp.arguments(OpenTableSchema())
@blp.response(201, TableSchema)
def open_table(body: dict[str, Any], request_id: str) -> dict[str, Any]:
    """Open a table under a preset (R-S2); overrides and limits (R-S1, R-X15) are the
    manager's, as a change of a table's rules is: a dealer opens a preset as it is."""
    if (body.get("overrides") or body.get("limits")) and current_principal().role != MANAGER:
        raise Forbidden("The dealer role opens a table under a preset as it is, with its "
                        "default limits; rules or limits of its own need the manager role.")
    led = ledger()
    with settings_named():
        rules = rules_from(body)
        limits = TableLimits.from_dict(body.get("limits") or {})
        table_id = led.open_table(request_id, actor(), body["name"], rules, limits,
                                  body["currency"])
    return led.table(table_id)


@blp.route("/tables/<uuid:table_id>", methods=["GET"])
@guard(blp, *VIEWERS)
@blp.response(200, TableSchema)
def get_table(table_id: UUID) -> dict[str, Any]:
    """A table: its rules in force, limits, shoe and current round."""
    return ledger().table(table_id)


@blp.route("/tables/<uuid:table_id>/close", methods=["POST"])
@guard(blp, DEALER, mutating=True)
@blp.arguments(ReasonSchema())
@blp.response(200, TableSchema)
def close_table(body: dict[str, Any], table_id: UUID, request_id: str) -> dict[str, Any]:
    """Close a table between rounds; its shoe retires and is revealed (R-H2)."""
    led = ledger()
    led.close_table(request_id, actor(), table_id, body["reason"])
    return led.table(table_id)


@blp.route("/tables/<uuid:table_id>/reopen", methods=["POST"])
@guard(blp, DEALER, mutating=True)
@blp.arguments(ReopenSchema(), required=False)
@blp.response(200, TableSchema)
def reopen_table(body: dict[str, Any], table_id: UUID, request_id: str) -> dict[str, Any]:
    """Reopen a closed table, with a reason if given (a fresh shoe comes with its next
    round)."""
    led = ledger()
    led.reopen_table(request_id, actor(), table_id, (body or {}).get("reason", ""))
    return led.table(table_id)


@blp.route("/tables/<uuid:table_id>/rounds", methods=["POST"])
@guard(blp, DEALER, mutating=True)
@blp.arguments(_NO_BODY, required=False)
@blp.response(201, RoundStateSchema)
def start_round(_: dict[str, Any], table_id: UUID, request_id: str) -> dict[str, Any]:
    """Start a round under the rules in force; betting opens (R-S1, R-H4). The answer is the
    round as it started (a retry gets the same), which the ledger holds without a read."""
    led = ledger()
    round_id = led.start_round(request_id, actor(), table_id)
    return led.round_state(round_id, 1)


@blp.route("/tables/<uuid:table_id>/rounds", methods=["GET"])
@guard(blp, *VIEWERS)
@blp.arguments(TableRoundsQuerySchema(), location="query", unknown="raise")
@blp.response(200, RoundIdsSchema)
def table_rounds(query: dict[str, Any], table_id: UUID) -> dict[str, Any]:
    """The table's round ids, newest first, a page at a time."""
    return ledger().table_rounds(table_id, before=query.get("before"), limit=query["limit"])


# --- rounds ----------------------------------------------------------------------------------


@rounds.route("/rounds/<uuid:round_id>", methods=["GET"])
@guard(rounds, *VIEWERS)
@rounds.response(200, RoundStateSchema)
def get_round(round_id: UUID) -> dict[str, Any]:
    """The round now, as a terminal may see it, with the legal decisions."""
    return ledger().round_state(round_id)


# The use case, given the ledger, the request id, the actor, the round, the body and the
# version the terminal saw (If-Match; None when not sent).
Run = Callable[[GameLedger, str, str, UUID, dict[str, Any], int | None], dict[str, Any]]
_ROUND_COMMAND_HEADERS = RoundCommandHeaderSchema()


def round_command(bp: Blueprint, name: str, path: str, schema: type[Schema] | None, run: Run,
                  summary: str, roles: tuple[str, ...] = (DEALER,)) -> None:
    """Register ``POST /rounds/<round_id>/<path>``: run a use case, answer with the round
    right after it (the ledger keeps that version at hand: no second read)."""

    def view(*args: Any, round_id: UUID, request_id: str,
             expected: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = args[0] if args else {}
        led = ledger()
        result = run(led, request_id, actor(), round_id, body, expected)
        return {"result": result, "round": led.round_state(round_id, result["version"])}

    view.__name__ = view.__qualname__ = name
    view.__doc__ = summary
    decorated: Any = bp.response(200, DecisionResponseSchema)(view)
    decorated = bp.alt_response(412, response="PRECONDITION_FAILED")(decorated)
    # An instance: given a class, webargs would build a new schema for every request.
    decorated = (bp.arguments(schema())(decorated) if schema is not None
                 else bp.arguments(_NO_BODY, required=False)(decorated))
    decorated = guard(bp, *roles, mutating=True, headers=_ROUND_COMMAND_HEADERS)(decorated)
    bp.route(f"/rounds/<uuid:round_id>{path}", methods=["POST"], endpoint=name)(decorated)


# Each round command: its endpoint, path, body schema, use case and summary.
COMMANDS: tuple[tuple[str, str, type[Schema] | None, Run, str], ...] = (
    ("place_stake", "/stakes", StakeSchema,
     lambda g, r, a, i, b, v: g.place_stake(r, a, i, b["bettor"], b["box"], b["amount"],
                                            expected=v),
     "Place a stake on a box while betting is open (R-C8, R-M3)."),
    ("withdraw_stake", "/stakes/withdraw", BoxBettorSchema,
     lambda g, r, a, i, b, v: g.withdraw_stake(r, a, i, b["bettor"], b["box"], expected=v),
     "Withdraw a stake while betting is open; its hold is released (R-C8)."),
    ("deal", "/deal", None,
     lambda g, r, a, i, b, v: g.deal(r, a, i, expected=v),
     "Close betting and make the initial deal (R-C8, R-G2)."),
    ("hit", "/hit", HandDecisionSchema,
     lambda g, r, a, i, b, v: g.hit(r, a, i, b["player"], b["box"], b["hand"], expected=v),
     "The box owner hits the hand whose turn it is (R-G3, R-G4)."),
    ("stand", "/stand", HandDecisionSchema,
     lambda g, r, a, i, b, v: g.stand(r, a, i, b["player"], b["box"], b["hand"], expected=v),
     "The box owner stands."),
    ("double", "/double", HandDecisionSchema,
     lambda g, r, a, i, b, v: g.double(r, a, i, b["player"], b["box"], b["hand"], expected=v),
     "The box owner doubles: one more stake, exactly one more card (R-C2)."),
    ("split", "/split", HandDecisionSchema,
     lambda g, r, a, i, b, v: g.split(r, a, i, b["player"], b["box"], b["hand"], expected=v),
     "The box owner splits a pair (R-C3)."),
    ("surrender", "/surrender", SurrenderSchema,
     lambda g, r, a, i, b, v: g.surrender(r, a, i, b["player"], b["box"], expected=v),
     "The box owner surrenders the box: half of every stake is lost (R-C1)."),
    ("match", "/match", AnswerSchema,
     lambda g, r, a, i, b, v: g.answer(r, a, i, b["bettor"], b["box"], b["hand"], True,
                                       expected=v),
     "A co-bettor matches the owner's double or split (R-C4)."),
    ("decline", "/decline", AnswerSchema,
     lambda g, r, a, i, b, v: g.answer(r, a, i, b["bettor"], b["box"], b["hand"], False,
                                       expected=v),
     "A co-bettor declines the owner's double or split (R-C4)."),
    ("insure", "/insurance", InsuranceSchema,
     lambda g, r, a, i, b, v: g.insure(r, a, i, b["bettor"], b["amount"], expected=v),
     "A player insures against a dealer natural (R-C5)."),
    ("even_money", "/even-money", BoxBettorSchema,
     lambda g, r, a, i, b, v: g.even_money(r, a, i, b["bettor"], b["box"], expected=v),
     "A bettor with a natural against an ace takes even money (R-C6)."),
    ("play_dealer", "/dealer", None,
     lambda g, r, a, i, b, v: g.play_dealer(r, a, i, expected=v),
     "The dealer plays out the hand (R-G8, R-W6)."),
    ("settle", "/settle", None,
     lambda g, r, a, i, b, v: g.settle(r, a, i, expected=v),
     "Settle every stake against the dealer's result (R-G5..R-G7, R-C5, R-C7)."),
)

for _name, _path, _schema, _run, _summary in COMMANDS:
    round_command(rounds, _name, _path, _schema, _run, _summary)

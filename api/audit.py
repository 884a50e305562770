"""Replay and audit (roles ``auditor`` and ``manager``; read-only).

A round's events with actor, time and version, its state at any version, its frame-by-frame
replay and its re-adjudication; a shoe's commitment, and its reveal and verification once
retired; the event store's hash chain. Nothing here shows a live shoe's order: the ledger's
queries mask it, and the response schemas carry no field that could hold it.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from api.auth import AUDITOR, MANAGER
from api.schemas import (
    VERSION_IN_PATH,
    AccountSchema,
    ChainHeadSchema,
    ChainQuerySchema,
    ChainReportSchema,
    EntriesPageSchema,
    EntriesQuerySchema,
    EventSchema,
    FindingsSchema,
    FrameSchema,
    PostingSchema,
    RoundStateSchema,
    ShoeSchema,
)
from api.services import ledger
from api.views import Blueprint, guard
from ledger.storage import LedgerRecorder, chain_head, verify_chain

blp = Blueprint("audit", __name__, url_prefix="/audit", description="Replay and audit.")

AUDITORS = (AUDITOR, MANAGER)


@blp.route("/rounds/<uuid:round_id>/events", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, EventSchema(many=True))
def round_events(round_id: UUID) -> list[dict[str, Any]]:
    """Every event of a round with version, time, actor and request id (a face-down card stays
    hidden while the round is live, R-G2)."""
    return ledger().round_events(round_id)


@blp.route("/rounds/<uuid:round_id>/versions/<int(signed=True):version>", methods=["GET"],
           parameters=[VERSION_IN_PATH])
@guard(blp, *AUDITORS)
@blp.response(200, RoundStateSchema)
def round_at(round_id: UUID, version: int) -> dict[str, Any]:
    """The round as it stood right after its event ``version``."""
    return ledger().round_state(round_id, version)


@blp.route("/rounds/<uuid:round_id>/replay", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, FrameSchema(many=True))
def replay(round_id: UUID) -> list[dict[str, Any]]:
    """Frame by frame: each event with the round's state right after it."""
    return ledger().replay(round_id)


@blp.route("/rounds/<uuid:round_id>/check", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, FindingsSchema)
def check_round(round_id: UUID) -> dict[str, Any]:
    """Re-adjudicate: re-run the rules over the recorded cards and decisions (R-S1)."""
    findings = ledger().check_round(round_id)
    return {"ok": not findings, "findings": findings}


@blp.route("/rounds/<uuid:round_id>/postings", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, PostingSchema(many=True))
def round_postings(round_id: UUID) -> list[dict[str, Any]]:
    """Every posting naming the round, on any account, with the account it moved: what the
    round check compares with the round's events (R-M4), by account."""
    return ledger().round_postings(round_id)


@blp.route("/shoes/<uuid:shoe_id>", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, ShoeSchema)
def shoe(shoe_id: UUID) -> dict[str, Any]:
    """A shoe's commitment and position; its order and salt once retired (R-H2)."""
    return ledger().shoe(shoe_id)


@blp.route("/shoes/<uuid:shoe_id>/verification", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, FindingsSchema)
def verify_shoe(shoe_id: UUID) -> dict[str, Any]:
    """For a retired shoe: the reveal matches the commitment and every card dealt was the next
    card of the order (R-H2, R-H3). A live shoe is refused (422, ShoeLive): nothing is checked
    until its order is revealed."""
    findings = ledger().verify_shoe(shoe_id)
    return {"ok": not findings, "findings": findings}


@blp.route("/tables/<uuid:table_id>/events", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(EntriesQuerySchema(), location="query", unknown="raise")
@blp.response(200, EntriesPageSchema)
def table_events(query: dict[str, Any], table_id: UUID) -> dict[str, Any]:
    """The table's record, a page at a time: who opened it, changed its rules and why, started
    each shoe and round, closed and reopened it, and when (R-S1)."""
    return ledger().table_events(table_id, after=query["after"], limit=query["limit"])


@blp.route("/tables/<uuid:table_id>/house", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, AccountSchema)
def house(table_id: UUID) -> dict[str, Any]:
    """The table's house account (R-M4)."""
    return ledger().house(table_id)


@blp.route("/tables/<uuid:table_id>/house/entries", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(EntriesQuerySchema(), location="query", unknown="raise")
@blp.response(200, EntriesPageSchema)
def house_entries(query: dict[str, Any], table_id: UUID) -> dict[str, Any]:
    """The house account's statement: every entry in order, a page at a time (R-M4)."""
    return ledger().house_entries(table_id, after=query["after"], limit=query["limit"])


@blp.route("/chain", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(ChainQuerySchema(), location="query", unknown="raise")
@blp.response(200, ChainReportSchema)
def chain(query: dict[str, Any]) -> dict[str, Any]:
    """Walk the event store's hash chain: every stored event is recomputed against its link.

    At most ``limit`` rows per request: a longer chain is walked in parts, each from the
    ``next_after`` of the part before, until ``complete``. A part takes the link stored where
    it starts on trust (``from_start`` is false): only the parts before it check the events
    up to there. Give a head kept outside the database (``expected_head``, and
    ``expected_at``, the notification id it was taken at) to a walk from the start to prove
    that nothing up to that event was changed, removed or inserted since, however many events
    came after it. ``pitboss chain`` walks it all against the database.
    """
    report = verify_chain(_recorder(), after=query["after"], limit=query["limit"],
                          expected_head=query.get("expected_head"),
                          expected_at=query.get("expected_at"))
    return {"rows": report.rows, "head": report.head,
            "head_notification_id": report.head_notification_id, "intact": report.intact,
            "findings": report.findings, "complete": report.complete,
            "from_start": report.from_start, "next_after": report.next_after,
            "kept_head_checked": report.kept_head_checked,
            "kept_head_at": report.kept_head_at, "warnings": report.warnings}


@blp.route("/chain/head", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, ChainHeadSchema)
def head() -> dict[str, Any]:
    """The last event's notification id and chain hash: keep it outside the database."""
    notification_id, digest = chain_head(_recorder())
    return {"notification_id": notification_id, "head": digest}


def _recorder() -> LedgerRecorder:
    recorder = ledger().recorder
    if not isinstance(recorder, LedgerRecorder):
        raise TypeError("the ledger does not store in PostgreSQL with the hash chain")
    return recorder

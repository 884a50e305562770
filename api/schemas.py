"""Marshmallow schemas of every request and response, and the strict fields they use.

Requests refuse unknown fields (marshmallow's default ``RAISE``), floats and booleans where a
whole number is due, and anything but ``true``/``false`` where a boolean is due (R-M1: no
floats anywhere). Every number has a range and every list and text a length.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from functools import cache
from typing import Any, Final

import marshmallow
from marshmallow import EXCLUDE, ValidationError, fields, validate, validates_schema

from api.auth import ROLES
from ledger.aggregates.account import ACCOUNT_KINDS
from ledger.application import (
    PAGE_SIZE_MAX,
    REQUEST_ID_MAX_CHARS,
    VERSION_MAX,
)
from ledger.engine.machine import DECISIONS, HAND_STATUSES, PHASES, REASON_MAX_CHARS
from ledger.names import NAME_MAX_CHARS, PLAYER_ID_PATTERN, PLAYER_ID_WRITTEN, WRITTEN_ONE_WAY
from ledger.plays import Play
from ledger.rules import (
    AMOUNT_MAX,
    BOOL_FIELDS,
    BOXES_MAX,
    DEALER_NATURAL_TAKES,
    DEALER_POLICIES,
    PRESETS,
    RATIO_FIELDS,
    SETTING_RANGES,
    RuleSet,
)
from ledger.storage import (
    CHAIN_FINDINGS_MAX,
    CHAIN_WALK_ROWS_DEFAULT,
    CHAIN_WALK_ROWS_MAX,
    HEAD_PATTERN,
)

BOX_MAX: Final = BOXES_MAX
HAND_MAX: Final = SETTING_RANGES["max_hands_per_box"][1] - 1  # hands count from 0
RULING_ENTRIES_MAX: Final = 100
PLAYER_PATTERN: Final = f"^{PLAYER_ID_PATTERN}$"  # as the ledger opens accounts with


# --- strict fields ---------------------------------------------------------------------------


class WholeNumber(fields.Integer):
    """A JSON integer: no float (not even 2.0), no boolean, no string."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.make_error("invalid")
        result: int = super()._deserialize(value, attr, data, **kwargs)
        return result


_DIGITS_MAX = 30  # more, and a number is past every range a query takes
_PAST_ANY_RANGE = 10 ** _DIGITS_MAX


class QueryWholeNumber(fields.Integer):
    """A whole number in a query string: digits only (an optional minus), no ``1.0``; one out
    of range is refused by the field's range, which names it (each use has one)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if not isinstance(value, str) or not re.fullmatch(r"-?[0-9]+", value):
            raise self.make_error("invalid")
        sign, digits = ("-", value[1:]) if value.startswith("-") else ("", value)
        digits = digits.lstrip("0") or "0"  # (int() reads 4,300 digits at most, zeros too)
        if len(digits) > _DIGITS_MAX:  # past any range: as its range says it
            past: int = -_PAST_ANY_RANGE if sign else _PAST_ANY_RANGE
            return past
        result: int = super()._deserialize(sign + digits, attr, data, **kwargs)
        return result


class TrueOrFalse(fields.Boolean):
    """A JSON ``true`` or ``false``, nothing else (no 1, no "yes")."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if value is True or value is False:
            return value
        raise self.make_error("invalid")


class QueryBoolean(fields.Boolean):
    """``true`` or ``false`` in a query string."""

    default_error_messages = {"invalid": "Not a boolean: true or false, in lower case."}  # noqa: RUF012

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(truthy={"true"}, falsy={"false"}, **kwargs)


class Schema(marshmallow.Schema):
    """The API's schemas: a body, or an object in one, that is not a JSON object is told so in
    words (marshmallow's own: "Invalid input type.")."""

    # A class attribute marshmallow reads as a dict.
    error_messages = {"type": "Not a JSON object: give the members in braces, {...}."}  # noqa: RUF012


class FullMatch(validate.Regexp):
    """A pattern the whole text must match (``re.match`` lets ``$`` pass a final newline)."""

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str) or re.fullmatch(str(self.regex.pattern), value) is None:
            raise ValidationError(self._format_error(value))
        return value


def currency() -> fields.String:
    """A table's or an account's currency: EUR unless named. Its shape is checked here, the
    code itself (ISO 4217) by the ledger."""
    return fields.String(load_default="EUR", validate=FullMatch(
        r"^[A-Z]{3}$", error="Not a currency: a three-letter ISO code in capitals, such as EUR."),
        metadata={"description": "An ISO 4217 code with a minor unit, current or withdrawn "
                  "since 2020 (EUR unless named); it cannot be changed once opened."})


def printable(value: str) -> str:
    if not value.isprintable():
        raise ValidationError("Must be printable characters only.")
    return value


def _trimmed(value: str) -> str:
    if value != value.strip():
        raise ValidationError("Must not begin or end with spaces.")
    return value


def amount(**kwargs: Any) -> WholeNumber:
    return WholeNumber(validate=validate.Range(1, AMOUNT_MAX), **kwargs)


NOT_A_PLAYER_ID: Final = f"Not a valid player id ({PLAYER_ID_WRITTEN})."


def player(*, in_query: bool = False, **kwargs: Any) -> fields.String:
    """A player id field. In a query string a + arrives as a space, which no player id holds:
    refused with how to write it, not searched for and found nowhere."""
    plus = " A + in a query string is written %2B." if in_query else ""
    metadata = {"description": f"A player id: {PLAYER_ID_WRITTEN}.{plus}",
                **kwargs.pop("metadata", {})}
    return fields.String(validate=FullMatch(PLAYER_PATTERN, error=NOT_A_PLAYER_ID + plus),
                         metadata=metadata, **kwargs)


# Path parameters as the views check them (the route's converter alone documents any string,
# any integer).
PLAYER_IN_PATH: Final = {
    "in": "path", "name": "player", "required": True,
    "description": f"A player id, as the account was opened with: {PLAYER_ID_WRITTEN}.",
    "schema": {"type": "string", "pattern": PLAYER_PATTERN}}
VERSION_IN_PATH: Final = {
    "in": "path", "name": "version", "required": True,
    "description": "One of the round's event versions (``version`` of its events), from 1.",
    "schema": {"type": "integer", "minimum": 1, "maximum": VERSION_MAX}}


def box(**kwargs: Any) -> WholeNumber:
    return WholeNumber(validate=validate.Range(1, BOX_MAX), **kwargs)


def hand(**kwargs: Any) -> WholeNumber:
    return WholeNumber(validate=validate.Range(0, HAND_MAX), load_default=0,
                       metadata={"description": "The hand of the box, 0 before any split."},
                       **kwargs)


def _described(kwargs: dict[str, Any], written: str) -> dict[str, Any]:
    """``kwargs`` with ``written`` (what the server checks beyond the schema's lengths) after
    the field's own description."""
    metadata = kwargs.pop("metadata", {})
    own = metadata.get("description")
    return {**kwargs, "metadata": {**metadata,
                                   "description": f"{own} {written}" if own else written}}


def text(max_chars: int, **kwargs: Any) -> fields.String:
    """A name given to something new (a table, a rule set)."""
    return fields.String(
        validate=[validate.Length(1, max_chars), printable, _trimmed],
        **_described(kwargs, "Printable characters without surrounding spaces, written "
                             f"{WRITTEN_ONE_WAY}."))


def _not_blank(value: str) -> str:
    if value and not value.strip():  # an empty one is told by its length
        raise ValidationError("Must not be only spaces.")
    return value


def reason(**kwargs: Any) -> fields.String:
    return fields.String(validate=[validate.Length(1, REASON_MAX_CHARS), printable, _not_blank],
                         **_described(kwargs, "Printable characters, not only spaces."))


def page_limit(default: int, maximum: int = PAGE_SIZE_MAX) -> QueryWholeNumber:
    return QueryWholeNumber(load_default=default, validate=validate.Range(1, maximum),
                            metadata={"description": f"Page size, at most {maximum}."})


# --- headers ---------------------------------------------------------------------------------


def _one_visible_key(value: str) -> str:
    # Two Idempotency-Key headers reach the app as one, joined by a comma (and a space, under
    # some servers): a new key that a retry with either would not match.
    if "," in value:
        raise ValidationError("An Idempotency-Key holds no comma; send one key, once.")
    # HTTP carries header values as bytes that servers decode differently (gunicorn as
    # Latin-1): a key outside visible ASCII would be recorded garbled, or refused by chance.
    if not all("!" <= c <= "~" for c in value):
        raise ValidationError("An Idempotency-Key is visible ASCII characters only (letters, "
                              "digits, punctuation; no spaces), such as a UUID.")
    return value


class IdempotencyHeaderSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    request_id = fields.String(
        data_key="Idempotency-Key",
        required=True,
        validate=[validate.Length(1, REQUEST_ID_MAX_CHARS), _one_visible_key],
        metadata={"pattern": r"^[!-+\--~]+$",
                  "description": "The client's id of this request (R-M4): visible ASCII "
                  "characters without commas (a UUID, say). A "
                  "retry with the same key records and moves nothing again. Round commands, "
                  "buy-ins and cash-outs answer it as they answered the first time; opening an "
                  "account and the table commands answer with the current state. The same key "
                  "with another request is refused. A key is the casino's, not the terminal's: "
                  "make it unique (a UUID)."},
    )



VERSION_TAG = re.compile(r'"([1-9][0-9]{0,8})"|([1-9][0-9]{0,8})')


class VersionTag(fields.Field[int]):
    """A round version in an ``If-Match`` header: ``7`` or ``"7"`` (an entity tag)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        found = VERSION_TAG.fullmatch(value.strip()) if isinstance(value, str) else None
        if found is None:
            if isinstance(value, str) and value.strip().startswith("W/"):
                # RFC 9110: If-Match compares strongly, and a weak tag never matches.
                raise ValidationError("If-Match compares strongly: send \"7\", not W/\"7\".")
            raise ValidationError("If-Match names the round version shown, such as \"7\".")
        return int(found.group(1) or found.group(2))


class RoundCommandHeaderSchema(IdempotencyHeaderSchema):
    expected = VersionTag(
        data_key="If-Match",
        metadata={"type": "string", "example": '"7"',
                  "pattern": r'^("[1-9][0-9]{0,8}"|[1-9][0-9]{0,8})$',
                  "description": "The round version the terminal shows (``round.version``): "
                  "the decision is made on exactly that version, or refused with 412 when the "
                  "round has moved on. Without it, the decision is made on the round as it is "
                  "when the request arrives."},
    )


# --- rules and limits ------------------------------------------------------------------------


def _rule_field(name: str, *, required: bool) -> fields.Field[Any]:
    if name in BOOL_FIELDS:
        return TrueOrFalse(required=required)
    if name in RATIO_FIELDS:
        return fields.List(WholeNumber(validate=validate.Range(1, 100)),
                           validate=validate.Length(2, 2), required=required,
                           metadata={"description": "A ratio [numerator, denominator]."})
    if name == "dealer_policy":
        return fields.String(validate=validate.OneOf(DEALER_POLICIES), required=required)
    if name == "dealer_natural_takes":
        return fields.String(validate=validate.OneOf(DEALER_NATURAL_TAKES), required=required)
    if name == "name":
        return text(64, required=required)
    low, high = SETTING_RANGES[name]  # a new whole-number setting needs its range there
    # In the ledger's words (R-S1, cited as the ledger cites it).
    return WholeNumber(validate=validate.Range(
        low, high, error="It must be a whole number from {min} to {max}."), required=required)


# One field per setting of the rule set, so a new setting of the ledger shows up here by itself.
RuleOverridesSchema = Schema.from_dict(
    {f.name: _rule_field(f.name, required=False) for f in dataclass_fields(RuleSet)},
    name="RuleOverrides",
)
RuleSetSchema = Schema.from_dict(
    {f.name: _rule_field(f.name, required=True) for f in dataclass_fields(RuleSet)},
    name="RuleSet",
)


class LimitsSchema(Schema):
    """Table settings (R-X15), in minor units; each defaults to the ledger's default."""

    table_min = WholeNumber(validate=validate.Range(1, AMOUNT_MAX))
    table_max = WholeNumber(validate=validate.Range(1, AMOUNT_MAX))
    min_chip = WholeNumber(validate=validate.Range(1, AMOUNT_MAX))
    min_unit = WholeNumber(validate=validate.Range(1, AMOUNT_MAX))
    boxes = WholeNumber(validate=validate.Range(1, BOX_MAX))


class RulesChoiceSchema(Schema):
    preset = fields.String(required=True, validate=validate.OneOf(sorted(PRESETS)),
                           metadata={"description": "casino, wild21 or casino_wild (R-S2)."})
    overrides = fields.Nested(RuleOverridesSchema, metadata={
        "description": "Settings that differ from the preset; give the result its own name "
        "or version (R-S1)."})
    limits = fields.Nested(LimitsSchema)


class OpenTableSchema(RulesChoiceSchema):
    name = text(NAME_MAX_CHARS, required=True)
    currency = currency()


class ChangeRulesSchema(RulesChoiceSchema):
    reason = reason(required=True)


class NoBodySchema(Schema):
    """The body of a command that takes none: nothing, or an empty object (any field in it is
    unknown, and refused like every other unknown field)."""


class ReasonSchema(Schema):
    reason = reason(required=True)


class ReopenSchema(Schema):
    reason = reason(metadata={"description": "Why the table reopens (optional)."})


# --- play ------------------------------------------------------------------------------------


class StakeSchema(Schema):
    bettor = player(required=True)
    box = box(required=True)
    amount = amount(required=True)


class BoxBettorSchema(Schema):
    bettor = player(required=True)
    box = box(required=True)


class HandDecisionSchema(Schema):
    player = player(required=True, metadata={"description": "The box owner (R-C4)."})
    box = box(required=True)
    hand = hand()


class SurrenderSchema(Schema):
    player = player(required=True)
    box = box(required=True)


class AnswerSchema(Schema):
    bettor = player(required=True, metadata={"description": "The co-bettor answering."})
    box = box(required=True)
    hand = hand()


class InsuranceSchema(Schema):
    bettor = player(required=True)
    amount = amount(required=True)


RULING_MOVES_CHIPS = "A ruling moves a non-zero amount for each player it names."  # R-V2


def _not_zero(value: int) -> int:
    if value == 0:
        raise ValidationError(RULING_MOVES_CHIPS)
    return value


RULING_NAMES_NOBODY = ("A ruling moves chips (R-V2): name the players it moves them for. A "
                       "dispute settled as recorded needs no ruling.")


def _entries(value: dict[str, int]) -> dict[str, int]:
    # Not validate.Length: the API document would say minLength of an object, which is void.
    if not value:
        raise ValidationError(RULING_NAMES_NOBODY)
    if len(value) > RULING_ENTRIES_MAX:
        raise ValidationError(f"A ruling names at most {RULING_ENTRIES_MAX} players.")
    return value


class RulingSchema(Schema):
    reason = reason(required=True)
    corrects = fields.List(
        WholeNumber(validate=validate.Range(1, VERSION_MAX)), required=True,
        validate=validate.Length(1, RULING_ENTRIES_MAX),
        metadata={"description": "The round's event versions this ruling corrects, each once.",
                  "uniqueItems": True})
    adjustments = fields.Dict(
        keys=player(), values=WholeNumber(
            validate=[validate.Range(-AMOUNT_MAX, AMOUNT_MAX), _not_zero],
            metadata={"not": {"enum": [0]}}),
        required=True, validate=_entries,
        metadata={"description": "Chips to move per player, by player id (positive: to the "
                                 "player), none zero.",
                  "minProperties": 1, "maxProperties": RULING_ENTRIES_MAX})



# --- accounts --------------------------------------------------------------------------------


class OpenAccountSchema(Schema):
    player = player(required=True)
    currency = currency()


class AmountSchema(Schema):
    amount = amount(required=True)


class EntriesQuerySchema(Schema):
    after = QueryWholeNumber(load_default=0, validate=validate.Range(0, VERSION_MAX),
                             metadata={"description": "Entries after this version of the "
                                                      "account (of the table, for a table's "
                                                      "events)."})
    limit = page_limit(100)


class TableRoundsQuerySchema(Schema):
    before = QueryWholeNumber(validate=validate.Range(1, VERSION_MAX),
                              metadata={"description": "Rounds numbered below this one."})
    limit = page_limit(50)


class ChainQuerySchema(Schema):
    after = QueryWholeNumber(
        load_default=0, validate=validate.Range(0, 2**63 - 1),
        metadata={"description": "Walk from the event after this notification id: 0 for the "
                                 "start, else a `next_after` of the part before."})
    limit = QueryWholeNumber(
        load_default=CHAIN_WALK_ROWS_DEFAULT, validate=validate.Range(1, CHAIN_WALK_ROWS_MAX),
        metadata={"description": f"Rows checked in this request, at most "
                                 f"{CHAIN_WALK_ROWS_MAX:,}; a longer chain is walked in parts "
                                 "(`next_after`)."})
    expected_head = fields.String(
        validate=FullMatch(f"^{HEAD_PATTERN}$", error="Not a head: 64 lower-case hex digits, "
                           "as /audit/chain/head gives it."),
        metadata={"description": "A head kept outside the database (`/audit/chain/head`): "
                                 "the link the walk carries at `expected_at` (recomputed, or "
                                 "past an altered event the one stored) must be this one."})
    expected_at = QueryWholeNumber(
        validate=validate.Range(1, 2**63 - 1),
        metadata={"description": "The notification id the kept head was taken at. Without "
                                 "it, the walk looks for the kept head at every event "
                                 "(kept_head_at): a walk from after=0 that never carries it "
                                 "is a finding; a later part that does not carry it leaves "
                                 "kept_head_checked false (a walk in parts that never found "
                                 "it by its last part has found an alteration)."})

    @validates_schema
    def _kept_together(self, data: dict[str, Any], **_: Any) -> None:
        if "expected_at" in data and "expected_head" not in data:
            raise ValidationError("It names where expected_head was taken: give both.",
                                  "expected_at")
        if data.get("expected_at", data["after"]) < data["after"]:
            raise ValidationError("The head kept outside lies before this part: start after "
                                  "it or earlier.", "expected_at")


# --- responses -------------------------------------------------------------------------------

Project = Callable[[Any], Any]


class Out(Schema):
    """A response schema whose dump copies the declared fields and nothing else.

    The ledger's answers are JSON-ready already (strings, integers, lists, dicts), so a
    response needs its shape enforced, not its values converted: dropping every key the schema
    does not declare is what keeps an undeclared field (a shoe's order, say) out of a
    response. marshmallow's own dump does the same ten times slower, which a replay of a few
    dozen frames would feel. The contract test checks every response against the document.
    """

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        project = _projector(type(self))
        if self.many if many is None else many:
            return [project(item) for item in obj]
        return project(obj)


@cache
def _projector(schema: type[Schema]) -> Project:
    declared = schema._declared_fields
    plan = [(name, field.data_key or name, _field_projector(field))
            for name, field in declared.items() if not field.load_only]

    def project(obj: Any) -> Any:
        if obj is None:
            return None
        return {key: (convert(obj[name]) if convert is not None else obj[name])
                for name, key, convert in plan if name in obj}

    return project


def _field_projector(field: fields.Field[Any]) -> Project | None:
    if isinstance(field, fields.Nested):
        nested = field.nested
        cls = type(nested) if isinstance(nested, Schema) else nested
        if not isinstance(cls, type):
            raise TypeError(f"{field!r}: nested schemas are given as classes here")
        inner = _projector(cls)
        many = field.many or (isinstance(nested, Schema) and nested.many)
        return (lambda v: None if v is None else [inner(x) for x in v]) if many else inner
    if isinstance(field, fields.List):
        item = _field_projector(field.inner)
        if item is None:
            return lambda v: None if v is None else list(v)
        return lambda v: None if v is None else [item(x) for x in v]
    if isinstance(field, fields.Dict):
        return lambda v: None if v is None else dict(v)
    if isinstance(field, fields.UUID):
        return lambda v: None if v is None else str(v)
    return None



class LimitsOutSchema(Out):
    table_min = fields.Integer(required=True)
    table_max = fields.Integer(required=True)
    min_chip = fields.Integer(required=True)
    min_unit = fields.Integer(required=True)
    boxes = fields.Integer(required=True)


class LegalSchema(Out):
    decision = fields.String(required=True, metadata={"enum": list(DECISIONS)})
    player = fields.String(required=True, metadata={"description": "Empty for the dealer."})
    box = fields.Integer(required=True)
    hand = fields.Integer(required=True)


class HandSchema(Out):
    hand = fields.Integer(required=True)
    cards = fields.List(fields.String(), required=True)
    total = fields.Integer(required=True)
    soft = fields.Boolean(required=True)
    status = fields.String(required=True, metadata={
        "enum": list(HAND_STATUSES),
        "description": "How the hand stands in play: live, bust, surrendered or forfeited. A "
                       "hand still in play when the round settles stays live; `settled` says "
                       "its stakes are settled. One still in play when the round was voided "
                       "stays live too: the round's `phase` says voided."})
    doubled = fields.Boolean(required=True)
    stood = fields.Boolean(required=True)
    done = fields.Boolean(required=True)
    natural = fields.Boolean(required=True, metadata={
        "description": "An ace and a ten-value card as the first two of an unsplit box (R-G6)."})
    settled = fields.Boolean(required=True, metadata={
        "description": "Every stake on the hand is settled (see results); never in a "
                       "voided round, which returns them."})
    stakes = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)


class RulingRecordSchema(Out):
    reason = fields.String(required=True)
    corrects = fields.List(fields.Integer(), required=True)
    adjustments = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)


class BoxSchema(Out):
    box = fields.Integer(required=True)
    owner = fields.String(required=True)
    bettors = fields.List(fields.String(), required=True)
    stakes = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    hands = fields.List(fields.Nested(HandSchema), required=True, metadata={
        "description": "In table order, left to right: a re-split's new hand goes right of the "
                       "hand split (R-X4), so after one the list reads hand 0, 2, 1. Name a "
                       "hand by its `hand` number, not its place in the list."})


class DealerSchema(Out):
    cards = fields.List(fields.String(), required=True, metadata={
        "description": "\"hidden\" stands for a face-down card not yet revealed (R-G2)."})
    total = fields.Integer(required=True, metadata={"description": "Of the cards shown."})
    soft = fields.Boolean(required=True, metadata={
        "description": "Whether the total counts an ace as 11: a soft 17 stands or draws as "
                       "the rules say (R-G8)."})


class TurnSchema(Out):
    box = fields.Integer(required=True)
    hand = fields.Integer(required=True)


class PendingSchema(Out):
    kind = fields.String(required=True, metadata={"enum": [Play.DOUBLE.value,
                                                           Play.SPLIT.value]})
    box = fields.Integer(required=True)
    hand = fields.Integer(required=True)
    bettors = fields.List(fields.String(), required=True)


class RoundStateSchema(Out):
    """A round as a table terminal may see it: never the shoe, no hidden card's face."""

    round_id = fields.UUID(required=True)
    table_id = fields.UUID(required=True)
    round_no = fields.Integer(required=True)
    shoe_id = fields.UUID(required=True)
    rules_hash = fields.String(required=True)
    version = fields.Integer(required=True)
    phase = fields.String(required=True, metadata={"enum": list(PHASES)})
    legal = fields.List(fields.Nested(LegalSchema), required=True,
                        metadata={"description": "The decisions somebody may make now: a "
                                  "player's (player named), the dealer's (player empty), and "
                                  "void, which only a manager may make. Balances are not "
                                  "looked at here (a terminal sees none): chips for a "
                                  "double, a split, insurance or a match are checked when "
                                  "the decision is made (R-M3)."})
    boxes = fields.List(fields.Nested(BoxSchema), required=True)
    dealer = fields.Nested(DealerSchema, required=True)
    turn = fields.Nested(TurnSchema, required=True, allow_none=True)
    pending = fields.Nested(PendingSchema, required=True, allow_none=True)
    window_open = fields.Boolean(required=True)
    insurance = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    staked = fields.Integer(required=True)
    results = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    house_result = fields.Integer(required=True)
    void_reason = fields.String(required=True, allow_none=True)
    rulings = fields.List(fields.Nested(RulingRecordSchema), required=True, metadata={
        "description": "Managers' rulings on the settled round (R-V2): results include their "
                       "adjustments."})


class CommandResultSchema(Out):
    round_id = fields.UUID(required=True)
    version = fields.Integer(required=True)
    phase = fields.String(required=True, metadata={"enum": list(PHASES)})
    facts = fields.Integer(required=True, metadata={"description": "Facts this request recorded."})


class DecisionResponseSchema(Out):
    result = fields.Nested(CommandResultSchema, required=True, metadata={
        "description": "What the request recorded (a retry returns the first result)."})
    round = fields.Nested(RoundStateSchema, required=True, metadata={
        "description": "The round right after this request, with the legal decisions (a "
                       "retry shows the same)."})


class TableSchema(Out):
    id = fields.UUID(required=True)
    name = fields.String(required=True)
    currency = fields.String(required=True)
    open = fields.Boolean(required=True)
    rules = fields.Nested(RuleSetSchema, required=True)
    rules_hash = fields.String(required=True)
    limits = fields.Nested(LimitsOutSchema, required=True)
    shoe_id = fields.UUID(required=True, allow_none=True, metadata={
        "description": "The table's last shoe (null before its first round). Closing the table "
                       "retires it and reveals its order (GET /audit/shoes/{id}); the first "
                       "round after a reopening shuffles a new one."})
    rounds = fields.Integer(required=True)
    current_round_id = fields.UUID(required=True, allow_none=True, metadata={
        "description": "The table's last round, in whatever phase (settled and voided too; "
                       "null before its first): its phase is the round's own to say."})
    version = fields.Integer(required=True)


class RoundIdsSchema(Out):
    items = fields.List(fields.UUID(), required=True, metadata={"description": "Newest first."})
    next_before = fields.Integer(required=True, allow_none=True, metadata={
        "description": "Pass as before= for the next page; null on the last page."})


class AccountSchema(Out):
    owner = fields.String(required=True)
    kind = fields.String(required=True, metadata={"enum": list(ACCOUNT_KINDS)})
    currency = fields.String(required=True)
    available = fields.Integer(required=True)
    held = fields.Integer(required=True)
    total = fields.Integer(required=True)
    version = fields.Integer(required=True)


class EventSchema(Out):
    version = fields.Integer(required=True)
    type = fields.String(required=True)
    timestamp = fields.String(required=True, metadata={"format": "date-time"})
    actor = fields.String(required=True, allow_none=True)
    request_id = fields.String(required=True, allow_none=True)
    data = fields.Dict(keys=fields.String(), required=True)


class BalanceAfterSchema(Out):
    available = fields.Integer(required=True)
    held = fields.Integer(required=True)


class EntrySchema(EventSchema):
    balance = fields.Nested(BalanceAfterSchema, metadata={
        "description": "On an account's statement: its available and held chips after this "
                       "entry. What the entry moved is in data: amount for a buy-in (added to "
                       "available) or a cash-out (taken from it), available_delta and "
                       "held_delta for a round's posting; an account's opening moves "
                       "nothing. Absent from a table's record."})


class EntriesPageSchema(Out):
    items = fields.List(fields.Nested(EntrySchema), required=True)
    next_after = fields.Integer(required=True, allow_none=True, metadata={
        "description": "Pass as after= for the next page; null on the last page."})


class PostingSchema(EventSchema):
    """A posting naming a round, on the account it moved."""

    account_id = fields.UUID(required=True)
    owner = fields.String(required=True, allow_none=True, metadata={
        "description": "Whose account: the player id, or for a table's house account "
                       "house: and the table's name as opened (house:T1); null for an id no "
                       "account was opened as, or whose opening does not decode."})
    kind = fields.String(required=True, allow_none=True, metadata={
        "description": "player or house, as the account was opened; null as for owner."})


class FrameSchema(Out):
    event = fields.Nested(EventSchema, required=True)
    state = fields.Nested(RoundStateSchema, required=True)


class FindingsSchema(Out):
    ok = fields.Boolean(required=True)
    findings = fields.List(fields.String(), required=True)


class ShoeSchema(Out):
    """A shoe's commitment and position; its order and salt only once it is retired (R-H2)."""

    shoe_id = fields.UUID(required=True)
    table_id = fields.UUID(required=True)
    shoe_no = fields.Integer(required=True)
    size = fields.Integer(required=True)
    cut = fields.Integer(required=True)
    position = fields.Integer(required=True)
    commitment = fields.String(required=True, metadata={
        "description": "SHA-256 (hex) of the text 'pitboss-shoe-v1', a newline, the salt in hex, "
                       "a newline and the order's card codes joined by commas."})
    committed_at = fields.String(required=True, metadata={
        "format": "date-time", "description": "When the commitment was recorded: before the "
                                              "shoe's first card (R-H2)."})
    retired = fields.Boolean(required=True)
    retired_at = fields.String(metadata={"format": "date-time",
                                         "description": "Only once retired."})
    retired_reason = fields.String(metadata={
        "description": "Why it was retired (R-H4): the cut card came out, every card was "
                       "dealt (the last card drawn, or the shoe ran out mid-round), the table "
                       "closed or took rules for another shoe, too few cards were left for a "
                       "deal, or the reason it was abandoned. Only once retired."})
    order = fields.List(fields.String(), metadata={"description": "Only once retired, "
                                                                  "unless abandoned."})
    salt = fields.String(metadata={"description": "Only once retired, unless abandoned."})
    verified = fields.Boolean(metadata={"description": "Only once retired, unless abandoned."})
    abandoned = fields.Boolean(metadata={
        "description": "Only if true: retired without its reveal, the shoe key that sealed it "
                       "lost (`pitboss shoes abandon`); its cards cannot be checked against "
                       "its commitment."})


class ChainReportSchema(Out):
    rows = fields.Integer(required=True)
    head = fields.String(required=True, metadata={
        "description": "The link the walk carries at the last row checked: recomputed, or "
                       "past an altered event the link stored with it (keep a head only from "
                       "an intact walk)."})
    head_notification_id = fields.Integer(required=True)
    intact = fields.Boolean(required=True)
    findings = fields.List(fields.String(), required=True)
    complete = fields.Boolean(required=True, metadata={
        "description": "Whether the walk reached the last stored event. It goes on past an "
                       "altered event, and past a kept head that does not match, listing each; "
                       f"it stops short at the row limit or after {CHAIN_FINDINGS_MAX} "
                       "findings (and a kept head's)."})
    from_start = fields.Boolean(required=True, metadata={
        "description": "Whether the walk began at the first event (after=0). A part that "
                       "starts later takes the link stored there on trust: the events before "
                       "it, and a kept head's proof, rest on the parts before it."})
    next_after = fields.Integer(required=True, allow_none=True, metadata={
        "description": "Pass as after= for the next part; null once complete."})
    kept_head_at = fields.Integer(required=True, allow_none=True, metadata={
        "description": "The notification id whose link is expected_head: expected_at, or, "
                       "without it, the first event the walk found carrying it. The record up "
                       "to it is as it was when the head was kept, from where the walk began "
                       "(from the first event if from_start; else the link stored where it "
                       "began taken on trust). Null if not (yet) found."})
    kept_head_checked = fields.Boolean(required=True, metadata={
        "description": "Whether this part compared expected_head (or found its event "
                       "missing): false when it stopped before expected_at; go on from "
                       "next_after until it is true."})


    warnings = fields.List(fields.String(), required=True, metadata={
        "description": "What leaves the record open to change now, though the chain may be "
                       "intact: a refusing trigger of the event table missing, disabled "
                       "or no longer refusing."})


class ChainHeadSchema(Out):
    notification_id = fields.Integer(required=True)
    head = fields.String(required=True)


class WhoAmISchema(Out):
    name = fields.String(required=True)
    role = fields.String(required=True, metadata={"enum": list(ROLES)})

"""Read-model audit views (roles ``auditor`` and ``manager``): searches, balances, reports.

They read the projections (:mod:`projections.queries`), which the projection worker keeps up
to date a moment behind the ledger; ``GET /audit/projections`` tells by how many events.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from uuid import UUID

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from api.auth import AUDITOR, MANAGER
from api.schemas import FindingsSchema, Out, QueryBoolean, page_limit, player, printable
from api.services import ledger, services
from api.views import Blueprint, guard
from ledger.aggregates.account import ACCOUNT_KINDS
from projections.queries import MOMENTS
from projections.rounds import STATUSES
from projections.settings import (
    BALANCES_PAGE_MAX,
    CASHIER_PAGE_MAX,
    CASHIERS_SHOWN_MAX,
    CHECK_BUDGET_S,
    CURSOR_MAX_CHARS,
    DAY_MAX,
    DAY_MIN,
    DAY_RANGE_MAX_DAYS,
    DAY_ROUNDS_PAGE_MAX,
    HOUSE_PAGE_MAX,
    MOMENT_MAX,
    MOMENT_MIN,
    ROUNDS_PAGE_MAX,
)

blp = Blueprint("reports", __name__, url_prefix="/audit",
                description="Read models: round search, balances, reports, projection lag.")

AUDITORS = (AUDITOR, MANAGER)


def _cursor() -> fields.String:
    return fields.String(validate=[validate.Length(1, CURSOR_MAX_CHARS), printable], metadata={
        "description": "next_cursor of the previous page."})


_MOMENT = ("An ISO 8601 time with its zone, as 2026-11-30T06:00:00Z or 2026-11-30T07:00:00%2B01:00 "
           "(a + in a query string is written %2B).")


def _within_moments(value: datetime) -> None:
    if not MOMENT_MIN <= value <= MOMENT_MAX:
        raise ValidationError(MOMENTS)


class _Moment(fields.AwareDateTime):
    """An ISO 8601 time with its zone; its Z in either case, as RFC 3339 allows (a client's
    2026-11-30T06:00:00z was refused; any separator, a lower-case t too, was taken)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if isinstance(value, str) and _FINER_THAN_RECORDED.search(value):
            # Cut to the microsecond, 15:45:03.3212875 took in a round started at .321287.
            raise ValidationError("A time is given to the microsecond at most (6 digits after "
                                  "the second), as the record keeps it.")
        return super()._deserialize(value.upper() if isinstance(value, str) else value, attr,
                                    data, **kwargs)


_FINER_THAN_RECORDED = re.compile(r"[.,]\d{7}")


def _moment(bound: str) -> fields.AwareDateTime:
    return _Moment(
        error_messages={"invalid": _MOMENT, "invalid_awareness": _MOMENT},
        validate=_within_moments,
        metadata={"description": f"{bound}, with a zone: 2026-11-30T06:00:00Z; from "
                                 f"{MOMENT_MIN.date()} to {MOMENT_MAX.date()} (UTC)."})


class SearchRoundsQuerySchema(Schema):
    table_id = fields.UUID()
    player = player(in_query=True)
    status = fields.String(validate=validate.OneOf(STATUSES))
    started_from = _moment("Inclusive")
    started_to = _moment("Exclusive")
    wild_card = QueryBoolean()
    prize = QueryBoolean()
    ruling = QueryBoolean()
    limit = page_limit(50, ROUNDS_PAGE_MAX)
    cursor = _cursor()

    @validates_schema
    def _range(self, data: dict[str, Any], **_: Any) -> None:
        low, high = data.get("started_from"), data.get("started_to")
        if low is not None and high is not None and low >= high:
            raise ValidationError("Must come after started_from.", "started_to")


class BalancesQuerySchema(Schema):
    player = player(in_query=True)
    limit = page_limit(100, BALANCES_PAGE_MAX)
    cursor = _cursor()


class BalanceCheckQuerySchema(Schema):
    cursor = _cursor()


class HouseQuerySchema(Schema):
    limit = page_limit(100, HOUSE_PAGE_MAX)
    cursor = _cursor()


_days = validate.Range(DAY_MIN, DAY_MAX)
_DAY = "A gaming day is a calendar date written as 2025-03-01."
_DAY_FORMAT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class _Day(fields.Date):
    """A date as the document writes one, 2025-03-01 (Python's parser takes 20250301 too)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, str) or not _DAY_FORMAT.fullmatch(value):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


def _day(description: str, **kwargs: Any) -> fields.Date:
    return _Day(required=True, validate=_days, error_messages={"invalid": _DAY},
                metadata={"description": description}, **kwargs)


class DayRangeQuerySchema(Schema):
    day_from = _day("The first gaming day, e.g. 2025-03-01.", data_key="from")
    day_to = _day(f"The last gaming day (included); at most {DAY_RANGE_MAX_DAYS} days.",
                  data_key="to")

    @validates_schema
    def _range(self, data: dict[str, Any], **_: Any) -> None:
        low, high = data.get("day_from"), data.get("day_to")
        if low is not None and high is not None:
            if low > high:
                raise ValidationError("Must not come before from.", "to")
            if (high - low).days + 1 > DAY_RANGE_MAX_DAYS:
                raise ValidationError(f"A report covers at most {DAY_RANGE_MAX_DAYS} days.",
                                      "to")


class DayRoundsQuerySchema(Schema):
    day = _day("The gaming day, e.g. 2025-03-01.")
    limit = page_limit(100, DAY_ROUNDS_PAGE_MAX)
    cursor = _cursor()


class CashierQuerySchema(Schema):
    day = _day("The gaming day, e.g. 2025-03-01.")
    limit = page_limit(100, CASHIER_PAGE_MAX)
    cursor = _cursor()


# The report figures, in minor units (projections/amounts.py sums them).
STAKED = ("Chips put at risk: stakes, doubles, splits, matches and insurance, less stakes "
          "withdrawn while betting was open. A voided round's stakes are in it (and, returned, "
          "in what was paid).")
PAID = ("Chips handed to bettors, gross: stakes released (a push, a surrender's half, a void) "
        "and won stakes coming back, winnings paid on top, and what rulings give players; "
        "less what a void takes back (even money already paid) and what rulings take.")
HOUSE_RESULT = ("The house's result: stakes lost less winnings paid, plus what a void takes "
                "back, less what rulings give players (plus what they take); positive when the "
                "house won.")


class RoundIndexSchema(Out):
    round_id = fields.String(required=True, metadata={"format": "uuid"})
    table_id = fields.String(required=True, metadata={"format": "uuid"})
    table_name = fields.String(required=True, allow_none=True)
    round_no = fields.Integer(required=True)
    started_at = fields.String(required=True, allow_none=True, metadata={"format": "date-time"})
    ended_at = fields.String(required=True, allow_none=True, metadata={"format": "date-time"})
    rules_hash = fields.String(required=True, allow_none=True)
    rules_name = fields.String(required=True, allow_none=True)
    rules_version = fields.Integer(required=True, allow_none=True)
    currency = fields.String(required=True, allow_none=True)
    status = fields.String(required=True, metadata={"enum": list(STATUSES)})
    players = fields.List(fields.String(), required=True)
    total_staked = fields.Integer(required=True, metadata={"description": STAKED})
    total_paid = fields.Integer(required=True, metadata={"description": PAID})
    house_result = fields.Integer(required=True, metadata={"description": HOUSE_RESULT})
    held = fields.Integer(required=True, metadata={
        "description": "Chips the round holds now (0 once it is settled or voided). "
                       "total_staked - total_paid - house_result = held."})
    wild_card = fields.Boolean(required=True)
    prize = fields.Boolean(required=True)
    ruling = fields.Boolean(required=True)
    version = fields.Integer(required=True)
    last_notification_id = fields.Integer(required=True, allow_none=True)


class RoundPageSchema(Out):
    items = fields.List(fields.Nested(RoundIndexSchema), required=True)
    next_cursor = fields.String(required=True, allow_none=True)


class BalanceSchema(Out):
    account_id = fields.String(required=True, metadata={"format": "uuid"})
    owner = fields.String(required=True)
    kind = fields.String(required=True, metadata={"enum": list(ACCOUNT_KINDS)})
    currency = fields.String(required=True)
    table_id = fields.String(required=True, allow_none=True, metadata={"format": "uuid"})
    available = fields.Integer(required=True)
    held = fields.Integer(required=True)
    total = fields.Integer(required=True)
    bought_in = fields.Integer(required=True)
    cashed_out = fields.Integer(required=True)
    version = fields.Integer(required=True)
    last_notification_id = fields.Integer(required=True, allow_none=True)


class BalancePageSchema(Out):
    items = fields.List(fields.Nested(BalanceSchema), required=True)
    next_cursor = fields.String(required=True, allow_none=True)


class HouseResultSchema(Out):
    table_id = fields.String(required=True, metadata={"format": "uuid"})
    table_name = fields.String(required=True, allow_none=True)
    currency = fields.String(required=True, allow_none=True)
    house_account_id = fields.String(required=True, allow_none=True, metadata={"format": "uuid"})
    result = fields.Integer(required=True)
    version = fields.Integer(required=True)
    last_notification_id = fields.Integer(required=True, allow_none=True)


class BalanceCheckSchema(FindingsSchema):
    findings_before = fields.Integer(required=True, metadata={
        "description": "Findings the earlier parts of this check made (by the cursor); ok is "
                       "true only when there are none there or here."})
    began_at = fields.String(required=True, metadata={
        "format": "date-time",
        "description": "When the first part of this check ran (ISO 8601, UTC): ok speaks for "
                       "the check from then; a cursor kept from an earlier check shows as "
                       "that check's."})
    complete = fields.Boolean(required=True, metadata={
        "description": "Whether the check reached its end; if not, go on from next_cursor."})
    accounts_checked = fields.Integer(required=True, metadata={
        "description": "Projected balances compared with their accounts in this request."})
    events_scanned = fields.Integer(required=True, metadata={
        "description": "Ids of the event log scanned for accounts opened without a balance."})
    position = fields.Integer(required=True, metadata={
        "description": "The last event of the log the balances view had applied when the "
                       "check's first part summed every balance (R-M4): the sum speaks for "
                       "the record up to there, and for nothing stored after it (each balance "
                       "compared speaks for its own account's version)."})
    ledger_head = fields.Integer(required=True, metadata={
        "description": "The last event of the log now."})
    lag_events = fields.Integer(required=True, metadata={
        "description": "Events stored after position, which the sum has not seen (counted "
                       "as /audit/projections counts a view's lag)."})
    next_cursor = fields.String(required=True, allow_none=True)


class HousePageSchema(Out):
    items = fields.List(fields.Nested(HouseResultSchema), required=True)
    next_cursor = fields.String(required=True, allow_none=True)


class _GamingDaySchema(Out):
    gaming_day = fields.String(required=True, metadata={"format": "date"})
    starts_at = fields.String(required=True, metadata={"format": "date-time"})
    ends_at = fields.String(required=True, metadata={"format": "date-time"})


class _TableGamingDaySchema(_GamingDaySchema):
    table_id = fields.String(required=True, metadata={"format": "uuid"})
    table_name = fields.String(required=True, allow_none=True)
    currency = fields.String(required=True, allow_none=True)


class _DayCountsSchema(Out):
    rounds_played = fields.Integer(required=True)
    rounds_settled = fields.Integer(required=True)
    rounds_voided = fields.Integer(required=True)
    rulings = fields.Integer(required=True)
    staked = fields.Integer(required=True, metadata={
        "description": f"Over the day's rounds, voided ones included: {STAKED}"})
    paid_out = fields.Integer(required=True, metadata={
        "description": f"Over the day's rounds, voided ones included: {PAID}"})
    house_win = fields.Integer(required=True, metadata={
        "description": f"Over the day's rounds: {HOUSE_RESULT}"})


class _ReadToDayEndSchema(Out):
    read_to_day_end = fields.Boolean(required=True, metadata={
        "description": "Whether the table/day view has read the log a minute past the day's "
                       "end (an event stamped before the end may be stored that much later): "
                       "it has read every event stored (lag 0) and that minute is over, or it "
                       "has counted an event stamped after it. False for the day in progress, "
                       "a day to come, and a day the view has not read to its end: its "
                       "figures may still change."})


class TableDaySchema(_TableGamingDaySchema, _DayCountsSchema, _ReadToDayEndSchema):
    no_activity = fields.Boolean(required=True, metadata={
        "description": "The table was open on the day (as far as the view has read the log), "
                       "and no round started, settled or was voided and no chips moved; a "
                       "round dealt the day before may have been played on in it."})
    held_at_day_end = fields.Integer(required=True, metadata={
        "description": "Chips the table's rounds held at the day's end: staked - paid_out - "
                       "house_win over every day so far."})
    open_rounds_at_day_end = fields.Integer(required=True)


class DayFiguresSchema(_DayCountsSchema):
    held_delta = fields.Integer(required=True, metadata={
        "description": "Chips the table's rounds held more at the day's end than at its start: "
                       "staked - paid_out - house_win."})


class DayRoundSchema(Out):
    round_id = fields.String(required=True, metadata={"format": "uuid"})
    round_no = fields.Integer(required=True, allow_none=True, metadata={
        "description": "Null until the round index has read the round."})
    started_at = fields.String(required=True, allow_none=True, metadata={
        "format": "date-time", "description": "Null until the round index has read the round."})
    started = fields.Boolean(required=True, metadata={
        "description": "The round started on this day (counted in rounds_played)."})
    settled = fields.Boolean(required=True)
    voided = fields.Boolean(required=True)
    rulings = fields.Integer(required=True, metadata={
        "description": "Manager's rulings on the round recorded on this day (R-V2)."})
    staked = fields.Integer(required=True, metadata={"description": STAKED})
    paid_out = fields.Integer(required=True, metadata={"description": PAID})
    house_win = fields.Integer(required=True, metadata={"description": HOUSE_RESULT})
    held_delta = fields.Integer(required=True, metadata={
        "description": "staked - paid_out - house_win: what the round held more at the day's "
                       "end than at its start."})
    first_notification_id = fields.Integer(required=True, metadata={
        "description": "The round's first event counted on this day (the list's order)."})
    last_notification_id = fields.Integer(required=True, metadata={
        "description": "The round's last event counted on this day so far."})


class _ReadSoFarSchema(Out):
    """How far a view had read the log when a page was read (in the page's snapshot)."""

    position = fields.Integer(required=True, metadata={
        "description": "The last event of the log the view had applied: the page speaks for "
                       "the record up to there."})
    ledger_head = fields.Integer(required=True, metadata={
        "description": "The last event of the log then."})
    lag_events = fields.Integer(required=True, metadata={
        "description": "Events stored after position, which the page has not seen (counted "
                       "as /audit/projections counts a view's lag)."})


class DayRoundPageSchema(_TableGamingDaySchema, _ReadToDayEndSchema, _ReadSoFarSchema):
    complete = fields.Boolean(required=True, metadata={
        "description": "Whether every round the day's figures count is listed, and their sums "
                       "were checked against the figures (R-M4). On a view made before the "
                       "reports listed rounds, false for a day that began before the end of "
                       "the last day it had counted then, until table_days is rebuilt "
                       "(pitboss rebuild table_days). Figures and list alike go as far as the "
                       "view has read the log (position, read_to_day_end)."})
    rounds_listed = fields.Integer(required=True, metadata={
        "description": "Rounds in the whole list, over all its pages."})
    last_notification_id = fields.Integer(required=True, allow_none=True, metadata={
        "description": "The last event counted on the day (null: none). A walk of the pages "
                       "whose pages differ in it spans a change of the day (a ruling, a "
                       "settlement): its pages need not add up; walk again."})
    figures = fields.Nested(DayFiguresSchema, required=True, metadata={
        "description": "The day's figures, as the table/day report counts them: the sums of "
                       "the listed rounds' where complete is true."})
    items = fields.List(fields.Nested(DayRoundSchema), required=True)
    next_cursor = fields.String(required=True, allow_none=True)


class CashierTotalsSchema(Out):
    currency = fields.String(required=True)
    buy_ins = fields.Integer(required=True, metadata={"description": "How many buy-ins."})
    bought_in = fields.Integer(required=True, metadata={
        "description": "Chips bought at the desk, in minor units."})
    cash_outs = fields.Integer(required=True, metadata={"description": "How many cash-outs."})
    cashed_out = fields.Integer(required=True, metadata={
        "description": "Chips exchanged back at the desk, in minor units."})
    net = fields.Integer(required=True, metadata={
        "description": "bought_in - cashed_out: what the desk took in, net."})


class CashierSchema(CashierTotalsSchema):
    cashier = fields.String(required=True, metadata={
        "description": "The name of the cashier key that recorded the movements."})


class CashierMovementSchema(Out):
    at = fields.String(required=True, metadata={"format": "date-time"})
    kind = fields.String(required=True, metadata={"enum": ["buy_in", "cash_out"]})
    player = fields.String(required=True)
    account_id = fields.String(required=True, metadata={"format": "uuid"})
    currency = fields.String(required=True)
    amount = fields.Integer(required=True)
    cashier = fields.String(required=True)
    request_id = fields.String(required=True)
    version = fields.Integer(required=True, metadata={
        "description": "The account's event version (its statement's entry)."})
    notification_id = fields.Integer(required=True)


class CashierDaySchema(_GamingDaySchema, _ReadSoFarSchema):
    complete = fields.Boolean(required=True, metadata={
        "description": "Whether every buy-in and cash-out of the day is listed. False on every "
                       "day for a balances view made before the desk was kept, which lists "
                       "only the movements it counted since, until it is rebuilt (pitboss "
                       "rebuild balances). Totals and list alike go as far as the view has "
                       "read the log (position)."})
    currencies = fields.List(fields.Nested(CashierTotalsSchema), required=True, metadata={
        "description": "The day's totals per currency."})
    cashiers = fields.List(fields.Nested(CashierSchema), required=True, metadata={
        "description": "The day's totals per cashier and currency, by currency then cashier: "
                       f"the first {CASHIERS_SHOWN_MAX} (cashiers_listed says how many there "
                       "are; each movement names its cashier)."})
    cashiers_listed = fields.Integer(required=True, metadata={
        "description": "Cashier and currency pairs of the day, over all of them."})
    movements_listed = fields.Integer(required=True, metadata={
        "description": "Movements in the whole list, over all its pages."})
    last_notification_id = fields.Integer(required=True, allow_none=True, metadata={
        "description": "The day's last movement counted (null: none). A walk of the pages "
                       "whose pages differ in it spans a change of the day: walk again."})
    items = fields.List(fields.Nested(CashierMovementSchema), required=True)
    next_cursor = fields.String(required=True, allow_none=True)


class PositionSchema(Out):
    projection = fields.String(required=True)
    position = fields.Integer(required=True)
    ledger_head = fields.Integer(required=True)
    lag_events = fields.Integer(required=True)


@blp.route("/rounds", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(SearchRoundsQuerySchema(), location="query", unknown="raise")
@blp.response(200, RoundPageSchema)
def search_rounds(query: dict[str, Any]) -> dict[str, Any]:
    """Search the round index, newest first: by table, player, status, start time, wild card,
    prize or ruling; a page at a time (pass next_cursor as cursor)."""
    result: dict[str, Any] = services().read_models().search_rounds(**query)
    return result


@blp.route("/balances", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(BalancesQuerySchema(), location="query", unknown="raise")
@blp.response(200, BalancePageSchema)
def balances(query: dict[str, Any]) -> dict[str, Any]:
    """Every account's projected balance (players and houses), in owner order."""
    result: dict[str, Any] = services().read_models().balances(**query)
    return result


@blp.route("/balances/check", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(BalanceCheckQuerySchema(), location="query", unknown="raise")
@blp.response(200, BalanceCheckSchema)
def check_balances(query: dict[str, Any]) -> dict[str, Any]:
    """Every projected balance against the ledger's own account, and every balance together
    against the chips bought in less those cashed out (R-M4): findings, if any. The check
    runs for about 5 seconds per request; until it is complete, pass next_cursor as cursor to
    go on (ok covers the part checked so far)."""
    result: dict[str, Any] = services().read_models().check_balances(
        ledger(), cursor=query.get("cursor"), budget_s=CHECK_BUDGET_S)
    return result


@blp.route("/house", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(HouseQuerySchema(), location="query", unknown="raise")
@blp.response(200, HousePageSchema)
def house_results(query: dict[str, Any]) -> dict[str, Any]:
    """Each table's house result, in table name order: what the house has won (negative:
    lost); a page at a time (pass next_cursor as cursor)."""
    result: dict[str, Any] = services().read_models().house_results(**query)
    return result


@blp.route("/tables/<uuid:table_id>/report", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(DayRangeQuerySchema(), location="query", unknown="raise")
@blp.response(200, TableDaySchema(many=True))
def table_day_report(query: dict[str, Any], table_id: UUID) -> list[dict[str, Any]]:
    """The table's figures per gaming day: rounds, stakes, payouts, the house's win."""
    result: list[dict[str, Any]] = services().read_models().table_day_report(
        table_id, query["day_from"], query["day_to"])
    return result


@blp.route("/tables/<uuid:table_id>/report/rounds", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(DayRoundsQuerySchema(), location="query", unknown="raise")
@blp.response(200, DayRoundPageSchema)
def table_day_rounds(query: dict[str, Any], table_id: UUID) -> dict[str, Any]:
    """The rounds behind one gaming day of the table's report, each with what the day's
    figures count of it: a round started the day before, or ruled on later, is listed on each
    day it counts on. The figures are the sums of the rounds' (checked on every page). In the
    order first counted on the day; a page at a time (pass next_cursor as cursor)."""
    result: dict[str, Any] = services().read_models().table_day_rounds(table_id, **query)
    return result


@blp.route("/cashier", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.arguments(CashierQuerySchema(), location="query", unknown="raise")
@blp.response(200, CashierDaySchema)
def cashier_day(query: dict[str, Any]) -> dict[str, Any]:
    """The cashier's desk on one gaming day: buy-ins and cash-outs per currency and per
    cashier, and the movements behind them in time order, a page at a time (pass next_cursor
    as cursor)."""
    result: dict[str, Any] = services().read_models().cashier_day(**query)
    return result


@blp.route("/projections", methods=["GET"])
@guard(blp, *AUDITORS)
@blp.response(200, PositionSchema(many=True))
def positions() -> list[dict[str, Any]]:
    """Each projection's position, the ledger's head and the lag between them, in events."""
    result: list[dict[str, Any]] = services().read_models().positions()
    return result

"""Table/day figures: what a casino reconciles per table and gaming day.

Per table and gaming day: rounds played (started that day), settled and voided, rulings, and
the money that moved that day, each movement counted on the gaming day of the event that moved
it: ``staked``, ``paid_out`` to bettors, ``house_win``, and the change in chips held
(``held_delta``) and in rounds left open (``open_delta``), whose running sums give what is
still held and open at each day's end. The report (:mod:`projections.queries`) adds a
"no activity" row for every day the table was open without a round; the open intervals come
from the table's Created, Closed and Reopened events.

The same counters are kept per round and gaming day (``round_days``): one row for each round
the day's figures count something of (started, money moved, settled, voided, ruled on), so the
rounds behind a day's figures are listed from one index range, a round started the day before
or ruled on a week later among them, and the day's figures are their sums. A view made by an
earlier version has no such rows for what it had counted: its ``rounds_listed_after`` (when the
part was made, or the end of the last day counted then, whichever is later) tells which days'
lists are whole; a rebuild fills in the rest.

The gaming day (``PITBOSS_GAMING_DAY_TZ``, ``PITBOSS_GAMING_DAY_START``) is fixed when the
view's tables are created and stored with them, so every row of one view uses the same
boundary. Changing it takes a rebuild (``projections.rebuild``), which builds fresh tables
under the new setting and swaps them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Composed, Identifier, Literal

from ledger.aggregates.round import Round
from ledger.aggregates.table import Table
from ledger.engine import facts as f
from ledger.errors import InvariantBroken
from projections.amounts import NONE, QUIET_TOPICS, Money, money_of
from projections.base import (
    ROUND_STREAM,
    TABLE_STREAM,
    BatchProjection,
    Curs,
    Item,
    View,
    aggregate_ids,
    known_topics,
    load_rows,
    select_rows,
    table_exists,
    upsert_rows,
    versioned,
)
from projections.settings import GamingDay

_STREAMS = (ROUND_STREAM, TABLE_STREAM)
_DECODED = (ROUND_STREAM, Table.Created.TOPIC, Table.Closed.TOPIC, Table.Reopened.TOPIC)
_ENDS = (f.RoundSettled, f.RoundVoided, f.RulingRecorded)  # counted even without money

COUNTERS = ("rounds_played", "rounds_settled", "rounds_voided", "rulings", "staked",
            "paid_out", "house_win", "held_delta", "open_delta")
_TABLE_COLUMNS = ("table_id", "name", "currency", "version")
_ROUND_COLUMNS = ("round_id", "table_id", "version")
_DAY_COLUMNS = ("table_id", "gaming_day", *COUNTERS, "last_notification_id")
_ROUND_DAY_COLUMNS = ("table_id", "gaming_day", "round_id", *COUNTERS,
                      "first_notification_id", "last_notification_id")


class TableDaysView(View):
    base = "table_days"
    parts = ("settings", "tables", "intervals", "rounds", "days", "round_days")

    def __init__(self, datastore: PostgresDatastore, *, tracking_table_name: str | None = None,
                 generation: str = "", gaming_day: GamingDay | None = None,
                 **kwargs: Any) -> None:
        self.gaming_day = gaming_day or GamingDay.from_env({})
        super().__init__(datastore, tracking_table_name=tracking_table_name,
                         generation=generation, **kwargs)

    def create_statements(self) -> list[Composed]:
        q = self.qualified
        return [
            # The gaming day this generation of the view counts in; one row, set at creation.
            # ``applied_until``: the latest time of an event the view has counted, so that the
            # report claims no "no activity" day the view has not read yet.
            SQL("CREATE TABLE IF NOT EXISTS {} (singleton boolean PRIMARY KEY DEFAULT true "
                "CHECK (singleton), tz text NOT NULL, day_start time NOT NULL, "
                "applied_until timestamptz)").format(q("settings")),
            self.added_column("settings", "applied_until", "timestamptz"),
            SQL("INSERT INTO {} (tz, day_start) VALUES ({}, {}) ON CONFLICT DO NOTHING").format(
                q("settings"), Literal(self.gaming_day.tz_name),
                Literal(self.gaming_day.start.isoformat())),
            SQL("CREATE TABLE IF NOT EXISTS {} (table_id uuid PRIMARY KEY, name text NOT NULL, "
                "currency text NOT NULL, version bigint NOT NULL)").format(q("tables")),
            SQL("CREATE TABLE IF NOT EXISTS {} (table_id uuid NOT NULL, "
                "opened_at timestamptz NOT NULL, closed_at timestamptz, "
                "PRIMARY KEY (table_id, opened_at))").format(q("intervals")),
            SQL("CREATE TABLE IF NOT EXISTS {} (round_id uuid PRIMARY KEY, "
                "table_id uuid NOT NULL, version bigint NOT NULL)").format(q("rounds")),
            SQL("CREATE TABLE IF NOT EXISTS {} (table_id uuid NOT NULL, gaming_day date NOT NULL, "
                "rounds_played integer NOT NULL, rounds_settled integer NOT NULL, "
                "rounds_voided integer NOT NULL, rulings integer NOT NULL, "
                "staked bigint NOT NULL, paid_out bigint NOT NULL, house_win bigint NOT NULL, "
                "held_delta bigint NOT NULL, open_delta integer NOT NULL, "
                "last_notification_id bigint NOT NULL, PRIMARY KEY (table_id, gaming_day), "
                "CONSTRAINT money_conserved CHECK (staked - paid_out - house_win = held_delta))"
                ).format(q("days")),
            # When the round_days part was made for a view that had counted events already:
            # the days up to then are not all listed in it (NULL: every day is).
            self.added_column("settings", "rounds_listed_after", "timestamptz"),
            SQL("DO $$ BEGIN IF to_regclass(quote_ident({schema}) || '.' || quote_ident({name})) "
                "IS NULL THEN "
                "CREATE TABLE {round_days} (table_id uuid NOT NULL, gaming_day date NOT NULL, "
                "round_id uuid NOT NULL, rounds_played integer NOT NULL, "
                "rounds_settled integer NOT NULL, rounds_voided integer NOT NULL, "
                "rulings integer NOT NULL, staked bigint NOT NULL, paid_out bigint NOT NULL, "
                "house_win bigint NOT NULL, held_delta bigint NOT NULL, "
                "open_delta integer NOT NULL, first_notification_id bigint NOT NULL, "
                "last_notification_id bigint NOT NULL, "
                "PRIMARY KEY (table_id, gaming_day, round_id), "
                "CONSTRAINT money_conserved CHECK (staked - paid_out - house_win = held_delta)); "
                # A day's rounds in the order the view first counted them, paged by keyset.
                "CREATE UNIQUE INDEX {by_first} ON {round_days} "
                "(table_id, gaming_day, first_notification_id); "
                # After the latest event counted, whichever clock ran ahead: the end of the
                # last day counted (applied_until is NULL in a view made before it). That
                # day's start, read as GamingDay.bounds reads it: in an hour the clocks repeat,
                # the first of the two instants (PostgreSQL's AT TIME ZONE takes the second),
                # the earliest that reads back as that local time (none does in an hour the
                # clocks skip: then PostgreSQL's reading, the offset before, as Python's).
                "UPDATE {settings} SET rounds_listed_after = greatest(now(), applied_until, "
                "(SELECT coalesce(min(c.at) FILTER (WHERE c.at AT TIME ZONE tz = l.start), "
                "min(l.start) AT TIME ZONE tz) FROM (SELECT (max(gaming_day) + 1) + day_start "
                "AS start FROM {days}) l, LATERAL (SELECT l.start AT TIME ZONE tz - step "
                "FROM unnest(ARRAY[interval '0', interval '30 minutes', interval '1 hour', "
                "interval '2 hours']) step) c(at))) "
                "WHERE EXISTS "
                "(SELECT 1 FROM {tracking} WHERE notification_id > 0); "
                "END IF; END $$").format(
                schema=Literal(self.datastore.schema), name=Literal(self.name_of("round_days")),
                round_days=q("round_days"), by_first=Identifier(self.name_of("round_days_first")),
                settings=q("settings"), tracking=q("tracking"), days=q("days")),
        ]


def built_gaming_day(view: View) -> GamingDay | None:
    """The gaming day ``view``'s tables were built with; None where they are not made yet."""
    with view.datastore.transaction(commit=False) as curs:
        return (stored_gaming_day(curs, view)
                if table_exists(curs, view.qualified("settings")) else None)


def stored_gaming_day(curs: Curs, view: View) -> GamingDay:
    curs.execute(SQL("SELECT tz, day_start FROM {}").format(view.qualified("settings")))
    row = curs.fetchone()
    if row is None:
        raise InvariantBroken(f"{view.name_of('settings')} has no gaming-day row")
    start: time = row["day_start"]
    return GamingDay(row["tz"], start)


class TableDaysProjection(BatchProjection[TableDaysView]):
    name = "table_days"
    view_class: ClassVar[type[View]] = TableDaysView
    streams = _STREAMS
    decoded = _DECODED
    undecoded = QUIET_TOPICS
    topics = known_topics(_STREAMS, Round, Table)

    def __init__(self, view: TableDaysView) -> None:
        super().__init__(view)
        q = view.qualified
        self._select_tables = select_rows(q("tables"), _TABLE_COLUMNS, "table_id")
        self._select_rounds = select_rows(q("rounds"), _ROUND_COLUMNS, "round_id")
        self._upsert_table = upsert_rows(q("tables"), _TABLE_COLUMNS, "table_id", ("version",))
        self._upsert_round = upsert_rows(q("rounds"), _ROUND_COLUMNS, "round_id", ("version",))
        self._open = SQL("INSERT INTO {} (table_id, opened_at) VALUES (%s, %s)").format(
            q("intervals"))
        self._close = SQL("UPDATE {} SET closed_at = %s WHERE table_id = %s AND closed_at IS NULL"
                          ).format(q("intervals"))
        self._upsert_day = _adding(q("days"), _DAY_COLUMNS, ("table_id", "gaming_day"))
        # A round's first counted notification on a day stays.
        self._upsert_round_day = _adding(q("round_days"), _ROUND_DAY_COLUMNS,
                                         ("table_id", "gaming_day", "round_id"))
        self._applied_until = SQL("UPDATE {} SET applied_until = greatest(applied_until, %s)"
                                  ).format(q("settings"))

    def apply(self, curs: Curs, items: Sequence[Item]) -> None:
        gaming_day = stored_gaming_day(curs, self.view)
        tables = load_rows(curs, self._select_tables, "table_id",
                           aggregate_ids(items, TABLE_STREAM, Table.Created.TOPIC))
        rounds = load_rows(curs, self._select_rounds, "round_id",
                           aggregate_ids(items, ROUND_STREAM, Round.Created.TOPIC))
        days: dict[tuple[UUID, date], dict[str, Any]] = {}
        round_days: dict[tuple[UUID, date, UUID], dict[str, Any]] = {}
        touched_tables: dict[UUID, dict[str, Any]] = {}
        touched_rounds: dict[UUID, dict[str, Any]] = {}

        def counted_in(round_row: dict[str, Any], at: datetime, item: Item
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
            """The counters of the gaming day of ``at`` at the round's table, and of the
            round on that day, the item noted in both."""
            table_id, day = round_row["table_id"], gaming_day.day_of(at)
            of_day = days.get((table_id, day))
            if of_day is None:
                of_day = days[table_id, day] = dict.fromkeys(COUNTERS, 0)
                of_day.update(table_id=table_id, gaming_day=day)
            of_round = round_days.get((table_id, day, round_row["round_id"]))
            if of_round is None:
                of_round = round_days[table_id, day, round_row["round_id"]] = dict.fromkeys(
                    COUNTERS, 0)
                of_round.update(table_id=table_id, gaming_day=day, round_id=round_row["round_id"],
                                first_notification_id=item.notification_id)
            of_day["last_notification_id"] = of_round["last_notification_id"] = \
                item.notification_id
            return of_day, of_round

        for item in items:
            key = item.originator_id
            if item.topic.startswith(TABLE_STREAM):
                tables[key] = touched_tables[key] = self._table(curs, tables.get(key), item)
                continue
            event = item.event
            created = item.topic == Round.Created.TOPIC
            fresh = {"round_id": key, "table_id": event.table_id} if created else None
            row = versioned("round", rounds.get(key), item, fresh)
            rounds[key] = touched_rounds[key] = row
            if created:
                for counts in counted_in(row, event.timestamp, item):
                    counts["rounds_played"] += 1
                    counts["open_delta"] += 1
            elif isinstance(event, Round.Recorded):
                fact = event.fact()
                money = money_of(fact)
                if money != NONE or isinstance(fact, _ENDS):
                    for counts in counted_in(row, event.timestamp, item):
                        _count(counts, fact, money, item)
        if touched_tables:
            curs.executemany(self._upsert_table, list(touched_tables.values()))
        if touched_rounds:
            curs.executemany(self._upsert_round, list(touched_rounds.values()))
        if days:
            curs.executemany(self._upsert_day, list(days.values()))
        if round_days:
            curs.executemany(self._upsert_round_day, list(round_days.values()))
        counted = [i.event.timestamp for i in items if i.event is not None]
        if counted:
            curs.execute(self._applied_until, (max(counted),))

    def _table(self, curs: Curs, row: dict[str, Any] | None, item: Item) -> dict[str, Any]:
        event = item.event
        fresh = ({"table_id": item.originator_id, "name": event.name,
                  "currency": event.currency} if item.topic == Table.Created.TOPIC else None)
        row = versioned("table", row, item, fresh)
        if isinstance(event, Table.Created | Table.Reopened):
            curs.execute(self._open, (item.originator_id, event.timestamp))
        elif isinstance(event, Table.Closed):
            curs.execute(self._close, (event.timestamp, item.originator_id))
            if curs.rowcount != 1:
                raise InvariantBroken(f"table {item.originator_id} closed while not open "
                                      f"(notification {item.notification_id})")
        return row


def _adding(table: Identifier, columns: Sequence[str], key: Sequence[str]) -> Composed:
    """Insert a row of ``columns``, or add its counters to those of the row with its ``key``
    (``upsert_rows`` would replace them), noting its last notification."""
    return SQL("INSERT INTO {0} AS d ({1}) VALUES ({2}) ON CONFLICT ({3}) "
               "DO UPDATE SET {4}, last_notification_id = EXCLUDED.last_notification_id").format(
        table, SQL(", ").join(map(Identifier, columns)),
        SQL(", ").join(SQL("%({})s").format(SQL(c)) for c in columns),
        SQL(", ").join(map(Identifier, key)),
        SQL(", ").join(SQL("{0} = d.{0} + EXCLUDED.{0}").format(Identifier(c))
                       for c in COUNTERS))


def _count(counts: dict[str, Any], fact: f.Fact, money: Money, item: Item) -> None:
    if not money.balanced:
        raise InvariantBroken(f"{item.topic} (notification {item.notification_id}) moves "
                              "chips that do not balance (R-M4)")
    counts["staked"] += money.staked
    counts["paid_out"] += money.paid
    counts["house_win"] += money.house
    counts["held_delta"] += money.held
    if isinstance(fact, f.RoundSettled):
        counts["rounds_settled"] += 1
        counts["open_delta"] -= 1
    elif isinstance(fact, f.RoundVoided):
        counts["rounds_voided"] += 1
        counts["open_delta"] -= 1
    elif isinstance(fact, f.RulingRecorded):
        counts["rulings"] += 1

"""The read facade the HTTP API serves: searches, balances, reports, positions, checks.

Every query runs in a read-only, repeatable-read transaction with a statement timeout
(``PITBOSS_QUERY_STATEMENT_TIMEOUT_MS``, default 5000), and every argument is checked first.
Rounds, balances and the house results come a page of a bounded size at a time, with a
keyset cursor (never OFFSET). The other lists are not paged: a table's day report covers at
most ``DAY_RANGE_MAX_DAYS`` days (366), and the positions are one row per projection. The balance
check is the exception to the first rule: it goes in parts of bounded work, in plain
transactions without the statement timeout, for as long as it is given, and says where to go on
(a cursor).
A bad argument raises :class:`~ledger.errors.DecisionRefused` (a search too broad for the
timeout, :class:`QueryTooBroad`, is one) and an unknown table
:class:`~ledger.errors.NotFound`, each with a sentence for the person who asked. Results are
JSON-ready: ids and times as strings (times in ISO 8601, UTC), amounts as integers in minor
units.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.persistence import OperationalError
from psycopg.errors import QueryCanceled, UndefinedTable
from psycopg.sql import SQL, Composable, Identifier, Literal

from ledger.errors import DecisionRefused, InvariantBroken, NotFound, QueryRefused
from ledger.names import NAME_MAX_CHARS
from projections.balances import BUY_IN, CASH_OUT, BalancesView
from projections.base import Curs, View, table_exists
from projections.checks import ACCOUNTS, OPENINGS, Part, check_part
from projections.engine import (
    ddl_lock,
    lag_report,
    ledger_events_table,
    log_after,
    projections_datastore,
)
from projections.rounds import FLAGS, STATUSES, RoundIndexView
from projections.settings import (
    BALANCES_PAGE_MAX,
    CASHIER_PAGE_MAX,
    CASHIERS_SHOWN_MAX,
    CHECK_FINDINGS_MAX,
    CURSOR_MAX_CHARS,
    DAY_END_SETTLE,
    DAY_MAX,
    DAY_MIN,
    DAY_RANGE_MAX_DAYS,
    DAY_ROUNDS_PAGE_MAX,
    HOUSE_PAGE_MAX,
    MOMENT_MAX,
    MOMENT_MIN,
    ROUNDS_PAGE_MAX,
    GamingDay,
    statement_timeout_ms,
)
from projections.table_days import COUNTERS, TableDaysView, stored_gaming_day

if TYPE_CHECKING:
    from ledger.application import GameLedger


MOMENTS = "A time lies from {} to {}.".format(
    *(m.isoformat().replace("+00:00", "Z") for m in (MOMENT_MIN, MOMENT_MAX)))


class QueryTooBroad(DecisionRefused):
    """A search ran into the statement timeout."""


class ReadModelsNotMade(Exception):
    """Tables a read needs do not exist: the views were never made, or this version's new
    tables not yet (an upgrade whose owner's start has not run). Its text says which and who
    makes them."""


class _TablesMissing(Exception):
    """A lock on the views' tables found one missing (the transaction is spoilt)."""


class ReadModels:
    """Queries over the projections' views; one pool, opened on first use."""

    def __init__(self, env: Mapping[str, str], *, cursor_secret: bytes | None = None) -> None:
        """``cursor_secret`` signs the cursors given out (the service passes its shoe key, so
        that every worker takes the others' cursors, and a restart keeps them); without one,
        a cursor holds for this object only."""
        self._cursors = _Cursors(os.urandom(32) if cursor_secret is None else cursor_secret)
        self._datastore, create = projections_datastore(env)
        try:
            self._timeout_ms = statement_timeout_ms(env)
            self._events = ledger_events_table(env)
            self._balances = BalancesView(self._datastore)
            self._rounds = RoundIndexView(self._datastore)
            self._days = TableDaysView(self._datastore, gaming_day=GamingDay.from_env(env))
            self._views: dict[str, View] = {"balances": self._balances,
                                            "round_index": self._rounds,
                                            "table_days": self._days}
            if create:
                with ddl_lock(self._datastore):
                    for view in self._views.values():
                        view.create_table()
        except BaseException:  # a pool left open is closed by the garbage collector, badly
            self._datastore.close()
            raise

    def close(self) -> None:
        self._datastore.close()

    def __enter__(self) -> ReadModels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _read(self, *views: View, parts: tuple[str, ...] | None = None) -> Iterator[Curs]:
        """A read-only transaction on one snapshot, the tables of ``views`` locked before its
        first query takes it: a read that waits on a rebuild's swap (:mod:`projections.rebuild`)
        then sees the swapped-in tables as committed. Locked by its first query instead, it had
        taken its snapshot before waiting, and found the new tables without the events the swap
        brought them up to meanwhile (a day's report, read to its end, went back a round and
        forward again). ``parts``: the tables of each view it reads, if not all."""
        try:
            with self._datastore.transaction(commit=False) as curs:
                curs.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                curs.execute(SQL("SET LOCAL statement_timeout = {}").format(
                    Literal(self._timeout_ms)))
                if views:  # in the order a swap and a worker's batch lock them
                    try:
                        curs.execute(SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(
                            SQL(", ").join(v.qualified(part) for v in views
                                           for part in parts or ("tracking", *v.parts))))
                    except UndefinedTable:
                        raise _TablesMissing from None
                yield curs
        except _TablesMissing:
            raise ReadModelsNotMade(self.unmade(views) or "The read models' tables were "
                                    "being made or replaced: read again.") from None
        except OperationalError as error:
            if isinstance(error.__cause__, QueryCanceled):
                raise QueryTooBroad(f"The query took longer than {self._timeout_ms} ms; narrow "
                                    "it by table, player or time range.") from None
            raise

    def unmade(self, views: tuple[View, ...] = ()) -> str | None:
        """Which tables of ``views`` (all by default) do not exist and what makes them, in a
        sentence; None when every one does."""
        views = views or tuple(self._views.values())
        with self._datastore.transaction(commit=False) as curs:
            missing = [v.name_of(part) for v in views for part in ("tracking", *v.parts)
                       if not table_exists(curs, v.qualified(part))]
        if not missing:
            return None
        if not any(v.name_of("tracking") in missing for v in views):
            # Counted by an earlier version, which did not have them.
            return (f"The read models lack this version's tables {', '.join(missing)}: start "
                    "pitboss once as the database owner, which makes them (README: Upgrading).")
        return (f"The read models are not made yet ({', '.join(missing)} missing): the "
                "projection worker, pitboss project, makes them.")

    # ------------------------------------------------------------------ rounds

    def search_rounds(self, *, table_id: UUID | None = None, player: str | None = None,
                      status: str | None = None, started_from: datetime | None = None,
                      started_to: datetime | None = None, wild_card: bool | None = None,
                      prize: bool | None = None, ruling: bool | None = None,
                      limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """Rounds newest first (by start time), filtered, one keyset page at a time.

        ``started_from`` is inclusive and ``started_to`` exclusive; ``player`` finds the rounds
        the player had a stake in. See :mod:`projections.rounds` for the indexes behind it.
        """
        _check_limit(limit, ROUNDS_PAGE_MAX, "rounds")
        if table_id is not None and not isinstance(table_id, UUID):
            raise QueryRefused("A table id is a UUID.", field="table_id")
        if player is not None and (not isinstance(player, str)
                                   or not 1 <= len(player) <= NAME_MAX_CHARS):
            raise QueryRefused(f"A player id is 1 to {NAME_MAX_CHARS} characters.",
                                  field="player")
        if status is not None and status not in STATUSES:
            raise QueryRefused(f"A round's status is one of {', '.join(STATUSES)}.",
                                  field="status")
        flags = {"wild_card": wild_card, "prize": prize, "ruling": ruling}
        for flag, value in flags.items():
            if value is not None and not isinstance(value, bool):
                raise QueryRefused(f"The {flag} filter is true or false.", field=flag)
        for name, bound in (("started_from", started_from), ("started_to", started_to)):
            if bound is not None and (not isinstance(bound, datetime) or bound.tzinfo is None):
                raise QueryRefused("A time bound needs a date, a time and a time zone.",
                                      field=name)
            if bound is not None and not MOMENT_MIN <= bound <= MOMENT_MAX:
                raise QueryRefused(MOMENTS, field=name)
        if started_from is not None and started_to is not None and started_from >= started_to:
            raise QueryRefused("The start of a time range must come before its end.",
                                  field="started_to")
        # A page's cursor holds for the filters of the page that gave it out: under others it
        # would go on from a place in another list, and skip rounds unseen.
        of = _filtered("rounds", table_id, player, status, started_from, started_to,
                       *flags.values())
        after = None if cursor is None else self._cursors.decode(cursor, of, _round_key)

        r = SQL("r.")
        key = SQL("p.") if player is not None else r
        where: list[Composable] = []
        params: list[Any] = []

        def cond(sql: str, *values: Any) -> None:
            where.append(SQL(sql).format(k=key, r=r))
            params.extend(values)

        if player is not None:
            source = SQL("{} AS p JOIN {} AS r ON r.round_id = p.round_id").format(
                self._rounds.qualified("players"), self._rounds.qualified("rounds"))
            cond("p.player = %s", player)
        else:
            source = SQL("{} AS r").format(self._rounds.qualified("rounds"))
        if table_id is not None:
            cond("{k}table_id = %s", table_id)
        if status is not None:
            # Literal values, so the planner can match the partial indexes' predicates.
            where.append(SQL("r.status = {}").format(Literal(status)))
            if status != "settled":
                where.append(SQL("r.status <> 'settled'"))
        for flag in FLAGS:
            if flags[flag] is not None:
                where.append(SQL("{}r.{}").format(SQL("" if flags[flag] else "NOT "),
                                                  Identifier(flag)))
        if started_from is not None:
            cond("{k}started_at >= %s", started_from)
        if started_to is not None:
            cond("{k}started_at < %s", started_to)
        if after is not None:
            cond("({k}started_at, {k}round_id) < (%s, %s)", *after)
        statement = SQL(
            "SELECT r.*, t.name AS table_name FROM {source} LEFT JOIN {tables} AS t "
            "ON t.table_id = r.table_id {where} "
            "ORDER BY {k}started_at DESC, {k}round_id DESC LIMIT %s").format(
            source=source, tables=self._rounds.qualified("tables"), k=key,
            where=SQL("WHERE ") + SQL(" AND ").join(where) if where else SQL(""))
        with self._read(self._rounds) as curs:
            curs.execute(statement, [*params, limit + 1], prepare=False)
            rows = curs.fetchall()
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            last = page[-1]
            next_cursor = self._cursors.encode(
                of, [last["started_at"].isoformat(), str(last["round_id"])])
        return {"items": [_round_json(row) for row in page], "next_cursor": next_cursor}

    # ---------------------------------------------------------------- balances

    def balances(self, *, player: str | None = None, limit: int = 100,
                 cursor: str | None = None) -> dict[str, Any]:
        """Accounts in owner order (players and houses), or one player's account."""
        _check_limit(limit, BALANCES_PAGE_MAX, "accounts")
        if player is not None and (not isinstance(player, str)
                                   or not 1 <= len(player) <= NAME_MAX_CHARS):
            raise QueryRefused(f"A player id is 1 to {NAME_MAX_CHARS} characters.",
                                  field="player")
        of = _filtered("balances", player)
        after = None if cursor is None else self._cursors.decode(cursor, of, _balance_key)
        where: list[Composable] = []
        params: list[Any] = []
        if player is not None:
            where.append(SQL("a.owner = %s AND a.kind = 'player'"))
            params.append(player)
        if after is not None:
            where.append(SQL("(a.owner, a.account_id) > (%s, %s)"))
            params += after
        statement = SQL(
            "SELECT a.*, t.table_id FROM {} AS a LEFT JOIN {} AS t "
            "ON t.house_account_id = a.account_id {} ORDER BY a.owner, a.account_id LIMIT %s"
            ).format(self._balances.qualified("accounts"), self._balances.qualified("tables"),
                     SQL("WHERE ") + SQL(" AND ").join(where) if where else SQL(""))
        with self._read(self._balances) as curs:
            curs.execute(statement, [*params, limit + 1])
            rows = curs.fetchall()
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = self._cursors.encode(
                of, [page[-1]["owner"], str(page[-1]["account_id"])])
        return {"items": [_balance_json(row) for row in page], "next_cursor": next_cursor}

    def house_results(self, *, limit: int = 100, cursor: str | None = None) -> dict[str, Any]:
        """Each table's house account, in table name order: its result is what the house has
        won (negative: lost)."""
        _check_limit(limit, HOUSE_PAGE_MAX, "tables")
        after = None if cursor is None else self._cursors.decode(cursor, "house", _balance_key)
        statement = SQL(
            "SELECT t.table_id, t.name, t.currency, t.house_account_id, a.available, a.version, "
            "a.last_notification_id FROM {} AS t LEFT JOIN {} AS a "
            "ON a.account_id = t.house_account_id {} ORDER BY t.name, t.table_id LIMIT %s"
            ).format(self._balances.qualified("tables"), self._balances.qualified("accounts"),
                     SQL("" if after is None else "WHERE (t.name, t.table_id) > (%s, %s)"))
        with self._read(self._balances) as curs:
            curs.execute(statement, [*(after or []), limit + 1])
            rows = curs.fetchall()
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = self._cursors.encode(
                "house", [page[-1]["name"], str(page[-1]["table_id"])])
        return {"items": [{"table_id": str(row["table_id"]), "table_name": row["name"],
                           "currency": row["currency"],
                           "house_account_id": str(row["house_account_id"]),
                           "result": row["available"] or 0, "version": row["version"] or 0,
                           "last_notification_id": row["last_notification_id"]}
                          for row in page],
                "next_cursor": next_cursor}

    def check_balances(self, ledger: GameLedger, *, cursor: str | None = None,
                       budget_s: float | None = None) -> dict[str, Any]:
        """Every projected balance against the ledger's account aggregate, and R-M4 over the
        view: the findings, if any. Parts of the check follow one another from ``cursor`` (None:
        the start) until it is complete, ``budget_s`` seconds have passed (None: no limit), or
        ``CHECK_FINDINGS_MAX`` findings are in hand; ``next_cursor`` goes on from there, and
        carries how many findings the parts before it made (``findings_before``), so that
        ``ok`` speaks for the whole check so far, and when the check began (``began_at``): a
        cursor kept from an earlier check shows as that check's."""
        part: Part | None = None
        before = 0
        began = datetime.now(UTC).replace(microsecond=0)
        summed_at: int | None = None  # where the view was as the first part summed R-M4
        if cursor is not None:
            phase, after, before, began, summed_at = self._cursors.decode(
                cursor, "balance-check", _part_key, parts=5)
            part = (phase, after)
        findings: list[str] = []
        accounts = events = 0
        started = time.monotonic()
        deadline = None if budget_s is None else started + budget_s
        while True:
            checked = check_part(self._balances, ledger, part, deadline)
            summed_at = checked.summed_at if summed_at is None else summed_at
            findings += checked.findings
            accounts += checked.accounts
            events += checked.events
            part = checked.next
            if part is None or len(findings) >= CHECK_FINDINGS_MAX or (
                    deadline is not None and time.monotonic() >= deadline):
                break
        with self._read() as curs:  # the log after what the sum spoke for
            reach = log_after(curs, self._events, summed_at or 0)
        found = before + len(findings)
        if len(findings) > CHECK_FINDINGS_MAX:
            more = len(findings) - CHECK_FINDINGS_MAX
            findings = [*findings[:CHECK_FINDINGS_MAX],
                        f"and {more} more findings in the part checked, not listed"]
        return {"ok": found == 0, "findings": findings, "findings_before": before,
                "began_at": began.isoformat(), "complete": part is None,
                "accounts_checked": accounts, "events_scanned": events,
                "position": reach["position"], "ledger_head": reach["ledger_head"],
                "lag_events": reach["lag_events"],
                "next_cursor": None if part is None else self._cursors.encode(
                    "balance-check", [*part, str(found), began.isoformat(), str(summed_at)])}

    # ----------------------------------------------------------- table / day

    def table_day_report(self, table_id: UUID, day_from: date, day_to: date
                         ) -> list[dict[str, Any]]:
        """One row per gaming day from ``day_from`` to ``day_to`` (both included) on which the
        table had activity or was open: a day it was open without any is a "no activity" row,
        claimed only for time the view has read (its lag: :meth:`positions`).
        Held chips and open rounds are as at the end of each gaming day."""
        _check_table_id(table_id)
        _check_day(day_from, "from")
        _check_day(day_to, "to")
        if day_from > day_to:
            raise QueryRefused("The first day of a report must not come after its last.",
                                  field="to")
        if (day_to - day_from).days + 1 > DAY_RANGE_MAX_DAYS:
            raise QueryRefused(f"A report covers at most {DAY_RANGE_MAX_DAYS} days.",
                                  field="to")
        q = self._days.qualified
        with self._read(self._days) as curs:
            gaming_day = stored_gaming_day(curs, self._days)
            (lag,) = lag_report(curs, self._events, [("table_days", self._days)])
            curs.execute(SQL("SELECT applied_until FROM {}").format(q("settings")))
            applied = curs.fetchone()
            table = _reported_table(curs, q("tables"), table_id)
            curs.execute(SQL("SELECT coalesce(sum(held_delta), 0) AS held, "
                             "coalesce(sum(open_delta), 0) AS open FROM {} "
                             "WHERE table_id = %s AND gaming_day < %s").format(q("days")),
                         (table_id, day_from))
            opening = curs.fetchone()
            curs.execute(SQL("SELECT * FROM {} WHERE table_id = %s AND gaming_day >= %s "
                             "AND gaming_day <= %s").format(q("days")),
                         (table_id, day_from, day_to))
            days = {row["gaming_day"]: row for row in curs.fetchall()}
            begin, end = gaming_day.bounds(day_from)[0], gaming_day.bounds(day_to)[1]
            curs.execute(SQL("SELECT opened_at, closed_at FROM {} WHERE table_id = %s "
                             "AND opened_at < %s AND (closed_at IS NULL OR closed_at > %s)"
                             ).format(q("intervals")), (table_id, end, begin))
            intervals = [(row["opened_at"], row["closed_at"]) for row in curs.fetchall()]
        assert opening is not None
        assert applied is not None
        held, open_rounds = int(opening["held"]), int(opening["open"])
        read_until = _read_until(lag, applied["applied_until"])
        # No activity is claimed for time the view has read (all of it, for a view made by an
        # earlier version that has not yet counted an event: as that version did).
        now = read_until or datetime.now(UTC)
        out = []
        day = day_from
        while day <= day_to:
            starts, ends = gaming_day.bounds(day)
            row = days.get(day)
            if row is not None:
                held += row["held_delta"]
                open_rounds += row["open_delta"]
            # Open at some moment of the day that has already come (not a future day) and
            # that the view has read.
            was_open = starts < now and any(o < min(ends, now) and (c is None or c > starts)
                                            for o, c in intervals)
            if row is not None or was_open:
                out.append(_day_json(table_id, table, day, starts, ends, row, held,
                                     open_rounds, _read_to_day_end(ends, read_until)))
            day += timedelta(days=1)
        return out

    def table_day_rounds(self, table_id: UUID, day: date, *, limit: int = 100,
                         cursor: str | None = None) -> dict[str, Any]:
        """The rounds behind one gaming day of the table's report, each with what the day's
        figures count of it, in the order the view first counted them on the day, one keyset
        page at a time. A round started the day before, or ruled on days after it was settled,
        is listed on each day it counts on. The day's figures are the sums of its rounds':
        checked on every page, where the list is whole (``complete``: a view made by an earlier
        version lists only what it counted since, until a rebuild). Each page gives the last
        event counted on the day (``last_notification_id``): a walk whose pages differ in it
        spans a change of the day, and its pages need not add up."""
        _check_table_id(table_id)
        _check_day(day, "day")
        _check_limit(limit, DAY_ROUNDS_PAGE_MAX, "rounds")
        of = _filtered("day-rounds", table_id, day)
        after = None if cursor is None else self._cursors.decode(
            cursor, of, _notification_key, parts=1)[0]
        q = self._days.qualified
        with self._read(self._days) as curs:
            gaming_day = stored_gaming_day(curs, self._days)
            table = _reported_table(curs, q("tables"), table_id)
            (lag,) = lag_report(curs, self._events, [("table_days", self._days)])
            curs.execute(SQL("SELECT rounds_listed_after, applied_until FROM {}").format(
                q("settings")))
            settings = curs.fetchone()
            curs.execute(SQL("SELECT * FROM {} WHERE table_id = %s AND gaming_day = %s").format(
                q("days")), (table_id, day))
            day_row = curs.fetchone()
            curs.execute(SQL("SELECT count(*) AS rounds, {} FROM {} WHERE table_id = %s "
                             "AND gaming_day = %s").format(
                SQL(", ").join(SQL("coalesce(sum({0}), 0) AS {0}").format(Identifier(c))
                               for c in COUNTERS), q("round_days")), (table_id, day))
            sums = curs.fetchone()
            curs.execute(SQL("SELECT d.*, r.round_no, r.started_at FROM {} AS d LEFT JOIN {} "
                             "AS r ON r.round_id = d.round_id WHERE d.table_id = %s "
                             "AND d.gaming_day = %s AND d.first_notification_id > %s "
                             "ORDER BY d.first_notification_id LIMIT %s").format(
                q("round_days"), self._rounds.qualified("rounds")),
                (table_id, day, after or 0, limit + 1))
            rows = curs.fetchall()
        assert settings is not None
        assert sums is not None
        starts, ends = gaming_day.bounds(day)
        since = settings["rounds_listed_after"]
        complete = since is None or since <= starts
        totals = {name: (day_row[name] if day_row is not None else 0) for name in COUNTERS}
        if complete and any(int(sums[name]) != totals[name] for name in COUNTERS):
            raise InvariantBroken(f"table {table_id} on {day}: the day's figures are not the "
                                  "sums of its rounds' (R-M4)")
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = self._cursors.encode(of, [str(page[-1]["first_notification_id"])])
        return {"table_id": str(table_id), "table_name": table["name"],
                "currency": table["currency"], "gaming_day": day.isoformat(),
                "starts_at": _iso(starts), "ends_at": _iso(ends), "complete": complete,
                "read_to_day_end": _read_to_day_end(
                    ends, _read_until(lag, settings["applied_until"])),
                **_position(lag), "rounds_listed": int(sums["rounds"]),
                "last_notification_id": day_row["last_notification_id"] if day_row else None,
                "figures": _figures(f"table {table_id} on {day}", totals),
                "items": [_round_day_json(row) for row in page], "next_cursor": next_cursor}

    # ---------------------------------------------------------------- cashier

    def cashier_day(self, day: date, *, limit: int = 100,
                    cursor: str | None = None) -> dict[str, Any]:
        """The cashier's desk on one gaming day (the table/day report's bounds): buy-ins and
        cash-outs per currency and per cashier, and the movements behind them in time order,
        one keyset page at a time. ``complete``: the view holds every movement (not one made
        by an earlier version, until it is rebuilt). Each movement of a page is checked (R-M4):
        its account's totals after it are those after the movement before it (from nothing,
        where the view holds every movement) with its amount added, and its account's last
        movement leaves the totals its balance counts. Each page gives the day's last movement
        counted (``last_notification_id``): a walk whose pages differ in it spans a change of
        the day."""
        _check_day(day, "day")
        _check_limit(limit, CASHIER_PAGE_MAX, "movements")
        of = _filtered("cashier", day)
        after = None if cursor is None else self._cursors.decode(cursor, of, _moment_key)
        movements = self._balances.qualified("movements")
        with self._read(self._balances, self._days) as curs:
            starts, ends = stored_gaming_day(curs, self._days).bounds(day)
            (lag,) = lag_report(curs, self._events, [("balances", self._balances)])
            curs.execute(SQL("SELECT movements_listed_after FROM {}").format(
                self._balances.qualified("settings")))
            complete = curs.fetchone() is None
            sums = SQL(
                "count(*) FILTER (WHERE kind = {buy}) AS buy_ins, "
                "coalesce(sum(amount) FILTER (WHERE kind = {buy}), 0) AS bought_in, "
                "count(*) FILTER (WHERE kind = {cash}) AS cash_outs, "
                "coalesce(sum(amount) FILTER (WHERE kind = {cash}), 0) AS cashed_out, "
                "max(notification_id) AS last_notification_id").format(
                buy=Literal(BUY_IN), cash=Literal(CASH_OUT))
            curs.execute(SQL(
                "SELECT currency, {sums}, count(DISTINCT cashier) AS cashiers FROM {movements} "
                "WHERE at >= %s AND at < %s GROUP BY currency ORDER BY currency").format(
                sums=sums, movements=movements), (starts, ends))
            by_currency = curs.fetchall()
            # The first CASHIERS_SHOWN_MAX: one a cashier key and currency, however many keys
            # took chips that day.
            curs.execute(SQL(
                "SELECT currency, cashier, {sums} FROM {movements} "
                "WHERE at >= %s AND at < %s GROUP BY currency, cashier "
                "ORDER BY currency, cashier LIMIT %s").format(sums=sums, movements=movements),
                (starts, ends, CASHIERS_SHOWN_MAX))
            by_cashier = curs.fetchall()
            keyset = SQL("AND (m.at, m.notification_id) > (%s, %s) " if after else "")
            curs.execute(SQL(
                "SELECT m.*, b.bought_in_after AS before_in, b.cashed_out_after AS before_out, "
                "l.bought_in_after AS last_in, l.cashed_out_after AS last_out, "
                "a.bought_in AS balance_in, a.cashed_out AS balance_out FROM {movements} AS m "
                "LEFT JOIN LATERAL (SELECT bought_in_after, cashed_out_after FROM {movements} "
                "WHERE account_id = m.account_id AND version < m.version "
                "ORDER BY version DESC LIMIT 1) AS b ON true "
                "CROSS JOIN LATERAL (SELECT bought_in_after, cashed_out_after FROM {movements} "
                "WHERE account_id = m.account_id ORDER BY version DESC LIMIT 1) AS l "
                "LEFT JOIN {accounts} AS a ON a.account_id = m.account_id "
                "WHERE m.at >= %s AND m.at < %s {keyset}"
                "ORDER BY m.at, m.notification_id LIMIT %s").format(
                movements=movements, accounts=self._balances.qualified("accounts"),
                keyset=keyset), (starts, ends, *(after or ()), limit + 1))
            rows = curs.fetchall()
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            last = page[-1]
            next_cursor = self._cursors.encode(
                of, [last["at"].isoformat(), str(last["notification_id"])])
        return {"gaming_day": day.isoformat(), "starts_at": _iso(starts), "ends_at": _iso(ends),
                "complete": complete, **_position(lag),
                "currencies": [_cashier_totals(t) for t in by_currency],
                "cashiers": [{"cashier": g["cashier"], **_cashier_totals(g)}
                             for g in by_cashier],
                "cashiers_listed": sum(int(t["cashiers"]) for t in by_currency),
                "movements_listed": sum(int(t["buy_ins"]) + int(t["cash_outs"])
                                        for t in by_currency),
                "last_notification_id": max((g["last_notification_id"] for g in by_currency),
                                            default=None),
                "items": [_movement_json(row, complete) for row in page],
                "next_cursor": next_cursor}

    # -------------------------------------------------------------- positions

    def positions(self) -> list[dict[str, Any]]:
        """Each projection's position, the ledger's head and the lag between them (events)."""
        # The tracking tables alone: an upgrade's new tables, still to be made, do not stop it.
        with self._read(*self._views.values(), parts=("tracking",)) as curs:
            return lag_report(curs, self._events, list(self._views.items()))


# ---------------------------------------------------------------------- helpers

def _check_table_id(table_id: UUID) -> None:
    if not isinstance(table_id, UUID):
        raise QueryRefused("A table id is a UUID.", field="table_id")


def _check_day(day: date, name: str) -> None:
    if not isinstance(day, date) or isinstance(day, datetime):
        raise QueryRefused("A gaming day is a calendar date such as 2025-03-01.", field=name)
    if not DAY_MIN <= day <= DAY_MAX:
        raise QueryRefused(f"A gaming day lies from {DAY_MIN} to {DAY_MAX}.", field=name)


def _reported_table(curs: Curs, tables: Identifier, table_id: UUID) -> dict[str, Any]:
    """The table's name and currency as the table/day view has them (``tables``)."""
    curs.execute(SQL("SELECT name, currency FROM {} WHERE table_id = %s").format(tables),
                 (table_id,))
    table = curs.fetchone()
    if table is None:
        raise NotFound(f"There is no table {table_id} in the reports (yet).")
    return table


def _check_limit(limit: int, maximum: int, what: str) -> None:
    if type(limit) is not int or not 1 <= limit <= maximum:
        raise QueryRefused(f"A page holds 1 to {maximum} {what}.", field="limit")


class _Cursors:
    """Where the next page of a list starts: the list's name and the last row's key, as JSON,
    with an HMAC tag, in base64. A cursor this list did not give out, or one edited (a check
    told to start past the end, or that it found nothing before), is refused."""

    TAG_BYTES = 16
    _CONTEXT = b"pitboss read model cursors v1"

    def __init__(self, secret: bytes) -> None:
        self._key = hmac.new(secret, self._CONTEXT, hashlib.sha256).digest()

    def _tag(self, raw: bytes) -> bytes:
        return hmac.new(self._key, raw, hashlib.sha256).digest()[:self.TAG_BYTES]

    def encode(self, of: str, key: list[str]) -> str:
        raw = json.dumps([of, *key], separators=(",", ":"), ensure_ascii=False).encode()
        return base64.urlsafe_b64encode(raw + self._tag(raw)).decode().rstrip("=")

    def decode(self, cursor: str, of: str, parse: Callable[[list[str]], list[Any]],
               parts: int = 2) -> list[Any]:
        refused = QueryRefused("The cursor is not one this list gives out now (made up, edited, "
                               "or given out by an earlier version or under another shoe key); "
                               "start again without it.", field="cursor")
        if not isinstance(cursor, str) or not 1 <= len(cursor) <= CURSOR_MAX_CHARS:
            raise refused
        try:
            signed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            raw, tag = signed[:-self.TAG_BYTES], signed[-self.TAG_BYTES:]
            if len(signed) <= self.TAG_BYTES or not hmac.compare_digest(tag, self._tag(raw)):
                raise ValueError("not signed here")
            key = json.loads(raw)
            if not isinstance(key, list) or len(key) != parts + 1 \
                    or not all(isinstance(k, str) and k.isprintable() for k in key):
                raise ValueError(key)
            if key[0] != of:
                # (A cursor of a filtered list given out before lists were named with their
                # filters has no ":": it is refused as any other of an earlier version.)
                if ":" in key[0] and key[0].split(":")[0] == of.split(":")[0]:
                    raise QueryRefused("The cursor was given out for this list under other "
                                       "filters: send the filters of the first page with it, "
                                       "or start again without it.", field="cursor")
                raise ValueError(key)
            for k in key:
                k.encode()  # a lone surrogate (from a \ud800 escape) is no text to look up
            parsed: list[Any] = parse(key[1:])
        except (ValueError, binascii.Error, UnicodeError):
            raise refused from None
        return parsed


def _filtered(name: str, *filters: object) -> str:
    """A list's name for its cursors, with a digest of the filters it was given."""
    given = json.dumps([None if f is None else  # an instant however its zone was written
                        str(f.astimezone(UTC) if isinstance(f, datetime) else f)
                        for f in filters]).encode()
    return f"{name}:{hashlib.sha256(given).hexdigest()[:16]}"


def _round_key(key: list[str]) -> list[Any]:
    at = datetime.fromisoformat(key[0])
    if at.tzinfo is None:
        raise ValueError(key[0])
    return [at, UUID(key[1])]


def _notification_key(key: list[str]) -> list[Any]:
    if not _digits(key[0]):
        raise ValueError(key)
    return [int(key[0])]


def _moment_key(key: list[str]) -> list[Any]:
    at = datetime.fromisoformat(key[0])
    if at.tzinfo is None or not _digits(key[1]):
        raise ValueError(key)
    return [at, int(key[1])]


def _balance_key(key: list[str]) -> list[Any]:
    return [key[0], UUID(key[1])]


def _part_key(key: list[str]) -> list[Any]:
    phase, after, found, began, summed_at = key
    began_at = datetime.fromisoformat(began)
    if not _digits(found) or began_at.tzinfo is None or not _digits(summed_at):
        raise ValueError(key)
    if phase == ACCOUNTS:
        return [phase, str(UUID(after)), int(found), began_at, int(summed_at)]
    if phase != OPENINGS or not _digits(after):
        raise ValueError(key)
    return [phase, str(int(after)), int(found), began_at, int(summed_at)]


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 19


def _iso(at: datetime | None) -> str | None:
    return at.astimezone(UTC).isoformat() if at is not None else None


def _round_json(row: dict[str, Any]) -> dict[str, Any]:
    return {"round_id": str(row["round_id"]), "table_id": str(row["table_id"]),
            "table_name": row["table_name"], "round_no": row["round_no"],
            "started_at": _iso(row["started_at"]), "ended_at": _iso(row["ended_at"]),
            "rules_hash": row["rules_hash"], "rules_name": row["rules_name"],
            "rules_version": row["rules_version"], "currency": row["currency"],
            "status": row["status"], "players": list(row["players"]),
            "total_staked": row["total_staked"], "total_paid": row["total_paid"],
            "house_result": row["house_result"], "held": row["held"],
            "wild_card": row["wild_card"], "prize": row["prize"], "ruling": row["ruling"],
            "version": row["version"], "last_notification_id": row["last_notification_id"]}


def _balance_json(row: dict[str, Any]) -> dict[str, Any]:
    return {"account_id": str(row["account_id"]), "owner": row["owner"], "kind": row["kind"],
            "currency": row["currency"],
            "table_id": str(row["table_id"]) if row["table_id"] is not None else None,
            "available": row["available"], "held": row["held"],
            "total": row["available"] + row["held"], "bought_in": row["bought_in"],
            "cashed_out": row["cashed_out"], "version": row["version"],
            "last_notification_id": row["last_notification_id"]}


def _cashier_totals(group: Mapping[str, Any]) -> dict[str, Any]:
    bought_in, cashed_out = int(group["bought_in"]), int(group["cashed_out"])
    return {"currency": group["currency"], "buy_ins": int(group["buy_ins"]),
            "bought_in": bought_in, "cash_outs": int(group["cash_outs"]),
            "cashed_out": cashed_out, "net": bought_in - cashed_out}


def _movement_json(row: dict[str, Any], complete: bool) -> dict[str, Any]:
    """A movement at the desk, checked against the one before it on its account (from nothing
    where the view holds every movement: ``complete``) and its account's balance (R-M4)."""
    what = (f"{row['owner']}'s {row['kind'].replace('_', '-')} of {row['amount']} "
            f"(version {row['version']} of account {row['account_id']})")
    before = (row["before_in"], row["before_out"])
    if before == (None, None) and complete:
        before = (0, 0)
    if None not in before:
        bought_in, cashed_out = before
        if row["kind"] == BUY_IN:
            bought_in += row["amount"]
        else:
            cashed_out += row["amount"]
        if (bought_in, cashed_out) != (row["bought_in_after"], row["cashed_out_after"]):
            raise InvariantBroken(
                f"{what} leaves {row['bought_in_after']} bought in and "
                f"{row['cashed_out_after']} cashed out; the movements before it and its amount "
                f"come to {bought_in} and {cashed_out} (R-M4)")
    if (row["last_in"], row["last_out"]) != (row["balance_in"], row["balance_out"]):
        raise InvariantBroken(
            f"{row['owner']}'s movements at the desk come to {row['last_in']} bought in and "
            f"{row['last_out']} cashed out; the balance counts {row['balance_in']} and "
            f"{row['balance_out']} (R-M4)")
    return {"at": _iso(row["at"]), "kind": row["kind"], "player": row["owner"],
            "account_id": str(row["account_id"]), "currency": row["currency"],
            "amount": row["amount"], "cashier": row["cashier"], "request_id": row["request_id"],
            "version": row["version"], "notification_id": row["notification_id"]}


def _balanced(what: str, counts: Mapping[str, int]) -> None:
    if counts["staked"] - counts["paid_out"] - counts["house_win"] != counts["held_delta"]:
        raise InvariantBroken(f"{what}: the figures do not balance (R-M4)")


def _figures(what: str, counts: Mapping[str, int]) -> dict[str, int]:
    """A day's counters, checked, as the list of its rounds answers them."""
    _balanced(what, counts)
    return {name: counts[name] for name in COUNTERS if name != "open_delta"}


def _round_day_json(row: dict[str, Any]) -> dict[str, Any]:
    _balanced(f"round {row['round_id']} on {row['gaming_day']}", row)
    return {"round_id": str(row["round_id"]), "round_no": row["round_no"],
            "started_at": _iso(row["started_at"]), "started": row["rounds_played"] > 0,
            "settled": row["rounds_settled"] > 0, "voided": row["rounds_voided"] > 0,
            "rulings": row["rulings"], "staked": row["staked"], "paid_out": row["paid_out"],
            "house_win": row["house_win"], "held_delta": row["held_delta"],
            "first_notification_id": row["first_notification_id"],
            "last_notification_id": row["last_notification_id"]}


def _position(lag: Mapping[str, Any]) -> dict[str, int]:
    """How far a view has read the log, in the snapshot a page was read in."""
    return {name: lag[name] for name in ("position", "ledger_head", "lag_events")}


def _read_until(lag: Mapping[str, Any], applied_until: datetime | None) -> datetime | None:
    """Up to when the table/day view has read the log: now once it has caught up, else the
    time of the latest event it counted (a day after that may have had rounds it has not
    read); None while it is behind without such a time (a view made by an earlier version,
    until it counts its next event)."""
    if not lag["lag_events"]:
        return datetime.now(UTC)
    return applied_until


def _read_to_day_end(ends: datetime, read_until: datetime | None) -> bool:
    """Whether the view has read the log far enough past a day's end (``ends``) that no event
    of the day can still come (:data:`DAY_END_SETTLE`)."""
    return read_until is not None and ends + DAY_END_SETTLE <= read_until


def _day_json(table_id: UUID, table: dict[str, Any], day: date, starts: datetime,
              ends: datetime, row: dict[str, Any] | None, held: int,
              open_rounds: int, read_to_day_end: bool) -> dict[str, Any]:
    counts = {name: (row[name] if row is not None else 0) for name in COUNTERS}
    _balanced(f"table {table_id} on {day}", counts)
    if held < 0 or open_rounds < 0:
        raise InvariantBroken(f"table {table_id} on {day}: the day's figures do not balance "
                              "(R-M4)")
    return {"table_id": str(table_id), "table_name": table["name"],
            "currency": table["currency"], "gaming_day": day.isoformat(),
            "starts_at": _iso(starts), "ends_at": _iso(ends),
            "no_activity": row is None, "rounds_played": counts["rounds_played"],
            "rounds_settled": counts["rounds_settled"],
            "rounds_voided": counts["rounds_voided"], "rulings": counts["rulings"],
            "staked": counts["staked"], "paid_out": counts["paid_out"],
            "house_win": counts["house_win"], "held_at_day_end": held,
            "open_rounds_at_day_end": open_rounds, "read_to_day_end": read_to_day_end}

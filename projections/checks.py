"""Checking the balances projection against the ledger's account aggregates.

Each projected row is compared with its aggregate *at the version the row has applied*
(``repository.get(id, version=...)``), so the check is exact even while the ledger is being
written to: a projection that is merely behind is not wrong. What is reported, one sentence per
finding (an empty list when all agree):

* a row whose figures (owner, kind, currency, available, held, bought in, cashed out) differ
  from the aggregate's;
* an account event at or before the projection's position that the row has not applied
  (a skipped event);
* an account opened at or before the position that has no row (a skipped opening);
* a row for an account the ledger does not have;
* an account snapshot that does not verify (:class:`ledger.storage.SnapshotRecorder`): written
  around the ledger, which passes over it;
* a currency in which all balances together, the houses' included, differ from the chips
  bought in less those cashed out (R-M4): a posting without its counterpart, which every row
  agreeing with its own account would not reveal. The projection commits whole saves only
  (:meth:`projections.engine.Engine.step`), so this holds at every position it reaches.

The check goes in parts (:func:`check_part`), each a bounded amount of work, so that a casino of
any size can be checked a request at a time.

When the projection has caught up, "at its version" is the latest version, so this is the same
comparison as ``GameLedger.balance(player)`` and ``GameLedger.house(table_id)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg.sql import SQL, Composed, Identifier, Literal

from ledger.aggregates.account import Account
from ledger.application import GameLedger, reading_record, unreplayable
from ledger.errors import InvariantBroken
from ledger.storage import SnapshotRecorder
from projections.balances import BalancesView
from projections.base import LEDGER_APP
from projections.settings import CHECK_PAGE_ROWS, CHECK_SCAN_IDS

# The columns of a balances row compared with the attributes of the same name on ``Account``.
FIGURES = ("owner", "kind", "currency", "available", "held", "bought_in", "cashed_out")
_SELECTED = SQL(", ").join(Identifier(name) for name in ("account_id", *FIGURES, "version"))


ACCOUNTS, OPENINGS = "accounts", "openings"
Part = tuple[str, str]  # where a part of the check starts: the phase, and the key it goes on after


@dataclass(frozen=True)
class CheckedPart:
    findings: list[str]
    accounts: int  # rows compared with their accounts
    events: int  # ids of the ledger's log scanned for account openings
    next: Part | None  # where the check goes on; None once it is complete
    summed_at: int | None = None  # the first part's: the view's position as R-M4 was summed


def check_part(view: BalancesView, ledger: GameLedger, part: Part | None,
               deadline: float | None = None) -> CheckedPart:
    """One part of the check, from ``part`` (None: the start). The first part sums the whole
    view (R-M4) and compares the first ``CHECK_PAGE_ROWS`` rows; the next ones compare the
    rows after them in account id order, then scan the ledger's log ``CHECK_SCAN_IDS`` ids at
    a time for openings without a row, up to the projection's position. A part comparing rows
    ends early, after the row in hand, once ``deadline`` (of ``time.monotonic``) has passed:
    an account read from all its events (its snapshot not verifying) takes seconds, and a
    part of them took minutes."""
    recorder = ledger.recorder
    if not isinstance(recorder, PostgresApplicationRecorder):
        return CheckedPart(["the ledger given is not stored in PostgreSQL; nothing to compare "
                            "with"], 0, 0, None)
    events = Identifier(recorder.datastore.schema, recorder.events_table_name)
    position = view.position()
    phase, after = part or (ACCOUNTS, str(UUID(int=0)))
    if phase == OPENINGS:
        low = int(after)
        high = min(low + CHECK_SCAN_IDS, position)
        return CheckedPart(_missing(view, recorder, events, low, high, position), 0,
                           max(high - low, 0), (OPENINGS, str(high)) if high < position else None)
    findings, summed_at = _unconserved(view) if part is None else ([], None)
    with view.datastore.transaction(commit=False) as curs:
        curs.execute(SQL("SELECT {} FROM {} WHERE account_id > %s ORDER BY account_id "
                         "LIMIT %s").format(_SELECTED, view.qualified("accounts")),
                     (UUID(after), CHECK_PAGE_ROWS))
        rows = curs.fetchall()
    compared = []
    for row in rows:
        findings += _compare(row, ledger)
        compared.append(row)
        if deadline is not None and time.monotonic() >= deadline:
            break
    if compared:
        findings += _unapplied(recorder, events, compared, position)
        findings += _unsigned(ledger, compared)
    if len(compared) < len(rows) or len(rows) == CHECK_PAGE_ROWS:
        return CheckedPart(findings, len(compared), 0,
                           (ACCOUNTS, str(compared[-1]["account_id"])), summed_at)
    return CheckedPart(findings, len(rows), 0, (OPENINGS, "0") if position > 0 else None,
                       summed_at)


def _unconserved(view: BalancesView) -> tuple[list[str], int]:
    """R-M4 over the whole view, per currency, and the view's position, in one statement (one
    snapshot): the sum speaks for the log up to that position."""
    with view.datastore.transaction(commit=False) as curs:
        curs.execute(SQL(
            "SELECT p.position, s.* FROM (SELECT coalesce((SELECT notification_id FROM {} "
            "WHERE application_name = %s), 0) AS position) AS p LEFT JOIN (SELECT currency, "
            "sum(available + held) AS chips, sum(bought_in - cashed_out) AS net, "
            "max(last_notification_id) AS at FROM {} GROUP BY currency HAVING "
            "sum(available + held) <> sum(bought_in - cashed_out)) AS s ON true "
            "ORDER BY s.currency").format(view.qualified("tracking"),
                                          view.qualified("accounts")), (LEDGER_APP,))
        rows = curs.fetchall()
    findings = [
        f"R-M4: in {row['currency']}, every balance together, the houses' included, comes to "
        f"{row['chips']}, but the chips bought in less those cashed out are {row['net']}: "
        f"{abs(row['chips'] - row['net'])} chips "
        f"{'appeared' if row['chips'] > row['net'] else 'vanished'} (events up to notification "
        f"{row['at']})" for row in rows if row["currency"] is not None]
    return findings, int(rows[0]["position"])


def _describe(row: dict[str, Any]) -> str:
    return f"account {row['owner']} ({row['kind']}, {row['account_id']})"


def _compare(row: dict[str, Any], ledger: GameLedger) -> list[str]:
    try:
        with reading_record(row["account_id"], "account"):
            account: Any = ledger.repository.get(row["account_id"], version=row["version"])
    except AggregateNotFoundError:
        return [f"{_describe(row)}: projected, but the ledger has no such account"]
    except InvariantBroken as error:
        return [f"{_describe(row)}: {unreplayable(error)}"]
    if not isinstance(account, Account):
        return [f"{_describe(row)}: projected, but {row['account_id']} is not an account"]
    if account.version != row["version"]:
        return [f"{_describe(row)}: projected at version {row['version']}, but the ledger's "
                f"account has only {account.version} events"]
    theirs = {name: getattr(account, name) for name in FIGURES}
    differ = [name for name in FIGURES if row[name] != theirs[name]]
    if not differ:
        return []
    return [f"{_describe(row)} at version {row['version']}: projected "
            + ", ".join(f"{name} {row[name]}" for name in differ) + "; the ledger has "
            + ", ".join(f"{name} {theirs[name]}" for name in differ)]


def _unapplied(recorder: PostgresApplicationRecorder, events: Identifier,
               rows: list[dict[str, Any]], position: int) -> list[str]:
    """Account events at or before ``position`` past the version a row has applied."""
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(SQL(
            "SELECT a.id, min(e.notification_id) AS first FROM unnest(%s::uuid[], %s::bigint[]) "
            "AS a(id, version) JOIN {} AS e ON e.originator_id = a.id "
            "AND e.originator_version > a.version GROUP BY a.id").format(events),
            ([r["account_id"] for r in rows], [r["version"] for r in rows]))
        later = {row["id"]: row["first"] for row in curs.fetchall()}
    return [f"{_describe(r)}: the event at notification {later[r['account_id']]} is at or "
            f"before the projection's position {position} but was not applied"
            for r in rows if later.get(r["account_id"], position + 1) <= position]


def _unsigned(ledger: GameLedger, rows: list[dict[str, Any]]) -> list[str]:
    """The rows' accounts whose newest snapshot does not verify: the ledger passes over it, but
    someone wrote it around the ledger (or it predates signing, or another shoe key signed it)."""
    snapshots = ledger.snapshots.recorder if ledger.snapshots is not None else None
    if not isinstance(snapshots, SnapshotRecorder):
        return []
    by_id = {row["account_id"]: row for row in rows}
    return [f"{_describe(by_id[account_id])}: its snapshot at version {version} does not "
            "verify with this shoe key (altered, written around the ledger, or signed with "
            "another key); the ledger passes over it"
            for account_id, version in snapshots.unverified(list(by_id))]


def accounts_opened(events: Identifier) -> Composed:
    """The accounts opened in the event table ``events`` after one notification id and at or
    before another (the parameters). The topic is written out, as the index of accounts
    opened is defined: a plan made for any topic could not use it, and read the whole log."""
    return SQL("SELECT originator_id, notification_id FROM {} WHERE topic = {} "
               "AND notification_id > %s AND notification_id <= %s").format(
                   events, Literal(Account.Created.TOPIC))


def _missing(view: BalancesView, recorder: PostgresApplicationRecorder, events: Identifier,
             low: int, high: int, position: int) -> list[str]:
    """Accounts opened after ``low`` and at or before ``high`` without a row."""
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(accounts_opened(events), (low, high))
        opened = {row["originator_id"]: row["notification_id"] for row in curs.fetchall()}
    if not opened:
        return []
    with view.datastore.transaction(commit=False) as curs:
        curs.execute(SQL("SELECT account_id FROM {} WHERE account_id = ANY(%s)").format(
            view.qualified("accounts")), (list(opened),))
        present = {row["account_id"] for row in curs.fetchall()}
    return [f"account {account_id}: opened at notification {n}, at or before the "
            f"projection's position {position}, but has no row"
            for account_id, n in sorted(opened.items(), key=lambda kv: kv[1])
            if account_id not in present]

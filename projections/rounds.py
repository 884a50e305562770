"""The round index: one row per round, searchable by table, player, time, status and flags.

Each row holds the round's table and number, when it started and ended, the rule set it was
played under (content hash, name, version: R-S1), its status (``open``, ``settled``,
``voided``), its players, the money (``total_staked``, ``total_paid`` to bettors,
``house_result``, chips still ``held``) and three flags: a wild card was drawn, a prize was
paid (a ``StakeSettled`` with a ``prize``), a manager's ruling was recorded (R-V2).

**Indexes, for ten million rounds and more.** Every search lists rounds newest first, ordered
by ``(started_at, round_id)`` and paged by keyset (the last row's pair, never OFFSET), so each
search shape needs an index that yields its rows already in that order: the query then reads
``limit + 1`` index entries and stops, whatever the table's size.

* ``_started (started_at, round_id)``: all rounds, a time range, and the filters that keep most
  rows (status ``settled``, a flag ``false``), which are checked on the way.
* ``_table (table_id, started_at, round_id)``: one table's rounds, with or without a range.
* ``<players> PRIMARY KEY (player, started_at, round_id)``: a separate table with one row per
  (round, player), so one player's rounds come from one index range instead of a GIN lookup
  that would have to fetch and sort all of a regular's rounds. It also carries ``table_id``.
* partial ``_unsettled``, ``_wild``, ``_prize``, ``_ruling`` on ``(started_at, round_id)``:
  the rare rows (open or voided rounds, flagged rounds) in a small index of their own, so a
  search for them does not walk past millions of ordinary rounds. Partial indexes cost nothing
  for the rounds they leave out.

Combinations use the most selective of these and filter the rest; the statement timeout of
:mod:`projections.queries` bounds any shape that would still read far.

Players are the bettors with a stake on a box: while betting is open, the column ``stakes`` (not
shown in searches) holds the bettor of each stake, so a bettor who withdrew his last one is no
player; once betting closes, exactly the bettors dealt in (``BettingClosed.players``). Amounts
come from :mod:`projections.amounts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from psycopg.sql import SQL, Composed

from ledger.aggregates.round import Round
from ledger.aggregates.table import Table
from ledger.cards import WILD
from ledger.engine import facts as f
from ledger.errors import InvariantBroken
from projections.amounts import QUIET_TOPICS, money_of
from projections.base import (
    ROUND_STREAM,
    BatchProjection,
    Curs,
    Item,
    View,
    aggregate_ids,
    known_topics,
    load_rows,
    select_rows,
    upsert_rows,
    versioned,
)

ROUND_CREATED = Round.Created.TOPIC
OPEN, SETTLED, VOIDED = "open", "settled", "voided"
STATUSES = (OPEN, SETTLED, VOIDED)
FLAGS = ("wild_card", "prize", "ruling")

_STREAMS = (ROUND_STREAM, Table.Created.TOPIC)

COLUMNS = ("round_id", "table_id", "round_no", "started_at", "ended_at", "rules_hash",
           "rules_name", "rules_version", "currency", "status", "players", "total_staked",
           "total_paid", "house_result", "held", "wild_card", "prize", "ruling", "stakes",
           "version", "last_notification_id")
_CHANGING = ("ended_at", "status", "players", "total_staked", "total_paid", "house_result",
             "held", "wild_card", "prize", "ruling", "stakes", "version",
             "last_notification_id")


class RoundIndexView(View):
    base = "round_index"
    parts = ("rounds", "players", "tables")

    def create_statements(self) -> list[Composed]:
        rounds, players = self.qualified("rounds"), self.qualified("players")

        def index(what: str, columns: str, where: str = "") -> Composed:
            return self.added_index(f"{self.name_of('rounds')}_{what}", "rounds", columns, where)

        return [
            SQL("CREATE TABLE IF NOT EXISTS {} ("
                "round_id uuid PRIMARY KEY, table_id uuid NOT NULL, round_no integer NOT NULL, "
                "started_at timestamptz NOT NULL, ended_at timestamptz, "
                "rules_hash text NOT NULL, rules_name text NOT NULL, "
                "rules_version integer NOT NULL, currency text NOT NULL, status text NOT NULL, "
                "players text[] NOT NULL, total_staked bigint NOT NULL, "
                "total_paid bigint NOT NULL, house_result bigint NOT NULL, "
                "held bigint NOT NULL, wild_card boolean NOT NULL, prize boolean NOT NULL, "
                "ruling boolean NOT NULL, stakes text[] NOT NULL DEFAULT '{{}}', "
                "version bigint NOT NULL, "
                "last_notification_id bigint NOT NULL, "
                "CONSTRAINT known_status CHECK (status IN ('open', 'settled', 'voided')), "
                "CONSTRAINT held_not_negative CHECK (held >= 0), "
                "CONSTRAINT ended_rounds_hold_nothing CHECK (status = 'open' OR held = 0), "
                "CONSTRAINT money_conserved CHECK "
                "(total_staked - total_paid - house_result = held))").format(rounds),
            # Made by an earlier version, without ``stakes``: a withdrawal in a round it did
            # not count the stakes of leaves its players as they were.
            self.added_column("rounds", "stakes", "text[] NOT NULL DEFAULT '{}'"),
            index("started", "started_at, round_id"),
            index("table", "table_id, started_at, round_id"),
            index("unsettled", "started_at, round_id", "status <> 'settled'"),
            index("wild", "started_at, round_id", "wild_card"),
            index("prize", "started_at, round_id", "prize"),
            index("ruling", "started_at, round_id", "ruling"),
            SQL("CREATE TABLE IF NOT EXISTS {} ("
                "player text NOT NULL, started_at timestamptz NOT NULL, round_id uuid NOT NULL, "
                "table_id uuid NOT NULL, PRIMARY KEY (player, started_at, round_id))"
                ).format(players),
            SQL("CREATE TABLE IF NOT EXISTS {} (table_id uuid PRIMARY KEY, name text NOT NULL)"
                ).format(self.qualified("tables")),
        ]


class RoundIndexProjection(BatchProjection[RoundIndexView]):
    name = "round_index"
    view_class: ClassVar[type[View]] = RoundIndexView
    streams = _STREAMS
    decoded = _STREAMS
    undecoded = QUIET_TOPICS - {Round.EVENT_FOR_FACT[f.HoleCardRevealed].TOPIC}
    topics = known_topics(_STREAMS, Round, Table)

    def __init__(self, view: RoundIndexView) -> None:
        super().__init__(view)
        rounds, players = view.qualified("rounds"), view.qualified("players")
        self._select = select_rows(rounds, COLUMNS, "round_id")
        self._upsert = upsert_rows(rounds, COLUMNS, "round_id", _CHANGING)
        self._add_player = SQL(
            "INSERT INTO {} (player, started_at, round_id, table_id) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING").format(players)
        self._remove_player = SQL(
            "DELETE FROM {} WHERE player = %s AND started_at = %s AND round_id = %s").format(
            players)
        self._upsert_table = SQL(
            "INSERT INTO {} (table_id, name) VALUES (%s, %s) ON CONFLICT (table_id) DO NOTHING"
            ).format(view.qualified("tables"))

    def apply(self, curs: Curs, items: Sequence[Item]) -> None:
        rows = load_rows(curs, self._select, "round_id",
                         aggregate_ids(items, ROUND_STREAM, ROUND_CREATED))
        changes = _Changes()
        for item in items:
            if isinstance(item.event, Table.Created):
                changes.tables.append((item.originator_id, item.event.name))
                continue
            row = _next(rows.get(item.originator_id), item)
            rows[item.originator_id] = changes.touched[item.originator_id] = row
            event = item.event
            if isinstance(event, Round.Recorded):
                _apply_fact(row, event.fact(), event.timestamp, item, changes)
        if changes.touched:
            curs.executemany(self._upsert, list(changes.touched.values()))
        added, removed = changes.players(rows)
        if added:
            curs.executemany(self._add_player, added)
        if removed:
            curs.executemany(self._remove_player, removed)
        if changes.tables:
            curs.executemany(self._upsert_table, changes.tables)


class _Changes:
    def __init__(self) -> None:
        self.touched: dict[UUID, dict[str, Any]] = {}
        # Each round's players before the page changed them: a page writes where it leaves
        # them, not each step (a withdrawal's removal would undo a stake placed after it).
        self.players_before: dict[UUID, list[str]] = {}
        self.tables: list[tuple[UUID, str]] = []

    def players(self, rows: dict[UUID, dict[str, Any]]) -> tuple[
            list[tuple[str, datetime, UUID, UUID]], list[tuple[str, datetime, UUID]]]:
        """The player rows to add and to remove."""
        added, removed = [], []
        for round_id, before in self.players_before.items():
            row = rows[round_id]
            key = (row["started_at"], round_id)
            added += [(p, *key, row["table_id"]) for p in row["players"] if p not in before]
            removed += [(p, *key) for p in before if p not in row["players"]]
        return added, removed


def _next(row: dict[str, Any] | None, item: Item) -> dict[str, Any]:
    """The round's row with this event counted in: a new row for ``Round.Created``."""
    fresh: dict[str, Any] | None = None
    if item.topic == ROUND_CREATED:
        event = item.event
        fresh = {"round_id": item.originator_id, "table_id": event.table_id,
                 "round_no": event.round_no, "started_at": event.timestamp, "ended_at": None,
                 "rules_hash": event.rules_hash, "rules_name": str(event.rules["name"]),
                 "rules_version": int(event.rules["version"]), "currency": event.currency,
                 "status": OPEN, "players": [], "total_staked": 0, "total_paid": 0,
                 "house_result": 0, "held": 0, "wild_card": False, "prize": False,
                 "ruling": False, "stakes": []}
    row = versioned("round", row, item, fresh)
    row["last_notification_id"] = item.notification_id
    return row


def _apply_fact(row: dict[str, Any], fact: f.Fact, at: datetime, item: Item,
                changes: _Changes) -> None:
    money = money_of(fact)
    if not money.balanced:
        raise InvariantBroken(f"round {row['round_id']}: {item.topic} moves chips that do "
                              "not balance (R-M4)")
    row["total_staked"] += money.staked
    row["total_paid"] += money.paid
    row["house_result"] += money.house
    row["held"] += money.held
    if isinstance(fact, f.StakePlaced):
        row["stakes"] = [*row["stakes"], fact.bettor]
        _set_players(row, [*row["players"], fact.bettor], changes)
    elif isinstance(fact, f.StakeWithdrawn) and fact.bettor in row["stakes"]:
        stakes = list(row["stakes"])
        stakes.remove(fact.bettor)
        row["stakes"] = stakes
        if fact.bettor not in stakes:
            _set_players(row, [p for p in row["players"] if p != fact.bettor], changes)
    elif isinstance(fact, f.BettingClosed):
        row["stakes"] = []
        _set_players(row, list(fact.players), changes)
    elif isinstance(fact, f.WildCardDrawn):
        # Face down (the dealer's hole card), it is the dealer's secret until turned over.
        row["wild_card"] = row["wild_card"] or fact.face_up
    elif isinstance(fact, f.HoleCardRevealed) and fact.card == WILD:
        row["wild_card"] = True
    elif isinstance(fact, f.StakeSettled) and fact.prize:
        row["prize"] = True
    elif isinstance(fact, f.RulingRecorded):
        row["ruling"] = True
    elif isinstance(fact, f.RoundSettled | f.RoundVoided):
        _end(row, fact, at, item)
    if row["held"] < 0:
        raise InvariantBroken(f"round {row['round_id']}: more chips released than held "
                              f"(notification {item.notification_id})")


def _set_players(row: dict[str, Any], players: list[str], changes: _Changes) -> None:
    changes.players_before.setdefault(row["round_id"], row["players"])
    row["players"] = list(dict.fromkeys(players))


def _end(row: dict[str, Any], fact: f.RoundSettled | f.RoundVoided, at: datetime,
         item: Item) -> None:
    """A settlement or void closes the round; its totals must agree with the index (R-M4)."""
    if row["status"] != OPEN:
        raise InvariantBroken(f"round {row['round_id']} ended twice (notification "
                              f"{item.notification_id})")
    row["status"] = SETTLED if isinstance(fact, f.RoundSettled) else VOIDED
    row["ended_at"] = at
    agree = row["held"] == 0
    if isinstance(fact, f.RoundSettled):
        agree = agree and (fact.staked, fact.returned, fact.house_result) == (
            row["total_staked"], row["total_paid"], row["house_result"])
    else:
        agree = agree and row["house_result"] == 0
    if not agree:
        raise InvariantBroken(f"round {row['round_id']}: the {row['status']} totals do not "
                              f"agree with the events counted (notification "
                              f"{item.notification_id}, R-M4)")

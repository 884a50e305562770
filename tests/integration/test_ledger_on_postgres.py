"""What only a real PostgreSQL can show: crashes, races, immutable and chained storage."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from eventsourcing.persistence import OperationalError, StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder
from psycopg.sql import SQL, Composable, Identifier

from api.database import DatabaseSettings
from ledger import storage
from ledger.aggregates import ids
from ledger.aggregates.account import Account
from ledger.aggregates.round import Round
from ledger.aggregates.shoe import ShoeRecord
from ledger.aggregates.snapshot import LedgerSnapshot
from ledger.aggregates.table import Table
from ledger.application import GameLedger
from ledger.errors import (
    Conflict,
    DealRefused,
    InsufficientChips,
    InvariantBroken,
    NotFound,
    QueryRefused,
    RequestIdReused,
    RuleSetInvalid,
    StaleVersion,
)
from ledger.rules import CASINO, WILD21, TableLimits, rules_hash
from ledger.sealing import ShoeSealer
from ledger.shoe import commitment
from ledger.storage import (
    GENESIS,
    STATEMENT_TIMEOUT,
    LedgerRecorder,
    SnapshotRecorder,
    append_lock_key,
    chain_head,
    link,
    verify_chain,
)
from projections.checks import accounts_opened
from projections.engine import Engine, Reader
from projections.queries import ReadModels
from tests.faults import (
    PausingLedger,
    append_around_the_ledger,
    interrupted_once_waiting,
    undecodable,
)
from tests.scripted import SteeredShuffle

NewEnv = Callable[[], dict[str, str]]


@pytest.fixture
def env(postgres_env: NewEnv) -> dict[str, str]:
    return postgres_env()


@pytest.fixture
def ledgers(env: dict[str, str]) -> Iterator[Callable[..., GameLedger]]:
    """GameLedgers sharing one schema and one shoe key, like the workers of one service."""
    key = ShoeSealer.new_key()
    made: list[GameLedger] = []

    def make(cls: type[GameLedger] = GameLedger, **kwargs: Any) -> GameLedger:
        ledger = cls(**{"env": env, "shoe_key": key, **kwargs})  # env may be given instead
        made.append(ledger)
        return ledger

    yield make
    for ledger in made:
        ledger.close()


CARD_DEALT = "pitboss:Round.CardDealt"  # (the event class is made at import: untyped)


def open_round(app: GameLedger, stakes: int = 2) -> tuple[UUID, UUID]:
    table = app.open_table("t", "boss", "T1", CASINO)
    for n in range(1, stakes + 1):
        app.open_account(f"a{n}", "cashier", f"P{n}")
        app.buy_in(f"b{n}", "cashier", f"P{n}", 1000)
    r = app.start_round("s", "dealer", table)
    for n in range(1, stakes + 1):
        app.place_stake(f"p{n}", "dealer", r, f"P{n}", n, 10)
    app.deal("d", "dealer", r)
    return table, r


def with_a_round(ledgers: Callable[..., GameLedger]) -> tuple[GameLedger, LedgerRecorder]:
    """A ledger on PostgreSQL with a round dealt, and its recorder."""
    app = ledgers()
    open_round(app)
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    return app, recorder


def test_a_crashed_process_resumes_the_round_with_the_same_shoe(
        ledgers: Callable[..., GameLedger]) -> None:
    # Box 1 holds 5,6 and will hit; box 2 stands on 19; the dealer shows a 7.
    first = ledgers(randbelow=SteeredShuffle("5S TH 7D 6S 9C 4H 8C TS"))
    table, r = open_round(first)
    first.hit("h1", "dealer", r, "P1", 1, 0)  # 5,6,4 = 15
    del first  # the process dies mid-round: nothing else of it survives

    second = ledgers()
    assert second.round_state(r)["boxes"][0]["hands"][0]["cards"] == ["5S", "6S", "4H"]
    second.stand("h2", "dealer", r, "P1", 1, 0)
    second.stand("h3", "dealer", r, "P2", 2, 0)
    second.play_dealer("h4", "dealer", r)
    second.settle("h5", "dealer", r)
    assert second.round_state(r)["dealer"]["cards"] == ["7D", "8C", "TS"]  # same shoe order
    assert second.check_round(r) == []
    shoe = UUID(second.round_state(r)["shoe_id"])
    second.close_table("c", "manager", table, "end of shift")
    assert second.verify_shoe(shoe) == []


def test_of_two_racing_decisions_one_wins_and_the_other_conflicts(
        ledgers: Callable[..., GameLedger]) -> None:
    setup = ledgers(randbelow=SteeredShuffle("TS TH 7D 6S 9C"))
    _, r = open_round(setup)
    barrier = threading.Barrier(2)
    racers = [ledgers(PausingLedger), ledgers(PausingLedger)]
    outcomes: dict[str, object] = {}

    def act(name: str, app: GameLedger, decision: str) -> None:
        app.barrier = barrier  # type: ignore[attr-defined]
        try:
            outcomes[name] = getattr(app, decision)(f"race-{name}", "dealer", r, "P1", 1, 0)
        except Exception as e:  # the test inspects what each racer got
            outcomes[name] = e

    threads = [threading.Thread(target=act, args=(n, a, d))
               for n, a, d in (("hit", racers[0], "hit"), ("stand", racers[1], "stand"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    conflicts = [o for o in outcomes.values() if isinstance(o, Conflict)]
    wins = [o for o in outcomes.values() if isinstance(o, dict)]
    assert len(conflicts) == 1
    assert len(wins) == 1
    events = [e["type"] for e in setup.round_events(r)]
    assert events.count("HandHit") + events.count("HandStood") == 1
    assert setup.check_round(r) == []


def test_stored_events_refuse_update_delete_and_truncate(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    open_round(ledgers())
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_events'
    for statement in (f"UPDATE {table} SET topic = topic", f"DELETE FROM {table}",
                      f"TRUNCATE {table}"):
        with psycopg.connect(database.conninfo()) as conn, \
                pytest.raises(psycopg.errors.InsufficientPrivilege, match="immutable"):
            conn.execute(statement)


@contextlib.contextmanager
def behind_the_ledger(database: DatabaseSettings,
                      env: dict[str, str]) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """What a superuser could still do: a connection with the event table's triggers off,
    and the table's name."""
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_events'
    with psycopg.connect(database.conninfo()) as conn:
        conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        yield conn, table
        conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def alter_buy_ins(conn: psycopg.Connection[Any], table: str, where: str = "TRUE",
                  params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Turn the 1000 of the buy-ins ``where`` says into 9000, links left alone; the rows
    altered (notification id, originator id and version, topic, state)."""
    return conn.execute(
        f"UPDATE {table} SET state = convert_to(replace(convert_from(state, 'UTF8'), '1000', "
        f"'9000'), 'UTF8') WHERE topic = 'pitboss:Account.BoughtIn' AND {where} RETURNING "
        "notification_id, originator_id, originator_version, topic, state", params).fetchall()


def test_the_hash_chain_exposes_an_altered_event(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    app = ledgers()
    open_round(app)
    report = verify_chain(app.recorder)  # type: ignore[arg-type]
    assert report.intact
    assert report.rows == app.recorder.max_notification_id()
    assert (report.head_notification_id, report.head) == chain_head(app.recorder)  # type: ignore[arg-type]
    with behind_the_ledger(database, env) as (conn, table):
        changed = alter_buy_ins(conn, table)
    assert len(changed) == 2
    tampered = verify_chain(app.recorder)  # type: ignore[arg-type]
    assert not tampered.intact
    # The walk goes on past the first: each altered event is named, and the walk completes.
    assert [f"(notification {n}) does not match the chain" in finding
            for finding, (n, *_) in zip(tampered.findings, sorted(changed), strict=True)
            ] == [True] * 2
    assert (tampered.complete, tampered.next_after) == (True, None)
    # Walked in parts of two rows, the parts holding them report them.
    after: int | None = 0
    found: list[str] = []
    while after is not None:
        part = verify_chain(app.recorder, after=after, limit=2)  # type: ignore[arg-type]
        found += part.findings
        after = part.next_after
    assert found == tampered.findings
    assert part.head_notification_id == tampered.head_notification_id


def test_a_part_of_the_chain_reads_the_rows_it_walks_and_one_more(
        ledgers: Callable[..., GameLedger], monkeypatch: pytest.MonkeyPatch) -> None:
    # Each part read a page of 5,000 rows whatever its limit: a walk in parts of 100 read
    # fifty times the rows it checked.
    app = ledgers()
    open_round(app)
    asked: list[int] = []
    fetched = storage._fetched

    def counted(recorder: Any, statement: str, params: Any) -> list[dict[str, Any]]:
        rows = fetched(recorder, statement, params)
        if "chain_hash" in statement and "ORDER BY notification_id LIMIT" in statement:
            asked.append(len(rows))
        return rows

    monkeypatch.setattr(storage, "_fetched", counted)
    part = verify_chain(app.recorder, limit=2)  # type: ignore[arg-type]
    assert (part.rows, part.complete, asked) == (2, False, [3])
    asked.clear()
    whole = verify_chain(app.recorder)  # type: ignore[arg-type]
    assert whole.complete
    assert sum(asked) == whole.rows > 3


@pytest.mark.parametrize("at", [0, -1])
def test_an_event_stored_below_the_first_notification_id_is_walked_too(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings, env: dict[str, str],
        at: int) -> None:
    # The sequence issues ids from 1; a row inserted by hand at 0 or below (no trigger to turn
    # off: inserts are not refused) is read with its account, and a walk from the start, kept
    # head and all, called the record intact.
    _, recorder = with_a_round(ledgers)
    kept_at, kept = chain_head(recorder)
    with behind_the_ledger(database, env) as (conn, table):
        conn.execute(
            f"INSERT INTO {table} (notification_id, originator_id, originator_version, topic, "
            f"state, chain_hash) SELECT %s, b.originator_id, (SELECT max(originator_version) "
            f"FROM {table} WHERE originator_id = b.originator_id) + 1, b.topic, b.state, %s "
            f"FROM {table} AS b WHERE b.topic = 'pitboss:Account.BoughtIn' ORDER BY "
            "b.notification_id LIMIT 1", (at, bytes(32)))
    bought_in = [e for e in ledgers().events.get(ids.account_id("P1"))
                 if type(e).__name__ == "BoughtIn"]
    assert len(bought_in) == 2  # the ledger reads it: P1 bought in twice
    report = verify_chain(recorder, expected_head=kept, expected_at=kept_at)
    assert report.rows == recorder.max_notification_id() + 1
    assert f"(notification {at}) does not match the chain" in report.findings[0]
    assert not report.intact


def test_a_walk_stops_after_so_many_findings_and_goes_on_from_there(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings, env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, recorder = with_a_round(ledgers)
    with behind_the_ledger(database, env) as (conn, table):
        first, second = sorted(row[0] for row in alter_buy_ins(conn, table))
    monkeypatch.setattr(storage, "CHAIN_FINDINGS_MAX", 1)
    stopped = verify_chain(recorder)
    assert len(stopped.findings) == 1
    assert (stopped.complete, stopped.next_after) == (False, first)
    then = verify_chain(recorder, after=first)
    assert f"(notification {second}) does not match" in then.findings[0]
    assert then.next_after == second
    rest = verify_chain(recorder, after=second)
    assert (rest.intact, rest.complete) == (True, True)


def test_an_event_altered_with_its_own_link_recomputed_is_found_at_the_next_one(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    _, recorder = with_a_round(ledgers)
    with behind_the_ledger(database, env) as (conn, table):  # the chain has no key:
        target, *rest = alter_buy_ins(  # anyone can recompute the link of the one altered
            conn, table, f"notification_id = (SELECT min(notification_id) FROM {table} "
            "WHERE topic = 'pitboss:Account.BoughtIn')")
        before = conn.execute(f"SELECT chain_hash FROM {table} WHERE notification_id < %s "
                              "ORDER BY notification_id DESC LIMIT 1", (target[0],)).fetchone()
        assert before is not None
        assert rest == []
        notification_id, originator_id, version, topic, state = target
        conn.execute(f"UPDATE {table} SET chain_hash = %s WHERE notification_id = %s",
                     (link(bytes(before[0]), originator_id, version, topic, bytes(state)),
                      notification_id))
    report = verify_chain(recorder)
    assert not report.intact
    assert report.head_notification_id > target[0]  # found where the next link fails
    assert "the event before it (its link recomputed), was altered" in report.findings[0]


def test_a_part_started_after_an_alteration_says_it_took_its_start_on_trust(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    _, recorder = with_a_round(ledgers)
    kept_at, kept = chain_head(recorder)
    with behind_the_ledger(database, env) as (conn, table):  # early events, links left alone
        altered = alter_buy_ins(conn, table)
    first, last = min(row[0] for row in altered), max(row[0] for row in altered)
    part = verify_chain(recorder, after=last, expected_head=kept, expected_at=kept_at)
    assert part.intact  # intact from the start it took on trust...
    assert not part.from_start
    whole = verify_chain(recorder, expected_head=kept, expected_at=kept_at)
    assert whole.from_start  # ...which a walk from the start checks
    assert not whole.intact
    assert f"(notification {first}) does not match the chain" in whole.findings[0]
    # The kept head is settled by the alteration before it: nothing is left to go on to.
    assert (whole.complete, whole.kept_head_checked, whole.next_after) == (True, True, None)


def test_a_head_kept_outside_exposes_a_chain_recomputed_after_an_alteration(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    app, recorder = with_a_round(ledgers)
    kept_at, kept = chain_head(recorder)
    app.buy_in("later", "cashier", "P1", 50)  # the ledger goes on after the head was kept
    # A part that stops before the kept head's event is intact so far, and says it did not
    # get to compare it; walked on, it does.
    short = verify_chain(recorder, limit=1, expected_head=kept, expected_at=kept_at)
    assert (short.intact, short.kept_head_checked) == (True, False)
    assert verify_chain(recorder, expected_head=kept, expected_at=kept_at).kept_head_checked
    with behind_the_ledger(database, env) as (conn, table):  # a superuser rewrites history...
        alter_buy_ins(conn, table)
        previous = GENESIS  # ...and every link after it, so the chain is whole again
        for row in conn.execute(f"SELECT notification_id, originator_id, originator_version, "
                                f"topic, state FROM {table} ORDER BY notification_id"
                                ).fetchall():
            previous = link(previous, row[1], row[2], row[3], bytes(row[4]))
            conn.execute(f"UPDATE {table} SET chain_hash = %s WHERE notification_id = %s",
                         (previous, row[0]))
    assert verify_chain(recorder).intact  # the chain alone cannot tell
    report = verify_chain(recorder, expected_head=kept, expected_at=kept_at)
    assert len(report.findings) == 1
    assert report.findings[0].startswith(f"the link at notification {kept_at} is ")
    assert report.findings[0].endswith(f"not the {kept} kept outside: the record up to it "
                                       "was altered")
    assert (report.complete, report.next_after) == (True, None)  # it walked on past it
    assert report.kept_head_checked
    # Walked from the kept head onwards, the link there is the one compared.
    onwards = verify_chain(recorder, after=kept_at, expected_head=kept, expected_at=kept_at)
    assert onwards.findings == [report.findings[0]]
    assert report.from_start
    assert not onwards.from_start
    with pytest.raises(QueryRefused, match="before this part") as refused:
        verify_chain(recorder, after=kept_at + 1, expected_head=kept, expected_at=kept_at)
    assert refused.value.field == "expected_at"
    last, _ = chain_head(recorder)
    beyond = verify_chain(recorder, expected_head=kept, expected_at=last + 1)
    assert beyond.findings == [f"there is no event at notification {last + 1}, where the head "
                               "kept outside was taken: it was removed, or the id is not the "
                               "one kept with it"]
    assert (beyond.complete, beyond.next_after) == (True, None)  # it walked to the end
    assert beyond.kept_head_checked


def _rewrite_links_from(conn: psycopg.Connection[Any], table: str, first: int) -> None:
    """Recompute every link from notification ``first`` on, as one hiding an alteration does."""
    previous = bytes(conn.execute(f"SELECT chain_hash FROM {table} WHERE notification_id < %s "
                                  "ORDER BY notification_id DESC LIMIT 1", (first,)
                                  ).fetchone()[0])  # type: ignore[index]
    for row in conn.execute(f"SELECT notification_id, originator_id, originator_version, topic, "
                            f"state FROM {table} WHERE notification_id >= %s ORDER BY "
                            "notification_id", (first,)).fetchall():
        previous = link(previous, row[1], row[2], row[3], bytes(row[4]))
        conn.execute(f"UPDATE {table} SET chain_hash = %s WHERE notification_id = %s",
                     (previous, row[0]))


def _alter_state_at(conn: psycopg.Connection[Any], table: str, notification_id: int) -> None:
    conn.execute(f"UPDATE {table} SET state = state || '\\x20'::bytea "
                 "WHERE notification_id = %s", (notification_id,))


def test_one_walk_shows_an_alteration_hidden_behind_another(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # A crude alteration early switched the kept head's comparison off, and a kept head that
    # did not match ended the walk: either way, the other alteration went unreported.
    _, recorder = with_a_round(ledgers)
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_events'
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        rows = conn.execute(f"SELECT notification_id, chain_hash FROM {table} "
                            "ORDER BY notification_id").fetchall()
    assert len(rows) >= 12
    crude, rewritten, (kept_at, kept_link), late = rows[2][0], rows[5][0], rows[8], rows[-1][0]
    with behind_the_ledger(database, env) as (conn, table):
        _alter_state_at(conn, table, rewritten)
        _rewrite_links_from(conn, table, rewritten)  # hidden from the chain alone
        _alter_state_at(conn, table, crude)  # links left alone
        _alter_state_at(conn, table, late)
    report = verify_chain(recorder, expected_head=bytes(kept_link).hex(), expected_at=kept_at)
    said = "\n".join(report.findings)
    assert len(report.findings) == 3, said
    assert f"(notification {crude}) does not match" in report.findings[0]
    assert report.findings[1].startswith(f"the link at notification {kept_at} is ")
    assert f"(notification {late}) does not match" in report.findings[2]
    assert (report.complete, report.kept_head_checked) == (True, True)


def test_processes_starting_together_create_the_tables_once_without_deadlock(
        postgres_env: NewEnv) -> None:
    env = postgres_env()
    started: list[object] = []

    def start() -> None:
        try:
            started.append(GameLedger(env=env))
        except Exception as e:  # the test inspects what each start got
            started.append(e)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(started) == 4, started  # each thread ended, with a ledger or its error
    assert all(isinstance(s, GameLedger) for s in started), started
    again = GameLedger(env=env)  # a restart finds everything in place
    started.append(again)
    assert again.recorder.max_notification_id() is None
    for ledger in started:
        assert isinstance(ledger, GameLedger)
        ledger.close()


@pytest.mark.parametrize(("table", "holding"), [
    ("ledger_events", "SELECT count(*) FROM {}"),  # a reader
    # A writer: the lock an insert takes (a save in flight, or one that stalls). A start that
    # waited for it held every later append in the lock's queue behind itself.
    ("ledger_events", "LOCK TABLE {} IN ROW EXCLUSIVE MODE"),
    ("ledger_snapshots", "LOCK TABLE {} IN ROW EXCLUSIVE MODE"),
])
def test_a_process_starting_does_not_wait_for_readers_or_writers_of_the_event_tables(
        ledgers: Callable[..., GameLedger], env: dict[str, str],
        database: DatabaseSettings, table: str, holding: str) -> None:
    ledgers()  # the tables exist
    started: list[GameLedger] = []
    with psycopg.connect(database.conninfo()) as other:
        other.execute(holding.format(f'"{env["POSTGRES_SCHEMA"]}".{table}'))  # stays open
        restart = threading.Thread(target=lambda: started.append(GameLedger(env=env)))
        restart.start()
        restart.join(timeout=20)
        waited = restart.is_alive()
        other.rollback()  # lets a start that waited go on
    restart.join(timeout=60)
    for ledger in started:
        ledger.close()
    assert not waited, f"the restart waited for {holding.format(table)}"
    assert len(started) == 1  # and it did start


def test_a_read_waiting_on_an_operators_lock_ends_at_the_statement_timeout(
        ledgers: Callable[..., GameLedger], env: dict[str, str],
        database: DatabaseSettings) -> None:
    app = ledgers(env={**env, STATEMENT_TIMEOUT: "1"})
    _, r = open_round(app)
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(app.round_events(r))
        except Exception as e:  # the test inspects what the read got
            outcome.append(e)

    with psycopg.connect(database.conninfo()) as operator:
        # What VACUUM FULL or an ALTER TABLE holds: every read of the table waits for it.
        operator.execute(f'LOCK TABLE "{env["POSTGRES_SCHEMA"]}".ledger_events '
                         "IN ACCESS EXCLUSIVE MODE")
        reading = threading.Thread(target=read)
        reading.start()
        reading.join(timeout=15)
        waited = reading.is_alive()
        operator.rollback()
    reading.join(timeout=60)
    assert not waited, "the read waited out the lock"
    assert len(outcome) == 1
    assert isinstance(outcome[0], OperationalError), outcome  # the API answers it 503
    assert app.round_events(r)  # and the next read, the lock gone, answers


def _statement_timeout(app: GameLedger) -> str:
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute("SHOW statement_timeout")
        row = curs.fetchone()
    assert row is not None
    return str(row["statement_timeout"])


def test_the_statement_timeout_is_read_under_the_ledgers_name_first_and_a_blank_one_is_unset(
        env: dict[str, str]) -> None:
    # A blank LEDGER_POSTGRES_STATEMENT_TIMEOUT (an env file's "NAME=") took the limit away.
    for ledger_s, expected in (("", "1s"), (" ", "1s"), ("3", "3s")):
        app = GameLedger(env={**env, STATEMENT_TIMEOUT: "1",
                              f"LEDGER_{STATEMENT_TIMEOUT}": ledger_s})
        try:
            assert _statement_timeout(app) == expected, ledger_s
        finally:
            app.close()


def test_the_read_sides_reader_waits_out_a_lock_where_a_request_would_not(
        env: dict[str, str]) -> None:
    # A rebuild whose page read ended at the timeout started again from event zero.
    GameLedger(env=env).close()
    reader = Reader({**env, STATEMENT_TIMEOUT: "1"})
    try:
        assert _statement_timeout(reader.ledger) == "0"
    finally:
        reader.close()


def test_a_start_waits_for_another_process_creating_the_tables_past_the_statement_timeout(
        env: dict[str, str], database: DatabaseSettings) -> None:
    GameLedger(env=env).close()  # the tables exist; a start still takes the creation lock
    with psycopg.connect(database.conninfo()) as other:
        other.execute("SELECT pg_advisory_xact_lock(%s)", (LedgerRecorder.CREATION_LOCK,))
        let_go = threading.Event()

        def done_creating() -> None:
            let_go.set()
            other.rollback()

        timer = threading.Timer(2.0, done_creating)  # creating for 2 s
        timer.start()
        GameLedger(env={**env, STATEMENT_TIMEOUT: "1"}).close()  # waits, then starts
        # Started only once the other let the lock go (not before, as without the lock; nor
        # refused by the statement timeout, as while the wait counted against it).
        assert let_go.is_set()
        timer.join()


def _snapshotted(app: GameLedger) -> SnapshotRecorder:
    """P1 bought in 200 times: the account's version 200 is snapshotted. The ledger's snapshot
    recorder."""
    app.open_account("a", "cashier", "P1")
    for n in range(200):
        app.buy_in(f"b{n}", "cashier", "P1", 1)
    snapshots = app.snapshots.recorder if app.snapshots is not None else None
    assert isinstance(snapshots, SnapshotRecorder)
    return snapshots


def _snapshotted_beside_an_empty_account(ledgers: Callable[..., GameLedger]) -> GameLedger:
    """A ledger where P1's account is snapshotted at version 200 and P2's is open, empty."""
    app = ledgers()
    _snapshotted(app)
    app.open_account("c", "cashier", "P2")
    return app


def _named_as_unverified(env: dict[str, str], ledger: GameLedger, owner: str,
                         version: int) -> None:
    """The balance check's one finding: ``owner``'s snapshot at ``version`` does not verify."""
    (finding,) = _balance_findings(env, ledger)
    assert owner in finding, finding
    assert f"snapshot at version {version} does not verify" in finding, finding


def _balance_findings(env: dict[str, str], ledger: GameLedger) -> list[str]:
    with Engine(env) as engine:
        engine.catch_up(1000)
    with ReadModels(env) as reads:
        return list(reads.check_balances(ledger)["findings"])


# What a snapshot of each snapshotted aggregate holds, by its class_version. A snapshot taken
# before an attribute was added reads without it (the library copies the stored state as the
# aggregate's attributes), and the attribute is missing wherever it is used. Changing these
# attributes: raise the class's class_version, give it a static upcast_vN_vM(state) that makes
# an older snapshot's state whole (README: Changing an event's shape), and pin the new shape.
SNAPSHOT_SHAPES: dict[type, tuple[int, list[str]]] = {
    Account: (1, ["_created_on", "_modified_on", "available", "bought_in", "cashed_out",
                  "currency", "held", "kind", "owner"]),
    Table: (1, ["_created_on", "_modified_on", "currency", "limits", "name", "open",
                "round_count", "round_id", "rules", "rules_hash", "shoe_count", "shoe_id"]),
}


def test_a_snapshots_shape_changes_only_with_its_aggregates_class_version(
        ledgers: Callable[..., GameLedger]) -> None:
    app = ledgers()
    table, r = open_round(app)  # a shoe, a round, stakes held (every kind of event but these)
    app.void("v", "boss", r, "test")
    app.change_rules("c", "boss", table, CASINO, {"table_max": 500}, "new limits")
    app.close_table("x", "boss", table, "end")
    app.reopen_table("o", "boss", table, "again")
    app.cash_out("w", "cashier", "P1", 5)
    for cls, aggregate_id in ((Table, table), (Account, ids.account_id("P1")),
                              (Account, ids.house_id(table))):
        state = LedgerSnapshot.take(app.repository.get(aggregate_id)).state
        version, attributes = SNAPSHOT_SHAPES[cls]
        assert getattr(cls, "class_version", 1) == version
        assert sorted(state) == attributes, (
            f"{cls.__name__}'s attributes changed: snapshots taken before read without the "
            "new ones. Raise its class_version with an upcast (see this test's comment).")


def test_an_older_snapshot_is_made_whole_by_its_aggregates_upcast(
        ledgers: Callable[..., GameLedger], monkeypatch: pytest.MonkeyPatch) -> None:
    _snapshotted(ledgers())  # P1's account at version 200, snapshotted as class_version 1
    upcasts: list[int] = []

    def upcast_v1_v2(state: dict[str, Any]) -> None:  # as a later version would add a limit
        upcasts.append(state["available"])
        state["credit_limit"] = 0

    monkeypatch.setattr(Account, "class_version", 2, raising=False)
    monkeypatch.setattr(Account, "upcast_v1_v2", staticmethod(upcast_v1_v2), raising=False)
    fresh = ledgers()  # signed snapshots, read through the ledger's recorder and snapshot class
    account: Any = fresh.repository.get(ids.account_id("P1"))
    assert upcasts == [199]  # read from the snapshot at version 200, and upcast once
    assert (account.credit_limit, account.available, account.version) == (0, 200, 201)


def test_a_genuine_snapshot_is_read_and_an_altered_one_passed_over_and_reported(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # Snapshots sit outside the hash chain: a superuser can change one. Signed with a key the
    # database does not hold, an altered one is passed over: the account comes from its
    # events, and the balance check names the snapshot.
    app = ledgers()
    snapshots = _snapshotted(app)
    account = ids.account_id("P1")
    assert [s.originator_version for s in snapshots.select_events(account)] == [200]
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_snapshots'
    with psycopg.connect(database.conninfo()) as conn:
        row = conn.execute(f"SELECT state FROM {table}").fetchone()
        assert row is not None
        state = bytes(row[0])  # the account's JSON, then the tag
        altered = re.sub(rb'"available":\s*199', b'"available":1000199', state[:-32])
        assert altered != state[:-32]
        conn.execute(f"UPDATE {table} SET state = %s", (altered + state[-32:],))
    fresh = ledgers()
    assert fresh.balance("P1")["available"] == 200  # from the events, not the snapshot
    recorder = fresh.recorder
    assert isinstance(recorder, LedgerRecorder)
    assert verify_chain(recorder).intact  # the chain covers events, not snapshots
    findings = _balance_findings(env, fresh)
    assert len(findings) == 1
    assert "P1" in findings[0]
    assert "snapshot at version 200 does not verify" in findings[0]


def test_only_the_newest_snapshot_counts_and_one_that_fails_falls_back_to_the_one_before(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    app = ledgers()
    _snapshotted(app)
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_snapshots'
    with psycopg.connect(database.conninfo()) as conn:  # v200 as an earlier version wrote it
        conn.execute(f"UPDATE {table} SET state = substring(state from 1 for length(state) - 32)")
    for n in range(200, 400):  # v400 is snapshotted, signed
        app.buy_in(f"b{n}", "cashier", "P1", 1)
    assert _balance_findings(env, ledgers()) == []  # v200 is never read again
    account = ids.account_id("P1")
    with psycopg.connect(database.conninfo()) as conn:  # newest, unsigned: hides v400
        (state,) = conn.execute(f"SELECT state FROM {table} WHERE originator_version = 400"
                                ).fetchone() or (b"",)
        conn.execute(f"INSERT INTO {table} SELECT originator_id, 401, topic, %s FROM {table} "
                     "WHERE originator_version = 400", (bytes(state)[:-32],))
    fresh = ledgers()
    snapshots = fresh.snapshots.recorder if fresh.snapshots is not None else None
    assert isinstance(snapshots, SnapshotRecorder)
    newest = snapshots.select_events(account, desc=True, limit=1)
    assert [s.originator_version for s in newest] == [400]
    assert fresh.balance("P1")["available"] == 400
    findings = _balance_findings(env, fresh)
    assert len(findings) == 1
    assert "snapshot at version 401 does not verify" in findings[0]


def test_snapshots_are_stored_under_a_topic_of_pitboss_and_one_no_class_answers_is_passed_over(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # Stored under the library's module path, a snapshot whose class moved made its account
    # unreadable ("its topic names no kind of event"), though every event of it was intact.
    app = ledgers()
    snapshots = _snapshotted(app)
    assert snapshots.signer is not None
    (taken,) = snapshots.select_events(ids.account_id("P1"))
    assert taken.topic == "pitboss:Snapshot"
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_snapshots'
    for topic, read in (("eventsourcing.domain:Snapshot", True),  # as earlier versions stored
                        ("eventsourcing.domain:MovedSnapshot", False)):
        signed = snapshots.signer.sign(dataclasses.replace(taken, topic=topic))
        with psycopg.connect(database.conninfo(), autocommit=True) as conn:
            conn.execute(f"UPDATE {table} SET topic = %s, state = %s", (topic, signed.state))
        fresh = ledgers()
        assert fresh.balance("P1")["available"] == 200  # from the snapshot, or the events
        findings = _balance_findings(env, fresh)
        assert (findings == []) == read, (topic, findings)


def test_a_snapshot_that_cannot_be_written_leaves_the_request_done_and_not_a_repeat(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # A snapshot row already at the version (left by a restore, say): the buy-in that reached
    # it was committed, then answered from its own receipt as a repeat (Idempotent-Replayed).
    app = ledgers()
    app.open_account("a", "cashier", "P1")
    for n in range(198):  # versions 2 .. 199
        app.buy_in(f"b{n}", "cashier", "P1", 1)
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_snapshots'
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} VALUES (%s, 200, 'pitboss:Snapshot', 'x')",
                     (ids.account_id("P1"),))
    app.buy_in("the-200th", "cashier", "P1", 1)
    assert not app.repeated()
    assert app.balance("P1")["available"] == 199
    assert ledgers().balance("P1")["available"] == 199  # the bad row passed over


@pytest.mark.parametrize("copied_to", ["another version", "another account"])
def test_a_genuine_snapshot_copied_elsewhere_does_not_verify(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str], copied_to: str) -> None:
    # The tag covers the aggregate and the version: a signed snapshot moved to an earlier
    # version would have its later events applied twice, copied to another account would
    # give it the chips of the first.
    _snapshotted_beside_an_empty_account(ledgers)
    table = f'"{env["POSTGRES_SCHEMA"]}".ledger_snapshots'
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        if copied_to == "another version":
            conn.execute(f"UPDATE {table} SET originator_version = 150")
            owner, version, available = "P1", 150, 200
        else:
            conn.execute(f"INSERT INTO {table} SELECT %s, originator_version, topic, state "
                         f"FROM {table}", (ids.account_id("P2"),))
            owner, version, available = "P2", 200, 0
    fresh = ledgers()
    assert fresh.balance(owner)["available"] == available  # from the events
    _named_as_unverified(env, fresh, owner, version)


@pytest.mark.parametrize("forgery", ["past-the-last-event", "copied-to-another-account"])
def test_a_snapshot_written_around_the_ledger_moves_no_chips(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str], forgery: str) -> None:
    # Whoever may insert snapshots (the service role may) but does not hold the shoe key
    # cannot give an account chips its events do not have.
    app = _snapshotted_beside_an_empty_account(ledgers)
    p1, p2 = ids.account_id("P1"), ids.account_id("P2")
    rich: Any = app.repository.get(p1)
    rich.available += 50_000
    if forgery == "past-the-last-event":
        target, rich._version = p1, 201  # no event 201
    else:
        target, rich._id, rich.owner = p2, p2, "P2"
    stored = app.mapper.to_stored_event(Account.Snapshot.take(rich))
    with psycopg.connect(database.conninfo()) as conn:
        conn.execute(f'INSERT INTO "{env["POSTGRES_SCHEMA"]}".ledger_snapshots VALUES '
                     "(%s, %s, %s, %s)", (target, stored.originator_version, stored.topic,
                                         stored.state + bytes(32)))
    fresh = ledgers()
    owner = "P1" if target == p1 else "P2"
    assert fresh.balance(owner)["available"] == (200 if target == p1 else 0)
    with pytest.raises(InsufficientChips):
        fresh.cash_out("out", "cashier", owner, 50_000)
    _named_as_unverified(env, fresh, owner, stored.originator_version)


def test_a_round_event_that_does_not_decode_is_a_finding_and_a_sentence_not_a_crash(
        ledgers: Callable[..., GameLedger]) -> None:
    app = ledgers()
    _, round_id = open_round(app)
    version = app.round_state(round_id)["version"]
    undecodable(app, round_id)
    fresh = ledgers()
    findings = fresh.check_round(round_id)
    assert len(findings) == 1
    assert f"v{version + 1} (pitboss:Round.StakeSettled) does not decode" in findings[0]
    assert "GET /audit/chain" in findings[0]
    for read in (fresh.replay, fresh.round_events, fresh.round_state):
        with pytest.raises(InvariantBroken, match="does not decode: it has no "):
            read(round_id)
    assert verify_chain(fresh.recorder).intact  # type: ignore[arg-type]  # linked like any


@pytest.mark.parametrize("delta", ["100", 99.5, None, True])
def test_a_posting_whose_amount_is_not_a_whole_number_is_named_wherever_it_is_read(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings, env: dict[str, str],
        delta: Any) -> None:
    # Altered in place after the read models counted it: an amount of chips as text, a
    # fraction, nothing, a boolean. The balance, the statement and the balance check each
    # name the event and the field (they answered a crash, or served a fractional balance).
    app = ledgers()
    open_round(app)
    assert _balance_findings(env, app) == []
    with behind_the_ledger(database, env) as (conn, table):
        (version,) = conn.execute(
            f"UPDATE {table} SET state = convert_to(replace(convert_from(state, 'UTF8'), "
            "'\"held_delta\":10,', %s), 'UTF8') WHERE originator_id = %s AND topic = %s "
            "RETURNING originator_version",
            (f'"held_delta":{json.dumps(delta)},', ids.account_id("P1"),
             Account.Posted.TOPIC)).fetchone() or (None,)
    said = (f"v{version} ({Account.Posted.TOPIC}) does not decode: the field held_delta "
            f"holds {json.dumps(delta)}, not a whole number")
    fresh = ledgers()
    with pytest.raises(InvariantBroken, match=re.escape(said)):
        fresh.balance("P1")
    with pytest.raises(InvariantBroken, match=re.escape(said)):
        fresh.account_entries("P1")
    findings = _balance_findings(env, fresh)
    assert [f for f in findings if said in f and "account P1" in f], findings


def test_a_card_that_is_no_card_is_a_broken_record_wherever_the_round_is_read(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # Text, as a card is, but no card: the state, the replay and the events answered a crash.
    _, round_id = open_round(ledgers())
    with behind_the_ledger(database, env) as (conn, table):
        conn.execute(f"UPDATE {table} SET state = convert_to(regexp_replace(convert_from("
                     "state, 'UTF8'), '\"card\":\"[^\"]*\"', '\"card\":\"ZZ\"'), 'UTF8') "
                     "WHERE originator_id = %s AND topic = %s", (round_id, CARD_DEALT))
    fresh = ledgers()
    said = (f"the stored events of round {round_id} hold a value they cannot (an unknown "
            "value, 'ZZ')")
    for read in (fresh.round_state, fresh.replay):
        with pytest.raises(InvariantBroken, match=re.escape(said)):
            read(round_id)
    (finding,) = fresh.check_round(round_id)
    assert said in finding
    assert "the record does not replay" in finding


def test_a_settlement_altered_to_pay_more_names_the_round_and_event_that_break(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # The operators' log said only "round totals break conservation (R-M4)".
    app = ledgers(randbelow=SteeredShuffle("TS TH 7D 9C 8C TD"))  # 19 and 18; 7, T
    _, r = open_round(app)
    app.stand("s1", "dealer", r, "P1", 1, 0)
    app.stand("s2", "dealer", r, "P2", 2, 0)
    app.play_dealer("pd", "dealer", r)
    app.settle("st", "dealer", r)
    with behind_the_ledger(database, env) as (conn, table):
        altered = _alter_round_event(conn, table, r, "pitboss:Round.StakeSettled",
                                     change=lambda s: s.update(won=s["won"] + 400))
    fresh = ledgers()
    last = len(fresh.round_events(r))
    said = (f"round {r} v{last} (pitboss:Round.RoundSettled): round totals break "
            "conservation (R-M4)")
    for read in (fresh.round_state, fresh.replay):
        with pytest.raises(InvariantBroken, match=re.escape(said)):
            read(r)
    fresh.round_state(r, version=last - 1)  # the state before it still answers
    # The round check names the altered settlement itself.
    assert fresh.check_round(r)[0].startswith(f"v{altered}: recorded StakeSettled(")


def _alter_round_event(conn: psycopg.Connection[Any], table: str, round_id: UUID, topic: str,
                       change: Callable[[dict[str, Any]], None], last: bool = False) -> int:
    """Change the round's first (``last``: last) event of ``topic`` in place; its version."""
    row = conn.execute(f"SELECT notification_id, originator_version, state FROM {table} "
                       "WHERE originator_id = %s AND topic = %s ORDER BY originator_version "
                       + ("DESC" if last else "") + " LIMIT 1", (round_id, topic)).fetchone()
    assert row is not None
    state = json.loads(row[2])
    change(state)
    conn.execute(f"UPDATE {table} SET state = %s WHERE notification_id = %s",
                 (json.dumps(state).encode(), row[0]))
    return int(row[1])


def _hex_uuid(state: dict[str, Any], field: str, value: UUID) -> None:
    state[field] = {"_type_": "uuid_hex", "_data_": value.hex}


@pytest.mark.parametrize("alteration", ["back-dated", "card-from-another-shoe",
                                        "round-names-another-shoe", "shoe-of-other-cards"])
def test_the_round_check_finds_a_round_and_its_shoe_telling_different_stories(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings, env: dict[str, str],
        alteration: str) -> None:
    # Each replays and settles as before: only the round check's cross-checks can tell.
    app = ledgers()
    _, round_id = open_round(app)
    shoe_id = UUID(app.round_state(round_id)["shoe_id"])
    other = uuid4()
    with behind_the_ledger(database, env) as (conn, table):
        if alteration == "back-dated":
            version = _alter_round_event(
                conn, table, round_id, CARD_DEALT, last=True,
                change=lambda s: s.update(timestamp={"_type_": "datetime_iso",
                                                     "_data_": "2001-01-01T00:00:00+00:00"}))
            wanted = [f"v{version}: recorded at 2001-01-01T00:00:00+00:00, before v"]
        elif alteration == "card-from-another-shoe":
            version = _alter_round_event(conn, table, round_id, CARD_DEALT,
                                         change=lambda s: _hex_uuid(s, "shoe_id", other))
            wanted = [f"v{version}: a card dealt from shoe {other}, but the round was started "
                      f"with shoe {shoe_id} (R-H3)"]
        elif alteration == "round-names-another-shoe":
            _alter_round_event(conn, table, round_id, Round.Created.TOPIC,
                               change=lambda s: _hex_uuid(s, "shoe_id", other))
            wanted = [f"but the round was started with shoe {other} (R-H3)",
                      f"cards dealt; its shoe {other} records 0 drawn for it (R-H3)"]
        else:  # a shoe recorded with wild cards the casino's rules have none of
            _alter_round_event(conn, table, shoe_id, ShoeRecord.Created.TOPIC,
                               change=lambda s: s.update(wild_cards=8))
            wanted = [f"its shoe {shoe_id} holds 6 decks and 8 wild cards, cut at card 234; "
                      "the rules the round was played under make a shoe of 6 decks and 0 wild "
                      "cards, cut at card 234 (R-S1)"]
    fresh = ledgers()
    assert fresh.replay(round_id)  # it replays
    findings = fresh.check_round(round_id)
    for said in wanted:
        assert [f for f in findings if said in f], (said, findings)


@pytest.mark.parametrize(("rules", "said"), [
    (["casino"], "v1 (pitboss:Round.Created) does not decode: the field rules holds "
                 '["casino"], not a mapping'),
    ("six decks", "the stored events of round {} hold a value they cannot (")])
def test_a_round_whose_recorded_values_cannot_be_replayed_is_a_finding(
        ledgers: Callable[..., GameLedger], rules: Any, said: str) -> None:
    # Rules of the wrong shape (refused as the event is read), or with a setting of the wrong
    # type (decoded, but not replayed), their hash made to match, appended as a new round.
    app = ledgers()
    _, round_id = open_round(app)
    (created,) = app.recorder.select_events(round_id, limit=1)
    state = json.loads(created.state)
    if rules == "six decks":
        rules = {**state["rules"], "decks": "six"}
    state["rules"], state["rules_hash"] = rules, rules_hash(rules)
    forged = uuid4()
    append_around_the_ledger(app, StoredEvent(originator_id=forged, originator_version=1,
                                              topic=created.topic,
                                              state=json.dumps(state).encode()))
    findings = ledgers().check_round(forged)
    assert len(findings) == 1
    assert said.format(forged) in findings[0]
    assert "the record does not replay" in findings[0]


def test_an_account_missing_an_event_is_a_finding_of_the_balance_check(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    app = ledgers()
    open_round(app)
    with Engine(env) as engine:
        engine.catch_up(1000)
    with behind_the_ledger(database, env) as (conn, table):
        conn.execute(f"DELETE FROM {table} WHERE originator_id = %s AND originator_version = 2",
                     (ids.account_id("P1"),))
    fresh = ledgers()
    with pytest.raises(InvariantBroken, match="skip or repeat a version"):
        fresh.balance("P1")
    with ReadModels(env) as reads:
        findings = reads.check_balances(fresh)["findings"]
    assert [f for f in findings if "P1" in f and "skip or repeat a version" in f]


@pytest.mark.parametrize(("change", "said"), [
    ("DELETE FROM {table} WHERE originator_id = %s AND originator_version = 3",
     "version 2 is followed by version 4"),
    ("DELETE FROM {table} WHERE originator_id = %s AND originator_version = 1",
     "its start is followed by version 2"),
    ("INSERT INTO {table} (originator_id, originator_version, topic, state, chain_hash) "
     "SELECT originator_id, originator_version + 1000, topic, state, chain_hash FROM {table} "
     "WHERE originator_id = %s AND originator_version = 2",
     "version 3 is followed by version 1002")])
def test_a_round_whose_versions_skip_says_which_follow_which(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings, env: dict[str, str],
        change: str, said: str) -> None:
    _, round_id = open_round(ledgers())
    last = ledgers().round_state(round_id)["version"]
    with behind_the_ledger(database, env) as (conn, table):
        conn.execute(change.format(table=table), (round_id,))
    if "1002" in said:
        said = f"version {last} is followed by version 1002"
    with pytest.raises(InvariantBroken, match=f"skip or repeat a version: {said}$"):
        ledgers().round_events(round_id)


def test_a_round_played_under_rules_its_name_and_version_do_not_stand_for_is_a_finding(
        ledgers: Callable[..., GameLedger]) -> None:
    # A rules change appended around the ledger: "casino v1" paying 6:5, which the ledger
    # itself refuses (R-S1). The rounds played under it follow those rules, so only the
    # registry of names and versions tells.
    app = ledgers()
    table, round_id = open_round(app)
    app.void("v", "boss", round_id, "to change the rules")
    forged = CASINO.evolve(natural_pays=(6, 5))
    assert (forged.name, forged.version) == (CASINO.name, CASINO.version)
    current: Any = app.repository.get(table)
    append_around_the_ledger(app, Table.RulesChanged(  # type: ignore[call-arg]
        originator_id=table, originator_version=current.version + 1,
        timestamp=current.modified_on, rules=forged.to_dict(), rules_hash=forged.content_hash,
        limits=current.limits, reason="forged", actor="boss", request_id="forged"))
    fresh = ledgers()
    r = fresh.start_round("s2", "dealer", table)
    assert fresh.round_state(r)["rules_hash"] == forged.content_hash
    findings = fresh.check_round(r)
    assert len(findings) == 1
    assert f"{CASINO.name} v{CASINO.version} stands for other rules (content hash " \
        f"{CASINO.content_hash}" in findings[0]
    assert fresh.check_round(round_id) == []


def test_a_table_recorded_before_rule_set_names_claims_its_rules_at_its_next_round(
        ledgers: Callable[..., GameLedger]) -> None:
    # Recorded by a version that kept no registry of names and versions: after an upgrade,
    # another table could open under the same name and version with other rules, and the
    # old table's next rounds were then findings of the round check.
    app = ledgers()
    house = CASINO.evolve(name="house", natural_pays=(6, 5))
    old = Table._create(Table.Created, id=ids.table_id("Old"),
                        timestamp=datetime.now(UTC), name="Old", currency="EUR",
                        rules=house.to_dict(), rules_hash=house.content_hash,
                        limits=TableLimits().to_dict(), actor="boss", request_id="then")
    append_around_the_ledger(app, *old.collect_events())
    fresh = ledgers()
    named = ids.rule_set_id(house.name, house.version)
    assert list(fresh.events.get(named)) == []
    r = fresh.start_round("s", "dealer", old.id)
    (claimed,) = fresh.events.get(named)
    assert claimed.rules_hash == house.content_hash  # type: ignore[attr-defined]
    with pytest.raises(RuleSetInvalid, match=f"{house.name} v{house.version} stands for other"):
        fresh.open_table("t", "boss", "New", house.evolve(natural_pays=(7, 5)))
    assert fresh.check_round(r) == []


def test_the_chain_walk_warns_while_the_event_table_is_left_open_to_change(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    _, recorder = with_a_round(ledgers)
    assert verify_chain(recorder).warnings == []
    for mode in ("DISABLE", "ENABLE REPLICA"):  # a replica trigger fires in replicas only
        with behind_the_ledger(database, env) as (conn, table):
            if mode != "DISABLE":
                for name in ("ledger_events_immutable", "ledger_events_no_truncate"):
                    conn.execute(f"ALTER TABLE {table} {mode} TRIGGER {name}")
            conn.commit()  # the triggers stay off while the walk runs
            report = verify_chain(recorder)
            assert report.intact  # nothing changed yet: only the door is open
            assert [w.split(":")[0] for w in report.warnings] == [
                "the trigger ledger_events_immutable is disabled (or fires in replicas only)",
                "the trigger ledger_events_no_truncate is disabled (or fires in replicas only)"]
        assert verify_chain(recorder).warnings == []


@pytest.mark.parametrize("change", ["function-rewritten", "fires-on-insert",
                                    "runs-another-function", "fires-when-false",
                                    "fires-on-one-column"])
def test_the_chain_walk_warns_when_a_refusing_trigger_no_longer_refuses(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str], change: str) -> None:
    # Enabled, and named as pitboss names it, yet letting changes through: the walk said
    # nothing while the owner changed an event.
    _, recorder = with_a_round(ledgers)
    schema = env["POSTGRES_SCHEMA"]
    table, refuse = f'"{schema}".ledger_events', f'"{schema}".ledger_events_refuse_change'
    let_through = "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN coalesce(NEW, OLD); END $$"
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        if change == "function-rewritten":
            conn.execute(f"CREATE OR REPLACE FUNCTION {refuse}() {let_through}")
            said = (f"the function {schema}.ledger_events_refuse_change() that the trigger "
                    "ledger_events_immutable runs was rewritten: UPDATE and DELETE on stored "
                    "events may not be refused")
        else:
            function = refuse
            if change == "runs-another-function":
                function = f'"{schema}".let_through'
                conn.execute(f"CREATE FUNCTION {function}() {let_through}")
            on = {"fires-on-insert": "AFTER INSERT",
                  "fires-on-one-column": "BEFORE UPDATE OF chain_hash OR DELETE"}.get(
                      change, "BEFORE UPDATE OR DELETE")
            when = "WHEN (false)" if change == "fires-when-false" else ""
            conn.execute(f"DROP TRIGGER ledger_events_immutable ON {table}")
            conn.execute(f"CREATE TRIGGER ledger_events_immutable {on} ON {table} FOR EACH ROW "
                         f"{when} EXECUTE FUNCTION {function}()")
            said = (f"the trigger ledger_events_immutable runs {schema}.let_through(), not "
                    f"{schema}.ledger_events_refuse_change()"
                    if change == "runs-another-function" else
                    "the trigger ledger_events_immutable was made again to fire on other "
                    "statements, or only on some rows or columns")
        changed = conn.execute(f"UPDATE {table} SET state = state WHERE notification_id = "
                               f"(SELECT min(notification_id) FROM {table})")
        assert changed.rowcount == 1  # the door is open
    warnings = verify_chain(recorder).warnings
    assert [w for w in warnings if w.startswith(said)], warnings


def edit_events(conn: psycopg.Connection[Any], table: str, topic: str,
                change: Callable[[dict[str, Any]], None], *, last: bool = False) -> None:
    """Rewrite the JSON of the stored events of ``topic`` (the newest only, with ``last``)
    behind the ledger's back, links left alone."""
    rows = conn.execute(f"SELECT notification_id, state FROM {table} WHERE topic = %s "
                        "ORDER BY notification_id", (topic,)).fetchall()
    for notification_id, state in rows[-1:] if last else rows:
        data = json.loads(bytes(state))
        change(data)
        conn.execute(f"UPDATE {table} SET state = %s WHERE notification_id = %s",
                     (json.dumps(data).encode(), notification_id))


def test_a_process_holding_a_shoe_abandoned_elsewhere_turns_no_hole_card_over(
        ledgers: Callable[..., GameLedger]) -> None:
    # wild21: turning the hole card over draws no card, so no save of the shoe failed on the
    # copy a serving process held: the card was shown and the round settled on a shoe
    # abandoned, its key lost, by the operator's command.
    # P1 10,8 and P2 9,9 stand on 18; the dealer holds 10 face down and shows a 9.
    serving = ledgers(randbelow=SteeredShuffle("TS 9H TD 8H 9C 9S"))
    table = serving.open_table("t", "boss", "T1", WILD21)
    for player in ("P1", "P2"):
        serving.open_account(f"a-{player}", "cashier", player)
        serving.buy_in(f"b-{player}", "cashier", player, 1000)
    r = serving.start_round("s", "dealer", table)
    serving.place_stake("p1", "dealer", r, "P1", 1, 100)
    serving.place_stake("p2", "dealer", r, "P2", 2, 100)
    serving.deal("d", "dealer", r)
    serving.stand("s1", "P1", r, "P1", 1, 0)
    serving.stand("s2", "P2", r, "P2", 2, 0)
    state = serving.round_state(r)
    shoe_id = UUID(state["shoe_id"])
    ledgers(shoe_key=ShoeSealer.new_key()).abandon_shoe("ab", "night manager", shoe_id,
                                                        "shoe key lost")
    # Named, the version it was shown lets the process trust its copy of the round: the save
    # fails on the abandonment the round recorded, and nothing is turned over.
    with pytest.raises(StaleVersion):
        serving.play_dealer("pd0", "dealer", r, expected=state["version"])
    with pytest.raises(DealRefused, match="The round's shoe was abandoned") as refused:
        serving.play_dealer("pd", "dealer", r)
    assert refused.value.rule == "R-V1"
    assert "HoleCardRevealed" not in [e["type"] for e in serving.round_events(r)]
    assert serving.round_state(r)["dealer"]["cards"] == ["hidden", "9S"]
    serving.void("v", "boss", r, "its shoe was abandoned")
    assert serving.balance("P1")["available"] == serving.balance("P2")["available"] == 1000


def test_a_round_whose_dealer_had_finished_settles_once_its_shoe_is_abandoned(
        ledgers: Callable[..., GameLedger]) -> None:
    # Voided, as the command advised for every round on such a shoe, it undid results the
    # cards had already decided (R-X13).
    app = ledgers(randbelow=SteeredShuffle("TS 9H 7D 8H 9C TD"))
    table, r = open_round(app)  # dealt: P1 10,8 and P2 9,9 against a 7
    app.stand("s1", "P1", r, "P1", 1, 0)
    app.stand("s2", "P2", r, "P2", 2, 0)
    app.play_dealer("pd", "dealer", r)  # the dealer draws a ten: 17
    shoe_id = UUID(app.round_state(r)["shoe_id"])
    ledgers(shoe_key=ShoeSealer.new_key()).abandon_shoe("ab", "night manager", shoe_id,
                                                        "shoe key lost")
    assert [x["decision"] for x in app.round_state(r)["legal"]] == ["settle", "void"]
    app.settle("st", "dealer", r)
    assert app.round_state(r)["results"] == {"P1": 10, "P2": 10}
    assert app.check_round(r) == []
    assert app.start_round("next", "dealer", table)  # on a new shoe
    assert app.table(table)["shoe_id"] != str(shoe_id)


def test_a_round_whose_hands_all_bust_is_played_out_without_a_card_once_its_shoe_is_abandoned(
        ledgers: Callable[..., GameLedger]) -> None:
    # The dealer's play, which draws nothing when no stake waits on it (R-G8), was refused,
    # and the void it left returned stakes already lost (R-G3).
    app = ledgers(randbelow=SteeredShuffle("TS 9H 7D 5C 4D KS KH"))
    _, r = open_round(app)  # dealt: P1 10,5 and P2 9,4 against a 7
    app.hit("h1", "P1", r, "P1", 1, 0)  # a king: 25
    app.hit("h2", "P2", r, "P2", 2, 0)  # a king: 23
    shoe_id = UUID(app.round_state(r)["shoe_id"])
    ledgers(shoe_key=ShoeSealer.new_key()).abandon_shoe("ab", "night manager", shoe_id,
                                                        "shoe key lost")
    assert [x["decision"] for x in app.round_state(r)["legal"]] == ["play_dealer", "void"]
    app.play_dealer("pd", "dealer", r)
    app.settle("st", "dealer", r)
    assert app.round_state(r)["results"] == {"P1": -10, "P2": -10}
    assert app.check_round(r) == []


def test_a_table_whose_recorded_rules_were_altered_shows_them_as_recorded(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # Its read answered 422 RuleSetInvalid, blaming a request that carried no input.
    app = ledgers()
    table = app.open_table("t", "boss", "T1", CASINO)

    def nine_decks(data: dict[str, Any]) -> None:
        data["rules"]["decks"] = 9

    with behind_the_ledger(database, env) as (conn, events):
        edit_events(conn, events, Table.Created.TOPIC, nine_decks)
    assert ledgers().table(table)["rules"] == {**CASINO.to_dict(), "decks": 9}
    # And a round there is no RuleSetInvalid naming a field the request did not carry.
    with pytest.raises(InvariantBroken, match=r"table T1's recorded rules do not read as a "
                                              r"rule set .*: the record was altered"):
        ledgers().start_round("s", "dealer", table)


@pytest.mark.parametrize("altered", ["reveal", "draw", "stacked"])
def test_a_shoe_altered_behind_the_ledger_fails_its_verification(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str], altered: str) -> None:
    app = ledgers()
    table, r = open_round(app)
    app.void("v", "boss", r, "closing early")
    app.close_table("c", "boss", table, "closing early")  # the shoe retires, revealed
    shoe_id = UUID(app.round_state(r)["shoe_id"])
    assert app.shoe(shoe_id)["verified"]
    assert app.verify_shoe(shoe_id) == []

    def swap_undealt(data: dict[str, Any]) -> None:  # two cards never dealt change places
        order = data["order"]
        i = next(i for i in range(100, len(order)) if order[i] != order[i + 1])
        order[i], order[i + 1] = order[i + 1], order[i]

    def one_more(data: dict[str, Any]) -> None:  # the round's draw claims a card it never got
        data["count"] += 1

    revealed: dict[str, Any] = {}

    def stack(data: dict[str, Any]) -> None:  # every ten never dealt an ace: a shoe sealed
        order = data["order"]                 # stacked, by someone holding the shoe key
        data["order"] = order[:100] + ["AS" if c[0] in "TJQK" else c for c in order[100:]]
        revealed.update(data)

    def commit(data: dict[str, Any]) -> None:
        data["commitment"] = commitment(revealed["order"], bytes.fromhex(revealed["salt"]))

    with behind_the_ledger(database, env) as (conn, events):
        if altered == "reveal":
            edit_events(conn, events, ShoeRecord.Retired.TOPIC, swap_undealt)
        elif altered == "stacked":
            edit_events(conn, events, ShoeRecord.Retired.TOPIC, stack)
            edit_events(conn, events, ShoeRecord.Created.TOPIC, commit)
        else:
            edit_events(conn, events, ShoeRecord.CardsDrawn.TOPIC, one_more, last=True)
    # The ledger that read the shoe before says what a fresh one says: the record, not the
    # copy it keeps for play (each API worker answered from its own).
    for reader in (app, ledgers()):
        if altered == "stacked":
            assert reader.shoe(shoe_id)["verified"]  # the commitment holds
            (finding,) = reader.verify_shoe(shoe_id)
            aces = revealed["order"].count("AS")
            assert finding.startswith("the revealed order is not 6 decks and 0 wild cards "
                                      f"(R-H1): AS {aces} times, not 6, ")
        elif altered == "reveal":
            assert reader.shoe(shoe_id)["verified"] is False
            assert reader.verify_shoe(shoe_id) == ["the reveal does not match the commitment"]
        else:
            (finding,) = reader.verify_shoe(shoe_id)
            assert finding.startswith(f"round {r}: the shoe gave it position ")
            assert finding.endswith("and the round records no card dealt from it")


def test_a_shoe_is_not_found_under_the_id_of_a_round_whose_record_is_broken(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # Read as a shoe, a round with a version removed was replayed: a 500, and a "finding".
    app = ledgers()
    _, r = open_round(app)
    with behind_the_ledger(database, env) as (conn, events):
        conn.execute(f"DELETE FROM {events} WHERE originator_id = %s AND originator_version = 2",
                     (r,))
    fresh = ledgers()
    for read in (fresh.shoe, fresh.verify_shoe):
        with pytest.raises(NotFound, match=f"There is no shoe {r}"):
            read(r)
    # A shoe whose first event was removed is a broken record, not no shoe.
    shoe_id = UUID(fresh.round_state(r, 1)["shoe_id"])
    with behind_the_ledger(database, env) as (conn, events):
        conn.execute(f"DELETE FROM {events} WHERE originator_id = %s AND originator_version = 1",
                     (shoe_id,))
    with pytest.raises(InvariantBroken, match="its first stored event is version 2"):
        ledgers().shoe(shoe_id)
    (finding,) = ledgers().verify_shoe(shoe_id)
    assert "its first stored event is version 2" in finding


def _postings_around(app: GameLedger, round_id: UUID, *moves: tuple[UUID, int, int],
                     memo: str = "StakeSettled") -> list[Any]:
    """Postings naming ``round_id`` that the ledger never decided, one per (account id,
    available, held), each its account's next event: to append around the ledger, or to
    store spelt otherwise first."""
    made = []
    for account_id, available, held in moves:
        account: Any = app.repository.get(account_id)
        made.append(account.Posted(
            originator_id=account.id, originator_version=account.version + 1,
            timestamp=account.modified_on, round_id=round_id, held_delta=held,
            available_delta=available, memo=memo, actor="dealer", request_id="forged"))
    return made


def _on_the_house(available: int) -> str:
    """The round check's finding of a posting around a dealt round on its table's house."""
    return (f"the postings naming this round on the table's house account move {available} "
            "available and 0 held; the round's events move 0 and 0: chips were posted around "
            "the round (R-M4)")


@pytest.mark.parametrize(("held", "available", "moved"), [
    (0, 5000, "4990 available and 10 held"),
    (500, 0, "-10 available and 510 held"),  # held alone: a check of available passed it
])
def test_chips_posted_around_a_round_are_a_finding_of_its_check(
        ledgers: Callable[..., GameLedger], held: int, available: int, moved: str) -> None:
    # A posting "for" the round, with its counterpart on the house, appended with the service
    # role's rights: every account agrees with its events and money is conserved, but the
    # round's facts do not move those chips.
    app = ledgers()
    table, r = open_round(app)
    assert app.check_round(r) == []
    append_around_the_ledger(app, *_postings_around(
        app, r, (ids.account_id("P1"), available, held),
        (ids.house_id(table), -held - available, 0)))
    findings = ledgers().check_round(r)
    assert findings == [
        f"the postings naming this round on P1's account move {moved}; "
        "the round's events move -10 and 10: chips were posted around the round (R-M4)",
        _on_the_house(-held - available)]


def _respelt(state: bytes, round_id: UUID, other: UUID, spelling: str) -> bytes:
    """A posting's stored state naming ``round_id`` as the ledger would not write it."""
    written = round_id.hex.encode()
    if spelling == "upper case":
        return state.replace(written, written.upper())
    if spelling == "hyphens":
        return state.replace(written, str(round_id).encode())
    if spelling == "an escape":
        return state.replace(written, b"\\u00%x" % written[0] + written[1:])
    if spelling == "its value twice":  # another round's first: JSON keeps the last
        return state.replace(written, other.hex.encode() + b'","_data_":"' + written)
    # The field twice, another round's first.
    assert spelling == "the field twice"
    first = state.replace(written, other.hex.encode())
    return first[:-1] + b',"round_id" :{"_type_":"uuid_hex","_data_":"' + written + b'"}}'


def _forged_win(app: GameLedger) -> tuple[UUID, list[StoredEvent]]:
    """A round dealt, and 5,000 posted to P1 for it from the house, as stored events not yet
    appended (P1's first): a win the round's events do not make."""
    table, r = open_round(app)
    return r, [app.mapper.to_stored_event(e) for e in _postings_around(
        app, r, (ids.account_id("P1"), 5000, 0), (ids.house_id(table), -5000, 0))]


@pytest.mark.parametrize("spelling", ["upper case", "hyphens", "an escape", "the field twice",
                                      "its value twice"])
def test_a_round_check_finds_chips_posted_around_it_however_the_round_is_spelt(
        ledgers: Callable[..., GameLedger], spelling: str) -> None:
    # The check has the server leave out the postings that name other rounds; one naming
    # this round in a spelling the ledger does not write (but decodes) passed as clean.
    app = ledgers()
    r, forged = _forged_win(app)
    forged[0] = dataclasses.replace(
        forged[0], state=_respelt(forged[0].state, r, uuid4(), spelling))
    append_around_the_ledger(app, *forged)
    fresh = ledgers()
    assert fresh.balance("P1")["available"] == 5990  # the posting reads, naming this round
    assert fresh.check_round(r) == [
        "the postings naming this round on P1's account move 4990 available and 10 held; "
        "the round's events move -10 and 10: chips were posted around the round (R-M4)",
        _on_the_house(-5000)]


@pytest.mark.parametrize("alias", ["pitboss:Account.Posted.",
                                   "pitboss:Account.Posted.__init_subclass__.__self__",
                                   "ledger.aggregates.account:Account.Posted"])
def test_a_posting_under_another_spelling_of_its_topic_fails_every_read_of_its_account(
        ledgers: Callable[..., GameLedger], alias: str) -> None:
    # The event store library resolves these to the posting's class too. The round check
    # reads the postings under their own topic: one forged so passed it, and moved chips on
    # the balance. Now it decodes nowhere.
    app = ledgers()
    _, forged = _forged_win(app)
    append_around_the_ledger(app, dataclasses.replace(forged[0], topic=alias), forged[1])
    fresh = ledgers()
    refused = (f"v{forged[0].originator_version} \\({re.escape(alias)}\\) does not decode: "
               "its topic is not the one pitboss writes for its kind of event, "
               "pitboss:Account.Posted")
    with pytest.raises(InvariantBroken, match=refused):
        fresh.balance("P1")
    with pytest.raises(InvariantBroken, match=refused):
        fresh.account_entries("P1")


def test_an_overdraft_posted_around_the_ledger_is_refused_where_the_account_is_read(
        ledgers: Callable[..., GameLedger], env: dict[str, str]) -> None:
    # R-M3 on the read side: the write side refuses an overdraft, so only an event written
    # around the ledger makes one, and each reader must refuse to make a balance of it.
    app = ledgers()
    table, r = open_round(app)
    append_around_the_ledger(app, *_postings_around(
        app, r, (ids.account_id("P1"), -2000, 0), (ids.house_id(table), 2000, 0)))
    with pytest.raises(InvariantBroken, match="account P1 has a negative balance "
                                              r"\(available -1010, held 10\)"):
        ledgers().balance("P1")
    with Engine(env, names=["balances"]) as engine, \
            pytest.raises(InvariantBroken, match=r"account P1 .* would have available -1010"):
        engine.catch_up(1000)


def test_a_round_check_finds_chips_posted_around_it_behind_later_rounds(
        ledgers: Callable[..., GameLedger]) -> None:
    # The check has the server pick out the postings whose stored state holds the round's id,
    # rather than decode each bettor's whole account: one appended after later rounds is
    # still found, and a later round's posting that only mentions the id counts for nothing.
    app = ledgers()
    table, r = open_round(app)
    app.void("v", "manager", r, "a misdeal")
    later = app.start_round("s2", "dealer", table)
    app.place_stake("p2-1", "dealer", later, "P1", 1, 20)
    for n in range(3):
        app.buy_in(f"more-{n}", "cashier", "P1", 5)
    for round_id, memo, amount in ((r, "StakeSettled", 300), (later, f"see {r} and {r.hex}", 7)):
        append_around_the_ledger(app, *_postings_around(
            app, round_id, (ids.account_id("P1"), amount, 0),
            (ids.house_id(table), -amount, 0), memo=memo))
    assert ledgers().check_round(r) == [
        "the postings naming this round on P1's account move 300 available and 0 held; "
        "the round's events move 0 and 0: chips were posted around the round (R-M4)",
        _on_the_house(-300)]


def _indexes_planned(recorder: LedgerRecorder, statement: Any, params: Any) -> set[str]:
    """The indexes PostgreSQL plans to read ``statement`` by, the event table analysed."""
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(f"ANALYZE {recorder.qualified_table}")
        query = statement if isinstance(statement, Composable) else SQL(statement)
        curs.execute(SQL("EXPLAIN (FORMAT JSON) ") + query, params)
        row = curs.fetchone()
    assert row is not None
    return set(re.findall(r'"Index Name": "([^"]+)"', json.dumps(row["QUERY PLAN"])))


def test_the_checks_find_a_rounds_postings_and_the_accounts_opened_by_index(
        ledgers: Callable[..., GameLedger]) -> None:
    # A player's long history (here 2,000 entries of other rounds) is not read to check one
    # round: with 200,000 entries among its players, a check took a second. Nor is the whole
    # log read for the accounts opened, at each balance check.
    app = ledgers()
    _, r = open_round(app)
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    player: Any = app.repository.get(ids.account_id("P1"))
    append_around_the_ledger(app, *[player.Posted(
        originator_id=player.id, originator_version=player.version + n,
        timestamp=player.modified_on, round_id=uuid4(), held_delta=0, available_delta=0,
        memo="StakeSettled", actor="dealer", request_id=f"other-{n}") for n in range(1, 2001)])
    table = recorder.events_table_name
    statement = storage.POSTINGS_THAT_MAY_NAME.format(table=recorder.qualified_table)
    assert _indexes_planned(recorder, statement, {
        "ids": [player.id, ids.account_id("P2")], "value": r.hex.encode()}) \
        == {f"{table}_postings_by_round"}
    assert _indexes_planned(recorder, accounts_opened(
        Identifier(recorder.datastore.schema, table)), (0, 10**9)) == {f"{table}_accounts_opened"}
    # And what they find is the round's own: its holds of P1's and P2's stakes, not the
    # 2,000 others.
    found = storage.postings_that_may_name(recorder, [player.id], r.hex.encode())
    postings: list[Any] = [app.mapper.to_domain_event(e) for e in found]
    assert [(p.originator_id, p.round_id, p.held_delta) for p in postings] == [
        (account_id, r, 10) for account_id in sorted([player.id, ids.account_id("P2")])]
    assert ledgers().check_round(r) == []


def _paid_to_strangers(app: GameLedger, spelling: str | None = None) -> UUID:
    """A round dealt, and a win for it paid to a player who had no stake in it, taken from
    another table's house (spelt as the ledger writes it, or ``spelling``): money is
    conserved and every account agrees with its events."""
    _, r = open_round(app)
    other = app.open_table("t2", "boss", "T2", CASINO)
    app.open_account("a9", "cashier", "P9")
    stored = [app.mapper.to_stored_event(e) for e in _postings_around(
        app, r, (ids.account_id("P9"), 70, 0), (ids.house_id(other), -70, 0))]
    append_around_the_ledger(app, *[
        e if spelling is None else dataclasses.replace(
            e, state=_respelt(e.state, r, uuid4(), spelling)) for e in stored])
    return r


PAID_TO_STRANGERS = [
    f"the postings naming this round on {owner}'s account, which has no part in it, move "
    f"{amount} available and 0 held; the round's events move 0 and 0: chips were posted "
    "around the round (R-M4)" for owner, amount in (("P9", 70), ("house:T2", -70))]


@pytest.mark.parametrize("spelling", [None, "upper case", "the field twice"])
def test_a_round_check_finds_chips_posted_for_it_on_accounts_with_no_part_in_it(
        ledgers: Callable[..., GameLedger], spelling: str | None) -> None:
    # The check read only the round's own accounts. An index now finds them wherever they
    # are, and all the postings spelt otherwise, to decode.
    r = _paid_to_strangers(ledgers(), spelling)
    assert ledgers().check_round(r) == PAID_TO_STRANGERS


@pytest.mark.parametrize("where", ["no account", "another account"])
def test_a_posting_that_does_not_decode_off_the_rounds_accounts_stops_no_check(
        ledgers: Callable[..., GameLedger], where: str) -> None:
    # Every posting spelt otherwise is read at each check, on every account: one that does
    # not decode, on a stream no account was opened as (which nothing else reads), made every
    # round's check answer with it alone, a forged win included.
    app = ledgers()
    forged = _paid_to_strangers(app)
    table = app.open_table("t3", "boss", "T3", CASINO)
    honest = app.start_round("s3", "dealer", table)
    for box, player in ((1, "P1"), (2, "P2")):
        app.place_stake(f"p3-{box}", "dealer", honest, player, box, 10)
    app.deal("d3", "dealer", honest)
    app.open_account("a8", "cashier", "P8")
    owner = uuid4() if where == "no account" else ids.account_id("P8")
    version = 1 if where == "no account" else 2
    append_around_the_ledger(app, StoredEvent(
        originator_id=owner, originator_version=version, topic=Account.Posted.TOPIC,
        state=b'{"round_id":{"_type_":"uuid_hex","_data_":"' + honest.hex.upper().encode()
        + b'"}}'))
    fresh = ledgers()
    assert fresh.check_round(honest) == []
    assert fresh.check_round(forged) == PAID_TO_STRANGERS


def test_a_posting_naming_a_round_where_no_account_was_opened_is_named_by_its_id(
        ledgers: Callable[..., GameLedger]) -> None:
    app = ledgers()
    table, r = open_round(app)
    house: Any = app.repository.get(ids.house_id(table))
    nowhere = uuid4()
    append_around_the_ledger(app, house.Posted(
        originator_id=nowhere, originator_version=1, timestamp=house.modified_on,
        round_id=r, held_delta=0, available_delta=70, memo="StakeSettled", actor="dealer",
        request_id="forged"))
    assert ledgers().check_round(r) == [
        f"the postings naming this round on {nowhere}, which no account was opened as, which "
        "has no part in it, move 70 available and 0 held; the round's events move 0 and 0: "
        "chips were posted around the round (R-M4)"]


def test_the_ledgers_own_postings_are_indexed_by_round_whatever_their_reasons_hold(
        ledgers: Callable[..., GameLedger], env: dict[str, str],
        database: DatabaseSettings) -> None:
    # A reason with a quote or a backslash is written with an escape, which made the index
    # read its postings as spelt otherwise: decoded at every check. Only a \u escape does
    # (the text \u of a Windows path is none).
    app = ledgers()
    _, r = open_round(app)
    app.void("v", "manager", r, 'he said "no bet" at C:\\users\\7, café')
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    with psycopg.connect(database.conninfo()) as conn:
        rows = conn.execute(
            f'SELECT ({storage.POSTING_ROUND}) AS named FROM "{env["POSTGRES_SCHEMA"]}".'
            f'"{recorder.events_table_name}" WHERE topic = %s ORDER BY notification_id',
            (Account.Posted.TOPIC,)
        ).fetchall()
    assert [row[0] for row in rows[-4:]] == [r.hex.encode()] * 4  # two holds, two releases
    assert ledgers().check_round(r) == []


def test_a_service_started_without_its_indexes_says_so(
        ledgers: Callable[..., GameLedger], env: dict[str, str], database: DatabaseSettings,
        caplog: pytest.LogCaptureFixture) -> None:
    # An upgrade started as the service role, before the owner's start: the checks answered
    # ok over fewer accounts, and nothing in the log said why.
    from api.services import prepare_store

    recorder = ledgers().recorder
    assert isinstance(recorder, LedgerRecorder)
    names = [f'"{env["POSTGRES_SCHEMA"]}"."{recorder.events_table_name}_{name}"'
             for name in ("postings_by_round", "accounts_opened")]
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        for name in names:
            conn.execute(f"DROP INDEX {name}")
    with caplog.at_level(logging.WARNING, logger="pitboss.api"):
        prepare_store({**env, "CREATE_TABLE": "no"})
    # One warning per index, each saying what answers otherwise: the one warning named the
    # round check for either.
    lacks = "as this version makes it (missing, or made by an earlier version, without its mark)"
    assert [r.getMessage().split(", until a start")[0] for r in caplog.records
            if r.name == "pitboss.api" and "event table" in r.getMessage()] == [
        f"the event table lacks {names[0]} {lacks}: the round check looks at the round's own "
        "accounts alone and reads their whole histories",
        f"the event table lacks {names[1]} {lacks}: the balance check reads every event in its "
        "range to find the accounts opened, unless an index an earlier version made serves it"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pitboss.api"):
        prepare_store(env)  # the owner's start makes them
    assert not [r for r in caplog.records if r.name == "pitboss.api"]


def test_a_service_started_before_a_read_models_table_is_made_says_so(
        env: dict[str, str], database: DatabaseSettings,
        caplog: pytest.LogCaptureFixture) -> None:
    # An upgrade started as the service role before the owner's start: the audit reads that
    # need this version's new tables answered 500s, and the start said nothing of them.
    from api.services import prepare_store

    prepare_store(env)  # the owner's start: every table made
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{env["POSTGRES_SCHEMA"]}".balances_settings')
    with caplog.at_level(logging.WARNING, logger="pitboss.api"):
        prepare_store({**env, "CREATE_TABLE": "no"})
    assert [r.getMessage() for r in caplog.records if r.name == "pitboss.api"] == [
        "The read models lack this version's tables balances_settings: start pitboss once as "
        "the database owner, which makes them (README: Upgrading). Until then, the reads that "
        "need them answer 503."]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pitboss.api"):
        prepare_store(env)  # the owner's start makes it
    assert not [r for r in caplog.records if r.name == "pitboss.api"]


@pytest.mark.parametrize("earlier", ["none", "defined otherwise"])
def test_until_the_owner_makes_the_index_of_postings_by_round_a_check_reads_its_accounts(
        ledgers: Callable[..., GameLedger], env: dict[str, str],
        database: DatabaseSettings, earlier: str) -> None:
    # Tables an older version made, a service role's start (which makes no index): a search
    # of every account would read the whole log at each check. postings_by_round kept its name
    # when its expression changed: tables made before kept an index the round check's query
    # could not use, and nothing said so; and indexes no version reads any more were kept up
    # at every append.
    app = ledgers()
    r = _paid_to_strangers(app)
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    schema, table = env["POSTGRES_SCHEMA"], recorder.events_table_name
    index = f'"{schema}"."{table}_postings_by_round"'
    retired = f'"{schema}"."{table}_foreign_topics"'
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP INDEX {index}")
        if earlier == "defined otherwise":
            conn.execute(f'CREATE INDEX "{table}_postings_by_round" ON "{schema}"."{table}" '
                         "(originator_id) WHERE topic = 'pitboss:Account.Posted'")
            conn.execute(f'CREATE INDEX "{table}_foreign_topics" ON "{schema}"."{table}" '
                         "(originator_id) WHERE topic NOT LIKE 'pitboss:%'")
    service = ledgers(env={**env, "CREATE_TABLE": "no"})
    service_recorder = service.recorder
    assert isinstance(service_recorder, LedgerRecorder)
    assert list(service_recorder.missing_indexes()) == [index]
    assert service.check_round(r) == []  # the round's own accounts are as its events say
    ledgers()  # the owner's start makes it, as this version defines it, while the service runs
    assert service_recorder.missing_indexes() == {}
    assert service.check_round(r) == PAID_TO_STRANGERS
    with psycopg.connect(database.conninfo()) as conn:
        found = conn.execute("SELECT to_regclass(%s) IS NULL", (retired,)).fetchone()
    assert found == (True,)


def test_a_statement_altered_around_the_ledger_still_lists_every_entry(
        ledgers: Callable[..., GameLedger]) -> None:
    # With balances on each entry, a forged posting that took held below zero made the whole
    # statement a 500, from that entry's page on: where an auditor would have seen it.
    app = ledgers()
    app.open_account("o", "cashier", "P1")
    app.buy_in("b", "cashier", "P1", 100)
    account: Any = app.repository.get(ids.account_id("P1"))
    at = {"originator_id": account.id, "timestamp": account.modified_on}
    append_around_the_ledger(
        app,
        Account.Posted(originator_version=3, round_id=uuid4(),  # type: ignore[call-arg]
                       held_delta=-5, available_delta=5, memo="forged", actor="dealer",
                       request_id="forged", **at),
        Account.BoughtIn(originator_version=4, amount=1,  # type: ignore[call-arg]
                         actor="cashier", request_id="later", **at))
    for after, limit in ((0, 100), (1, 1), (2, 100), (3, 1)):
        items = app.account_entries("P1", after=after, limit=limit)["items"]
        shown = {i["version"]: i.get("balance") for i in items}
        before = {1: {"available": 0, "held": 0}, 2: {"available": 100, "held": 0}}
        assert shown == {v: before.get(v) for v in range(after + 1, min(after + limit, 4) + 1)
                         }, (after, shown)
    assert [i["data"].get("memo") for i in app.account_entries("P1")["items"]][2] == "forged"


def _stand_around_the_ledger(app: GameLedger, r: UUID, request_id: str, actor: str) -> None:
    """P1's stand on box 1, appended as the round's next event with the service role's rights:
    a legal play that moves no chips."""
    current: Any = app.repository.get(r)
    append_around_the_ledger(app, Round.HandStood(  # type: ignore[attr-defined]
        originator_id=r, originator_version=current.version + 1,
        timestamp=current.modified_on, actor=actor, request_id=request_id, player="P1", box=1,
        hand=0))


def test_a_play_appended_around_the_ledger_is_a_finding_of_its_round_check(
        ledgers: Callable[..., GameLedger]) -> None:
    # Box 1 holds 5,6 (its turn first), box 2 holds 19; the dealer shows a 7. A stand P1 never
    # asked for replays under the rules, moves nothing, and the chain takes it like any append:
    # no request of the ledger's made it, so no receipt accounts for it.
    app = ledgers(randbelow=SteeredShuffle("5S TH 7D 6S 9C 4H 8C TS"))
    _, r = open_round(app)
    assert app.check_round(r) == []
    version = app.round_state(r)["version"]
    _stand_around_the_ledger(app, r, "slipped-in", "P1")
    fresh = ledgers()
    assert fresh.round_state(r)["turn"]["box"] == 2  # the stand took: box 2 is to play
    assert fresh.check_round(r) == [
        f"v{version + 1}: recorded under request 'slipped-in', of which the ledger kept no "
        "receipt: written around the ledger (R-V2)"]


def test_a_play_appended_under_another_requests_id_is_a_finding_of_its_round_check(
        ledgers: Callable[..., GameLedger]) -> None:
    app = ledgers(randbelow=SteeredShuffle("5S TH 7D 6S 9C 4H 8C TS"))
    _, r = open_round(app)
    version = app.round_state(r)["version"]
    dealt = [e.originator_version for e in app.events.get(r)
             if getattr(e, "request_id", None) == "d"]
    _stand_around_the_ledger(app, r, "d", "P1")  # the deal's request id, and not its actor
    (finding,) = ledgers().check_round(r)
    assert finding == (
        f"{', '.join(f'v{v}' for v in [*dealt, version + 1])}: recorded under request 'd', "
        "whose receipt (deal by dealer) does not account for them (recorded as made by P1): "
        "written around the ledger (R-V2)")


def _racing_check(ledgers: Callable[..., GameLedger], request: Callable[[GameLedger, UUID, int],
                  Any]) -> tuple[GameLedger, UUID, list[str]]:
    """An auditor's check of a played round that another process moves on with ``request``
    (its n-th) just after each time the check has read the round's events."""
    dealer = ledgers(randbelow=SteeredShuffle("TS TH 7D 9C 8C TD"))  # 19 and 18; 7, T
    _, r = open_round(dealer)
    dealer.stand("s1", "dealer", r, "P1", 1, 0)
    dealer.stand("s2", "dealer", r, "P2", 2, 0)
    dealer.play_dealer("pd", "dealer", r)
    auditor = ledgers()
    reads = count()
    read = auditor._round_events

    def read_then_move(round_id: UUID) -> list[Any]:
        events = read(round_id)
        request(dealer, round_id, next(reads))
        return events

    auditor._round_events = read_then_move  # type: ignore[method-assign]
    return dealer, r, auditor.check_round(r)


def test_a_round_settled_while_it_is_checked_is_read_again_not_a_finding(
        ledgers: Callable[..., GameLedger]) -> None:
    # Read before the settlement, its postings after: without a second reading, the
    # settlement's postings looked like chips posted around the round.
    def settle_once(dealer: GameLedger, r: UUID, n: int) -> None:
        if n == 0:
            dealer.settle("st", "dealer", r)

    dealer, r, findings = _racing_check(ledgers, settle_once)
    assert findings == []
    assert dealer.round_state(r)["phase"] == "settled"


def test_a_round_that_moves_on_at_every_reading_of_its_check_is_said_to(
        ledgers: Callable[..., GameLedger]) -> None:
    def ruling_each_time(dealer: GameLedger, r: UUID, n: int) -> None:
        if n == 0:
            dealer.settle("st", "dealer", r)
        else:
            dealer.record_ruling(f"ru{n}", "manager", r, "short paid", [1], {"P1": 5})

    _, r, findings = _racing_check(ledgers, ruling_each_time)
    assert findings[0] == (
        f"round {r} moved on each of the 3 times it was read for this check: what follows may "
        "be its newest requests rather than a fault; check it again once it is still")
    assert len(findings) == 3  # rulings moved both, in the reads between
    assert findings[1].startswith("the postings naming this round on P1's account move ")
    assert findings[2].startswith("the postings naming this round on the table's house account ")


# A buy-in in a process of its own, on the main thread, as a script runs the ledger.
BUY_IN_CHILD = """
import json, sys
from ledger.application import GameLedger
ledger = GameLedger(env=json.loads(sys.argv[1]))
ledger.buy_in("held-back", "cashier", "P1", 5)
"""


def test_an_append_waiting_on_the_append_lock_is_interrupted_by_ctrl_c_and_records_nothing(
        ledgers: Callable[..., GameLedger], env: dict[str, str],
        database: DatabaseSettings) -> None:
    # Through libpq's blocking call, the interrupt waited out the lock (60 s here) and the
    # buy-in then committed; the driver's wait cancels the statement at once.
    import os
    import subprocess
    import sys
    from pathlib import Path

    app = ledgers()
    app.open_account("a", "cashier", "P1")
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    key = append_lock_key(env["POSTGRES_SCHEMA"], recorder.events_table_name)
    root = Path(__file__).resolve().parents[2]
    with psycopg.connect(database.conninfo(), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        child = subprocess.Popen(
            [sys.executable, "-c", BUY_IN_CHILD,
             json.dumps({**env, "POSTGRES_LOCK_TIMEOUT": "60"})],
            cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err = interrupted_once_waiting(child, lambda: holder.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone() != (0,), "the buy-in")
        assert "KeyboardInterrupt" in err
    assert ledgers().balance("P1")["available"] == 0  # the lock is free: nothing came late


def _connection_lost_once(app: GameLedger, database: DatabaseSettings, *, committed: bool,
                          meanwhile: Callable[[], object] = lambda: None) -> list[int]:
    """The first append's connection dies (its server process terminated), after its commit or
    before it, and after ``meanwhile`` (another request) has run; the backends it took."""
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    append = recorder._append
    lost: list[int] = []

    def losing_its_connection(conn: psycopg.Connection[Any], params: Any) -> list[int]:
        if lost:
            return append(conn, params)
        lost.append(conn.info.backend_pid)
        ids = append(conn, params) if committed else []
        meanwhile()
        with psycopg.connect(database.conninfo(), autocommit=True) as operator:
            operator.execute("SELECT pg_terminate_backend(%s)", (lost[0],))
        conn.execute("SELECT 1")  # raises: the server closed the connection
        return ids

    recorder._append = losing_its_connection  # type: ignore[assignment]
    return lost


def _bought_in(app: GameLedger, player: str) -> list[dict[str, Any]]:
    return [e for e in app.account_entries(player, limit=10)["items"] if e["type"] == "BoughtIn"]


def test_a_save_whose_answer_was_lost_after_its_commit_is_no_repeat(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings) -> None:
    # The connection broke once the buy-in had committed; the append tried again found its
    # own events and the buy-in was answered as a repeat ("nothing changed now", said to a
    # cashier who then sold the chips again).
    app = ledgers()
    app.open_account("a", "cashier", "P1")
    lost = _connection_lost_once(app, database, committed=True)
    assert app.buy_in("b", "cashier", "P1", 100)["available"] == 100
    assert lost
    assert not app.repeated()
    assert app.buy_in("b", "cashier", "P1", 100)["available"] == 100  # a resend is one
    assert app.repeated()
    assert len(_bought_in(ledgers(), "P1")) == 1


def test_a_save_lost_before_its_commit_is_told_from_a_twins_and_from_another_request(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings) -> None:
    # What tells a save's own events from others' after its connection broke: a twin (the same
    # request, sent to another process) that committed meanwhile is a repeat; another request
    # that took the account's next version leaves this one to be decided again.
    app = ledgers()
    app.open_account("a", "cashier", "P1")
    other = ledgers()
    lost = _connection_lost_once(app, database, committed=False,
                                 meanwhile=lambda: other.buy_in("b", "cashier", "P1", 100))
    assert app.buy_in("b", "cashier", "P1", 100)["available"] == 100
    assert lost
    assert app.repeated()  # the twin's work
    lost = _connection_lost_once(app, database, committed=False,
                                 meanwhile=lambda: other.buy_in("c", "cashier", "P1", 50))
    assert app.buy_in("d", "cashier", "P1", 25)["available"] == 175
    assert lost
    assert not app.repeated()
    assert [e["data"]["amount"] for e in _bought_in(ledgers(), "P1")] == [100, 50, 25]


def test_a_repeat_this_process_carried_out_is_answered_without_the_store(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A terminal's retry of a buy-in (or of a hit the hand still allows) was decided again and
    # refused by the receipt's primary key, which PostgreSQL logs as an error each time.
    app = ledgers()
    app.open_account("a", "cashier", "P1")
    first = app.buy_in("b", "cashier", "P1", 100)
    server_log = Path(database.host, "log")  # the embedded server's
    logged = server_log.stat().st_size if server_log.is_file() else None
    used: list[str] = []  # every read and write of the store from here (still made)
    recorder = app.recorder

    def counted(name: str, real: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        used.append(name)
        return real(*args, **kwargs)

    for name in ("insert_events", "select_events", "max_notification_id"):
        monkeypatch.setattr(recorder, name,
                            functools.partial(counted, name, getattr(recorder, name)))
    assert app.buy_in("b", "cashier", "P1", 100) == first
    assert app.repeated()
    with pytest.raises(RequestIdReused, match="buy in"):  # other content under the id
        app.buy_in("b", "cashier", "P1", 50)
    assert used == []
    # Another process has no such receipt: it answers the same from the store.
    other = ledgers()
    assert other.buy_in("b", "cashier", "P1", 100) == first
    assert other.repeated()
    assert len(_bought_in(other, "P1")) == 1
    if logged is not None:
        with server_log.open("rb") as log:
            log.seek(logged)
            errors = log.read().decode(errors="replace").count("duplicate key value")
        assert errors == 1  # the other process's, decided again and refused by the key


def test_an_append_that_waits_out_the_lock_timeout_is_refused_after_one_wait(
        ledgers: Callable[..., GameLedger], env: dict[str, str],
        database: DatabaseSettings) -> None:
    # A bulk load holding the append lock: each of the library's ten tries waited out the lock
    # timeout again, and the buy-in got its 503 after ten of them (52 s at the default 5 s).
    from eventsourcing.persistence import OperationalError

    app = ledgers(env={**env, "POSTGRES_LOCK_TIMEOUT": "1"})
    app.open_account("a", "cashier", "P1")
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    key = append_lock_key(env["POSTGRES_SCHEMA"], recorder.events_table_name)
    waits: set[object] = set()  # each try's wait for the lock, by when it began
    done = threading.Event()
    with psycopg.connect(database.conninfo(), autocommit=True) as holder, \
            psycopg.connect(database.conninfo(), autocommit=True) as watcher:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))

        def watch() -> None:
            while not done.is_set():
                waits.update(row[0] for row in watcher.execute(
                    "SELECT waitstart FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                    "AND waitstart IS NOT NULL").fetchall())
                done.wait(0.02)

        watching = threading.Thread(target=watch)
        watching.start()
        try:
            with pytest.raises(OperationalError, match="lock timeout"):
                app.buy_in("b", "cashier", "P1", 100)
        finally:
            done.set()
            watching.join()
    assert len(waits) == 1, waits
    assert ledgers().balance("P1")["available"] == 0


def test_a_link_removed_is_a_finding_wherever_a_part_starts_and_at_the_head(
        ledgers: Callable[..., GameLedger], database: DatabaseSettings,
        env: dict[str, str]) -> None:
    # The tables' owner can make the column take none: a part starting after such an event
    # was refused as naming no event, and the head answered with a crash (a 500).
    _, recorder = with_a_round(ledgers)
    last, head = chain_head(recorder)
    with behind_the_ledger(database, env) as (conn, table):
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN chain_hash DROP NOT NULL")
        conn.execute(f"UPDATE {table} SET chain_hash = NULL WHERE notification_id IN (5, %s)",
                     (last,))
    whole = verify_chain(recorder)
    assert [f.split("(notification ")[1].split(")")[0] for f in whole.findings] == ["5", str(last)]
    first = verify_chain(recorder, limit=5)
    rest = verify_chain(recorder, after=first.next_after or 0)
    assert first.findings + rest.findings == whole.findings
    assert chain_head(recorder) == (last, head)  # the link recomputed where it was removed


def test_a_snapshot_whose_answer_was_lost_after_its_commit_is_not_called_unwritten(
        ledgers: Callable[..., GameLedger], caplog: pytest.LogCaptureFixture) -> None:
    # The snapshot's insert committed and its connection broke before the answer came: tried
    # again, it found its row there. That was logged as "not written", with a traceback.
    app = ledgers()
    snapshots = app.snapshots.recorder if app.snapshots is not None else None
    assert isinstance(snapshots, SnapshotRecorder)
    library_insert = PostgresAggregateRecorder.insert_events.__wrapped__
    tries: list[int] = []

    def committed_then_lost(recorder: SnapshotRecorder, stored: Any, **kwargs: Any) -> None:
        tries.append(len(stored))
        library_insert(recorder, stored, **kwargs)
        if len(tries) == 1:
            raise OperationalError("server closed the connection unexpectedly")

    snapshots._insert = functools.partial(storage._retried(committed_then_lost), snapshots)
    with caplog.at_level(logging.WARNING, "pitboss.ledger"):
        _snapshotted(app)
    assert tries == [1, 1]  # the version-200 snapshot, tried twice
    assert [r.getMessage() for r in caplog.records] == []
    account = ids.account_id("P1")
    assert [s.originator_version for s in snapshots.select_events(account)] == [200]
    assert ledgers().balance("P1")["available"] == 200

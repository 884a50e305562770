"""Rebuilds: from event zero into fresh tables, swapped in atomically, identical to the view
that was maintained incrementally (by batches of any size, or one event at a time by the
library's own runner), even while a worker keeps the live view current."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from eventsourcing.projection import ProjectionRunner

from ledger.application import GameLedger
from ledger.rules import CASINO
from projections.engine import NAMES, PROJECTION_CLASSES
from projections.queries import ReadModels
from projections.rebuild import rebuild, rebuild_lock_key
from projections.settings import GamingDay, ProjectionSetupError
from projections.worker import run_worker
from tests.integration.test_projections_support import (
    WILD_HEAVY,
    Casino,
    Env,
    connect,
    dump,
    engine,
    head,
    positions,
    wait_until,
)

PLAYERS = ("P1", "P2", "P3", "P4")


@pytest.fixture
def env(postgres_env: Callable[[], Env]) -> Env:
    return postgres_env()


@pytest.fixture
def casino(env: Env) -> Iterator[Casino]:
    casino = Casino.on(env, seed=11)
    casino.fund(*PLAYERS)
    yield casino
    casino.close()


def test_a_rebuilt_view_is_identical_to_the_incrementally_maintained_one(
        env: Env, casino: Casino) -> None:
    rng = random.Random(7)
    tables = [casino.table("Wild", WILD_HEAVY), casino.table("Main", CASINO)]
    with engine(env) as e:
        for i in range(8):
            casino.random_round(tables[i % 2], PLAYERS, rng)
            if i % 3 == 0:
                casino.ledger.cash_out(casino.rid(), "cashier", "P4", 1000)
            e.step(rng.choice([1, 3, 17, 64]))  # views trail the ledger, in uneven batches
        e.catch_up(5)
    incremental = dump(env)
    assert sum(len(rows) for rows in incremental.values()) > 30
    for name in NAMES:
        report = rebuild(env, name, batch_size=1000)
        assert report["swapped"]
        assert report["position"] == head(env)
    assert dump(env) == incremental


def test_the_library_runner_one_event_at_a_time_builds_the_same_views(
        env: Env, casino: Casino) -> None:
    tables = [casino.table("Wild", WILD_HEAVY), casino.table("Main", CASINO)]
    rng = random.Random(3)
    for i in range(3):
        casino.random_round(tables[i % 2], PLAYERS, rng)
    ReadModels(env).close()  # the live views' tables exist, empty
    for cls in PROJECTION_CLASSES:
        with connect(env) as conn:
            row = conn.execute("SELECT max(notification_id) FROM ledger_events "
                               "WHERE topic = ANY(%s)", (list(cls.topics),)).fetchone()
        last = row[0] if row else None
        with ProjectionRunner(application_class=GameLedger, projection_class=cls,
                              view_class=cls.view_class, env=env) as runner:
            runner.wait(last, timeout=30)
    one_by_one = dump(env)
    for name in NAMES:
        rebuild(env, name)
    assert dump(env) == one_by_one


def test_a_rebuild_swaps_in_under_a_running_worker_which_goes_on_from_the_new_view(
        env: Env, casino: Casino) -> None:
    table = casino.table("Main", CASINO)
    for _ in range(2):
        casino.simple_round(table)
    ReadModels(env).close()
    stop = threading.Event()
    worker = threading.Thread(target=run_worker, args=(env, stop), kwargs={
        "batch_size": 5, "poll_interval_s": 0.02, "log": logging.getLogger("pitboss.test")})
    worker.start()
    rng = random.Random(5)
    writer = threading.Thread(target=lambda: [casino.random_round(table, PLAYERS, rng)
                                              for _ in range(4)])
    try:
        writer.start()
        reports = [rebuild(env, name, batch_size=3) for name in NAMES]
        writer.join(timeout=60)
        events = head(env)
        wait_until(lambda: min(positions(env).values()) >= events, 20.0, "the worker")
    finally:
        stop.set()
        worker.join(timeout=10)
    assert all(report["swapped"] for report in reports)
    with ReadModels(env) as reads:
        assert reads.check_balances(casino.ledger)["findings"] == []
    survived = dump(env)
    for name in NAMES:
        rebuild(env, name)
    assert dump(env) == survived


def test_a_rebuild_whose_catch_up_after_the_swap_loses_to_the_worker_is_done(
        env: Env, casino: Casino) -> None:
    # The worker moving the new view on first made the rebuild end in a traceback, exit 1,
    # after its swap: an operator took a finished rebuild for a failed one.
    table = casino.table("Main", CASINO)
    casino.simple_round(table)
    ReadModels(env).close()
    swapped = threading.Event()

    class Log(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "swapped in" in record.getMessage():
                swapped.set()

    class WorkerMovesOnFirst(threading.Event):
        """Asked whether to stop as the catch-up after the swap starts, a round is played;
        asked again, a page later, the worker wins."""

        def is_set(self) -> bool:
            if swapped.is_set() and not moved:
                swapped_at.append(head(env))
                moved.append(casino.simple_round(table))
            elif moved and len(moved) == 1:
                moved.append(None)
                rebuilt_to.append(positions(env)["balances"])
                with engine(env, names=["balances"]) as worker:
                    worker.catch_up(100)
            return False

    moved: list[object] = []
    swapped_at: list[int] = []
    rebuilt_to: list[int] = []
    log = logging.getLogger("pitboss.test.rebuild")
    handler = Log()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        report = rebuild(env, "balances", batch_size=1, log=log, stop=WorkerMovesOnFirst())
    finally:
        log.removeHandler(handler)
    assert len(moved) == 2
    assert report["swapped"]
    # Every event up to where the worker took over (notifications count from 1): the report
    # left out the page the catch-up after the swap had applied.
    assert rebuilt_to[0] > swapped_at[0]
    assert report["events_read"] == rebuilt_to[0]
    assert report["position"] == head(env) == positions(env)["balances"]


def test_a_rebuild_swaps_in_no_earlier_than_where_the_worker_had_brought_the_view(
        env: Env, casino: Casino, caplog: pytest.LogCaptureFixture) -> None:
    # Between the fresh tables' catch-up and the swap, the worker moved the live view on: the
    # view swapped in went back a few events (a balance a version older for a moment), and a
    # balance check reading the position before the swap and the rows after it found events
    # "not applied".
    table = casino.table("Main", CASINO)
    casino.simple_round(table)
    ReadModels(env).close()
    asked: list[int] = []

    class WorkerMovesOnBeforeTheSwap(threading.Event):
        """Asked the second time (the fresh tables at the head, the swap next), a round is
        played and the live view brought up to it."""

        def is_set(self) -> bool:
            asked.append(0)
            if len(asked) == 2:
                casino.simple_round(table)
                with engine(env, names=["balances"]) as worker:
                    worker.catch_up(100)
                asked[-1] = positions(env)["balances"]
            return False

    with caplog.at_level(logging.INFO, logger="pitboss.test.swap"):
        # A pool of two: the catch-up under the swap's lock needs a third connection.
        report = rebuild({**env, "PROJECTIONS_POSTGRES_MAX_OVERFLOW": "0"}, "balances",
                         batch_size=1000,
                         log=logging.getLogger("pitboss.test.swap"),
                         stop=WorkerMovesOnBeforeTheSwap())
    live_at = asked[1]
    assert live_at > 0
    (swapped,) = [r.getMessage() for r in caplog.records if "swapped in" in r.getMessage()]
    assert swapped == f"balances rebuilt up to notification {live_at} and swapped in"
    assert report["swapped"]
    assert report["position"] == head(env)
    with ReadModels(env) as reads:
        assert reads.check_balances(casino.ledger)["findings"] == []


def test_a_read_waiting_on_the_swap_sees_the_view_swapped_in_with_all_it_was_brought_up_to(
        env: Env, casino: Casino) -> None:
    # A read arriving while the swap held the live tables took its snapshot, then waited; the
    # swap's catch-up (the round the worker had counted meanwhile) committed after that
    # snapshot, so the read found the new tables without it: a day read to its end went back
    # a round, and forward again on the next read.
    table = casino.table("Main", CASINO)
    casino.simple_round(table)
    ReadModels(env).close()
    day = GamingDay.from_env(env).day_of(datetime.fromisoformat(
        casino.ledger.round_events(casino.simple_round(table))[0]["timestamp"]))
    holder = connect(env)
    holder.autocommit = False
    asked: list[int] = []

    class WorkerMovesOnAndTheCatchUpWaits(threading.Event):
        """Asked the second time (the swap next): a round is played and the live view brought
        up to it; the fresh tracking table is held, so the swap's catch-up waits for it."""

        def is_set(self) -> bool:
            asked.append(0)
            if len(asked) == 2:
                casino.simple_round(table)
                with engine(env, names=["table_days"]) as worker:
                    worker.catch_up(100)
                holder.execute("LOCK TABLE table_days_next_tracking IN ACCESS EXCLUSIVE MODE")
            return False

    def waiting(count: int) -> Callable[[], bool]:
        """Whether ``count`` locks on the view's tables are waited for."""
        def found() -> bool:
            with connect(env) as conn:
                return conn.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                    "WHERE c.relname LIKE 'table\\_days\\_%' AND NOT l.granted"
                ).fetchone() == (count,)
        return found

    done: dict[str, Any] = {}
    rebuilding = threading.Thread(target=lambda: done.update(report=rebuild(
        env, "table_days", batch_size=1000, stop=WorkerMovesOnAndTheCatchUpWaits())))
    with ReadModels(env) as reads, holder:
        rebuilding.start()
        try:
            wait_until(waiting(1), what="the swap's catch-up waiting")
            reader = threading.Thread(target=lambda: done.update(
                during=reads.table_day_report(table, day, day)))
            reader.start()
            wait_until(waiting(2), what="the read waiting on the swap")
        finally:
            holder.rollback()
            rebuilding.join(30)
        reader.join(30)
        assert done["report"]["swapped"]
        after = reads.table_day_report(table, day, day)
    assert after[0]["rounds_played"] >= 2  # (3, unless a gaming day began between them)
    assert done["during"] == after


def test_a_rebuild_stopped_before_the_swap_leaves_the_live_view_alone(
        env: Env, casino: Casino) -> None:
    casino.simple_round(casino.table("Main", CASINO))
    with engine(env) as e:
        e.catch_up(100)
    live = dump(env, ["balances"])
    stopped = threading.Event()
    stopped.set()
    report = rebuild(env, "balances", stop=stopped)
    assert not report["swapped"]
    assert dump(env, ["balances"]) == live


def _live_tables(env: Env) -> list[list[tuple[Any, ...]]]:
    """The oids of the live balances tables: a swap replaces them, a rebuild that did not
    swap leaves them."""
    with connect(env) as conn:
        return [conn.execute("SELECT to_regclass(%s)::oid", (f"balances_{part}",)).fetchall()
                for part in ("tracking", "accounts")]


def _swap_waiting(env: Env) -> bool:
    with connect(env) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE c.relname LIKE 'balances\\_%' AND NOT l.granted").fetchone() != (0,)


def test_a_rebuild_stopped_while_its_swap_waits_for_the_live_tables_leaves_them_alone(
        env: Env, casino: Casino) -> None:
    # The stop was logged, the swap went ahead once the tables were free, and the rebuild
    # exited 0 ("rebuilt").
    casino.simple_round(casino.table("Main", CASINO))
    with engine(env) as e:
        e.catch_up(100)
    live = _live_tables(env)
    stop = threading.Event()
    done: dict[str, Any] = {}
    rebuilding = threading.Thread(target=lambda: done.update(
        report=rebuild(env, "balances", stop=stop)))
    with connect(env) as reader:
        reader.autocommit = False
        reader.execute("SELECT count(*) FROM balances_accounts")  # a long read holds them
        rebuilding.start()
        try:
            wait_until(lambda: _swap_waiting(env), what="the swap waiting")
            stop.set()
        finally:
            reader.rollback()
            rebuilding.join(30)
    assert not done["report"]["swapped"]
    assert _live_tables(env) == live
    assert rebuild(env, "balances")["swapped"]  # the next one goes ahead
    assert _live_tables(env) != live


def test_a_swap_that_waits_too_long_for_the_live_tables_says_so_and_leaves_them(
        env: Env, casino: Casino, monkeypatch: pytest.MonkeyPatch) -> None:
    # It said "database error: canceling statement due to lock timeout".
    casino.simple_round(casino.table("Main", CASINO))
    with engine(env) as e:
        e.catch_up(100)
    live = _live_tables(env)
    monkeypatch.setattr("projections.rebuild.SWAP_LOCK_TIMEOUT_S", 1)
    with connect(env) as reader:
        reader.autocommit = False
        reader.execute("SELECT count(*) FROM balances_accounts")
        with pytest.raises(ProjectionSetupError, match=(
                r"^the rebuilt balances could not be swapped in: its live tables stayed in use "
                r"for 1 s .*the live view is unchanged: run the rebuild again")):
            rebuild(env, "balances")
        reader.rollback()
    assert _live_tables(env) == live


def test_a_rebuild_swaps_in_and_catches_up_on_a_pool_of_one_connection(
        env: Env, casino: Casino) -> None:
    # The catch-up after the swap waited out the pool's timeout: swapped in, and said failed.
    casino.simple_round(casino.table("Main", CASINO))
    smallest = {**env, "PROJECTIONS_POSTGRES_POOL_SIZE": "1",
                "PROJECTIONS_POSTGRES_MAX_OVERFLOW": "0"}
    report = rebuild(smallest, "balances")
    assert report["swapped"]
    assert report["position"] == head(env)


def test_a_rebuild_reports_its_progress_against_the_head_it_started_at(
        env: Env, casino: Casino, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    casino.simple_round(casino.table("Main", CASINO))
    events = head(env)
    monkeypatch.setattr("projections.rebuild.PROGRESS_INTERVAL_S", 0.0)
    log = logging.getLogger("pitboss.test.rebuild")
    with caplog.at_level(logging.INFO, logger=log.name):
        rebuild(env, "balances", batch_size=5, log=log)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(
        "rebuilding balances: at notification ")]
    positions_seen = [int(line.split()[4]) for line in lines]
    assert len(positions_seen) >= events // 5
    assert positions_seen == sorted(positions_seen)
    assert all(f" of {events} (" in line for line in lines)
    assert f"at notification {events} of {events} (100%)" in lines[-1]


def test_a_rebuild_before_the_ledger_has_written_anything_builds_empty_views(env: Env) -> None:
    report = rebuild(env, "balances")
    assert (report["events_read"], report["swapped"], report["position"]) == (0, True, 0)
    read_models = ReadModels(env)
    try:
        assert read_models.positions()[0]["ledger_head"] == 0
    finally:
        read_models.close()


def test_a_second_rebuild_of_a_read_model_is_refused_while_one_runs(
        env: Env, casino: Casino) -> None:
    # It dropped the fresh tables the first was filling ("relation ... does not exist"), or
    # the two deadlocked. The lock is the one a running rebuild holds for its whole length.
    casino.simple_round(casino.table("Main", CASINO))
    with connect(env) as running:
        running.execute("SELECT pg_advisory_lock(%s, %s)",
                        rebuild_lock_key(env["POSTGRES_SCHEMA"], "balances"))
        with pytest.raises(ProjectionSetupError,
                           match=r"^a rebuild of balances is already running: let it finish"):
            rebuild(env, "balances")
        assert rebuild(env, "round_index")["swapped"]  # another read model's goes ahead
        # So does the same read model's in another schema (another ledger).
        running.execute("SELECT pg_advisory_unlock_all()")
        running.execute("SELECT pg_advisory_lock(%s, %s)",
                        rebuild_lock_key("elsewhere", "balances"))
        assert rebuild(env, "balances")["swapped"]
    # The lock is held on a connection of its own: a reader pool of one still reads.
    smallest = {**env, "LEDGER_POSTGRES_POOL_SIZE": "1", "LEDGER_POSTGRES_MAX_OVERFLOW": "0"}
    assert rebuild(smallest, "balances")["swapped"]


def test_an_unknown_projection_cannot_be_rebuilt(env: Env) -> None:
    with pytest.raises(ProjectionSetupError, match="there is no projection 'ledger'"):
        rebuild(env, "ledger")


def test_the_swap_leaves_only_the_live_tables_and_their_indexes(env: Env,
                                                                 casino: Casino) -> None:
    casino.simple_round(casino.table("Main", CASINO))
    for name in NAMES:
        rebuild(env, name)
    with connect(env) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "UNION ALL SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    assert not [n for n in names if "_next" in n]
    assert "round_index_rounds_wild" in names
    assert "balances_accounts_pkey" in names
    with pytest.raises(psycopg.errors.UndefinedTable), connect(env) as conn:
        conn.execute("SELECT 1 FROM balances_next_accounts")

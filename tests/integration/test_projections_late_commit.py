"""Late commits and gaps: the projection never skips a lower id that commits late, and never
stalls after an id that never commits.

The ledger's insert function takes an advisory lock before it draws notification ids and
holds it through its commit (the library's own pipelined insert locks the table to the same
end). So a writer that holds its transaction open makes the other writers queue behind it
rather than commit past it: ids become visible in order. These tests hold a writer open for
a second inside the real insert path (a recorder that pauses after its insert, before its
commit) or in a raw transaction that calls the same function and then rolls back (a gap),
while another ledger writes and the worker runs, and check what the worker does before and
after.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from eventsourcing.utils import register_topic

from ledger.aggregates.ids import account_id
from ledger.storage import LedgerRecorder, _insert_parameters
from projections.queries import ReadModels
from projections.worker import run_worker
from tests.integration.test_projections_support import (
    Casino,
    Env,
    connect,
    head,
    positions,
    wait_until,
)

PAUSING = "pitboss-tests:PausingRecorder"


class PausingRecorder(LedgerRecorder):
    """The ledger's recorder; when armed, a save pauses after its INSERT (ids drawn, the
    append lock held, nothing committed) until released.

    The ledger saves through one SQL function that takes the append lock (an advisory lock),
    notifies and inserts in a single autocommitted statement; armed, the same statement runs
    inside a transaction that is held open.
    """

    armed = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inserted = threading.Event()
        self.release = threading.Event()
        self.ids: list[int] = []

    def insert_events(self, stored_events: Sequence[Any], **kwargs: Any) -> Sequence[int] | None:
        if not self.armed:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
        with self.datastore.get_connection() as conn, conn.transaction():
            drawn = self._append(conn, _insert_parameters(stored_events))
            self._hold(drawn)
        return drawn

    def _hold(self, ids: list[int]) -> None:
        self.ids = ids
        self.inserted.set()
        if not self.release.wait(10):
            raise AssertionError("never released")


register_topic(PAUSING, PausingRecorder)


@pytest.fixture
def env(postgres_env: Callable[[], Env]) -> Env:
    return postgres_env()


@pytest.fixture
def floor(env: Env) -> Iterator[tuple[Casino, threading.Event]]:
    """A ledger with funded players, and the worker running on it, caught up."""
    casino = Casino.on(env)
    casino.fund("P1", "P2")
    casino.simple_round(casino.table("T1"))
    ReadModels(env).close()
    stop = threading.Event()
    worker = threading.Thread(target=run_worker, args=(env, stop), kwargs={
        "batch_size": 100, "poll_interval_s": 0.05, "log": logging.getLogger("pitboss.test")})
    worker.start()
    events = head(env)
    wait_until(lambda: min(positions(env).values()) >= events, 10.0, "the first catch-up")
    try:
        yield casino, stop
    finally:
        stop.set()
        worker.join(timeout=10)
        casino.close()


def in_thread(action: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=action)
    thread.start()
    return thread


def waiting_on_the_append_lock(env: Env) -> bool:
    """Whether a session waits for an advisory lock (the ledger's append lock): a second
    writer that reached the database and queues there, not one that has not got there yet."""
    with connect(env) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                           "'Lock' AND wait_event = 'advisory'").fetchone()
    return bool(row and row[0])


def projected(env: Env, player: str) -> int:
    with ReadModels(env) as reads:
        (row,) = reads.balances(player=player)["items"]
    return int(row["available"])


def test_a_writer_that_commits_late_is_neither_skipped_nor_stalls_the_worker(
        env: Env, floor: tuple[Casino, threading.Event]) -> None:
    casino, _ = floor
    before = {p: casino.ledger.balance(p)["available"] for p in ("P1", "P2")}
    start = head(env)
    # The service's environment pins the library's settings; the ledger's own name wins.
    late = Casino.on({**env, "LEDGER_APPLICATION_RECORDER_TOPIC": PAUSING})
    recorder = late.ledger.recorder
    assert isinstance(recorder, PausingRecorder)
    recorder.armed = True
    slow = in_thread(lambda: late.ledger.buy_in(late.rid(), "cashier", "P1", 100))
    assert recorder.inserted.wait(10)
    (late_id, *_) = recorder.ids
    other = in_thread(lambda: casino.ledger.buy_in(casino.rid(), "cashier", "P2", 50))
    # The other writer queues behind the append lock; the worker has nothing new to read.
    wait_until(lambda: waiting_on_the_append_lock(env), 10.0, "the second writer's wait")
    assert other.is_alive(), "a second writer committed past an open writer"
    assert head(env) == start
    assert set(positions(env).values()) == {start}
    recorder.release.set()
    slow.join(timeout=10)
    other.join(timeout=10)
    assert head(env) > late_id > start
    events = head(env)
    wait_until(lambda: min(positions(env).values()) >= events, 5.0, "projection")
    assert projected(env, "P1") == before["P1"] + 100
    assert projected(env, "P2") == before["P2"] + 50
    with ReadModels(env) as reads:
        assert reads.check_balances(casino.ledger)["findings"] == []
    late.close()


def test_an_id_that_never_commits_leaves_a_gap_the_worker_does_not_wait_on(
        env: Env, floor: tuple[Casino, threading.Event]) -> None:
    casino, _ = floor
    before = {p: casino.ledger.balance(p)["available"] for p in ("P1", "P2")}
    start = head(env)
    # A realistic event to insert: P1's next account event.
    account: Any = casino.ledger.repository.get(account_id("P1"))
    account.buy_in(500, "cashier", "never-committed", account.modified_on)
    (event,) = account.collect_events()
    stored = casino.ledger.mapper.to_stored_event(event)
    recorder = casino.ledger.recorder
    assert isinstance(recorder, LedgerRecorder)
    with connect(env) as conn:
        # What the recorder does, inside a transaction that rolls back: the drawn id is burnt.
        conn.execute("BEGIN")
        (burnt,) = recorder._append(conn, _insert_parameters([stored]))
        other = in_thread(lambda: casino.ledger.buy_in(casino.rid(), "cashier", "P2", 50))
        wait_until(lambda: waiting_on_the_append_lock(env), 10.0, "the second writer's wait")
        assert other.is_alive()
        assert set(positions(env).values()) == {start}
        conn.execute("ROLLBACK")
    other.join(timeout=10)
    events = head(env)
    assert events > burnt > start
    with connect(env) as conn:
        gone = conn.execute("SELECT count(*) FROM ledger_events WHERE notification_id = %s",
                            (burnt,)).fetchone()
    assert gone == (0,)
    # The burnt id never commits: a worker that waited for it would never catch up.
    wait_until(lambda: min(positions(env).values()) >= events, 5.0, "projection")
    assert projected(env, "P1") == before["P1"]
    assert projected(env, "P2") == before["P2"] + 50
    with ReadModels(env) as reads:
        assert reads.check_balances(casino.ledger)["findings"] == []

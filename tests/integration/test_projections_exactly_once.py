"""Exactly once: a batch that dies before its commit leaves no trace, and the resume neither
loses an event nor counts one twice; two workers on the same views collide, one is refused,
and neither double counts.

"The same as a rebuild" is the yardstick: a view rebuilt from event zero in one pass must equal
the view that survived the failures, row for row, and the balances must equal the aggregates.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.rules import CASINO
from projections.base import BatchProjection
from projections.engine import NAMES
from projections.queries import ReadModels
from projections.rebuild import rebuild
from projections.rounds import RoundIndexProjection
from projections.worker import REPORT_INTERVAL_S, run_worker
from tests.integration.test_projections_support import (
    WILD_HEAVY,
    Casino,
    Env,
    dump,
    engine,
    head,
    positions,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
PLAYERS = ("P1", "P2", "P3")


@pytest.fixture
def env(postgres_env: Callable[[], Env]) -> Env:
    return postgres_env()


@pytest.fixture
def casino(env: Env) -> Iterator[Casino]:
    casino = Casino.on(env, seed=5)
    casino.fund(*PLAYERS)
    yield casino
    casino.close()


def play(casino: Casino, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    tables = [casino.table(f"T{seed}-{i}", rules) for i, rules in
              enumerate((WILD_HEAVY, CASINO))]
    for i in range(rounds):
        casino.random_round(tables[i % 2], PLAYERS, rng)


def assert_exact(env: Env, casino: Casino) -> None:
    """The views agree with the aggregates and with a rebuild from event zero."""
    with ReadModels(env) as reads:
        assert reads.check_balances(casino.ledger)["findings"] == []
    survived = dump(env)
    for name in NAMES:
        rebuild(env, name, batch_size=1000)
    assert dump(env) == survived


def test_a_batch_that_fails_before_its_commit_leaves_no_trace_and_the_resume_counts_once(
        env: Env, casino: Casino, monkeypatch: pytest.MonkeyPatch) -> None:
    play(casino, 4, seed=1)
    with engine(env) as e:
        e.catch_up(40)
    play(casino, 3, seed=2)
    before, at = dump(env, ["round_index"]), positions(env)["round_index"]
    original = RoundIndexProjection.apply
    written: list[int] = []

    def dies_before_commit(self: RoundIndexProjection, curs: Any, items: Any) -> None:
        original(self, curs, items)  # every row of the batch is written...
        written.append(len(items))
        raise RuntimeError("power cut")  # ...and the transaction never commits

    monkeypatch.setattr(RoundIndexProjection, "apply", dies_before_commit)
    with engine(env) as e, pytest.raises(RuntimeError, match="power cut"):
        e.catch_up(25)
    monkeypatch.undo()
    assert written, "the failing batch did write rows before it failed"
    assert dump(env, ["round_index"]) == before
    assert positions(env)["round_index"] == at
    with engine(env) as e:
        e.catch_up(25)
    assert set(positions(env).values()) == {head(env)}
    assert_exact(env, casino)


# The worker in a child process, announcing *inside* each batch's transaction (after its rows
# and tracking row are written, before the commit) the position it is about to commit. Its
# KILLED_AT-th batch then never commits: it waits until the test kills it with SIGKILL.
KILLED_AT = 4
CHILD = """
import json, logging, sys, threading
from itertools import count
from psycopg.sql import SQL
from projections.engine import PROJECTION_CLASSES
from projections.worker import run_worker

batches = count(1)

def announcing(apply):
    def announce(self, curs, items):
        apply(self, curs, items)
        curs.execute(SQL("SELECT notification_id FROM {} WHERE application_name = 'Ledger'")
                     .format(self.view.qualified("tracking")))
        print(self.name, curs.fetchone()["notification_id"], flush=True)
        if next(batches) == int(sys.argv[2]):
            threading.Event().wait()
    return announce

for cls in PROJECTION_CLASSES:
    cls.apply = announcing(cls.apply)
run_worker(json.loads(sys.argv[1]), threading.Event(), batch_size=15, poll_interval_s=0.1,
           log=logging.getLogger("child"))
"""


def test_a_worker_killed_between_its_writes_and_its_commit_resumes_exactly_once(
        env: Env, casino: Casino) -> None:
    play(casino, 6, seed=3)
    with subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(env), str(KILLED_AT)],
                          cwd=ROOT,
                          stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}) as child:
        try:
            assert child.stdout is not None
            announced = [child.stdout.readline().split() for _ in range(KILLED_AT)]
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
    name, uncommitted = announced[-1][0], int(announced[-1][1])
    # The child is gone: its open transaction can only roll back.
    assert positions(env)[name] < uncommitted, "the killed batch must not have committed"
    with engine(env) as e:
        e.catch_up(15)
    assert set(positions(env).values()) == {head(env)}
    assert_exact(env, casino)


def test_two_workers_on_the_same_views_collide_and_never_count_an_event_twice(
        env: Env, casino: Casino, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ReadModels(env).close()  # create the views before the workers race to
    # Each worker's first batch (balances, from 0) waits until the other worker has read its
    # first page too, so both then try to move the balances view from 0 at once: one commits,
    # and the compare-and-set refuses the other, whatever the timing.
    both_read = threading.Barrier(2, timeout=60)
    first_batch_done: set[int] = set()
    process_batch = BatchProjection.process_batch

    def meet_at_the_first_batch(self: BatchProjection[Any], items: Any, start: int,
                                end: int) -> None:
        if threading.get_ident() not in first_batch_done:
            first_batch_done.add(threading.get_ident())
            both_read.wait()
        process_batch(self, items, start, end)

    monkeypatch.setattr(BatchProjection, "process_batch", meet_at_the_first_batch)
    warnings = two_workers(env, casino, caplog, sizes=(3, 7), rounds=6, seed=4)
    monkeypatch.undo()
    assert len(first_batch_done) == 2
    refused_at_0 = [m for m in warnings if m.startswith("balances: the view is no longer at 0: "
                                                        "another worker or a rebuild moved it")]
    assert len(refused_at_0) == 1, warnings
    assert_exact(env, casino)


def test_two_workers_racing_say_so_once_instead_of_at_every_lost_batch(
        env: Env, casino: Casino, caplog: pytest.LogCaptureFixture) -> None:
    # Small batches and a busy ledger: they lost a race about a hundred times a second, each
    # a warning, and retried at once, in step with each other.
    ReadModels(env).close()
    started = time.monotonic()
    warnings = two_workers(env, casino, caplog, sizes=(1, 2), rounds=12, seed=5)
    intervals = 1 + int((time.monotonic() - started) / REPORT_INTERVAL_S)
    lost = [m for m in warnings if "moved it" in m]
    assert len(lost) <= 2 * intervals, lost  # one a worker in each report's interval
    assert_exact(env, casino)


def two_workers(env: Env, casino: Casino, caplog: pytest.LogCaptureFixture, *,
                sizes: tuple[int, int], rounds: int, seed: int) -> list[str]:
    """Two workers (batches of ``sizes``) projecting while ``rounds`` are played, until both
    have read every event; the warnings they logged."""
    stop = threading.Event()
    log = logging.getLogger("pitboss.test.workers")
    workers = [threading.Thread(target=run_worker, args=(env, stop), kwargs={
        "batch_size": size, "poll_interval_s": 0.02, "log": log}) for size in sizes]
    with caplog.at_level(logging.WARNING, logger=log.name):
        for worker in workers:
            worker.start()
        try:
            play(casino, rounds, seed=seed)
            events = head(env)
            wait_until(lambda: min(positions(env).values()) >= events, 30.0, "both workers")
        finally:
            stop.set()
            for worker in workers:
                worker.join(timeout=10)
    assert not any(worker.is_alive() for worker in workers)
    return [r.getMessage() for r in caplog.records
            if r.name == log.name and r.levelno == logging.WARNING]

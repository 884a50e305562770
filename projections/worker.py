"""The projection worker: keeps every projection up to date with the ledger's log.

``run_worker`` is what ``pitboss project`` runs. It applies the log in batches (one
transaction per projection and page, tracking row included: exactly once), so a kill at any
moment loses nothing and counts nothing twice; the next start resumes from the tracking rows.
When it has caught up it waits for the ledger's ``NOTIFY`` (every save sends one) or at most
``poll_interval_s``, so new events are projected within milliseconds, and polling still works
if the ``LISTEN`` connection is lost. Database outages are retried with a capped backoff.
Positions and lags are logged when the worker starts and stops, and every
``REPORT_INTERVAL_S`` in which it projected something.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError
from psycopg.sql import SQL, Identifier

from projections.base import TrackingConflict
from projections.engine import Engine, Reader, ahead_of_the_log
from projections.settings import (
    POLL_INTERVAL_MAX_S,
    POLL_INTERVAL_MIN_S,
    GamingDay,
    ProjectionSetupError,
    check_batch_size,
)
from projections.table_days import TableDaysView, built_gaming_day

REPORT_INTERVAL_S = 10.0
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 10.0
CONFLICT_PAUSE_MAX_S = 0.05  # before reading the positions again after losing a race
WAIT_SLICE_S = 0.25  # how often a wait looks at ``stop``
LISTEN_RETRY_S = 5.0
TRANSIENT = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


def run_worker(env: Mapping[str, str], stop: threading.Event, *, batch_size: int,
               poll_interval_s: float, log: logging.Logger) -> None:
    """Project the ledger's events until ``stop`` is set; see the module docstring."""
    check_batch_size(batch_size)
    if not POLL_INTERVAL_MIN_S <= poll_interval_s <= POLL_INTERVAL_MAX_S:
        raise ValueError(f"poll_interval_s must be from {POLL_INTERVAL_MIN_S} to "
                         f"{POLL_INTERVAL_MAX_S} seconds")
    with Engine(env) as engine:
        unwritable = [name for p in engine.projections for name in p.view.unwritable_parts()]
        if unwritable:  # else it would stop at the first event it cannot write
            raise ProjectionSetupError(
                f"the read models' tables {', '.join(unwritable)} do not exist or may not be "
                "written by this role: start pitboss once as the database owner, which makes "
                "them, and run the roles file again (README: Upgrading)")
        _check_gaming_day(engine, env, log)
        ahead = [said for p in engine.positions() if (said := ahead_of_the_log(p)) is not None]
        if ahead:  # read on from there, it would skip the ids the ledger's next events take
            raise ProjectionSetupError("; ".join(ahead))
        waker = Waker(engine.reader, log)
        answering = True
        try:
            _log_positions(engine, log, "projection worker started")
            answering = _loop(engine, waker, stop, batch_size, poll_interval_s, log)
        finally:
            waker.close()
            if answering:
                _log_positions(engine, log, "projection worker stopped")
            else:  # asking would wait out the connect timeouts again
                log.info("projection worker stopped while the database was not answering; "
                         "it resumes from the positions last committed")


def _loop(engine: Engine, waker: Waker, stop: threading.Event, batch_size: int,
          poll_interval_s: float, log: logging.Logger) -> bool:
    """Project until ``stop``; whether the database was answering then."""
    backoff = BACKOFF_MIN_S
    reported = time.monotonic()
    read = lost = 0  # lost: batches refused since the last report (another worker's turn)
    answering = True
    while not stop.is_set():
        try:
            n, more = engine.step(batch_size)
            backoff, answering = BACKOFF_MIN_S, True
        except TrackingConflict as conflict:
            if not lost:  # then counted: two workers racing lost a hundred a second
                log.warning("%s: another worker or a rebuild moved it; reading the positions "
                            "again", conflict)
            lost += 1
            stop.wait(random.uniform(0, CONFLICT_PAUSE_MAX_S))  # out of step with the other
            answering = _retry(engine.reload, log)
            continue
        except TRANSIENT as error:
            log.warning("the database is not answering (%s); retrying in %.1f s", error, backoff)
            answering = False
            if stop.wait(backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            answering = _retry(engine.reload, log)
            if answering:
                log.info("the database answers again")
            continue
        read += n
        now = time.monotonic()
        if now - reported >= REPORT_INTERVAL_S:
            if read:  # quiet while idle
                _log_positions(engine, log, f"projected {read} events in the last "
                                            f"{now - reported:.0f} s")
            if lost > 1:
                log.warning("%d more batches refused in the last %.0f s: another worker or "
                            "a rebuild moved the same read models (one worker is enough)",
                            lost - 1, now - reported)
            reported, read, lost = now, 0, 0
        if not more:
            waker.wait(poll_interval_s, stop)
    return answering


def _check_gaming_day(engine: Engine, env: Mapping[str, str], log: logging.Logger) -> None:
    """The table/day view keeps the gaming day it was built with; say so if that differs."""
    wanted = GamingDay.from_env(env)
    for projection in engine.projections:
        if isinstance(projection.view, TableDaysView):
            built = built_gaming_day(projection.view)
            if built is not None and not built.counts_as(wanted):
                log.warning("table_days counts gaming days from %s, as its tables were built; "
                            "the settings now say %s: `pitboss rebuild table_days "
                            "--new-gaming-day` applies them",
                            built.describe(), wanted.describe())


def _retry(action: Callable[[], None], log: logging.Logger) -> bool:
    """``action``; whether the database answered."""
    try:
        action()
    except TRANSIENT as error:
        log.warning("the database is still not answering (%s)", error)
        return False
    return True


def _log_positions(engine: Engine, log: logging.Logger, what: str) -> None:
    try:
        positions = engine.positions()
    except TRANSIENT as error:
        log.warning("%s; positions unknown (%s)", what, error)
        return
    log.info("%s; %s", what, "; ".join(
        f"{p['projection']} at {p['position']} of {p['ledger_head']} "
        f"(lag {p['lag_events']} events)" for p in positions))
    for p in positions:  # (refused at the start; moved back while it runs)
        if (ahead := ahead_of_the_log(p)) is not None:
            log.warning("%s", ahead)


class Waker:
    """Wakes the worker when the ledger commits (``LISTEN`` on its channel), else on time."""

    def __init__(self, reader: Reader, log: logging.Logger) -> None:
        self._reader = reader
        self._channel = reader.channel
        self._log = log
        self._conn: psycopg.Connection[Any] | None = None
        self._next_attempt = 0.0
        self._listen()

    def _listen(self) -> psycopg.Connection[Any] | None:
        if self._conn is None and time.monotonic() >= self._next_attempt:
            self._next_attempt = time.monotonic() + LISTEN_RETRY_S
            try:
                conn = self._reader.own_connection()
                conn.execute(SQL("LISTEN {}").format(Identifier(self._channel)))
                self._conn = conn
            except psycopg.Error as error:
                self._log.warning("cannot LISTEN for new events (%s); polling instead", error)
        return self._conn

    def wait(self, timeout_s: float, stop: threading.Event) -> None:
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            slice_s = min(remaining, WAIT_SLICE_S)
            conn = self._listen()
            if conn is None:
                stop.wait(slice_s)
                continue
            try:
                for _ in conn.notifies(timeout=slice_s, stop_after=1):
                    return
            except psycopg.Error:
                self.close()

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

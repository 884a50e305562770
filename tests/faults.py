"""What tests do to a ledger on PostgreSQL that no client can: hold its saves at a barrier,
append events around it through the insert function (as whoever holds the service role's
credentials could), and interrupt a process of its own while it waits in the database."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import StoredEvent

from ledger.aggregates.receipt import Receipt
from ledger.application import GameLedger
from ledger.storage import LedgerRecorder, _insert_parameters


class PausingLedger(GameLedger):
    """Holds every save at a barrier, so two requests decide before either commits."""

    name = "Ledger"  # the same event table as the service, not one named after this class
    barrier: threading.Barrier

    def _save(self, aggregates: Sequence[Aggregate], receipt: Receipt.Created) -> StoredEvent:
        self.barrier.wait(timeout=10)
        return super()._save(aggregates, receipt)


def append_around_the_ledger(app: GameLedger, *events: Any) -> None:
    """Events through the insert function, linked into the chain like any other, that the
    application never decided (domain events, or stored ones as they are)."""
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    stored = [e if isinstance(e, StoredEvent) else app.mapper.to_stored_event(e)
              for e in events]
    with recorder.datastore.get_connection() as conn:
        recorder._append(conn, _insert_parameters(stored))


def undecodable(app: GameLedger, round_id: UUID) -> None:
    """A round event missing every field, appended as the round's next version."""
    version = app.round_state(round_id)["version"]
    append_around_the_ledger(app, StoredEvent(originator_id=round_id,
                                              originator_version=version + 1,
                                              topic="pitboss:Round.StakeSettled", state=b"{}"))


def interrupted_once_waiting(child: subprocess.Popen[str], waiting: Callable[[], bool],
                             what: str) -> str:
    """Ctrl-C (SIGINT) to ``child`` once ``waiting()`` says it is blocked in the database
    (within a minute); its standard error, once it has ended."""
    try:
        deadline = time.monotonic() + 60
        while not waiting():
            assert time.monotonic() < deadline, f"{what} never waited"
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        return child.communicate(timeout=60)[1]
    finally:
        child.kill()

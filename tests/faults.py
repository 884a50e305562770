"""What tests do to a ledger on PostgreSQL that no client can: hold its saves at a barrier, and
append events around it through the insert function (as whoever holds the service role's
credentials could)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
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

    def _save(self, aggregates: Sequence[Aggregate], receipt: Receipt.Created) -> None:
        self.barrier.wait(timeout=10)
        super()._save(aggregates, receipt)


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

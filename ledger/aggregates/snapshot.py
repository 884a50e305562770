"""The snapshot of an aggregate whose events have no end (an account's entries, a table's
rounds), taken every so many events (``GameLedger.snapshotting_intervals``)."""

from __future__ import annotations

from eventsourcing.domain import Snapshot


class LedgerSnapshot(Snapshot):
    """Stored under a topic of pitboss's own, like every event, rather than the library's
    module path (``eventsourcing.domain:Snapshot``, under which earlier versions stored them,
    and which still reads while the library keeps the class there)."""

    TOPIC = "pitboss:Snapshot"

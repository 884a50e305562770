"""The snapshot of an aggregate whose events have no end (an account's entries, a table's
rounds), taken every so many events (``GameLedger.snapshotting_intervals``)."""

from __future__ import annotations

from eventsourcing.domain import Snapshot
from eventsourcing.utils import register_topic


class LedgerSnapshot(Snapshot):
    """Stored under a topic of pitboss's own, like every event, rather than the library's
    module path (``eventsourcing.domain:Snapshot``, under which earlier versions stored them,
    and which still reads while the library keeps the class there)."""

    TOPIC = "pitboss:Snapshot"


# Registered now: the library registers an event class's TOPIC as it defines an aggregate's
# events, which this class is not one of. Unregistered, a process that had not yet written a
# snapshot could not read one (and passed over every snapshot as one that does not verify).
register_topic(LedgerSnapshot.TOPIC, LedgerSnapshot)

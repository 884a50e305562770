"""The aggregates a ledger process has recently used, lent to one request at a time.

A command takes what it needs out of the working set (:meth:`WorkingSet.take`), so no
other thread of the process can see or change the same object meanwhile, and gives it
back only once its save has committed (:meth:`WorkingSet.give`). A command that fails
gives back only copies it made of what it took before changing anything (the accounts,
cheap to copy); what it took may be half-changed, and the next command reads the rest
again from the event store.

An aggregate kept here is exactly the state its version had (events are immutable), but
it may be behind the store: another process may have recorded newer events. The ledger
decides when that matters (:mod:`ledger.application`): a command's save fails on the
event table's primary key if anything it used was behind, and is then decided again on
fresh state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from uuid import UUID

from eventsourcing.domain import Aggregate


class WorkingSet:
    """A thread-safe LRU of aggregates by id, at most ``size`` of them."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a working set holds at least one aggregate")
        self.size = size
        self._items: OrderedDict[UUID, Aggregate] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, aggregate_id: UUID) -> Aggregate | None:
        """The aggregate, removed from the set until given back; None if not held."""
        with self._lock:
            return self._items.pop(aggregate_id, None)

    def give(self, aggregate: Aggregate) -> None:
        """Keep ``aggregate`` unless a newer version of it came back meanwhile."""
        self.give_all((aggregate,))

    def give_all(self, aggregates: Iterable[Aggregate]) -> None:
        """:meth:`give` each of ``aggregates`` in turn, under one acquisition of the lock (a
        command gives back what it read and what it wrote, mostly the same three or four)."""
        items = self._items
        with self._lock:
            for aggregate in aggregates:
                key = aggregate.id
                held = items.get(key)
                if held is None or held.version < aggregate.version:
                    items[key] = aggregate
                items.move_to_end(key)
                while len(items) > self.size:
                    items.popitem(last=False)

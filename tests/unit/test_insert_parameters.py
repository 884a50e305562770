"""The insert function's array parameters, in PostgreSQL's binary array format."""

from __future__ import annotations

import struct
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from ledger import storage
from ledger.storage import _insert_parameters


def events(count: int) -> list[StoredEvent]:
    return [StoredEvent(originator_id=UUID(int=n), originator_version=n + 1,
                        topic="pitboss:Round.Café", state=b"{}" * n) for n in range(count)]


def array(element_oid: int, items: list[bytes]) -> bytes:
    """array_recv's format: dimensions, has nulls, element oid, length, lower bound, then each
    element's length and bytes."""
    out = struct.pack("!iiiii", 1, 0, element_oid, len(items), 1)
    return out + b"".join(struct.pack("!i", len(x)) + x for x in items)


def test_each_array_is_what_postgresql_reads_and_a_bulk_save_leaves_no_layout_behind() -> None:
    kept = 0
    for count in (1, 4, storage.FIXED_WIDTH_CACHED_MAX + 1, 500):
        if count > storage.FIXED_WIDTH_CACHED_MAX and not kept:
            kept = storage._cached_fixed_width.cache_info().currsize
        saved = events(count)
        ids, versions, topics, states = _insert_parameters(saved)
        assert ids == array(2950, [UUID(str(e.originator_id)).bytes for e in saved])
        assert versions == array(20, [e.originator_version.to_bytes(8, "big") for e in saved])
        assert topics == array(25, [e.topic.encode() for e in saved])
        assert states == array(17, [e.state for e in saved])
    # The layouts of a command's saves are kept; a bulk save's (megabytes) are not.
    assert storage._cached_fixed_width.cache_info().currsize == kept > 0

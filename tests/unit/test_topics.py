"""Every stored topic of pitboss resolves in a process that has only imported the ledger."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from eventsourcing.utils import _topic_cache

ROOT = Path(__file__).resolve().parents[2]

# Run apart: in this process, a class's topic may have been registered by some earlier use
# of it (the library registers one when it first names an event's topic), which a fresh
# process reading the store has not made.
_PROBE = """
import ledger.application
from ledger import aggregates
from ledger.aggregates.snapshot import LedgerSnapshot
from eventsourcing.utils import resolve_topic

def classes(cls):
    yield cls
    for value in vars(cls).values():
        if isinstance(value, type) and value.__qualname__.startswith(cls.__qualname__ + "."):
            yield from classes(value)

found = [c for a in (*map(getattr, [aggregates] * len(aggregates.__all__), aggregates.__all__),
                     LedgerSnapshot) for c in classes(a) if "TOPIC" in vars(c)]
print(len(found))
for cls in found:
    try:
        assert resolve_topic(cls.TOPIC) is cls
    except Exception as error:
        print(cls.TOPIC, type(error).__name__)
"""


def test_every_topic_resolves_in_a_fresh_process() -> None:
    # "pitboss:Snapshot" did not: a restarted process passed over every snapshot the last one
    # wrote as one that did not verify, and the balance check called them altered.
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    count, *unresolved = done.stdout.splitlines()
    assert int(count) > 25
    assert unresolved == []


def _classes_reached(obj: object, depth: int = 3) -> Iterator[tuple[str, object]]:
    """The classes the event store library reaches from ``obj`` by a topic's attribute path
    (``topic.Name.Other``, as ``resolve_topic`` follows it), with their paths."""
    yield "", obj
    if depth == 0:
        return
    for name in [n for n in dir(obj) if not n.startswith("__")] + ["__base__", "__class__"]:
        found = getattr(obj, name, None)
        if isinstance(found, type):
            for path, deeper in _classes_reached(found, depth - 1):
                yield f".{name}{path}", deeper


def test_no_topic_of_the_ledger_reads_as_a_posting_but_the_postings_own() -> None:
    # The round check passes over the events under the ledger's topics other than the
    # posting's (postings_that_may_name): none of them, nor any spelling the library
    # resolves from a registered topic by attributes, may read as a posting.
    import ledger.application  # noqa: F401 (every topic registered)
    from ledger.aggregates.account import Account
    from ledger.storage import LEDGER_TOPICS

    prefix = LEDGER_TOPICS.removesuffix("%")
    assert importlib.util.find_spec(prefix.removesuffix(":")) is None  # the registry alone
    registered = [(t, o) for t, o in list(_topic_cache.items()) if t.startswith(prefix)]
    assert len(registered) > 25
    reading_as_a_posting = {topic + path for topic, obj in registered
                            for path, found in _classes_reached(obj) if found is Account.Posted}
    assert reading_as_a_posting == {Account.Posted.TOPIC}

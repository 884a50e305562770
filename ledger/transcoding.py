"""How events become stored bytes and back: JSON as the standard library's encoder writes it,
with less work per call, and a mapper that refuses an event it cannot make whole.

``json.JSONEncoder.encode`` builds a new C encoder (and the closures around it) on every
call, a large share of the cost of encoding one small event. :class:`ReusedEncoder`
builds it once per thread and writes the very same text. :class:`LedgerTranscoder` is
the library's JSON transcoder on it: stored events keep their shape to the byte, and any
transcoder reads them back as before.
"""

from __future__ import annotations

import dataclasses
import functools
import json.encoder
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    JSONTranscoder,
    Mapper,
    MapperDeserialisationError,
    StoredEvent,
)
from eventsourcing.utils import TopicError

from ledger.errors import InvariantBroken

_MAKE_ENCODER: Callable[..., Callable[[Any, int], Any]] | None = getattr(
    json.encoder, "c_make_encoder", None)


class ReusedEncoder:
    """``encoder.encode`` with the C encoder built once per thread: an encoder keeps the
    containers it is inside (its circular-reference check), so threads cannot share one.
    ``encoder`` has no indent (which takes the pure Python path)."""

    def __init__(self, encoder: json.JSONEncoder) -> None:
        self._encoder = encoder
        self._local = threading.local()

    def encode(self, obj: Any) -> str:
        e = self._encoder
        if _MAKE_ENCODER is None:  # pragma: no cover (CPython has the C accelerator)
            return e.encode(obj)
        encode = getattr(self._local, "encode", None)
        if encode is None:
            # What JSONEncoder.iterencode builds on every call, with the same settings.
            encode = self._local.encode = _MAKE_ENCODER(
                {} if e.check_circular else None, e.default,
                json.encoder.encode_basestring_ascii if e.ensure_ascii
                else json.encoder.encode_basestring,
                None, e.key_separator, e.item_separator, e.sort_keys, e.skipkeys, e.allow_nan)
        try:
            return "".join(encode(obj, 0))
        except BaseException:
            # A failure can leave containers in the circular-reference check, where a later
            # call would take them for a loop: the next call gets a new encoder.
            self._local.encode = None
            raise


class LedgerTranscoder(JSONTranscoder):
    """The library's JSON transcoder, encoding through a :class:`ReusedEncoder`, and
    remembering the last time it encoded: the events of one command share their timestamp."""

    def __init__(self) -> None:
        super().__init__()
        self._reused = ReusedEncoder(self.encoder)
        self._last_time: tuple[datetime | None, dict[str, Any]] = (None, {})

    def _encode_obj(self, o: Any) -> dict[str, Any]:
        last = self._last_time  # one read: another thread may replace it, never half of it
        if last[0] is o:
            return last[1]
        encoded = super()._encode_obj(o)
        if type(o) is datetime:  # immutable, so its encoding never changes
            self._last_time = (o, encoded)
        return encoded

    def encode(self, obj: Any) -> bytes:
        return self._reused.encode(obj).encode("utf8")


class CheckedMapper(Mapper[UUID]):
    """The library's mapper, refusing a stored event it cannot make whole: unreadable state,
    an unknown topic, or a field its class needs that the state lacks (the library would
    make the event all the same, and the missing field would fail later, wherever it is
    read). The refusal is :class:`~ledger.errors.InvariantBroken`, naming the event."""

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        try:
            event = super().to_domain_event(stored_event)
        except (MapperDeserialisationError, TopicError) as error:
            raise _undecodable(stored_event, str(error)) from error
        missing = _required_fields(type(event)) - event.__dict__.keys()
        if missing:
            raise _undecodable(stored_event, "it has no " + ", ".join(sorted(missing)))
        return event


def _undecodable(stored: StoredEvent, why: str) -> InvariantBroken:
    return InvariantBroken(f"the stored event {stored.originator_id} v"
                           f"{stored.originator_version} ({stored.topic}) does not decode: "
                           f"{why}")


@functools.cache
def _required_fields(cls: type) -> frozenset[str]:
    """The fields of an event class without a default (an event recorded before a field with
    a default was added reads it from the class)."""
    if not dataclasses.is_dataclass(cls):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(cls)
                     if f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)

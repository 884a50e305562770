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
import re
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, NoReturn
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
    an unknown topic, a topic that is not its class's own ``TOPIC``, the only one pitboss
    writes (the library reads the class's module path as that class too, and
    ``pitboss:Account.Posted.``: a search of the record by topic would miss an event forged
    so), a field its class needs that the state lacks (the library would make
    the event all the same, and the missing field would fail later, wherever it is read), or
    a field whose value is not of its declared kind (an amount that is text, a time that is
    not one). The refusal is :class:`~ledger.errors.InvariantBroken`, naming the event and the
    field: money and cards are checked where they are read, not only where they are written."""

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        try:
            event = super().to_domain_event(stored_event)
        except TopicError as error:
            raise _undecodable(stored_event, "its topic names no kind of event this version of "
                                             "pitboss knows") from error
        except MapperDeserialisationError as error:
            raise _undecodable(stored_event, str(error)) from error
        own = getattr(type(event), "TOPIC", None)
        if own is not None and stored_event.topic != own:
            raise _undecodable(stored_event, "its topic is not the one pitboss writes for its "
                                             f"kind of event, {own}")
        state = vars(event)
        fields = _fields(type(event))
        missing = fields.required - state.keys()
        if missing:
            raise _undecodable(stored_event, "it has no " + ", ".join(sorted(missing)))
        for name, made in fields.filled:
            if name not in state:
                state[name] = made()
        for name, exact in fields.scalars:  # the common case: one comparison each
            if name in state and type(state[name]) is not exact:
                _refuse(stored_event, name, state[name], _SCALARS[exact.__name__])
        for name, kind in fields.containers:
            if name in state and not kind.holds(state[name]):
                _refuse(stored_event, name, state[name], kind)
        return event


def _refuse(stored: StoredEvent, name: str, value: Any, kind: _Kind) -> NoReturn:
    raise _undecodable(stored, f"the field {name} holds {_shown(value)}, not {kind.description}")


def _undecodable(stored: StoredEvent, why: str) -> InvariantBroken:
    return InvariantBroken(f"the stored event {stored.originator_id} v"
                           f"{stored.originator_version} ({stored.topic}) does not decode: "
                           f"{why}")


def _shown(value: Any) -> str:
    shown = json.dumps(value, default=str)
    return shown if len(shown) <= SHOWN_CHARS_MAX else shown[:SHOWN_CHARS_MAX - 1] + "\u2026"


SHOWN_CHARS_MAX = 60  # of a value a refusal quotes


@dataclasses.dataclass(frozen=True)
class _Kind:
    """What a field's declared type allows, and how a refusal says it."""

    holds: Callable[[Any], bool]
    description: str
    plural: str
    exact: type | None = None  # a scalar's one type


_SCALARS = {  # exactly these types: the transcoder makes no subclass of any
    "int": _Kind(lambda v: type(v) is int, "a whole number", "whole numbers", int),
    "str": _Kind(lambda v: type(v) is str, "text", "texts", str),
    "bool": _Kind(lambda v: type(v) is bool, "true or false", "trues or falses", bool),
    "UUID": _Kind(lambda v: type(v) is UUID, "an id", "ids", UUID),
    "datetime": _Kind(lambda v: type(v) is datetime, "a time", "times", datetime),
}
_ITEMS = {**_SCALARS, "Any": _Kind(lambda v: True, "anything", "anything")}
_LIST = re.compile(r"list\[(\w+)\]")
_MAPPING = re.compile(r"dict\[str, (\w+)\]")


def _kind(annotation: Any) -> _Kind | None:
    """The kind an event field's annotation declares; None for one not checked (``Any``
    among them)."""
    if isinstance(annotation, type):
        annotation = annotation.__name__
    if not isinstance(annotation, str):
        return None
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if (found := _LIST.fullmatch(annotation)) and found[1] in _ITEMS:
        item = _ITEMS[found[1]]
        return _Kind(lambda v: type(v) is list and all(map(item.holds, v)),
                     f"a list of {item.plural}", f"lists of {item.plural}")
    if (found := _MAPPING.fullmatch(annotation)) and found[1] in _ITEMS:
        value = _ITEMS[found[1]]
        named = "" if found[1] == "Any" else f" of names to {value.plural}"
        return _Kind(lambda v: type(v) is dict and all(type(k) is str for k in v)
                     and all(map(value.holds, v.values())),
                     f"a mapping{named}", f"mappings{named}")
    return None


@dataclasses.dataclass(frozen=True)
class _Fields:
    required: frozenset[str]  # without a default: an event recorded before a field with a
    #                           default was added reads it from the class
    scalars: tuple[tuple[str, type], ...]
    containers: tuple[tuple[str, _Kind], ...]
    # Defaults, made into the event's state as it is read when an event recorded before the
    # field was added lacks it: a class attribute would give a plain default to a read of the
    # event, but not a default_factory's, nor a round's fact event its fact's (a dataclass
    # field with one cannot precede those without), nor a creation event's to the aggregate's
    # __init__, which takes the fields the event holds.
    filled: tuple[tuple[str, Callable[[], Any]], ...] = ()


_FROM_STORE = frozenset({"originator_id", "originator_version"})


@functools.cache
def _fields(cls: type) -> _Fields:
    if not dataclasses.is_dataclass(cls):
        return _Fields(frozenset(), (), ())
    fields = dataclasses.fields(cls)
    kinds = [(f.name, kind) for f in fields  # (the store gives the originator's id, version)
             if f.name not in _FROM_STORE and (kind := _kind(f.type)) is not None]
    fact = getattr(cls, "fact_class", None)  # a round's fact event (ledger.aggregates.round)
    filled = tuple(_defaults(cls if fact is None else fact))
    return _Fields(
        frozenset(f.name for f in fields if f.default is dataclasses.MISSING
                  and f.default_factory is dataclasses.MISSING) - {n for n, _ in filled},
        tuple((name, kind.exact) for name, kind in kinds if kind.exact is not None),
        tuple((name, kind) for name, kind in kinds if kind.exact is None),
        filled)


def _defaults(cls: type) -> Iterator[tuple[str, Callable[[], Any]]]:
    """The fields of dataclass ``cls`` with a default, each with what makes it."""
    for field in dataclasses.fields(cls):
        if field.default_factory is not dataclasses.MISSING:
            yield field.name, field.default_factory
        elif field.default is not dataclasses.MISSING:  # immutable: dataclasses see to it
            yield field.name, functools.partial(_given, field.default)


def _given(value: Any) -> Any:
    return value

"""The ledger's JSON is the standard library's to the byte, and stays so after a failure."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    StoredEvent,
    Transcoder,
    TranscodingNotRegisteredError,
    UUIDAsHex,
)
from eventsourcing.popo import POPOFactory

from ledger.aggregates.receipt import Receipt
from ledger.application import GameLedger
from ledger.errors import InvariantBroken
from ledger.transcoding import LedgerTranscoder, ReusedEncoder

CORPUS = Path(__file__).parent.parent / "corpus" / "ledger_events_v1.json"


def _registered(transcoder: JSONTranscoder) -> JSONTranscoder:
    for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO()):
        transcoder.register(transcoding)
    return transcoder


def test_every_stored_event_of_the_corpus_is_written_back_byte_for_byte() -> None:
    library, ledger = _registered(JSONTranscoder()), _registered(LedgerTranscoder())
    events = json.loads(CORPUS.read_text())["events"]
    for event in events:
        stored = base64.b64decode(event["state"])
        state = library.decode(stored)
        assert ledger.encode(state) == library.encode(state) == stored


def test_values_of_every_kind_are_written_as_the_library_writes_them() -> None:
    library, ledger = _registered(JSONTranscoder()), _registered(LedgerTranscoder())
    state: dict[str, Any] = {
        "when": datetime(2026, 1, 1, 20, 0, 0, 123456, tzinfo=UTC), "id": UUID(int=7),
        "price": Decimal("1.50"), "text": 'Café "1"\n\u2660', "n": -(2**70), "x": 0.1,
        "nan": float("nan"), "yes": True, "no": False, "none": None, "list": [1, "a", None],
        "tuple": (UUID(int=1), {"nested": [datetime(2026, 1, 1, tzinfo=UTC)]}), "empty": {},
    }
    assert ledger.encode(state) == library.encode(state)
    assert ledger.encode(["top", "level", 1]) == library.encode(["top", "level", 1])


def test_after_a_value_it_cannot_write_the_next_event_is_written_as_usual() -> None:
    ledger = _registered(LedgerTranscoder())
    state: dict[str, Any] = {"inner": [1, 2], "bad": object()}
    with pytest.raises(TranscodingNotRegisteredError):
        ledger.encode(state)
    # The failed call left the state in the encoder's circular-reference check: an encoder
    # used again would take it for a loop.
    del state["bad"]
    assert ledger.encode(state) == b'{"inner":[1,2]}'


def test_a_circular_reference_is_refused_as_the_library_refuses_it() -> None:
    looped: dict[str, Any] = {}
    looped["self"] = looped
    for transcoder in (JSONTranscoder(), LedgerTranscoder()):
        with pytest.raises(ValueError, match="Circular reference"):
            transcoder.encode(looped)


@pytest.mark.parametrize("settings", [
    {"sort_keys": True, "separators": (",", ":"), "default": str},  # request fingerprints
    {"ensure_ascii": False, "check_circular": False, "allow_nan": False, "default": repr},
])
def test_a_reused_encoder_writes_what_json_dumps_writes(settings: dict[str, Any]) -> None:
    value = {"b": [UUID(int=3), "Café \u2660"], "a": {"z": 1, "y": (2, None)}, "c": -1.5}
    reused = ReusedEncoder(json.JSONEncoder(**settings))
    for _ in range(2):
        assert reused.encode(value) == json.dumps(value, **settings)
    assert reused.encode("top") == json.dumps("top", **settings)


def test_events_sharing_a_timestamp_are_written_as_the_library_writes_them() -> None:
    library, ledger = _registered(JSONTranscoder()), _registered(LedgerTranscoder())
    first, second = (datetime(2026, 1, 1, 20, 0, s, tzinfo=UTC) for s in (1, 2))
    for when in (first, first, second, first):
        event = {"timestamp": when, "shoe_id": UUID(int=5), "at": [when]}
        assert ledger.encode(event) == library.encode(event)


class MarkedTranscoder(JSONTranscoder):
    """A transcoder a persistence module of an operator's own might give."""


class MarkedFactory(POPOFactory):
    def transcoder(self) -> Transcoder:
        return MarkedTranscoder()


@pytest.mark.parametrize(("env", "expected"), [
    ({"PERSISTENCE_MODULE": "eventsourcing.popo"}, LedgerTranscoder),
    ({"PERSISTENCE_MODULE": f"{__name__}:MarkedFactory"}, MarkedTranscoder),
    ({"PERSISTENCE_MODULE": "eventsourcing.popo",
      "TRANSCODER_TOPIC": f"{__name__}:MarkedTranscoder"}, MarkedTranscoder),
])
def test_the_ledger_takes_the_transcoder_its_persistence_gives_and_speeds_up_only_json(
        env: dict[str, str], expected: type) -> None:
    ledger = GameLedger(env=env)
    assert type(ledger.mapper.transcoder) is expected
    stored = ledger.mapper.to_stored_event(Receipt.record(
        UUID(int=1), datetime(2026, 1, 1, tzinfo=UTC), "r", "c", "f", {}, "a"))
    assert b'"request_id":"r"' in bytes(stored.state)  # its transcodings are registered
    ledger.close()


def _corpus_event(topic: str) -> StoredEvent:
    event = next(e for e in json.loads(CORPUS.read_text())["events"] if e["topic"] == topic)
    return StoredEvent(originator_id=UUID(event["originator_id"]),
                       originator_version=event["originator_version"], topic=topic,
                       state=base64.b64decode(event["state"]))


@pytest.mark.parametrize(("topic", "field", "value", "said"), [
    ("pitboss:Round.CardDealt", "timestamp", "yesterday", '"yesterday", not a time'),
    ("pitboss:Round.CardDealt", "card", 123, "123, not text"),
    ("pitboss:Round.CardDealt", "face_up", 1, "1, not true or false"),
    ("pitboss:Round.CardDealt", "position", 5.0, "5.0, not a whole number"),
    ("pitboss:Round.StakeSettled", "rate", [1, "1"], '[1, "1"], not a list of whole numbers'),
    ("pitboss:Round.RoundSettled", "results", {"P1": 1.5},
     '{"P1": 1.5}, not a mapping of names to whole numbers'),
    ("pitboss:Round.Created", "rules", None, "null, not a mapping"),
    ("pitboss:Account.Posted", "round_id", "not-an-id", '"not-an-id", not an id'),
])
def test_a_stored_value_not_of_its_fields_kind_is_refused_naming_the_event_and_field(
        topic: str, field: str, value: Any, said: str) -> None:
    mapper = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo"},
                        shoe_key=bytes(32)).mapper
    stored = _corpus_event(topic)
    mapper.to_domain_event(stored)  # as recorded, it decodes
    state = {**json.loads(stored.state), field: value}
    altered = StoredEvent(originator_id=stored.originator_id,
                          originator_version=stored.originator_version, topic=topic,
                          state=json.dumps(state).encode())
    with pytest.raises(InvariantBroken, match=re.escape(
            f"v{stored.originator_version} ({topic}) does not decode: the field {field} "
            f"holds {said}")):
        mapper.to_domain_event(altered)


@pytest.mark.parametrize("topic", ["pitboss:Round.CardSwapped", "elsewhere:Event"])
def test_a_stored_event_of_a_kind_this_version_does_not_know_is_refused_in_a_sentence(
        topic: str) -> None:
    mapper = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo"},
                        shoe_key=bytes(32)).mapper
    stored = _corpus_event("pitboss:Round.CardDealt")
    renamed = StoredEvent(originator_id=stored.originator_id,
                          originator_version=stored.originator_version, topic=topic,
                          state=stored.state)
    with pytest.raises(InvariantBroken, match=re.escape(
            f"({topic}) does not decode: its topic names no kind of event this version of "
            "pitboss knows")):
        mapper.to_domain_event(renamed)

"""Events stored by the first version of the event format still load and replay the same.

``tests/corpus/ledger_events_v1.json`` holds every stored event of a fixed session
(made by ``tests/corpus/make_corpus.py``). A change to an event's shape must keep
these loading, through an upcaster (``class_version`` and ``upcast_v1_v2``), and
the rounds must replay and re-adjudicate to the very same settlements.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import register_topic

from ledger.aggregates.round import Round, fact_event_class
from ledger.application import GameLedger
from ledger.engine import facts as f
from ledger.engine.machine import REASONS_BEFORE
from ledger.errors import InvariantBroken
from tests.corpus.make_corpus import record_session

CORPUS = Path(__file__).parent.parent / "corpus" / "ledger_events_v1.json"


def load_corpus(make_ledger: Callable[..., GameLedger],
                corpus: dict[str, Any] | None = None) -> tuple[GameLedger, dict[str, Any]]:
    corpus = corpus or json.loads(CORPUS.read_text())
    app = make_ledger(shoe_key=bytes.fromhex(corpus["shoe_key_hex"]))
    app.recorder.insert_events([
        StoredEvent(originator_id=UUID(e["originator_id"]),
                    originator_version=e["originator_version"], topic=e["topic"],
                    state=base64.b64decode(e["state"]))
        for e in corpus["events"]])
    return app, corpus


def test_version_1_rounds_replay_to_their_recorded_settlements(make_ledger) -> None:
    app, corpus = load_corpus(make_ledger)
    assert len(corpus["rounds"]) == 6
    for round_id, results in corpus["rounds"].items():
        state = app.round_state(UUID(round_id))
        assert state["results"] == results
        assert app.check_round(UUID(round_id)) == []
        assert len(app.replay(UUID(round_id))) == state["version"]
    for player, total in corpus["balances"].items():
        assert app.balance(player)["total"] == total


def test_version_1_shoes_verify_against_their_commitments(make_ledger) -> None:
    app, corpus = load_corpus(make_ledger)
    shoes = {e["originator_id"] for e in corpus["events"] if e["topic"] == "pitboss:Shoe.Created"}
    assert len(shoes) == 6
    for shoe_id in shoes:
        assert app.shoe(UUID(shoe_id))["verified"]
        assert app.verify_shoe(UUID(shoe_id)) == []


def test_an_event_stored_before_a_fact_field_with_a_default_reads_the_default(
        make_ledger) -> None:
    # A round's fact events took the facts' fields but not their defaults: a field added with
    # one made every round recorded before it undecodable ("it has no face_up").
    corpus = json.loads(CORPUS.read_text())
    defaults = {f"pitboss:Round.{fact.__name__}": dict(_defaults_of(fact))
                for fact in Round.EVENT_FOR_FACT}
    dropped: set[str] = set()
    for event in corpus["events"]:
        state = json.loads(base64.b64decode(event["state"]))
        kept = {k: v for k, v in state.items()
                if k not in defaults.get(event["topic"], {})
                or v != defaults[event["topic"]][k]}
        dropped |= state.keys() - kept.keys()
        event["state"] = base64.b64encode(json.dumps(kept).encode()).decode()
    assert dropped == {"face_up", "prize"}  # the face-up cards, the settlements without one
    app, _ = load_corpus(make_ledger, corpus)
    for round_id, results in corpus["rounds"].items():
        assert app.round_state(UUID(round_id))["results"] == results
        assert app.check_round(UUID(round_id)) == []


def _defaults_of(fact: type) -> Iterator[tuple[str, Any]]:
    for field in dataclasses.fields(fact):
        if field.default is not dataclasses.MISSING:
            yield field.name, field.default
        elif field.default_factory is not dataclasses.MISSING:
            yield field.name, field.default_factory()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Tipped(f.Fact):
    """A fact whose shape changed: version 1 recorded ``cents``, version 2 ``amount`` in
    chips and who was ``tipped``."""

    amount: int
    tipped: str

    class_version = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["amount"] = state.pop("cents") // 100
        state["tipped"] = "dealer"


_TIPPED = fact_event_class(_Tipped)
register_topic(_TIPPED.TOPIC, _TIPPED)


def test_a_fact_event_is_upcast_through_its_facts_class_version(make_ledger) -> None:
    # How a fact's shape evolves is declared on the fact and goes with its event class.
    event_class = _TIPPED
    app = make_ledger()
    old = json.dumps({"timestamp": {"_type_": "datetime_iso",
                                    "_data_": "2026-01-01T20:00:15+00:00"},
                      "actor": "P1", "request_id": "r-1", "cents": 500}).encode()
    round_id = uuid4()
    event = app.mapper.to_domain_event(StoredEvent(
        originator_id=round_id, originator_version=7, topic=event_class.TOPIC, state=old))
    assert event.fact() == _Tipped(amount=5, tipped="dealer")
    stored = app.mapper.to_stored_event(event)  # written today: as version 2, read as it is
    assert json.loads(stored.state)["class_version"] == 2
    assert app.mapper.to_domain_event(stored).fact() == _Tipped(amount=5, tipped="dealer")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _TippedTwice(_Tipped):
    """A fact that extends one whose shape changed, as ``StakeForfeited`` extends
    ``StakeSettled``: its fields are stored in the same shape, and evolve with them."""

    again: int


_TIPPED_TWICE = fact_event_class(_TippedTwice)
register_topic(_TIPPED_TWICE.TOPIC, _TIPPED_TWICE)


def _stored_tip(topic: str, **more: Any) -> StoredEvent:
    """A tip as version 1 stored it (in ``cents``)."""
    return StoredEvent(originator_id=uuid4(), originator_version=7, topic=topic, state=json.dumps(
        {"timestamp": {"_type_": "datetime_iso", "_data_": "2026-01-01T20:00:15+00:00"},
         "actor": "P1", "request_id": "r-1", "cents": 500, **more}).encode())


def test_a_fact_that_extends_another_evolves_with_it(make_ledger) -> None:
    # Its event class took the class_version and upcasts the fact class declared itself, not
    # those it inherits: StakeSettled changed as the README says, and every StakeForfeited
    # stored before did not decode ("it has no ..."), while new ones were stored unversioned.
    app = make_ledger()
    event = app.mapper.to_domain_event(_stored_tip(_TIPPED_TWICE.TOPIC, again=1))
    assert event.fact() == _TippedTwice(amount=5, tipped="dealer", again=1)
    assert json.loads(app.mapper.to_stored_event(event).state)["class_version"] == 2


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Gratuity(f.Fact):
    """A fact renamed: its events keep the topic they were stored under."""

    TOPIC = "pitboss:Round._Gift"
    cents: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _BigGratuity(_Gratuity):
    """A fact extending the renamed one: a topic of its own name, not its parent's."""


_GRATUITY = fact_event_class(_Gratuity)
register_topic(_GRATUITY.TOPIC, _GRATUITY)


def test_a_fact_renamed_keeps_the_topic_it_names(make_ledger) -> None:
    # The topic was always made from the class's name: a fact renamed with its old topic
    # given left every event stored before it undecodable, as a topic pitboss did not know.
    assert (_GRATUITY.TOPIC, fact_event_class(_BigGratuity).TOPIC) \
        == ("pitboss:Round._Gift", "pitboss:Round._BigGratuity")
    event = make_ledger().mapper.to_domain_event(_stored_tip("pitboss:Round._Gift"))
    assert event.fact() == _Gratuity(cents=500)


class _Shelf(Aggregate):
    """An aggregate whose events gained fields with a default after some were stored."""

    TOPIC = "pitboss:Test._Shelf"

    class Created(Aggregate.Created):
        TOPIC = "pitboss:Test._Shelf.Created"
        name: str
        labels: list[str] = dataclasses.field(default_factory=list)

    def __init__(self, name: str, labels: list[str]) -> None:
        self.name, self.labels = name, labels


register_topic(_Shelf.TOPIC, _Shelf)
register_topic(_Shelf.Created.TOPIC, _Shelf.Created)


def test_an_event_stored_before_a_field_with_a_default_factory_reads_the_default(
        make_ledger) -> None:
    # Only a plain default, read from the class, reached an event of an aggregate; and the
    # aggregate's __init__, given the fields the creation event holds, missed the new one
    # ("missing 1 required positional argument"): as if the stored record were broken.
    app = make_ledger()
    shelf_id = uuid4()
    stored = StoredEvent(originator_id=shelf_id, originator_version=1, topic=_Shelf.Created.TOPIC,
                         state=json.dumps({
                             "timestamp": {"_type_": "datetime_iso",
                                           "_data_": "2026-01-01T20:00:15+00:00"},
                             "originator_topic": _Shelf.TOPIC, "name": "top"}).encode())
    event = app.mapper.to_domain_event(stored)
    assert event.labels == []
    shelf = event.mutate(None)
    assert (shelf.id, shelf.name, shelf.labels) == (shelf_id, "top", [])


def test_a_dealt_card_that_is_not_the_next_of_the_revealed_order_is_reported(make_ledger) -> None:
    corpus = json.loads(CORPUS.read_text())
    dealt = next(e for e in corpus["events"] if e["topic"] == "pitboss:Round.CardDealt")
    state = json.loads(base64.b64decode(dealt["state"]))
    state["card"] = "2H" if state["card"] != "2H" else "3H"
    dealt["state"] = base64.b64encode(json.dumps(state).encode()).decode()
    app, _ = load_corpus(make_ledger, corpus)
    findings = app.verify_shoe(UUID(state["shoe_id"]["_data_"]))
    assert len(findings) == 1
    assert f"position {state['position']} dealt {state['card']}" in findings[0]


def as_worded_then(state: str) -> str:
    """An event's state (base64) as the first version wrote it: the settlement reasons
    reworded since (they now cite their rule; the round check takes either), and a posting's
    memo without the void's or the ruling's reason it now carries."""
    raw = base64.b64decode(state)
    for now, then in REASONS_BEFORE.items():
        raw = raw.replace(f'"reason":"{now}"'.encode(), f'"reason":"{then}"'.encode())
    raw = re.sub(rb'("memo":"[^"]*); reason: (?:[^"\\]|\\.)*"', rb'\1"', raw)
    return base64.b64encode(raw).decode()


# The kinds of fact that move chips (ledger.money.movements).
MOVING = {"StakePlaced", "StakeWithdrawn", "HandDoubled", "HandSplit", "DoubleMatched",
          "SplitMatched", "InsurancePlaced", "StakeSettled", "StakeForfeited", "RoundVoided",
          "RulingRecorded"}


def memo_of_moves(state: str) -> str:
    """An event's state (base64) with a posting's memo naming only the kinds of fact that moved
    chips, as postings name them now (the first version named every kind its command
    recorded, cards and decisions too)."""
    def kept(memo: re.Match[bytes]) -> bytes:
        kinds = [k for k in memo[2].decode().split(", ") if k in MOVING]
        return memo[1] + ", ".join(kinds).encode()
    raw = re.sub(rb'("memo":")([A-Za-z, ]*)', kept, base64.b64decode(state))
    return base64.b64encode(raw).decode()


def test_the_session_played_today_records_the_first_versions_events_byte_for_byte() -> None:
    """The event format has not drifted: replaying the corpus session through today's
    ledger stores the very same bytes, but for what a shoe draws at random when it is
    sealed (its salt and the encryption of its order) and what the reveal repeats."""
    stored, today = json.loads(CORPUS.read_text()), record_session()
    random_when_sealed = {"pitboss:Shoe.Created", "pitboss:Shoe.Retired"}
    # Events of a kind the first version did not have come on top of its events, not instead.
    added_since = {"pitboss:RuleSet.Created"}
    today["events"] = [e for e in today["events"] if e["topic"] not in added_since]
    assert [(e["originator_id"], e["originator_version"], e["topic"]) for e in today["events"]] \
        == [(e["originator_id"], e["originator_version"], e["topic"]) for e in stored["events"]]
    changed = [e["topic"] for e, old in zip(today["events"], stored["events"], strict=True)
               if as_worded_then(e["state"]) != memo_of_moves(old["state"])
               and e["topic"] not in random_when_sealed]
    assert changed == []
    assert (today["rounds"], today["balances"]) == (stored["rounds"], stored["balances"])


def test_a_settlement_the_rules_do_not_give_is_reported(make_ledger) -> None:
    corpus = json.loads(CORPUS.read_text())
    settled = next(e for e in corpus["events"] if e["topic"] == "pitboss:Round.StakeSettled"
                   and json.loads(base64.b64decode(e["state"]))["won"] > 0)
    state = json.loads(base64.b64decode(settled["state"]))
    state["won"] += 1  # one chip more than the rate pays
    settled["state"] = base64.b64encode(json.dumps(state).encode()).decode()
    app, _ = load_corpus(make_ledger, corpus)
    findings = app.check_round(UUID(settled["originator_id"]))
    assert len(findings) == 3
    assert f"v{settled['originator_version']}: recorded StakeSettled(" in findings[0]
    assert f"won={state['won']}" in findings[0]
    assert f"won={state['won'] - 1}" in findings[0]
    # And the chips the postings moved, the bettor's and the house's, are not what the
    # altered settlement says.
    assert findings[1].startswith(f"the postings naming this round on {state['bettor']}'s ")
    assert findings[2].startswith("the postings naming this round on the table's house ")
    assert all(f.endswith("chips were posted around the round (R-M4)") for f in findings[1:])


def test_a_field_no_event_class_declares_is_a_finding_of_the_round_check(make_ledger) -> None:
    # A settlement stored with "bonus_paid": the replay and results ignore it, the auditor's
    # view of the events shows it, and the round check passed the round as clean.
    corpus = json.loads(CORPUS.read_text())
    settled = next(e for e in corpus["events"] if e["topic"] == "pitboss:Round.StakeSettled")
    state = json.loads(base64.b64decode(settled["state"]))
    state["bonus_paid"] = 999
    settled["state"] = base64.b64encode(json.dumps(state).encode()).decode()
    app, _ = load_corpus(make_ledger, corpus)
    round_id = UUID(settled["originator_id"])
    assert app.round_state(round_id)["results"] == corpus["rounds"][str(round_id)]
    assert app.check_round(round_id) == [
        f"v{settled['originator_version']}: recorded with bonus_paid, which this version of "
        "pitboss does not read: written by a later version, or around the ledger (R-V2)"]


def unbalanced_corpus() -> tuple[dict[str, Any], UUID]:
    """The corpus with one settlement keeping a chip more than its bettor lost: the house
    gains it from nobody."""
    corpus = json.loads(CORPUS.read_text())
    settled = next(e for e in corpus["events"] if e["topic"] == "pitboss:Round.StakeSettled"
                   and json.loads(base64.b64decode(e["state"]))["lost"] > 0)
    state = json.loads(base64.b64decode(settled["state"]))
    state["lost"] += 1
    settled["state"] = base64.b64encode(json.dumps(state).encode()).decode()
    return corpus, UUID(settled["originator_id"])


def test_a_settlement_that_moves_chips_from_nowhere_is_a_finding(make_ledger) -> None:
    # Balanced chips are checked where money is read as where it is written (R-M4).
    corpus, round_id = unbalanced_corpus()
    app, _ = load_corpus(make_ledger, corpus)
    assert app.check_round(round_id) == [
        "StakeSettled does not move chips to zero (R-M4): the record does not replay, so it "
        "cannot be checked; the hash chain (GET /audit/chain) shows whether it was altered once "
        "stored (not whether it was appended with the service's credentials)"]
    with pytest.raises(InvariantBroken, match="does not balance what was held"):
        app.round_state(round_id)


def test_rules_altered_in_the_record_are_reported_as_such(make_ledger) -> None:
    # Re-run, the altered rules would find the settlement wrong: the finding names the rules.
    corpus = json.loads(CORPUS.read_text())
    created = next(e for e in corpus["events"] if e["topic"] == "pitboss:Round.Created")
    state = json.loads(base64.b64decode(created["state"]))
    state["rules"]["natural_pays"] = [2, 1]
    created["state"] = base64.b64encode(json.dumps(state).encode()).decode()
    app, _ = load_corpus(make_ledger, corpus)
    (finding,) = app.check_round(UUID(created["originator_id"]))
    assert finding.startswith("v1: the rules recorded"), finding
    assert "do not match the content hash" in finding


def _dealt_cards(corpus: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The corpus's dealt-card events, each with its decoded state."""
    return [(e, json.loads(base64.b64decode(e["state"]))) for e in corpus["events"]
            if e["topic"] == "pitboss:Round.CardDealt"]


def _claim(event: dict[str, Any], state: dict[str, Any], position: int, card: str) -> None:
    state["position"], state["card"] = position, card
    event["state"] = base64.b64encode(json.dumps(state).encode()).decode()


def test_a_card_of_the_order_dealt_out_of_its_turn_is_reported(make_ledger) -> None:
    # Each altered card is the revealed order's at the position it claims: only the sequence
    # the shoe recorded (which positions went to which round, in turn) can tell.
    honest, _ = load_corpus(make_ledger)
    for claimed in ("the last", "an earlier"):
        corpus = json.loads(CORPUS.read_text())
        cards = _dealt_cards(corpus)
        first, second = cards[0], cards[1]
        shoe = UUID(first[1]["shoe_id"]["_data_"])
        order = honest.shoe(shoe)["order"]
        event, state = first if claimed == "the last" else second
        position = len(order) - 1 if claimed == "the last" else first[1]["position"]
        given = state["position"]
        _claim(event, state, position, order[position])
        app, _ = load_corpus(make_ledger, corpus)
        findings = app.verify_shoe(shoe)
        assert any(f"as position {position}, but the shoe gave it position {given}" in finding
                   for finding in findings), findings

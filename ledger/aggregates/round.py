"""A round as immutable events: the rules engine's facts, each with who asked and why.

The round aggregate wraps a :class:`~ledger.engine.machine.RoundMachine`. Its
commands run the machine's commands; every fact the machine decides becomes one
stored event of the same name (``pitboss:Round.CardDealt``...) with the fact's
fields plus ``actor`` and ``request_id`` (and ``shoe_id`` on cards, R-H3). Each
event's ``apply`` hands the fact back to the machine, so the state at any
version is the machine fed with the facts up to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.utils import register_topic

from ledger.engine import facts as f
from ledger.engine.machine import RoundMachine
from ledger.errors import InvariantBroken
from ledger.rules import RuleSet, TableLimits

CARD_FACTS = (f.CardDealt, f.WildCardDrawn)


class Round(Aggregate):
    TOPIC = "pitboss:Round"

    class Created(Aggregate.Created):
        """A round started at a table under the rule set in force (R-S1): the rules in full,
        their content hash, the table limits and the shoe it deals from."""

        TOPIC = "pitboss:Round.Created"
        table_id: UUID
        round_no: int
        shoe_id: UUID
        rules: dict[str, Any]
        rules_hash: str
        limits: dict[str, int]
        currency: str
        actor: str
        request_id: str

    class Recorded(Aggregate.Event):
        """Base of the events that carry one fact of the rules engine."""

        TOPIC = "pitboss:Round.Recorded"
        actor: str
        request_id: str
        fact_class = f.Fact  # each concrete event class names its own

        def fact(self) -> f.Fact:
            cls = self.fact_class
            return cls(**{name: getattr(self, name) for name in cls.__dataclass_fields__})

        def apply(self, round_: Round) -> None:
            try:
                round_.assign(self.fact())
            except InvariantBroken as error:  # named where it broke, for the operators' log
                raise InvariantBroken(f"round {self.originator_id} v{self.originator_version} "
                                      f"({self.TOPIC}): {error}") from error

    EVENT_FOR_FACT: ClassVar[dict[type[f.Fact], type[Recorded]]] = {}

    def __init__(self, table_id: UUID, round_no: int, shoe_id: UUID, rules: dict[str, Any],
                 rules_hash: str, limits: dict[str, int], currency: str, actor: str,
                 request_id: str) -> None:
        self.table_id = table_id
        self.currency = currency
        self.round_no = round_no
        self.shoe_id = shoe_id
        self.rules_hash = rules_hash
        self.machine = RoundMachine(RuleSet.from_dict(rules), TableLimits.from_dict(limits))
        self.next_position: int | None = None  # the shoe position after the last card dealt

    def assign(self, fact: f.Fact) -> None:
        """The state one fact describes: what a recorded event's ``apply`` does."""
        self.machine.apply(fact)
        if isinstance(fact, CARD_FACTS):
            self.next_position = fact.position + 1

    def act(self, actor: str, request_id: str, now: datetime,
            command: Callable[[RoundMachine], list[f.Fact]]) -> list[f.Fact]:
        """Run one machine command, recording each fact it decides as an event.

        Each event is made and applied as the library's ``trigger_event`` would (the next
        version, the state its ``apply`` assigns, a pending event), with the fact in hand
        assigned instead of one rebuilt from the event's fields: the same values, at a
        tenth of a decision's time less. A replay rebuilds it from the event.

        The event's fields are given to it all at once, in the order its dataclass
        ``__init__`` assigns them one by one (checked where the event classes are made): the
        same object, its fields in the same order (which the stored JSON follows), in half
        the time."""
        machine = self.machine

        def record(fact: f.Fact) -> None:
            fields: dict[str, Any] = {
                "originator_id": self.id, "originator_version": self.version + 1,
                "timestamp": now, "actor": actor, "request_id": request_id, **fact.to_dict()}
            if isinstance(fact, CARD_FACTS):
                fields["shoe_id"] = self.shoe_id
            event = object.__new__(self.EVENT_FOR_FACT[type(fact)])
            vars(event).update(fields)
            self.assign(fact)
            self.version = event.originator_version
            self.modified_on = now
            self._pending_events.append(event)

        machine._sink = record
        try:
            return command(machine)
        finally:
            machine._sink = machine.apply


def _define_fact_events() -> None:
    """One event class per fact class, fields taken from the fact (one source of truth)."""
    fact_classes = [v for v in vars(f).values()
                    if isinstance(v, type) and issubclass(v, f.Fact) and v is not f.Fact]
    for fact_class in fact_classes:
        event_class = fact_event_class(fact_class)
        register_topic(event_class.TOPIC, event_class)
        setattr(Round, fact_class.__name__, event_class)
        Round.EVENT_FOR_FACT[fact_class] = event_class


def fact_event_class(fact_class: type[f.Fact]) -> type[Round.Recorded]:
    """The event class that records ``fact_class``: its fields, and how its shape evolves
    (``class_version`` and its ``upcast_vN_vM``, static methods from one stored state to the
    next, as the library reads them on an event class), inherited as the fields are: a fact
    that extends another (``StakeForfeited``, ``WildCardDrawn``) stores its fields in the same
    shape. Its defaults are not fields' defaults here (a dataclass field with one cannot
    precede the card facts' ``shoe_id``): an event stored before such a field was added gets
    it as it is read (``CheckedMapper``). Its topic is ``pitboss:Round.<fact>``, or the fact
    class's own ``TOPIC`` (not inherited): a fact renamed keeps the topic its events have."""
    name = fact_class.__name__
    annotations = {fl.name: fl.type for fl in dataclasses.fields(fact_class)}
    if fact_class in CARD_FACTS:
        annotations["shoe_id"] = "UUID"
    evolution = {key: value for klass in reversed(fact_class.__mro__)
                 for key, value in vars(klass).items()
                 if key == "class_version" or key.startswith("upcast_v")}
    namespace: dict[str, Any] = {
        **evolution,
        "__annotations__": annotations,
        "__module__": __name__,
        "__qualname__": f"Round.{name}",
        "__doc__": fact_class.__doc__,
        "TOPIC": vars(fact_class).get("TOPIC", f"pitboss:Round.{name}"),
        "fact_class": fact_class,
    }
    event_class: type[Round.Recorded] = type(name, (Round.Recorded,), namespace)
    order = [fl.name for fl in dataclasses.fields(event_class)]
    if order != ["originator_id", "originator_version", "timestamp", "actor", "request_id",
                 *annotations]:  # what Round.act gives an event, in this order
        raise TypeError(f"Round.{name} has its fields in another order: {order}")
    return event_class


_define_fact_events()

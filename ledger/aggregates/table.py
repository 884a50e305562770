"""A casino table: its rules in force, its shoe, its rounds (R-S1)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from ledger.aggregates.snapshot import LedgerSnapshot
from ledger.errors import InvariantBroken, RuleSetInvalid
from ledger.rules import ADDED_SETTINGS, RuleSet


class Table(Aggregate):
    TOPIC = "pitboss:Table"
    Snapshot = LedgerSnapshot

    class Created(Aggregate.Created):
        """A table opened with its name, currency, rule set and limits."""

        TOPIC = "pitboss:Table.Created"
        name: str
        currency: str
        rules: dict[str, Any]
        rules_hash: str
        limits: dict[str, int]
        actor: str
        request_id: str

    class RulesChanged(Aggregate.Event):
        """New rules for rounds started from now on; past rounds keep theirs (R-S1)."""

        TOPIC = "pitboss:Table.RulesChanged"
        rules: dict[str, Any]
        rules_hash: str
        limits: dict[str, int]
        reason: str
        actor: str
        request_id: str

        def apply(self, table: Table) -> None:
            table.rules, table.rules_hash, table.limits = self.rules, self.rules_hash, self.limits

    class ShoeStarted(Aggregate.Event):
        """A freshly shuffled shoe is now the table's shoe (R-H4)."""

        TOPIC = "pitboss:Table.ShoeStarted"
        shoe_id: UUID
        shoe_no: int
        actor: str
        request_id: str

        def apply(self, table: Table) -> None:
            table.shoe_id, table.shoe_count = self.shoe_id, self.shoe_no

    class RoundStarted(Aggregate.Event):
        TOPIC = "pitboss:Table.RoundStarted"
        round_id: UUID
        round_no: int
        shoe_id: UUID
        actor: str
        request_id: str

        def apply(self, table: Table) -> None:
            table.round_id, table.round_count = self.round_id, self.round_no

    class Closed(Aggregate.Event):
        TOPIC = "pitboss:Table.Closed"
        reason: str
        actor: str
        request_id: str

        def apply(self, table: Table) -> None:
            table.open = False

    class Reopened(Aggregate.Event):
        """The table reopened; ``reason`` may be empty (and is, in events stored before it
        was recorded)."""

        TOPIC = "pitboss:Table.Reopened"
        actor: str
        request_id: str
        reason: str = ""

        def apply(self, table: Table) -> None:
            table.open = True

    def __init__(self, name: str, currency: str, rules: dict[str, Any], rules_hash: str,
                 limits: dict[str, int], actor: str, request_id: str) -> None:
        self.name = name
        self.currency = currency
        self.rules = rules
        self.rules_hash = rules_hash
        self.limits = limits
        self.open = True
        self.shoe_id: UUID | None = None
        self.shoe_count = 0
        self.round_id: UUID | None = None
        self.round_count = 0

    def rule_set(self) -> RuleSet:
        """The rules in force, as recorded; a record that is no rule set was altered (it is
        not the request's fault: no 422 names a field the request did not carry)."""
        try:
            return RuleSet.from_dict(self.rules)
        except (RuleSetInvalid, TypeError, AttributeError) as invalid:
            raise InvariantBroken(f"table {self.name}'s recorded rules do not read as a rule "
                                  f"set ({invalid}): the record was altered") from None

    def summary(self) -> dict[str, Any]:
        # The rules as recorded; a setting added since, its value as the rules played before
        # it (not validated again: a read shows the record, whatever it holds).
        return {"id": str(self.id), "name": self.name, "currency": self.currency,
                "open": self.open, "rules": {**ADDED_SETTINGS, **self.rules},
                "rules_hash": self.rules_hash, "limits": self.limits,
                "shoe_id": str(self.shoe_id) if self.shoe_id else None, "rounds": self.round_count,
                "current_round_id": str(self.round_id) if self.round_id else None,
                "version": self.version}

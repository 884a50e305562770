"""What a rule set's name and version stand for (R-S1).

A round records its rule set by name, version and content hash; an auditor reads the name and
version. So that they say which rules were played, the first table to use a name and version
records the content they stand for, and the ledger refuses other content under them later.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate


class RuleSetRecord(Aggregate):
    TOPIC = "pitboss:RuleSet"

    class Created(Aggregate.Created):
        """A name and version first used, with the rules they stand for from now on."""

        TOPIC = "pitboss:RuleSet.Created"
        name: str
        version: int
        rules: dict[str, Any]
        rules_hash: str
        actor: str
        request_id: str

    def __init__(self, name: str, version: int, rules: dict[str, Any], rules_hash: str,
                 actor: str, request_id: str) -> None:
        self.name = name
        self.version = version
        self.rules = rules
        self.rules_hash = rules_hash

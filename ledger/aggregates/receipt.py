"""Idempotency receipts: one per client request id, saved with the request's effects.

The receipt's id is derived from the request id, so a second save of the same
request fails on the primary key and writes nothing; the ledger then answers
with the first result (same content) or refuses (different content).
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate


class Receipt(Aggregate):
    TOPIC = "pitboss:Receipt"

    class Created(Aggregate.Created):
        """A request was carried out: what it asked (``fingerprint``) and what it returned."""

        TOPIC = "pitboss:Receipt.Created"
        request_id: str
        command: str
        fingerprint: str
        result: dict[str, Any]
        actor: str

    def __init__(self, request_id: str, command: str, fingerprint: str, result: dict[str, Any],
                 actor: str) -> None:
        self.request_id = request_id
        self.command = command
        self.fingerprint = fingerprint
        self.result = result
        self.actor = actor

"""Idempotency receipts: one per client request id, saved with the request's effects.

The receipt's id is derived from the request id, so a second save of the same
request fails on the primary key and writes nothing; the ledger then answers
with the first result (same content) or refuses (different content).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any
from uuid import UUID

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

    @classmethod
    def record(cls, receipt_id: UUID, timestamp: datetime, request_id: str, command: str,
               fingerprint: str, result: dict[str, Any], actor: str) -> Receipt.Created:
        """The receipt's one event, made directly: the ledger only ever saves it, so the
        aggregate ``_create`` would build around it is never used. Its fields are given
        all at once, in the order its dataclass ``__init__`` assigns them one by one (checked
        below): the same object, its fields in the same order (which the stored JSON
        follows), in half the time."""
        event = object.__new__(cls.Created)
        vars(event).update({
            "originator_id": receipt_id, "originator_version": 1, "timestamp": timestamp,
            "originator_topic": cls.TOPIC, "request_id": request_id, "command": command,
            "fingerprint": fingerprint, "result": result, "actor": actor})
        return event

    def __init__(self, request_id: str, command: str, fingerprint: str, result: dict[str, Any],
                 actor: str) -> None:
        self.request_id = request_id
        self.command = command
        self.fingerprint = fingerprint
        self.result = result
        self.actor = actor


if [field.name for field in dataclasses.fields(Receipt.Created)] != [
        "originator_id", "originator_version", "timestamp", "originator_topic", "request_id",
        "command", "fingerprint", "result", "actor"]:  # what Receipt.record gives, in order
    raise TypeError("Receipt.Created has its fields in another order")

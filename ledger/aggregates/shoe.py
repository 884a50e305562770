"""A table's shoe as recorded: commitment first, every card drawn, then the reveal (R-H2), or,
its key lost, its abandonment."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from ledger.errors import InvariantBroken
from ledger.shoe import verify_commitment


class ShoeRecord(Aggregate):
    TOPIC = "pitboss:Shoe"

    class Created(Aggregate.Created):
        """A shuffled shoe, committed before its first card (R-H1, R-H2).

        ``sealed_order`` is the order and salt encrypted under the shoe key
        (:mod:`ledger.sealing`); ``commitment`` is SHA-256 over order and salt.
        """

        TOPIC = "pitboss:Shoe.Created"
        table_id: UUID
        shoe_no: int
        decks: int
        wild_cards: int
        size: int
        cut: int
        commitment: str
        sealing: str
        sealed_order: str
        actor: str
        request_id: str

    class CardsDrawn(Aggregate.Event):
        """Positions ``first`` .. ``first + count - 1`` went to ``round_id`` (R-H3)."""

        TOPIC = "pitboss:Shoe.CardsDrawn"
        round_id: UUID
        first: int
        count: int
        request_id: str

        def apply(self, shoe: ShoeRecord) -> None:
            if self.first != shoe.position:
                raise InvariantBroken(f"shoe {shoe.id} drew position {self.first} while at "
                                      f"{shoe.position}")
            shoe.position += self.count

    class Retired(Aggregate.Event):
        """The shoe is done; its order and salt are revealed for anyone to verify (R-H2)."""

        TOPIC = "pitboss:Shoe.Retired"
        order: list[str]
        salt: str
        reason: str
        actor: str
        request_id: str

        def apply(self, shoe: ShoeRecord) -> None:
            shoe.retired = True
            shoe.revealed_order = list(self.order)
            shoe.salt = self.salt
            shoe.retired_at = self.timestamp
            shoe.retired_reason = self.reason

    class Abandoned(Aggregate.Event):
        """The shoe is done without its reveal: the shoe key that sealed its order is lost,
        so no one can deal from it or reveal it. Its commitment stands; its cards cannot be
        checked against it (R-H2) unless that key is found."""

        TOPIC = "pitboss:Shoe.Abandoned"
        reason: str
        actor: str
        request_id: str

        def apply(self, shoe: ShoeRecord) -> None:
            shoe.retired = True
            shoe.abandoned = True
            shoe.retired_at = self.timestamp
            shoe.retired_reason = self.reason

    def __init__(self, table_id: UUID, shoe_no: int, decks: int, wild_cards: int, size: int,
                 cut: int, commitment: str, sealing: str, sealed_order: str, actor: str,
                 request_id: str) -> None:
        self.table_id = table_id
        self.shoe_no = shoe_no
        self.decks = decks
        self.wild_cards = wild_cards
        self.size = size
        self.cut = cut
        self.commitment = commitment
        self.sealed_order = sealed_order
        self.position = 0
        self.retired = False
        self.abandoned = False  # retired without its reveal: its key lost
        self.revealed_order: list[str] | None = None
        self.salt: str | None = None
        self.retired_at: datetime | None = None
        self.retired_reason: str | None = None

    @property
    def cut_card_out(self) -> bool:
        return self.position >= self.cut

    def public(self) -> dict[str, Any]:
        """What anyone may see: never the order of a live shoe."""
        out: dict[str, Any] = {
            "shoe_id": str(self.id), "table_id": str(self.table_id), "shoe_no": self.shoe_no,
            "size": self.size, "cut": self.cut, "position": self.position,
            "commitment": self.commitment, "committed_at": self.created_on.isoformat(),
            "retired": self.retired,
        }
        if self.retired:
            if self.revealed_order is not None and self.salt is not None:
                out["order"] = self.revealed_order
                out["salt"] = self.salt
                out["verified"] = verify_commitment(self.revealed_order, self.salt,
                                                    self.commitment)
            if self.abandoned:
                out["abandoned"] = True
            if self.retired_at is not None:
                out["retired_at"] = self.retired_at.isoformat()
            if self.retired_reason is not None:
                out["retired_reason"] = self.retired_reason
        return out

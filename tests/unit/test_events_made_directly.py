"""Events the ledger makes without their class's ``__init__`` (Round.act, Receipt.record) are
the objects it would make, their fields in the same order (the stored JSON follows it)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from ledger.aggregates.receipt import Receipt
from ledger.aggregates.round import Round
from ledger.cards import Card
from ledger.rules import CASINO, TableLimits


def test_an_event_act_records_is_what_its_class_makes_of_the_same_fields() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    round_ = Round._create(Round.Created, id=UUID(int=1), timestamp=now, table_id=UUID(int=2),
                           round_no=1, shoe_id=UUID(int=3), rules=CASINO.to_dict(),
                           rules_hash=CASINO.content_hash, limits=TableLimits().to_dict(),
                           currency="EUR", actor="dealer", request_id="r-1")
    round_.act("dealer", "r-2", now, lambda m: m.place_stake("P1", 1, 100))
    round_.act("dealer", "r-3", now, lambda m: m.place_stake("P2", 2, 100))
    cards = iter([(Card(c), n) for n, c in enumerate(["8S", "9H", "TD", "7C", "5D"])])
    round_.act("dealer", "r-4", now, lambda m: m.close_betting(lambda: next(cards)))
    made = round_.collect_events()[1:]
    assert [type(e).__name__ for e in made] == [
        "StakePlaced", "StakePlaced", "BettingClosed", *["CardDealt"] * 5]
    for event in made:
        again = type(event)(**vars(event))
        assert again == event
        assert list(vars(again)) == list(vars(event))  # the stored JSON follows this order


def test_a_receipt_is_what_its_class_makes_of_the_same_fields() -> None:
    receipt = Receipt.record(UUID(int=1), datetime(2026, 1, 1, tzinfo=UTC), "r-1", "hit",
                             "ab" * 32, {"round_id": str(UUID(int=2)), "version": 9}, "P1")
    again = type(receipt)(**vars(receipt))
    assert again == receipt
    assert list(vars(again)) == list(vars(receipt))

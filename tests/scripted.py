"""Scripted rounds for tests: a shoe stacked from a given order (tests only, R-H1).

Production code never builds a shoe from a chosen order; tests do, to play the
worked cases of RULES.md card by card.
"""

from __future__ import annotations

from collections.abc import Iterator

from ledger.cards import Card, is_card
from ledger.engine import facts as f
from ledger.engine.machine import RoundMachine
from ledger.errors import ShoeExhausted
from ledger.rules import RuleSet, TableLimits


class StackedShoe:
    """Deals the given cards in order; positions count from ``start``."""

    def __init__(self, cards: str, start: int = 0) -> None:
        codes = cards.split()
        assert all(is_card(c) for c in codes), f"bad card code in {cards!r}"
        self._cards = iter([Card(c) for c in codes])
        self.position = start

    def draw(self) -> tuple[Card, int]:
        try:
            card = next(self._cards)
        except StopIteration:
            raise ShoeExhausted() from None
        self.position += 1
        return card, self.position - 1

    def left(self) -> list[Card]:
        return list(self._cards)


class Scripted:
    """A round driven by test steps, keeping every fact it produced."""

    def __init__(self, rules: RuleSet, cards: str, limits: TableLimits | None = None) -> None:
        self.m = RoundMachine(rules, limits or TableLimits())
        self.shoe = StackedShoe(cards)
        self.facts: list[f.Fact] = []

    def _log(self, out: list[f.Fact]) -> Scripted:
        self.facts += out
        return self

    def bet(self, bettor: str, box: int, amount: int = 10) -> Scripted:
        return self._log(self.m.place_stake(bettor, box, amount))

    def deal(self) -> Scripted:
        return self._log(self.m.close_betting(self.shoe.draw))

    def hit(self, player: str, box: int, hand: int = 0) -> Scripted:
        return self._log(self.m.hit(player, box, hand, self.shoe.draw))

    def stand(self, player: str, box: int, hand: int = 0) -> Scripted:
        return self._log(self.m.stand(player, box, hand, self.shoe.draw))

    def double(self, player: str, box: int, hand: int = 0) -> Scripted:
        return self._log(self.m.double(player, box, hand, self.shoe.draw))

    def split(self, player: str, box: int, hand: int = 0) -> Scripted:
        return self._log(self.m.split(player, box, hand, self.shoe.draw))

    def answer(self, bettor: str, box: int, hand: int, match: bool) -> Scripted:
        return self._log(self.m.answer(bettor, box, hand, match, self.shoe.draw))

    def surrender(self, player: str, box: int) -> Scripted:
        return self._log(self.m.surrender(player, box))

    def insure(self, bettor: str, amount: int) -> Scripted:
        return self._log(self.m.insure(bettor, amount))

    def even_money(self, bettor: str, box: int) -> Scripted:
        return self._log(self.m.take_even_money(bettor, box))

    def dealer(self) -> Scripted:
        return self._log(self.m.play_dealer(self.shoe.draw))

    def settle(self) -> Scripted:
        return self._log(self.m.settle())

    def finish(self) -> Scripted:
        return self.dealer().settle()

    def settlements(self) -> Iterator[f.StakeSettled]:
        return (x for x in self.facts if isinstance(x, f.StakeSettled))

    def net(self, bettor: str, box: int, hand: int | None = None) -> int:
        """A bettor's net result on a box (all hands unless one is named)."""
        return sum(s.released + s.won - s.held for s in self.settlements()
                   if s.line == f.MAIN and s.bettor == bettor and s.box == box
                   and (hand is None or s.hand == hand))

    def insurance_net(self, bettor: str) -> int:
        return sum(s.released + s.won - s.held for s in self.settlements()
                   if s.line == f.INSURANCE and s.bettor == bettor)

    def outcome(self, bettor: str, box: int, hand: int = 0) -> str:
        (s,) = [s for s in self.settlements()
                if s.line == f.MAIN and s.bettor == bettor and s.box == box and s.hand == hand]
        return s.outcome

    def dealer_cards(self) -> list[str]:
        return list(self.m.dealer)

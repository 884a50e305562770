"""Scripted rounds for tests: a shoe stacked from a given order (tests only, R-H1).

Production code never builds a shoe from a chosen order; tests do, to play the
worked cases of RULES.md card by card.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count
from typing import Any, Self
from uuid import UUID

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
        self._dealt: dict[int, Card] = {}

    def draw(self) -> tuple[Card, int]:
        try:
            card = next(self._cards)
        except StopIteration:
            raise ShoeExhausted() from None
        self._dealt[self.position] = card
        self.position += 1
        return card, self.position - 1

    def dealt(self, position: int) -> Card:
        """The card dealt from ``position`` (to turn a face-down card over)."""
        return self._dealt[position]

    def left(self) -> list[Card]:
        return list(self._cards)


Start = Callable[..., Any]  # (rules, cards, limits=None) -> a Scripted round


class Outcomes:
    """Reading a scripted round's results from its facts."""

    facts: list[f.Fact]
    m: RoundMachine

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

    def dealer(self) -> Self:
        raise NotImplementedError

    def settle(self) -> Self:
        raise NotImplementedError

    def finish(self) -> Self:
        return self.dealer().settle()


class Scripted(Outcomes):
    """A round on the bare round machine, driven by test steps, keeping every fact."""

    def __init__(self, rules: RuleSet, cards: str, limits: TableLimits | None = None) -> None:
        self.m = RoundMachine(rules, limits or TableLimits())
        self.shoe = StackedShoe(cards)
        self.facts: list[f.Fact] = []

    def _log(self, out: list[f.Fact]) -> Self:
        self.facts += out
        return self

    def bet(self, bettor: str, box: int, amount: int = 10) -> Self:
        return self._log(self.m.place_stake(bettor, box, amount))

    def deal(self) -> Self:
        return self._log(self.m.close_betting(self.shoe.draw))

    def hit(self, player: str, box: int, hand: int = 0) -> Self:
        return self._log(self.m.hit(player, box, hand, self.shoe.draw))

    def stand(self, player: str, box: int, hand: int = 0) -> Self:
        return self._log(self.m.stand(player, box, hand, self.shoe.draw))

    def double(self, player: str, box: int, hand: int = 0) -> Self:
        return self._log(self.m.double(player, box, hand, self.shoe.draw))

    def split(self, player: str, box: int, hand: int = 0) -> Self:
        return self._log(self.m.split(player, box, hand, self.shoe.draw))

    def answer(self, bettor: str, box: int, hand: int, match: bool) -> Self:
        return self._log(self.m.answer(bettor, box, hand, match, self.shoe.draw))

    def surrender(self, player: str, box: int) -> Self:
        return self._log(self.m.surrender(player, box))

    def insure(self, bettor: str, amount: int) -> Self:
        return self._log(self.m.insure(bettor, amount))

    def even_money(self, bettor: str, box: int) -> Self:
        return self._log(self.m.take_even_money(bettor, box))

    def dealer(self) -> Self:
        return self._log(self.m.play_dealer(self.shoe.draw, self.shoe.dealt))

    def settle(self) -> Self:
        return self._log(self.m.settle())


class SteeredShuffle:
    """A ``randbelow`` that makes the production Fisher–Yates shuffle deal ``prefix`` first.

    The ledger shuffles every shoe itself (R-H1); tests that must play a worked case
    through it hand it this instead of ``secrets.randbelow``. It replays the shuffle
    on its own copy of the unshuffled shoe and, at each step, picks the index of the
    card the target order wants in that place. Each new shoe takes the next prefix
    from ``prefixes`` (then an arbitrary order).
    """

    def __init__(self, *prefixes: str) -> None:
        self._prefixes = [p.split() for p in prefixes]
        self._cards: list[str] = []
        self._target: list[str] = []
        self._next_bound = 0

    def __call__(self, bound: int) -> int:
        if bound != self._next_bound:  # a new shoe starts shuffling
            self._start(bound)
        i = bound - 1
        j = self._cards.index(self._target[i], 0, i + 1)
        self._cards[i], self._cards[j] = self._cards[j], self._cards[i]
        self._next_bound = bound - 1
        return j

    def _start(self, size: int) -> None:
        from ledger.cards import STANDARD_DECK, WILD

        decks, wild = divmod(size, 52)
        self._cards = [str(c) for c in STANDARD_DECK] * decks + [str(WILD)] * wild
        prefix = self._prefixes.pop(0) if self._prefixes else []
        rest = list(self._cards)
        for card in prefix:
            rest.remove(card)
        self._target = prefix + rest


class LedgerScripted(Outcomes):
    """The same test steps through the GameLedger: every step is a use case with its own
    request id, and results are read back from the stored events."""

    def __init__(self, ledger: Any, rules: RuleSet, limits: TableLimits | None = None) -> None:
        from ledger.aggregates.round import Round

        self._recorded = Round.Recorded
        self.app = ledger
        self._ids = count(1)
        self.table = ledger.open_table(self._rid(), "pit boss", "T", rules, limits)
        self.round: UUID = ledger.start_round(self._rid(), "dealer", self.table)
        self._players: set[str] = set()

    def _rid(self) -> str:
        return f"step-{next(self._ids)}"

    @property
    def facts(self) -> list[f.Fact]:  # type: ignore[override]
        return [e.fact() for e in self.app.events.get(self.round)
                if isinstance(e, self._recorded)]

    @property
    def m(self) -> RoundMachine:  # type: ignore[override]
        machine: RoundMachine = self.app.repository.get(self.round).machine
        return machine

    def _do(self, use_case: str, *args: Any) -> Self:
        getattr(self.app, use_case)(self._rid(), "dealer", self.round, *args)
        return self

    def bet(self, bettor: str, box: int, amount: int = 10) -> Self:
        if bettor not in self._players:
            self.app.open_account(self._rid(), "cashier", bettor)
            self.app.buy_in(self._rid(), "cashier", bettor, 100_000)
            self._players.add(bettor)
        return self._do("place_stake", bettor, box, amount)

    def deal(self) -> Self:
        return self._do("deal")

    def hit(self, player: str, box: int, hand: int = 0) -> Self:
        return self._do("hit", player, box, hand)

    def stand(self, player: str, box: int, hand: int = 0) -> Self:
        return self._do("stand", player, box, hand)

    def double(self, player: str, box: int, hand: int = 0) -> Self:
        return self._do("double", player, box, hand)

    def split(self, player: str, box: int, hand: int = 0) -> Self:
        return self._do("split", player, box, hand)

    def answer(self, bettor: str, box: int, hand: int, match: bool) -> Self:
        return self._do("answer", bettor, box, hand, match)

    def surrender(self, player: str, box: int) -> Self:
        return self._do("surrender", player, box)

    def insure(self, bettor: str, amount: int) -> Self:
        return self._do("insure", bettor, amount)

    def even_money(self, bettor: str, box: int) -> Self:
        return self._do("even_money", bettor, box)

    def dealer(self) -> Self:
        return self._do("play_dealer")

    def settle(self) -> Self:
        return self._do("settle")

"""Cards, ranks and hand values (R-G1, R-W1).

A card is a short string code so that it is cheap to compare, hash and store in
an event as it is: rank then suit (``"AS"``, ``"TD"``, ``"7C"``), and ``"W"`` for
the wild card. Ranks: ``A 2 3 4 5 6 7 8 9 T J Q K``; suits: ``S H D C``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NewType

Card = NewType("Card", str)

RANKS = "A23456789TJQK"
SUITS = "SHDC"
WILD = Card("W")
# A card dealt face down, as its deal is recorded: where it went and its shoe position, not its
# face, which stays the shoe's secret until the card is turned over (a hole card's reveal).
HIDDEN = Card("hidden")
STANDARD_DECK: tuple[Card, ...] = tuple(Card(r + s) for s in SUITS for r in RANKS)

_VALUE = {Card(r + s): min(RANKS.index(r) + 1, 10) for r in RANKS for s in SUITS}
SUIT_SYMBOLS = {"S": "\u2660", "H": "\u2665", "D": "\u2666", "C": "\u2663"}


def is_card(code: str) -> bool:
    """True for the code of a real card or the wild card."""
    return code == WILD or code in _VALUE


def rank(card: Card) -> str:
    """The rank character, or ``"W"`` for the wild card."""
    return card[0]


def suit(card: Card) -> str:
    """The suit character; the wild card has none (``""``)."""
    return card[1:]


def point_value(card: Card) -> int:
    """Face value with the ace as 1 and every ten-value card as 10 (R-G1).

    The wild card has no point value of its own (it makes its hand 21, R-W1).
    """
    return _VALUE[card]


def is_ace(card: Card) -> bool:
    return card[0] == "A"


def is_ten_value(card: Card) -> bool:
    return card != WILD and _VALUE[card] == 10


def hand_total(cards: Iterable[Card]) -> tuple[int, bool]:
    """The best total of a hand and whether it is soft (R-G1, R-W1).

    Returns ``(total, soft)``. A hand holding a wild card is worth exactly 21
    and is never soft. A soft total counts one ace as 11.
    """
    total = 0
    aces = False
    for card in cards:
        if card == WILD:
            return 21, False
        value = _VALUE[card]
        total += value
        if value == 1:
            aces = True
    if aces and total <= 11:
        return total + 10, True
    return total, False


def is_two_card_21(cards: Sequence[Card]) -> bool:
    """An ace and a ten-value card as exactly two cards (no wild card)."""
    if len(cards) != 2 or WILD in cards:
        return False
    a, b = cards
    return (is_ace(a) and is_ten_value(b)) or (is_ace(b) and is_ten_value(a))


def describe(card: Card) -> str:
    """Human form for terminals and replays: ``7♠``, ``10♦``, ``wild``."""
    if card == WILD:
        return "wild"
    r = "10" if card[0] == "T" else card[0]
    return r + SUIT_SYMBOLS[card[1]]

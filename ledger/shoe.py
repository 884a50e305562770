"""The shoe: an unbiased shuffle, the cut card and the commitment (R-H1..R-H4).

The ledger shuffles with :func:`fresh_order` (``secrets.randbelow`` unless a test steers it,
Fisher–Yates) and places the cut with :func:`cut_position`; :meth:`Shoe.shuffle` does both at
once, for tests and benchmarks. A shoe is rebuilt from a recorded order when the ledger
resumes a stored shoe; the round check re-deals a round's recorded cards without one
(:mod:`ledger.engine.readjudicate`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import Counter
from collections.abc import Callable, Sequence

from ledger.cards import STANDARD_DECK, WILD, Card, is_card
from ledger.errors import ShoeExhausted

COMMITMENT_SCHEME = "pitboss-shoe-v1"
SALT_BYTES = 32


def fresh_order(decks: int, wild_cards: int,
                randbelow: Callable[[int], int] = secrets.randbelow) -> list[Card]:
    """N decks plus W wild cards, shuffled by Fisher–Yates over ``randbelow`` (R-H1).

    ``randbelow(n)`` must return a uniform integer in ``[0, n)``; the default is
    the operating system's CSPRNG, which has no modulo bias.
    """
    cards = list(STANDARD_DECK) * decks + [WILD] * wild_cards
    for i in range(len(cards) - 1, 0, -1):
        j = randbelow(i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def cut_position(size: int, penetration_percent: int) -> int:
    """The position of the cut card: the first position not dealt in a new round."""
    return size * penetration_percent // 100


def deal_size(boxes: int, hole_card: bool) -> int:
    """The cards the deal takes with every one of ``boxes`` boxes staked: two a box, and the
    dealer's one, or two with a hole card (R-G2). A round starts only when that many are left
    before the cut card (R-H4)."""
    return 2 * boxes + (2 if hole_card else 1)


def canonical_order(order: Sequence[Card]) -> bytes:
    """The encoding a commitment covers: the card codes joined by commas."""
    return ",".join(order).encode("ascii")


def commitment(order: Sequence[Card], salt: bytes) -> str:
    """SHA-256 over the scheme name, the salt and the canonical order (R-H2), hex."""
    digest = hashlib.sha256()
    digest.update(COMMITMENT_SCHEME.encode("ascii") + b"\n")
    digest.update(salt.hex().encode("ascii") + b"\n")
    digest.update(canonical_order(order))
    return digest.hexdigest()


def verify_commitment(order: Sequence[str], salt_hex: str, expected: str) -> bool:
    """True when a revealed order and salt produce the recorded commitment."""
    if not all(is_card(c) for c in order) or not expected.isascii():
        return False
    try:
        salt = bytes.fromhex(salt_hex)
    except ValueError:
        return False
    actual = commitment([Card(c) for c in order], salt)
    return hmac.compare_digest(actual, expected)


def composition_findings(order: Sequence[str], decks: int, wild_cards: int,
                         size: int) -> list[str]:
    """R-H1: what a revealed order holds besides ``decks`` full decks and ``wild_cards`` wild
    cards, ``size`` in all. A commitment proves the order was fixed before the first card,
    not that it was a fair shoe: one sealed stacked would verify."""
    findings = []
    if len(order) != size:
        findings.append(f"the revealed order holds {len(order)} cards; the shoe was recorded "
                        f"with {size} (R-H1)")
    expected: Counter[str] = Counter([*STANDARD_DECK * decks, *[WILD] * wild_cards])
    held: Counter[str] = Counter(order)
    differ = sorted(card for card in expected.keys() | held.keys()
                    if held[card] != expected[card])
    if differ:
        shown = ", ".join(f"{card} {held[card]} times, not {expected[card]}"
                          for card in differ[:COMPOSITION_SHOWN_MAX])
        more = len(differ) - COMPOSITION_SHOWN_MAX
        findings.append(f"the revealed order is not {decks} decks and {wild_cards} wild cards "
                        f"(R-H1): {shown}" + (f", and {more} other cards" if more > 0 else ""))
    return findings


COMPOSITION_SHOWN_MAX = 8  # cards a composition finding names


def new_salt() -> bytes:
    return secrets.token_bytes(SALT_BYTES)


class Shoe:
    """Cards in a fixed order with a position and a cut card."""

    __slots__ = ("_order", "cut", "position")

    def __init__(self, order: Sequence[Card], cut: int, position: int = 0) -> None:
        if not 0 <= position <= len(order) or not 0 < cut <= len(order):
            raise ValueError("shoe position or cut card out of range")
        self._order = tuple(order)
        self.cut = cut
        self.position = position

    @classmethod
    def shuffle(cls, decks: int, wild_cards: int, penetration_percent: int,
                randbelow: Callable[[int], int] = secrets.randbelow) -> Shoe:
        order = fresh_order(decks, wild_cards, randbelow)
        return cls(order, cut_position(len(order), penetration_percent))

    @property
    def size(self) -> int:
        return len(self._order)

    @property
    def remaining(self) -> int:
        return len(self._order) - self.position

    @property
    def cut_card_out(self) -> bool:
        """True once the cut card is reached: no new round starts from this shoe (R-H4)."""
        return self.position >= self.cut

    def draw(self) -> tuple[Card, int]:
        """The next card and its position; :class:`ShoeExhausted` when none is left."""
        position = self.position
        if position >= len(self._order):
            raise ShoeExhausted()
        self.position = position + 1
        return self._order[position], position

    def dealt(self, position: int) -> Card:
        """The card dealt from ``position``, to turn over a card dealt face down: only one
        already dealt (the order ahead stays secret)."""
        if not 0 <= position < self.position:
            raise ValueError(f"position {position} of the shoe has not been dealt")
        return self._order[position]

    def reveal(self) -> tuple[Card, ...]:
        """The whole order, as tests read it. The ledger reveals a retired shoe (R-H2) from
        its sealed order, which the shoe's record keeps."""
        return self._order

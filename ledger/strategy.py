"""Basic strategy for the ``casino`` preset (RULES.md R-S2, R-G, R-C).

The rules it is built for: 6 decks, dealer stands on soft 17, no hole card with the European
rule (a dealer natural takes the original stake and every double and split, R-G7: "ENHC"),
blackjack 3:2, double on any first two cards, double after split (not on split aces), up to
3 hands, split aces once with one card each, and surrender before the first post-deal card,
never against an ace (R-C1). With no hole card, surrender against a ten is *early* surrender:
it is decided before the dealer's second card, so it avoids the dealer's naturals too.

Source. The tables follow the Wizard of Odds (Michael Shackelford, wizardofodds.com) basic
strategy for 4 to 8 decks, dealer stands on soft 17, double after split, with the changes his
"no hole card" strategy makes for the European rule: hit 11 and 10 against a ten or an ace,
hit 8,8 against a ten or an ace, hit A,A against an ace. They were written from knowledge of
those published charts, not copied from the page, and were not checked cell by cell against
it. The ENHC changes above were checked against one secondary source only, the European-rules
note of red-dog-poker.info/blackjack_basic_strategy3.html ("do not split or double down against
a dealer's ace, do not double down against a dealer 10, and do not split a pair of 8's against
a dealer's 10").

The surrender cells are not copied from a published chart either. They are the early-surrender
entries that follow from the no-hole-card expectations (surrender when playing on loses more
than half the stake), and from memory they agree with the usual early-surrender tables: hard
14-16 against a ten (7,7 and 8,8 included), hard 16 (not 8,8) against a 9. An ace upcard never
offers surrender here, so those cells read "hit".

The charts are strings, one row per total and one column per upcard (2..10, A), parsed once at
import into a dict keyed by ``(kind, total, upcard_value)`` whose values are the plays to try
in order; a decision is then one dict lookup and a scan of a few plays.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ledger.cards import WILD, Card, hand_total, point_value
from ledger.plays import Play

__all__ = ["basic_strategy", "choose"]

# Chart legend: the plays to try, first legal one wins. "Dh" reads "double, else hit".
CODES: dict[str, tuple[Play, ...]] = {
    "H": (Play.HIT,),
    "S": (Play.STAND,),
    "Dh": (Play.DOUBLE, Play.HIT),
    "Ds": (Play.DOUBLE, Play.STAND),
    "Rh": (Play.SURRENDER, Play.HIT),
    "Rs": (Play.SURRENDER, Play.STAND),
}
# Last resort when a chart's plays are all illegal, so the answer is always a legal play.
_LAST_RESORT = (Play.STAND, Play.HIT, Play.DOUBLE, Play.SURRENDER, Play.SPLIT)

# Columns are the upcard's point value; the ace (1) comes last, as printed charts show it.
_UPCARDS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 1)

# Rows: a total, or an inclusive range "lo-hi" of totals that play alike.
_HARD = """
        2  3  4  5  6  7  8  9  T  A
  4-8   H  H  H  H  H  H  H  H  H  H
  9     H  Dh Dh Dh Dh H  H  H  H  H
  10    Dh Dh Dh Dh Dh Dh Dh Dh H  H
  11    Dh Dh Dh Dh Dh Dh Dh Dh H  H
  12    H  H  S  S  S  H  H  H  H  H
  13    S  S  S  S  S  H  H  H  H  H
  14    S  S  S  S  S  H  H  H  Rh H
  15    S  S  S  S  S  H  H  H  Rh H
  16    S  S  S  S  S  H  H  Rh Rh H
  17-20 S  S  S  S  S  S  S  S  S  S
"""

_SOFT = """
        2  3  4  5  6  7  8  9  T  A
  12    H  H  H  H  H  H  H  H  H  H
  13-14 H  H  H  Dh Dh H  H  H  H  H
  15-16 H  H  Dh Dh Dh H  H  H  H  H
  17    H  Dh Dh Dh Dh H  H  H  H  H
  18    S  Ds Ds Ds Ds S  S  H  H  H
  19-20 S  S  S  S  S  S  S  S  S  S
"""

# Pairs by the point value of one card (A = 1). "P" splits; "." plays the pair as its total,
# which is also what a "P" cell falls back to when the split is not legal.
_PAIRS = """
        2  3  4  5  6  7  8  9  T  A
  1     P  P  P  P  P  P  P  P  P  .
  2-3   P  P  P  P  P  P  .  .  .  .
  4     .  .  .  P  P  .  .  .  .  .
  5     .  .  .  .  .  .  .  .  .  .
  6     P  P  P  P  P  .  .  .  .  .
  7     P  P  P  P  P  P  .  .  .  .
  8     P  P  P  P  P  P  P  P  .  .
  9     P  P  P  P  P  .  P  P  .  .
  10    .  .  .  .  .  .  .  .  .  .
"""

Key = tuple[str, int, int]  # (kind: "hard" | "soft" | "pair", total or pair value, upcard value)


def _rows(chart: str) -> dict[int, list[str]]:
    """Parse a chart into {total: [cell per upcard in _UPCARDS order]}."""
    rows: dict[int, list[str]] = {}
    for line in chart.strip().splitlines()[1:]:
        label, *cells = line.split()
        if len(cells) != len(_UPCARDS):
            raise ValueError(f"chart row {label!r} has {len(cells)} cells")
        lo, _, hi = label.partition("-")
        for total in range(int(lo), int(hi or lo) + 1):
            rows[total] = cells
    return rows


def _with_last_resort(plays: tuple[Play, ...]) -> tuple[Play, ...]:
    return plays + tuple(p for p in _LAST_RESORT if p not in plays)


def _build() -> dict[Key, tuple[Play, ...]]:
    table: dict[Key, tuple[Play, ...]] = {}
    for kind, chart in (("hard", _HARD), ("soft", _SOFT)):
        for total, cells in _rows(chart).items():
            for up, code in zip(_UPCARDS, cells, strict=True):
                table[kind, total, up] = _with_last_resort(CODES[code])
    for value, cells in _rows(_PAIRS).items():
        as_total = ("soft", 12) if value == 1 else ("hard", 2 * value)
        for up, code in zip(_UPCARDS, cells, strict=True):
            unsplit = table[(*as_total, up)]
            table["pair", value, up] = (Play.SPLIT, *unsplit) if code == "P" else unsplit
    return table


_TABLE = _build()
# A hand on 21, on the wild card or bust has ended (R-G3, R-G4, R-W1): it only stands.
_ENDED = _with_last_resort((Play.STAND,))
# A wild upcard makes the dealer 21 at once (`casino_wild`, R-X10): standing below 21 always
# loses, so surrender, else hit toward a push at 21.
_VS_DEALER_21 = _with_last_resort(CODES["Rh"])
_HIT_FIRST = _with_last_resort(CODES["H"])


def _first_legal(plays: tuple[Play, ...], legal: Collection[Play]) -> Play:
    for play in plays:
        if play in legal:
            return play
    raise ValueError("no legal play offered")


def basic_strategy(cards: Sequence[Card], upcard: Card, legal: Collection[Play]) -> Play:
    """The basic-strategy play for ``cards`` against ``upcard``, chosen from ``legal``.

    ``legal`` is what the table allows for this hand right now (R-C1..R-C3); the answer is
    always one of them: a chart cell's first legal play, else stand, hit, double, surrender,
    split in that order. A hand of fewer than two cards (a split hand awaiting its card) hits.
    Raises ``ValueError`` if ``legal`` is empty.
    """
    if WILD in cards:
        return _first_legal(_ENDED, legal)
    total, soft = hand_total(cards)
    if total >= 21:
        return _first_legal(_ENDED, legal)
    if upcard == WILD:
        return _first_legal(_VS_DEALER_21, legal)
    if len(cards) < 2:
        return _first_legal(_HIT_FIRST, legal)
    up = point_value(upcard)
    if len(cards) == 2 and point_value(cards[0]) == point_value(cards[1]):
        return _first_legal(_TABLE["pair", point_value(cards[0]), up], legal)
    return _first_legal(_TABLE["soft" if soft else "hard", total, up], legal)


def choose(code: str, legal: Collection[Play]) -> Play:
    """Resolve a chart code (a key of ``CODES``) against the legal plays, as the charts do."""
    return _first_legal(_with_last_resort(CODES[code]), legal)


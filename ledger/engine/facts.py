"""The facts a round records, in the order they happen.

Each fact is a past-tense, immutable record holding every input of its
decision (the card and its shoe position, amounts, the bettor). Facts hold only
JSON types (str, int, bool, lists, dicts) so they can be stored as they are.
:meth:`ledger.engine.machine.RoundMachine.apply` is the only place that turns
facts into state; the commands of the machine decide which facts happen.

Places: ``box`` is a box number (1..N) and ``hand`` an index within the box
(0 = the original hand, splits to its right). The dealer is box 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEALER = 0

# Outcomes of a settled stake.
WON = "won"
LOST = "lost"
PUSHED = "pushed"
SURRENDERED = "surrendered"
FORFEITED = "forfeited"
EVEN_MONEY = "even_money"
MAIN = "main"
INSURANCE = "insurance"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True, kw_only=True)
class StakePlaced(Fact):
    bettor: str
    box: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StakeWithdrawn(Fact):
    bettor: str
    box: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BettingClosed(Fact):
    players: list[str]
    boxes: list[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class CardDealt(Fact):
    """R-H3: the card, its shoe position, where it went and whether face up."""

    card: str
    position: int
    box: int
    hand: int
    face_up: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class WildCardDrawn(CardDealt):
    """A wild card dealt (R-W1); forfeitures it causes follow as their own facts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HoleCardRevealed(Fact):
    card: str
    position: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandHit(Fact):
    player: str
    box: int
    hand: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandStood(Fact):
    player: str
    box: int
    hand: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandDoubled(Fact):
    """The owner doubled; ``amount`` is the owner's extra stake (R-C2)."""

    player: str
    box: int
    hand: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandSplit(Fact):
    """The owner split; the new hand is ``new_hand``, right of ``hand`` (R-C3, R-X4)."""

    player: str
    box: int
    hand: int
    new_hand: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DoubleMatched(Fact):
    bettor: str
    box: int
    hand: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DoubleDeclined(Fact):
    bettor: str
    box: int
    hand: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitMatched(Fact):
    bettor: str
    box: int
    hand: int
    new_hand: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitDeclined(Fact):
    bettor: str
    box: int
    hand: int


@dataclass(frozen=True, slots=True, kw_only=True)
class InsurancePlaced(Fact):
    bettor: str
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BoxSurrendered(Fact):
    player: str
    box: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StakeSettled(Fact):
    """One stake ends (R-M2): ``held`` splits into ``released`` (back to the bettor) and
    ``lost`` (to the house); ``won`` is paid by the house on top. ``rate`` is the ratio
    applied to the staked amount, ``remainder`` what rounding down to the table's
    minimum unit took off the exact amount (R-M2, R-X5), in minor units as ``[num, den]``:
    a fraction of one unit, or several whole units when the minimum unit is above 1.
    ``line`` is ``"main"`` for a stake on a hand and ``"insurance"`` for an insurance bet
    (box 0, hand 0)."""

    line: str
    bettor: str
    box: int
    hand: int
    outcome: str
    held: int
    released: int
    lost: int
    won: int
    rate: list[int]
    remainder: list[int]
    reason: str
    prize: str = ""  # "777_mixed", "777_suited" or "678_suited" when a prize was paid


@dataclass(frozen=True, slots=True, kw_only=True)
class StakeForfeited(StakeSettled):
    """A main stake taken by the house because another player drew a wild card (R-W2)."""

    cause_box: int
    cause_player: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DealerFinished(Fact):
    total: int
    natural: bool
    bust: bool
    cards: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundSettled(Fact):
    """The end of a round with its totals; they must satisfy R-M4."""

    staked: int
    returned: int
    house_result: int
    results: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundVoided(Fact):
    """R-V1, R-X13: every stake returned. ``released`` is what each bettor still had held;
    ``reversals`` undo each bettor's settled results so far (positive: the house pays)."""

    reason: str
    released: dict[str, int]
    reversals: dict[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShoeAbandoned(Fact):
    """The round's shoe was abandoned, the key that sealed its order lost: no card can be
    dealt from it. The round takes no more stakes or decisions: a manager voids it (R-V1), or,
    once the dealer has finished, it is settled."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RulingRecorded(Fact):
    """R-V2: a manager's correction of a settled round, by compensating amounts."""

    reason: str
    corrects: list[int]
    adjustments: dict[str, int]

"""What a round fact does to the money on a table, in the terms of a casino's reports.

The chip movements come from :func:`ledger.money.movements`, the very function that
posts them to the accounts, so the reports and the balances cannot disagree about a fact.
They are summed into four figures (all minor units):

* ``staked``: chips put at risk (stakes, doubles, splits, matches, insurance), less stakes
  withdrawn while betting was open;
* ``paid``: chips handed back to bettors: released stakes, winnings, void refunds and
  reversals, ruling adjustments (negative when a ruling takes chips back);
* ``house``: the house's result: stakes lost minus winnings paid, less reversals and
  adjustments;
* ``held``: the change in chips held on the table.

For every fact ``staked - paid - house == held`` (R-M4); the readers check it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.aggregates.round import Round
from ledger.engine import facts as f
from ledger.money import HOUSE_KEY, movements

# Facts that put chips at risk (or take them back before the deal): they move chips from
# available to held and nothing else.
STAKE_FACTS: tuple[type[f.Fact], ...] = (
    f.StakePlaced, f.StakeWithdrawn, f.HandDoubled, f.HandSplit, f.DoubleMatched,
    f.SplitMatched, f.InsurancePlaced,
)


# Facts that move no chips and carry nothing the read side keeps: the projections hand them
# over undecoded (their versions still count), which saves decoding most of a round's events.
# Any other round fact, one added later included, is decoded and its movements counted.
QUIET_FACTS: tuple[type[f.Fact], ...] = (
    f.CardDealt, f.HoleCardRevealed, f.HandHit, f.HandStood, f.DoubleDeclined,
    f.SplitDeclined, f.BoxSurrendered, f.DealerFinished,
)
QUIET_TOPICS = frozenset(Round.EVENT_FOR_FACT[fact].TOPIC for fact in QUIET_FACTS)


@dataclass(frozen=True, slots=True)
class Money:
    staked: int = 0
    paid: int = 0
    house: int = 0
    held: int = 0

    @property
    def balanced(self) -> bool:
        return self.staked - self.paid - self.house == self.held


NONE = Money()


def money_of(fact: f.Fact) -> Money:
    moved = movements(fact)
    if not moved:
        return NONE
    house = moved[HOUSE_KEY].available if HOUSE_KEY in moved else 0
    held = sum(m.held for key, m in moved.items() if key != HOUSE_KEY)
    available = sum(m.available for key, m in moved.items() if key != HOUSE_KEY)
    if isinstance(fact, STAKE_FACTS):
        return Money(staked=held, house=house, held=held)
    return Money(paid=available, house=house, held=held)

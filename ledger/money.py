"""Chip movements implied by a round's facts (R-M3, R-M4): pure, checked to sum to zero.

A :class:`Movement` changes one account's ``held`` and ``available`` chips. The
house of the table is the account named :data:`HOUSE`. For every fact, the
movements it implies sum to zero across all accounts: chips are only moved,
never made or lost, inside a round.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ledger.engine import facts as f
from ledger.errors import InvariantBroken

HOUSE = ""  # the account key of the table's house


class Movement(NamedTuple):
    held: int
    available: int


def _hold(bettor: str, amount: int) -> dict[str, Movement]:
    return {bettor: Movement(amount, -amount)}


def movements(fact: f.Fact) -> dict[str, Movement]:
    """The movements one fact implies, by account key (a bettor, or HOUSE)."""
    if isinstance(fact, f.StakePlaced):
        return _hold(fact.bettor, fact.amount)
    if isinstance(fact, f.StakeWithdrawn):
        return _hold(fact.bettor, -fact.amount)
    if isinstance(fact, f.HandDoubled | f.HandSplit):
        return _hold(fact.player, fact.amount)
    if isinstance(fact, f.DoubleMatched | f.SplitMatched | f.InsurancePlaced):
        return _hold(fact.bettor, fact.amount)
    if isinstance(fact, f.StakeSettled):
        return {fact.bettor: Movement(-fact.held, fact.released + fact.won),
                HOUSE: Movement(0, fact.lost - fact.won)}
    if isinstance(fact, f.RoundVoided):
        out: dict[str, Movement] = {}
        for bettor, amount in fact.released.items():
            _add(out, bettor, Movement(-amount, amount))
        for bettor, amount in fact.reversals.items():
            _add(out, bettor, Movement(0, amount))
            _add(out, HOUSE, Movement(0, -amount))
        return out
    if isinstance(fact, f.RulingRecorded):
        out = {}
        for player, amount in fact.adjustments.items():
            _add(out, player, Movement(0, amount))
            _add(out, HOUSE, Movement(0, -amount))
        return out
    return {}


def _add(out: dict[str, Movement], key: str, m: Movement) -> None:
    old = out.get(key, Movement(0, 0))
    out[key] = Movement(old.held + m.held, old.available + m.available)


def net_movements(facts: Iterable[f.Fact]) -> dict[str, Movement]:
    """The movements of a whole command, one per account, each fact checked to balance."""
    out: dict[str, Movement] = {}
    for fact in facts:
        moved = movements(fact)
        if not moved:  # most facts (a card, a hit, a stand) move nothing
            continue
        if sum(m.held + m.available for m in moved.values()):
            raise InvariantBroken(f"{type(fact).__name__} does not move chips to zero (R-M4)")
        for key, m in moved.items():
            _add(out, key, m)
    return {k: m for k, m in out.items() if m.held or m.available}

"""A round's history that breaks what every recorded round keeps is refused when it is replayed.

Facts are history: the machine assigns the state they describe without checking the rules
(``RoundMachine.apply``), but it refuses a history whose chips or cards do not add up, which
only an event altered or written around the ledger can make. Each case replays a round
played here, with one fact changed, into a fresh machine.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import pytest

from ledger.engine import facts as f
from ledger.engine.machine import RoundMachine
from ledger.errors import InvariantBroken
from ledger.rules import CASINO, WILD21, RuleSet
from tests.scripted import Scripted

Facts = list[f.Fact]


def _first(facts: Facts, kind: type[f.Fact]) -> int:
    return next(i for i, fact in enumerate(facts) if type(fact) is kind)


def _changed(facts: Facts, kind: type[f.Fact], **changes: object) -> Facts:
    i = _first(facts, kind)
    return [*facts[:i], dataclasses.replace(facts[i], **changes), *facts[i + 1:]]


def _doubled(facts: Facts, kind: type[f.Fact]) -> Facts:
    i = _first(facts, kind)
    return [*facts[:i + 1], facts[i], *facts[i + 1:]]


def _without(facts: Facts, kind: type[f.Fact]) -> Facts:
    i = _first(facts, kind)
    return [*facts[:i], *facts[i + 1:]]


def _replayed(rules: RuleSet, facts: Facts) -> RoundMachine:
    m = RoundMachine(rules, Scripted(rules, "").m.limits)
    for fact in facts:
        m.apply(fact)
    return m


def _settled() -> Scripted:
    """P1 (10 on box 1, 18) and P2 (10 on box 2, 17) stand; the dealer makes 20."""
    return (Scripted(CASINO, "8S 9H TD TH 8D KC").bet("P1", 1).bet("P2", 2).deal()
            .stand("P1", 1).stand("P2", 2).dealer().settle())


def _hidden_hole() -> Scripted:
    """wild21: P1 stands on 18; the dealer's hole card is turned over."""
    return Scripted(WILD21, "8S 9H TD 7C 5D").bet("P1", 1).deal().stand("P1", 1).dealer()


def _settled_round() -> Facts:
    return _settled().facts


def _hidden_hole_round() -> Facts:
    return _hidden_hole().facts


CASES: list[tuple[str, Callable[[], Facts], str]] = [
    ("a stake settled twice",
     lambda: _doubled(_settled_round(), f.StakeSettled),
     "settled twice or never placed"),
    ("a settlement paying out more than was held",
     lambda: _changed(_settled_round(), f.StakeSettled, released=20),
     "does not balance what was held"),
    ("a round settled with a stake left open",
     lambda: _without(_settled_round(), f.StakeSettled),
     "round settled with open stakes"),
    ("a round's totals not what its settlements add up to",
     lambda: _changed(_settled_round(), f.RoundSettled, house_result=0),
     "round totals break conservation (R-M4)"),
    ("a stake placed twice",
     lambda: _doubled(_settled_round(), f.StakePlaced),
     "opened twice"),
    ("a stake withdrawn for less than was placed",
     lambda: [*Scripted(CASINO, "").bet("P1", 1, 10).facts,
              f.StakeWithdrawn(bettor="P1", box=1, amount=5)],
     "a withdrawn stake differs from the stake placed"),
    ("a card dealt to a hand after it stood",
     lambda: [*(facts := _settled_round())[:_first(facts, f.HandStood) + 1],
              f.CardDealt(card="5S", position=99, box=1, hand=0, face_up=True)],
     "after it ended"),
    ("a hole card turned over that is not the one dealt face down",
     lambda: _changed(_hidden_hole_round(), f.HoleCardRevealed, position=4),
     "is not the one dealt face down"),
    ("a double answered that nobody asked about",
     lambda: [*(facts := _settled_round())[:_first(facts, f.HandStood)],
              f.DoubleDeclined(bettor="P2", box=1, hand=0)],
     "answered a double or split nobody asked"),
    ("a void that leaves a player with a result",
     lambda: [*Scripted(CASINO, "").bet("P1", 1).facts,
              f.RoundVoided(reason="x", released={"P1": 10}, reversals={"P1": 5})],
     "a void left a bettor or the house with a result (R-X13)"),
]


@pytest.mark.parametrize(("history", "said"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_a_history_that_does_not_add_up_is_refused_on_replay(
        history: Callable[[], Facts], said: str) -> None:
    facts = history()
    rules = WILD21 if any(isinstance(x, f.HoleCardRevealed) for x in facts) else CASINO
    with pytest.raises(InvariantBroken, match=re.escape(said)):
        _replayed(rules, facts)


def test_the_histories_as_played_replay_to_the_same_round() -> None:
    # The cases above change one fact of these; unchanged, each replays without a refusal.
    for rules, played in ((CASINO, _settled()), (WILD21, _hidden_hole())):
        assert _replayed(rules, played.facts).view() == played.m.view()

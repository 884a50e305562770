"""Settlement beyond the worked cases: rounding, co-bettors, options, the wild card, the dealer's
draw and voids (R-M2, R-M4, R-X5, R-G6..R-G8, R-X1, R-X2, R-X8..R-X13, R-C4, R-C5).

Every round's money is checked twice: against the amounts the case expects, and against the
ledger's own bookkeeping: each stake's ``held`` splits into ``released`` and ``lost``; each
bettor's net is ``released + won - held`` over his settled stakes; and ``RoundSettled`` obeys
R-M4 (stakes held = paid back + kept by the house, results and house sum to zero).

Casino deal order (R-G2): box 1, box 2 (, box 3), dealer, box 1, box 2 (, box 3), then the play.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import pytest

from ledger.engine import facts as f
from ledger.engine.machine import payout, wild_draw_reason
from ledger.engine.readjudicate import readjudicate
from ledger.errors import DecisionRefused
from ledger.rules import CASINO, CASINO_WILD, WILD21, RuleSet, TableLimits
from tests.scripted import Scripted

# -- bookkeeping ---------------------------------------------------------------------------------


def held_by_bettor(facts: list[f.Fact]) -> Counter[str]:
    """Every amount taken from each bettor during the round, from the facts that take it."""
    held: Counter[str] = Counter()
    for x in facts:
        if isinstance(x, f.StakePlaced | f.DoubleMatched | f.SplitMatched):
            held[x.bettor] += x.amount
        elif isinstance(x, f.StakeWithdrawn):
            held[x.bettor] -= x.amount
        elif isinstance(x, f.HandDoubled | f.HandSplit):
            held[x.player] += x.amount
        elif isinstance(x, f.InsurancePlaced):
            held[x.bettor] += x.amount
    return held


def nets(r: Scripted) -> dict[str, int]:
    out: Counter[str] = Counter()
    for s in r.settlements():
        out[s.bettor] += s.released + s.won - s.held
    return dict(out)


def check_money(r: Scripted, expected: dict[str, int]) -> f.RoundSettled:
    """The round is settled, each bettor's net is as expected and the books balance (R-M4)."""
    settled = list(r.settlements())
    for s in settled:
        assert s.released + s.lost == s.held, s
        assert min(s.released, s.lost, s.won) >= 0, s
    assert nets(r) == expected
    # every stake taken was settled exactly once
    assert Counter({b: v for b, v in held_by_bettor(r.facts).items() if v}) == Counter(
        {b: v for b, v in _sum_held(settled).items() if v})
    (end,) = [x for x in r.facts if isinstance(x, f.RoundSettled)]
    assert end is r.facts[-1]
    assert end.staked == sum(s.held for s in settled)
    assert end.returned == sum(s.released + s.won for s in settled)
    assert end.staked == end.returned + end.house_result
    assert sum(end.results.values()) + end.house_result == 0
    assert end.results == {b: expected.get(b, 0) for b in end.results}
    assert set(expected) <= set(end.results)
    assert r.m.results == end.results
    assert r.m.phase == "settled"
    assert not r.m.open_stakes
    return end


def _sum_held(settled: list[f.StakeSettled]) -> Counter[str]:
    out: Counter[str] = Counter()
    for s in settled:
        out[s.bettor] += s.held
    return out


def settled_stake(r: Scripted, bettor: str, box: int, hand: int = 0,
                  line: str = f.MAIN) -> f.StakeSettled:
    (s,) = [s for s in r.settlements()
            if s.line == line and s.bettor == bettor and s.box == box and s.hand == hand]
    return s


def casino(cards: str, rules: RuleSet = CASINO, limits: TableLimits | None = None,
           stake: int = 10) -> Scripted:
    return Scripted(rules, cards, limits).bet("P1", 1, stake).bet("P2", 2, stake).deal()


# The casino's game with the wild21 dealer, who draws to beat the players (R-W6): a rule set a
# manager may give a table (every row of R-S2 is a setting). R-G8 and R-X2 hold for it too.
CASINO_BEATING = CASINO.evolve(name="casino_beating", dealer_policy="beat_players")
BOTH_DEALERS = pytest.mark.parametrize("rules", [CASINO, CASINO_BEATING], ids=["stand_17",
                                                                              "beat_players"])


# == payout() rounding (R-M2, R-X5) ================================================================

@pytest.mark.parametrize(("stake", "ratio", "unit", "paid", "remainder"), [
    (10, (3, 2), 1, 15, [0, 1]),
    (15, (3, 2), 1, 22, [1, 2]),
    (15, (1, 2), 1, 7, [1, 2]),
    (10, (1, 2), 1, 5, [0, 1]),
    (10, (2, 1), 1, 20, [0, 1]),
    (7, (6, 5), 1, 8, [2, 5]),
    (15, (1, 2), 5, 5, [5, 2]),
    (15, (3, 2), 5, 20, [5, 2]),
    (30, (3, 2), 20, 40, [5, 1]),
    (25, (1, 1), 5, 25, [0, 1]),
    (0, (3, 2), 1, 0, [0, 1]),
    (10, (0, 1), 1, 0, [0, 1]),
])
def test_a_payout_rounds_down_to_the_minimum_unit_and_records_the_remainder(
        stake: int, ratio: tuple[int, int], unit: int, paid: int, remainder: list[int]) -> None:
    assert payout(stake, ratio, unit) == (paid, remainder)


@pytest.mark.parametrize("stake", [1, 5, 7, 15, 33, 99, 1001])
@pytest.mark.parametrize("ratio", [(3, 2), (1, 2), (6, 5), (2, 1), (5, 1)])
@pytest.mark.parametrize("unit", [1, 5, 25])
def test_a_payout_plus_its_remainder_is_the_exact_ratio_of_the_stake(
        stake: int, ratio: tuple[int, int], unit: int) -> None:
    paid, (num, den) = payout(stake, ratio, unit)
    exact = Fraction(stake * ratio[0], ratio[1])
    assert paid + Fraction(num, den) == exact
    assert paid % unit == 0
    assert 0 <= Fraction(num, den) < unit
    assert Fraction(num, den).denominator == den  # lowest terms


# == rounding in play (R-X5, R-G6) ================================================================

def test_a_surrendered_stake_of_15_gets_7_back_and_the_house_keeps_8() -> None:
    r = casino("TS 9H 7D 6S 9C TD", stake=15).surrender("P1", 1).stand("P2", 2).finish()
    s = settled_stake(r, "P1", 1)
    assert (s.outcome, s.held, s.released, s.lost, s.won) == (f.SURRENDERED, 15, 7, 8, 0)
    assert (s.rate, s.remainder) == ([1, 2], [1, 2])
    check_money(r, {"P1": -8, "P2": 15})


def test_a_natural_on_a_stake_of_15_is_paid_22_with_half_a_unit_rounded_away() -> None:
    r = casino("AS 9H 7D KS 9C TD", stake=15).stand("P2", 2).finish()
    s = settled_stake(r, "P1", 1)
    assert (s.outcome, s.held, s.released, s.won) == (f.WON, 15, 15, 22)
    assert (s.rate, s.remainder) == ([3, 2], [1, 2])
    check_money(r, {"P1": 22, "P2": 15})


def test_with_a_minimum_unit_of_5_a_natural_on_15_is_paid_20() -> None:
    limits = TableLimits(min_unit=5)
    r = casino("AS 9H 7D KS 9C TD", limits=limits, stake=15).stand("P2", 2).finish()
    s = settled_stake(r, "P1", 1)
    assert (s.won, s.remainder) == (20, [5, 2])
    check_money(r, {"P1": 20, "P2": 15})


def test_with_a_minimum_unit_of_5_a_surrendered_15_gets_5_back() -> None:
    limits = TableLimits(min_unit=5)
    r = casino("TS 9H 7D 6S 9C TD", limits=limits, stake=15).surrender("P1", 1)
    r.stand("P2", 2).finish()
    s = settled_stake(r, "P1", 1)
    assert (s.released, s.lost, s.remainder) == (5, 10, [5, 2])
    check_money(r, {"P1": -10, "P2": 15})


def test_even_money_on_an_odd_stake_pays_the_stake_exactly() -> None:
    r = casino("AS 9H AD KS 9C 7D", stake=15).even_money("P1", 1).stand("P2", 2).finish()
    s = settled_stake(r, "P1", 1)
    assert (s.outcome, s.released, s.won, s.remainder) == (f.EVEN_MONEY, 15, 15, [0, 1])
    check_money(r, {"P1": 15, "P2": 0})


# == dealer natural: all or original only (R-G7, R-X12) ===========================================

ORIGINAL_ONLY = CASINO.evolve(dealer_natural_takes="original_only")


@pytest.mark.parametrize(("rules", "expected"), [
    (CASINO, {"P1": -20, "P2": -20, "P3": -10, "P4": -10}),
    (ORIGINAL_ONLY, {"P1": -10, "P2": -10, "P3": -10, "P4": -10}),
], ids=["all", "original_only"])
def test_a_dealer_natural_against_a_doubled_hand_takes_the_double_only_under_the_european_rule(
        rules: RuleSet, expected: dict[str, int]) -> None:
    # Box 1: P1 owns 6,5 with P2 (matches the double) and P3 (declines); box 2: P4 on 9,9.
    r = (Scripted(rules, "6S 9H TD 5S 9C 9D AD").bet("P1", 1).bet("P2", 1).bet("P3", 1)
         .bet("P4", 2).deal())
    r.double("P1", 1).answer("P2", 1, 0, True).answer("P3", 1, 0, False).stand("P4", 2)
    r.finish()
    assert r.m.dealer_natural()
    if rules is ORIGINAL_ONLY:
        s = settled_stake(r, "P1", 1)
        assert (s.outcome, s.held, s.released, s.lost) == (f.LOST, 20, 10, 10)
        assert settled_stake(r, "P3", 1).released == 0
    check_money(r, expected)


@pytest.mark.parametrize(("rules", "p1"), [(CASINO, -30), (ORIGINAL_ONLY, -10)],
                         ids=["all", "original_only"])
def test_a_dealer_natural_against_split_hands_takes_only_the_first_under_original_only(
        rules: RuleSet, p1: int) -> None:
    # 8,8 split: hand 0 draws 2 (stands on 10); hand 1 draws 3 and doubles on 8,3 with a 9.
    r = casino("8S 9H TD 8H 9C 2D 3D 9S AD", rules=rules).split("P1", 1).stand("P1", 1, 0)
    r.double("P1", 1, 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["TD", "AD"]
    if rules is ORIGINAL_ONLY:
        assert settled_stake(r, "P1", 1, 0).outcome == f.LOST
        second = settled_stake(r, "P1", 1, 1)
        assert (second.outcome, second.held, second.released) == (f.PUSHED, 20, 20)
    check_money(r, {"P1": p1, "P2": -10})


def test_original_only_still_lets_a_natural_push_against_a_dealer_natural() -> None:
    r = casino("AS 9H AD KS 9C KD", rules=ORIGINAL_ONLY).stand("P2", 2).finish()
    assert settled_stake(r, "P1", 1).outcome == f.PUSHED
    check_money(r, {"P1": 0, "P2": -10})


# == co-bettors follow the owner (R-C4, R-X9) ======================================================

def test_a_double_doubles_the_hands_stake_not_the_players_stakes_on_other_boxes() -> None:
    # P1 plays box 1 for 10 and box 2 for 30, and doubles box 1: 10 more, not 40.
    r = (Scripted(CASINO, "6S TS 7D 5C 9H TD TC").bet("P1", 1, 10).bet("P1", 2, 30).deal()
         .double("P1", 1).stand("P1", 2).finish())
    (doubled,) = [x for x in r.facts if isinstance(x, f.HandDoubled)]
    assert (doubled.box, doubled.amount) == (1, 10)
    assert (settled_stake(r, "P1", 1).held, settled_stake(r, "P1", 2).held) == (20, 30)
    check_money(r, {"P1": 50})


def test_co_bettors_who_match_a_double_double_and_one_who_declines_keeps_his_stake() -> None:
    # Box 1: P1 owns 5,6 with P2 (matches) and P3 (declines); doubled with a 9 to 20.
    r = (Scripted(CASINO, "5S 9H 7D 6S 9C 9D TD").bet("P1", 1).bet("P2", 1).bet("P3", 1)
         .bet("P4", 2).deal())
    r.double("P1", 1)
    assert r.m.pending is not None
    assert r.m.pending.bettors == ("P2", "P3")
    r.answer("P2", 1, 0, True)
    assert r.m.boxes[1].hands[0].cards == ["5S", "6S"]  # no card until every answer is in
    r.answer("P3", 1, 0, False)
    hand = r.m.boxes[1].hands[0]
    assert hand.cards == ["5S", "6S", "9D"]
    assert hand.stakes == {"P1": 20, "P2": 20, "P3": 10}
    matched = [x for x in r.facts if isinstance(x, f.DoubleMatched)]
    assert [(x.bettor, x.amount) for x in matched] == [("P2", 10)]
    r.stand("P4", 2).finish()
    assert r.m.dealer_total() == 17
    check_money(r, {"P1": 20, "P2": 20, "P3": 10, "P4": 10})


def test_a_declined_double_loses_only_the_original_stake_when_the_hand_busts() -> None:
    r = (Scripted(CASINO, "TS 9H 7D 2S 9C KD TD").bet("P1", 1).bet("P2", 1).bet("P4", 2)
         .deal())
    r.double("P1", 1).answer("P2", 1, 0, False)
    assert settled_stake(r, "P1", 1).held == 20
    assert settled_stake(r, "P2", 1).held == 10
    r.stand("P4", 2).finish()
    check_money(r, {"P1": -20, "P2": -10, "P4": 10})


def test_a_declined_split_leaves_the_stake_on_the_first_hand_and_is_not_asked_again() -> None:
    # Box 1: P1 owns 8,8 with P2 (declines the split) and P3 (matches); box 2: P4 on 9,9.
    # Hand 0 draws T (18); hand 1 draws 8 and is re-split: only P3 is asked, and declines.
    # Hand 1 then draws 2 (10), hand 2 draws 9 (17); the dealer makes 7,T = 17.
    r = (Scripted(CASINO, "8S 9H 7D 8H 9C TD 8D 2D 9D TS").bet("P1", 1).bet("P2", 1)
         .bet("P3", 1).bet("P4", 2).deal())
    r.split("P1", 1)
    assert r.m.pending is not None
    assert r.m.pending.bettors == ("P2", "P3")
    r.answer("P2", 1, 0, False).answer("P3", 1, 0, True)
    r.stand("P1", 1, 0)
    r.split("P1", 1, 1)
    assert r.m.pending is not None
    assert r.m.pending.hand == 1
    assert list(r.m.pending.bettors) == ["P3"]
    r.answer("P3", 1, 1, False)
    hands = r.m.boxes[1].hands
    assert [h.stakes for h in hands] == [{"P1": 10, "P2": 10, "P3": 10}, {"P1": 10, "P3": 10},
                                         {"P1": 10}]
    r.stand("P1", 1, 1).stand("P1", 1, 2).stand("P4", 2).finish()
    assert [hand.cards for hand in hands] == [["8S", "TD"], ["8H", "2D"], ["8D", "9D"]]
    assert settled_stake(r, "P1", 1, 2).outcome == f.PUSHED
    check_money(r, {"P1": 0, "P2": 10, "P3": 0, "P4": 10})


def test_a_split_decliner_is_not_asked_about_a_double_on_the_new_hand() -> None:
    r = (Scripted(CASINO, "8S 9H 7D 8H 9C TD 3D 9S TS").bet("P1", 1).bet("P2", 1).bet("P4", 2)
         .deal())
    r.split("P1", 1).answer("P2", 1, 0, False).stand("P1", 1, 0)
    r.double("P1", 1, 1)
    assert r.m.pending is None
    assert r.m.boxes[1].hands[1].cards == ["8H", "3D", "9S"]
    r.stand("P4", 2).finish()
    check_money(r, {"P1": 10 + 20, "P2": 10, "P4": 10})


def test_surrender_by_the_owner_surrenders_every_co_bettors_stake() -> None:
    r = (Scripted(CASINO, "TS 9H 7D 6S 9C TD").bet("P1", 1, 15).bet("P2", 1, 10)
         .bet("P3", 1, 25).bet("P4", 2).deal())
    r.surrender("P1", 1)
    got = {s.bettor: (s.outcome, s.released, s.lost, s.remainder)
           for s in r.settlements() if s.box == 1}
    assert got == {"P1": (f.SURRENDERED, 7, 8, [1, 2]), "P2": (f.SURRENDERED, 5, 5, [0, 1]),
                   "P3": (f.SURRENDERED, 12, 13, [1, 2])}
    r.stand("P4", 2).finish()
    check_money(r, {"P1": -8, "P2": -5, "P3": -13, "P4": 10})


def test_a_surrendered_box_is_not_touched_by_a_later_dealer_natural() -> None:
    r = casino("TS 9H KD 6S 9C AD").surrender("P1", 1).stand("P2", 2).finish()
    assert r.m.dealer_natural()
    check_money(r, {"P1": -5, "P2": -10})


# == insurance stands apart from the hands (R-C5) =================================================

def test_insurance_is_kept_when_the_insured_hand_busts() -> None:
    r = casino("TS 9H AD 6S 9C 8D KD").insure("P1", 5).hit("P1", 1)
    assert settled_stake(r, "P1", 1).outcome == f.LOST
    r.stand("P2", 2).finish()
    ins = settled_stake(r, "P1", 0, line=f.INSURANCE)
    assert (ins.outcome, ins.held, ins.released, ins.won, ins.rate) == (f.WON, 5, 5, 10, [2, 1])
    check_money(r, {"P1": 0, "P2": -10})


def test_insurance_is_lost_when_the_dealer_has_no_natural() -> None:
    r = casino("TS 9H AD 8S 9C 7D").insure("P1", 5).stand("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["AD", "7D"]
    ins = settled_stake(r, "P1", 0, line=f.INSURANCE)
    assert (ins.outcome, ins.released, ins.lost) == (f.LOST, 0, 5)
    check_money(r, {"P1": -5, "P2": 0})


# == the dealer's draw (R-G8, R-X2) ===============================================================

@pytest.mark.parametrize(("third", "prize", "rate"), [
    ("7S", "777_suited", CASINO.prize_777_suited),  # a winning 777 of one suit
    ("7H", "777_mixed", CASINO.prize_777_mixed),  # the first two of one suit, not the third
    ("8S", "678_suited", CASINO.prize_678_suited),
    ("8H", None, (1, 1)),  # 6 7 8 of mixed suits: no prize, 21 wins even money
])
def test_a_three_card_prize_needs_all_three_cards_of_one_suit(
        third: str, prize: str | None, rate: tuple[int, int]) -> None:
    # R-C7, R-X7: P1 holds 7S 7S, or 6S 7S, and draws the third; the dealer makes 19, as P2.
    first = "6S" if third[0] == "8" else "7S"
    r = casino(f"{first} TS TD 7S 9H {third} 9D").hit("P1", 1).stand("P2", 2).finish()
    s = settled_stake(r, "P1", 1)
    assert (s.prize or None, s.rate, s.won) == (prize, list(rate), 10 * rate[0] // rate[1])
    check_money(r, {"P1": 10 * rate[0] // rate[1], "P2": 0})  # P2 pushes on 19


@pytest.mark.parametrize(("hits_soft_17", "cards", "dealer"), [
    (True, "TS 9H AD 8S TC 6D TH 5C", ["AD", "6D", "TH"]),  # soft 17: one more card
    (True, "TS 9H TD 8S TC 7D 5C", ["TD", "7D"]),  # hard 17: stands
    (False, "TS 9H AD 8S TC 6D TH 5C", ["AD", "6D"]),  # the presets: soft 17 stands
])
def test_a_dealer_who_hits_soft_17_draws_to_a_soft_17_and_stands_on_a_hard_one(
        hits_soft_17: bool, cards: str, dealer: list[str]) -> None:
    # No preset hits soft 17, so the setting was never played (R-G8, a manager's override).
    rules = replace(CASINO, dealer_hits_soft_17=hits_soft_17)
    r = casino(cards, rules).stand("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == dealer
    check_money(r, {"P1": 10, "P2": 10})


@BOTH_DEALERS
def test_the_dealer_takes_no_card_when_every_hand_has_busted(rules: RuleSet) -> None:
    r = casino("TS 9H 7D 6S 5C 8D 9D 4C", rules).hit("P1", 1).hit("P2", 2).finish()
    assert r.dealer_cards() == ["7D"]
    assert r.shoe.left() == ["4C"]
    done = [x for x in r.facts if isinstance(x, f.DealerFinished)]
    assert [(x.total, x.natural, x.bust) for x in done] == [(7, False, False)]
    check_money(r, {"P1": -10, "P2": -10})


@BOTH_DEALERS
def test_the_dealer_takes_no_card_against_an_ace_when_every_hand_busted_and_nobody_insured(
        rules: RuleSet) -> None:
    r = casino("TS 9H AD 6S 5C 8D 9D 4C", rules).hit("P1", 1).hit("P2", 2).finish()
    assert r.dealer_cards() == ["AD"]
    check_money(r, {"P1": -10, "P2": -10})


@BOTH_DEALERS
def test_the_dealer_takes_only_the_second_card_for_insurance_when_every_hand_busted(
        rules: RuleSet) -> None:
    r = casino("TS 9H AD 6S 5C 8D 9D 5H 6C", rules).insure("P1", 5).hit("P1", 1).hit("P2", 2)
    r.finish()
    assert r.dealer_cards() == ["AD", "5H"]  # 16, yet no third card
    assert r.shoe.left() == ["6C"]
    check_money(r, {"P1": -15, "P2": -10})


@BOTH_DEALERS
def test_insurance_on_busted_hands_is_paid_when_the_second_card_makes_a_natural(
        rules: RuleSet) -> None:
    r = casino("TS 9H AD 6S 5C 8D 9D KH", rules).insure("P1", 5).hit("P1", 1).hit("P2", 2).finish()
    assert r.dealer_cards() == ["AD", "KH"]
    check_money(r, {"P1": 0, "P2": -10})


@BOTH_DEALERS
@pytest.mark.parametrize(("upcard", "dealer"), [("AD", ["AD", "5D"]), ("TD", ["TD", "5D"]),
                                                ("QD", ["QD", "5D"]), ("5D", ["5D"])])
def test_against_a_lone_natural_the_dealer_takes_only_the_second_card_and_only_for_ace_or_ten(
        upcard: str, dealer: list[str], rules: RuleSet) -> None:
    # P1 holds a natural (no even money); P2 busts 9,5 with a 9. Nothing else depends.
    r = casino(f"AS 9H {upcard} KS 5C 9S 5D 6C", rules).hit("P2", 2).finish()
    assert r.dealer_cards() == dealer
    check_money(r, {"P1": 15, "P2": -10})


@BOTH_DEALERS
def test_against_a_lone_prize_hand_and_a_5_upcard_the_dealer_takes_no_card(
        rules: RuleSet) -> None:
    r = casino("7S 9H 5D 7H 5C 7D 9D 6C", rules).hit("P1", 1).hit("P2", 2).finish()
    assert r.dealer_cards() == ["5D"]
    check_money(r, {"P1": 30, "P2": -10})


def test_the_dealer_draws_on_while_a_hand_depends_on_its_total() -> None:
    r = casino("AS 9H 5D KS 8C 5H 6C 2S").stand("P2", 2).finish()
    assert r.dealer_cards() == ["5D", "5H", "6C", "2S"]
    check_money(r, {"P1": 15, "P2": -10})


def test_a_dealer_beating_players_takes_its_second_card_before_judging_a_lower_hand() -> None:
    # P1 stands on 10 against the ace, insured; alone the ace (11) would beat him, but a
    # dealer's hand is two cards at least, and the second makes a natural (R-G2, R-G7).
    r = casino("4S 9H AD 6S 5C 8D KH 2C", CASINO_BEATING).insure("P1", 5).stand("P1", 1)
    r.hit("P2", 2).finish()
    assert r.dealer_cards() == ["AD", "KH"]
    assert settled_stake(r, "P1", 0, line=f.INSURANCE).won == 10
    check_money(r, {"P1": 0, "P2": -10})


def test_a_dealer_beating_players_draws_past_the_highest_live_total() -> None:
    # P1 stands on 17, P2 on 18: the dealer draws from 5 while not above 18 (R-W6).
    r = casino("9S TH 5D 8S 8C 4C 2D 3H 6S", CASINO_BEATING).stand("P1", 1).stand("P2", 2)
    r.finish()
    assert r.dealer_cards() == ["5D", "4C", "2D", "3H", "6S"]  # 20: above 18, it stops
    check_money(r, {"P1": -10, "P2": -10})


@pytest.mark.parametrize(("cards", "hits", "p1"), [
    ("AS TH 9D KS 7C AH TC TD", 0, 15),  # P1's natural (3:2)
    ("7S TH 9D 7H 7C 7D AH TC TD", 1, 30),  # P1's 7-7-7 of mixed suits (3:1)
], ids=["natural", "prize"])
def test_a_dealer_beating_players_does_not_chase_a_hand_it_cannot_beat_by_drawing(
        cards: str, hits: int, p1: int) -> None:
    # P2 stands on 17; the dealer's 9, A is 20 and beats him. Counting P1's 21 it drew on
    # (a 10: bust) and paid P2, whose result was the only one its total decided (R-X2, R-W6).
    r = casino(cards, CASINO_BEATING)
    for _ in range(hits):
        r.hit("P1", 1)
    r.stand("P2", 2).finish()
    assert r.dealer_cards() == ["9D", "AH"]
    check_money(r, {"P1": p1, "P2": -10})
    # A round recorded as it was dealt before is named by the round check, at the card.
    (i,) = [i for i, x in enumerate(r.facts) if isinstance(x, f.DealerFinished)]
    chased = f.CardDealt(card="TC", position=len(cards.split()) - 2, box=f.DEALER, hand=0)
    assert readjudicate(CASINO_BEATING, TableLimits(), r.facts) == []
    (finding,) = readjudicate(CASINO_BEATING, TableLimits(), [*r.facts[:i], chased])
    assert finding.startswith(f"fact {i + 1}: recorded CardDealt(card='TC'"), finding
    assert "the rules give DealerFinished(total=20" in finding, finding


# == casino_wild: forfeits and the dealer's wild upcard (R-X1, R-X8, R-X10, R-W2) ==================

def test_a_waiting_natural_is_forfeited_by_another_players_wild_card() -> None:
    r = casino("AS TH 7D KS 5C W TD", rules=CASINO_WILD).hit("P2", 2)
    (lost,) = [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    assert (lost.bettor, lost.box, lost.cause_box, lost.cause_player) == ("P1", 1, 2, "P2")
    assert (lost.held, lost.released, lost.lost, lost.won) == (10, 0, 10, 0)
    r.finish()
    assert r.dealer_cards() == ["7D", "TD"]
    check_money(r, {"P1": -10, "P2": 10})


def test_a_natural_taken_as_even_money_is_not_forfeited() -> None:
    r = casino("AS TH AD KS 5C W 6D", rules=CASINO_WILD).even_money("P1", 1).hit("P2", 2)
    assert not [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    r.finish()
    check_money(r, {"P1": 10, "P2": 10})


def test_a_co_bettor_keeps_his_stake_on_the_drawers_box_but_loses_his_own_box() -> None:
    # Box 1: P1 owns T,6 with co-bettor P2; box 2: P2 owns 9,7. P1 hits the wild card.
    r = (Scripted(CASINO_WILD, "TS 9H 8D 6S 7C W TD").bet("P1", 1).bet("P2", 1).bet("P2", 2)
         .deal())
    r.hit("P1", 1)
    forfeited = [(x.bettor, x.box) for x in r.facts if isinstance(x, f.StakeForfeited)]
    assert forfeited == [("P2", 2)]
    r.finish()
    assert r.m.dealer_total() == 18
    assert settled_stake(r, "P2", 1).outcome == f.WON
    check_money(r, {"P1": 10, "P2": 10 - 10})


def test_a_wild_card_drawn_in_play_forfeits_a_box_holding_one_from_the_deal() -> None:
    # Two wild cards (a rule set of its own): P1's box 1 and P2's box 3 each hold one from the
    # deal, and neither forfeits the other (R-W3). P2 then draws a third on box 4: R-W3's
    # exemption is of the initial deal, so R-W2 forfeits every other live box, P1's wild 21
    # on box 1 included. (RULES.md does not say so in as many words; this is its reading.)
    rules = CASINO_WILD.evolve(name="two wild", wild_cards=2)
    r = (Scripted(rules, "W 9S W 9D 8D 5C 8H 5D 8C W 7C").bet("P1", 1).bet("P1", 2)
         .bet("P2", 3).bet("P2", 4).deal())
    assert not [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    r.stand("P1", 2).hit("P2", 4)
    forfeited = {(x.bettor, x.box, x.cause_box) for x in r.facts
                 if isinstance(x, f.StakeForfeited)}
    assert forfeited == {("P1", 1, 4), ("P1", 2, 4)}


def test_a_wild_card_forfeits_the_split_and_doubled_stakes_of_an_earlier_box() -> None:
    # Box 1 splits 8,8: hand 0 draws 3 and doubles with a 9; hand 1 draws T and stands.
    # Box 2 (P2, T,4) then hits the wild card: all 30 of P1's stakes on box 1 go.
    r = casino("8S TH 7D 8H 4C 3D 9S TS W TD", rules=CASINO_WILD).split("P1", 1)
    r.double("P1", 1, 0).stand("P1", 1, 1).hit("P2", 2)
    forfeited = {(x.hand, x.held) for x in r.facts if isinstance(x, f.StakeForfeited)}
    assert forfeited == {(0, 20), (1, 10)}
    r.finish()
    check_money(r, {"P1": -30, "P2": 10})


def test_a_dealer_wild_upcard_is_21_at_once_without_a_second_card_or_insurance() -> None:
    # Box 1: P1 T,7 surrenders; box 2: P2 9,9 stands; box 3: P3 natural. Dealer's upcard: wild.
    r = (Scripted(CASINO_WILD, "TS 9H AS W 7S 9C KS 5D").bet("P1", 1).bet("P2", 2)
         .bet("P3", 3).deal())
    with pytest.raises(DecisionRefused, match="upcard is an ace"):
        r.insure("P3", 5)
    with pytest.raises(DecisionRefused, match="dealer's ace"):
        r.even_money("P3", 3)
    r.surrender("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["W"]
    assert r.shoe.left() == ["5D"]
    done = [x for x in r.facts if isinstance(x, f.DealerFinished)]
    assert [(x.total, x.natural) for x in done] == [(21, False)]
    assert not [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    check_money(r, {"P1": -5, "P2": -10, "P3": 15})


def test_a_deal_forfeiture_recorded_naming_one_holder_still_readjudicates() -> None:
    # Worked case 18: P1 and P3 hold wild cards after the deal, P2's box is forfeited.
    # Rounds recorded before both holders were named name P1 alone, as a wild draw does.
    r = Scripted(WILD21, "W 9H TC TD 7S 5H W 9D 2D")
    for n in (1, 2, 3):
        r.bet(f"P{n}", n)
    r.deal().finish()
    (i,) = [i for i, x in enumerate(r.facts) if isinstance(x, f.StakeForfeited)]
    forfeited = r.facts[i]
    assert isinstance(forfeited, f.StakeForfeited)
    assert "P1 (box 1) and P3 (box 3)" in forfeited.reason

    def recorded_with(reason: str, cause: tuple[int, str] = (1, "P1")) -> list[f.Fact]:
        altered = replace(forfeited, reason=reason, cause_box=cause[0], cause_player=cause[1])
        return [*r.facts[:i], altered, *r.facts[i + 1:]]

    limits = TableLimits()
    assert readjudicate(WILD21, limits, r.facts) == []
    then = wild_draw_reason("P1", 1)
    assert readjudicate(WILD21, limits, recorded_with(then)) == []
    # Only that wording is taken for the present one: another holder, or another cause, is not.
    (finding,) = readjudicate(WILD21, limits, recorded_with(wild_draw_reason("P3", 3)))
    assert "P3 drew the wild card on box 3" in finding
    (finding,) = readjudicate(WILD21, limits, recorded_with(then, cause=(3, "P3")))
    assert "cause_box=3" in finding


@pytest.mark.parametrize(("played", "now", "then"), [
    (lambda: casino("TS 9H 7D 6S 9C TD", stake=15).surrender("P1", 1).stand("P2", 2),
     "surrendered by the owner (R-C1)", "surrendered by the owner"),
    (lambda: casino("AS 9H AD KS 9C 7D", stake=15).even_money("P1", 1).stand("P2", 2),
     "even money taken against an ace (R-C6)", "even money taken against an ace"),
])
def test_a_settlement_recorded_before_its_reason_cited_its_rule_still_readjudicates(
        played: Callable[[], Scripted], now: str, then: str) -> None:
    r = played().finish()
    (i,) = [i for i, x in enumerate(r.facts)
            if isinstance(x, f.StakeSettled) and x.reason.startswith(then)]
    settled = r.facts[i]
    assert isinstance(settled, f.StakeSettled)
    assert settled.reason == now

    def recorded_with(reason: str) -> list[f.Fact]:
        return [*r.facts[:i], replace(settled, reason=reason), *r.facts[i + 1:]]

    assert readjudicate(CASINO, TableLimits(), recorded_with(then)) == []
    (finding,) = readjudicate(CASINO, TableLimits(), recorded_with(then + " (R-G5)"))
    assert f"v{i + 1}" not in finding  # (no versions given: facts are counted from 1)
    assert f"fact {i + 1}: recorded StakeSettled(" in finding


def test_a_player_wild_21_pushes_a_dealer_wild_21() -> None:
    two_wild = CASINO_WILD.evolve(wild_cards=2)
    r = casino("TS 9H W 4S 9C W", rules=two_wild).hit("P1", 1).finish()
    assert r.dealer_cards() == ["W"]
    check_money(r, {"P1": 0, "P2": -10})


# == voids (R-V1, R-X13, R-H4) ====================================================================

def check_void(r: Scripted, bettors: list[str]) -> f.RoundVoided:
    """The void makes every bettor whole and leaves nobody a result."""
    (void,) = [x for x in r.facts if isinstance(x, f.RoundVoided)]
    assert void is r.facts[-1]
    held = held_by_bettor(r.facts)
    settled_back: Counter[str] = Counter()
    for s in r.settlements():
        settled_back[s.bettor] += s.released + s.won
    for b in bettors:
        back = settled_back[b] + void.released.get(b, 0) + void.reversals.get(b, 0)
        assert back == held[b], b
    assert set(r.m.results) == set(bettors)
    assert all(v == 0 for v in r.m.results.values())
    assert r.m.house == 0
    assert r.m.phase == "voided"
    assert not r.m.open_stakes
    return void


def test_a_void_releases_every_stake_including_even_money_insurance_and_busts() -> None:
    # P1 natural takes even money; P2 (T,6) insures and stands; P3 (9,7) hits and busts.
    r = (Scripted(CASINO, "AS TH 9C AD KS 6H 7C 8D").bet("P1", 1).bet("P2", 2).bet("P3", 3)
         .deal())
    r.even_money("P1", 1).insure("P2", 5).stand("P2", 2).hit("P3", 3)
    assert r.m.results == {"P1": 10, "P2": 0, "P3": -10}
    r._log(r.m.void("dealer exposed the next card"))
    void = check_void(r, ["P1", "P2", "P3"])
    assert void.released == {"P2": 15}
    assert void.reversals == {"P1": -10, "P3": 10}
    assert void.reason == "dealer exposed the next card"
    assert r.m.void_reason == "dealer exposed the next card"


def test_a_void_after_the_dealer_finished_releases_doubles_and_undoes_a_surrender() -> None:
    r = casino("TS 5H 7D 6S 6C 9D TC").surrender("P1", 1).double("P2", 2).dealer()
    assert r.m.phase == "settling"
    r._log(r.m.void("table closed by the shift manager"))
    void = check_void(r, ["P1", "P2"])
    assert void.released == {"P2": 20}
    assert void.reversals == {"P1": 5}


def test_a_void_during_betting_releases_the_stakes() -> None:
    r = Scripted(CASINO, "").bet("P1", 1, 40).bet("P2", 1, 30)
    r._log(r.m.void("fire alarm"))
    (void,) = [x for x in r.facts if isinstance(x, f.RoundVoided)]
    assert void.released == {"P1": 40, "P2": 30}
    assert void.reversals == {}


def test_a_shoe_running_out_mid_round_voids_it_and_releases_everything() -> None:
    r = casino("TS 9H AD 6S 9C").insure("P1", 5).hit("P1", 1)
    void = check_void(r, ["P1", "P2"])
    assert "R-H4" in void.reason
    assert void.released == {"P1": 15, "P2": 10}


def test_a_decision_the_rules_refuse_is_named_with_the_events_before_it_as_its_ground() -> None:
    # The first event the rules refuse may be the altered one, or follow it: the finding says
    # it is judged on the events before it (a card changed at v11 made v12 the one refused).
    r = casino("TS 9H 7D 6S 9C TD").stand("P1", 1).stand("P2", 2).finish()
    i = next(i for i, x in enumerate(r.facts) if isinstance(x, f.HandStood))
    stood = r.facts[i]
    assert isinstance(stood, f.HandStood)
    altered = [*r.facts[:i], replace(stood, player="P2"), *r.facts[i + 1:]]
    (finding,) = readjudicate(CASINO, TableLimits(), altered)
    assert finding.startswith(f"fact {i + 1} (HandStood) is refused by the rules, given the "
                              "events before it: ")


def test_a_record_short_of_a_card_the_rules_deal_is_named_so_not_as_a_shoe_run_out() -> None:
    # The dealer's second card taken out of the record: the replay asks for one more card
    # than it holds, which once read as "the rules give RoundVoided (the shoe ran out)".
    r = casino("TS 9H AD 6S 5C 8D 9D 5H 6C").insure("P1", 5).hit("P1", 1).hit("P2", 2)
    r.finish()
    second = next(i for i, x in enumerate(r.facts) if isinstance(x, f.CardDealt)
                  and x.box == f.DEALER and x.card == "5H")
    finished = next(x for x in r.facts if isinstance(x, f.DealerFinished))
    short = [x for x in r.facts[:second] + r.facts[second + 1:] if x is not finished]
    short.insert(second, replace(finished, total=11, cards=["AD"]))
    (finding,) = readjudicate(CASINO, TableLimits(), short)
    assert finding == (f"fact {second + 1}: recorded {short[second]}; the rules deal one more "
                       "card at this point, and the record holds none")
    # A round the shoe did run out in replays as recorded.
    ran_out = casino("TS 9H AD 6S 9C").insure("P1", 5).hit("P1", 1)
    assert readjudicate(CASINO, TableLimits(), ran_out.facts) == []

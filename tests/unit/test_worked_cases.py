"""The 19 worked cases of RULES.md, each played card by card.

Here they run on the round machine alone; tests/application runs the very same
functions through the GameLedger on the in-memory and the PostgreSQL store (the
``play`` fixture chooses).

Casino cases use two boxes (a lone player needs two, R-C8): the box under test is
box 1, owned by P1; box 2 belongs to P2 and keeps the dealer drawing where the case
needs it. Deal order (R-G2): box 1, box 2, dealer, box 1, box 2, then the play.
"""

from __future__ import annotations

import pytest

from ledger.engine import facts as f
from ledger.errors import BetRefused, DealRefused, DecisionRefused, NotTheOwner
from ledger.rules import CASINO, WILD21, TableLimits
from tests.scripted import Scripted, Start


def casino(play: Start, cards: str, limits: TableLimits | None = None) -> Scripted:
    r: Scripted = play(CASINO, cards, limits).bet("P1", 1).bet("P2", 2).deal()
    return r


def wild(play: Start, cards: str, players: int = 3) -> Scripted:
    r = play(WILD21, cards)
    for n in range(1, players + 1):
        r.bet(f"P{n}", n)
    dealt: Scripted = r.deal()
    return dealt


# -- 1 ---------------------------------------------------------------------------------

def test_case_01_player_19_beats_dealer_18(play: Start) -> None:
    r = casino(play, "TS TH TD 9S 7C 8D").stand("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["TD", "8D"]
    assert r.net("P1", 1) == 10


def test_case_01_player_18_loses_to_dealer_19(play: Start) -> None:
    r = casino(play, "TS TH TD 8S 7C 9D").stand("P1", 1).stand("P2", 2).finish()
    assert r.net("P1", 1) == -10


def test_case_01_player_19_pushes_dealer_19(play: Start) -> None:
    r = casino(play, "TS TH TD 9S 7C 9D").stand("P1", 1).stand("P2", 2).finish()
    assert r.net("P1", 1) == 0
    assert r.outcome("P1", 1) == f.PUSHED


# -- 2 ---------------------------------------------------------------------------------

def test_case_02_bust_loses_even_when_dealer_busts(play: Start) -> None:
    r = casino(play, "TS TH 6D 6S 7C 9H TD 9D").hit("P1", 1)
    assert r.outcome("P1", 1) == f.LOST  # settled at once (R-G3)
    r.stand("P2", 2).finish()
    assert r.m.dealer_total() > 21
    assert r.net("P1", 1) == -10
    assert r.net("P2", 2) == 10


# -- 3 ---------------------------------------------------------------------------------

def test_case_03_dealer_stands_on_soft_17(play: Start) -> None:
    r = casino(play, "TS TH AD 8S 9C 6D 5D").stand("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["AD", "6D"]


def test_case_03_dealer_draws_on_soft_16(play: Start) -> None:
    r = casino(play, "TS TH AD 8S 9C 5D 2D").stand("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["AD", "5D", "2D"]
    assert r.m.dealer_total() == 18


# -- 4 ---------------------------------------------------------------------------------

def test_case_04_natural_beats_dealer_three_card_21_and_pays_3_to_2(play: Start) -> None:
    r = casino(play, "AS TH TD KS 7C 5D 6D").stand("P2", 2)
    hands = [b["hands"][0] for b in r.m.view()["boxes"]]
    assert [(h["natural"], h["settled"]) for h in hands] == [(True, False), (False, False)]
    r.finish()
    assert r.dealer_cards() == ["TD", "5D", "6D"]
    assert r.net("P1", 1) == 15
    hands = [b["hands"][0] for b in r.m.view()["boxes"]]
    assert [(h["natural"], h["settled"]) for h in hands] == [(True, True), (False, True)]


def test_case_04_natural_pushes_dealer_natural(play: Start) -> None:
    r = casino(play, "AS TH TD KS 7C AD").stand("P2", 2).finish()
    assert r.m.dealer_natural()
    assert r.net("P1", 1) == 0


# -- 5 ---------------------------------------------------------------------------------

def test_case_05_dealer_natural_takes_the_double_too(play: Start) -> None:
    r = casino(play, "6S TH TD 5S 7C 9H AD").double("P1", 1).stand("P2", 2).finish()
    assert r.m.dealer_natural()
    assert r.net("P1", 1) == -20


# -- 6 ---------------------------------------------------------------------------------

def test_case_06_surrender_then_dealer_natural_loses_half(play: Start) -> None:
    r = casino(play, "TS TH TD 6S 8C AD").surrender("P1", 1).stand("P2", 2).finish()
    assert r.m.dealer_natural()
    assert r.net("P1", 1) == -5
    assert r.outcome("P1", 1) == f.SURRENDERED


# -- 7 ---------------------------------------------------------------------------------

def test_case_07_surrender_refused_against_an_ace(play: Start) -> None:
    r = casino(play, "TS TH AD 6S 8C")
    with pytest.raises(DecisionRefused, match="upcard is an ace") as e:
        r.surrender("P1", 1)
    assert e.value.rule == "R-C1"


def test_case_07_surrender_refused_after_any_box_has_hit(play: Start) -> None:
    r = casino(play, "TS TH 9D 2S 5C 6H").hit("P1", 1)
    with pytest.raises(DecisionRefused, match="window has closed") as e:
        r.surrender("P2", 2)
    assert e.value.rule == "R-X3"


# -- 8 ---------------------------------------------------------------------------------

def test_case_08_resplit_eights_to_three_hands_and_no_fourth(play: Start) -> None:
    r = casino(play, "8S TH 9D 8H 9C 8D 8C").split("P1", 1)
    assert [h.cards for h in r.m.boxes[1].hands] == [["8S", "8D"], ["8H"]]
    r.split("P1", 1, 0)
    hands = r.m.boxes[1].hands
    assert len(hands) == 3
    assert r.m.boxes[1].order == [0, 2, 1]  # the re-split hand goes right of hand 0 (R-X4)
    assert hands[0].cards == ["8S", "8C"]
    with pytest.raises(DecisionRefused, match="3 hands") as e:
        r.split("P1", 1, 0)
    assert e.value.rule == "R-C3"


# -- 9 ---------------------------------------------------------------------------------

def test_case_09_split_aces_take_one_card_and_21_pays_even(play: Start) -> None:
    r = casino(play, "AS TH TD AH 9C KD 5S 7D").split("P1", 1)
    hands = r.m.boxes[1].hands
    assert [h.cards for h in hands] == [["AS", "KD"], ["AH", "5S"]]
    assert all(h.done for h in hands)
    with pytest.raises(DecisionRefused, match="exactly one card") as e:
        r.hit("P1", 1, 0)
    assert e.value.rule == "R-C3"
    r.stand("P2", 2).finish()
    assert r.m.dealer_total() == 17
    assert r.net("P1", 1, hand=0) == 10  # 21 on a split ace is not a natural
    assert r.net("P1", 1, hand=1) == -10


# -- 10 --------------------------------------------------------------------------------

def test_case_10_insurance_capped_at_half_and_pays_2_to_1(play: Start) -> None:
    r = play(CASINO, "TS 9H AD TH 9S KD").bet("P1", 1, 100).bet("P1", 2, 60).deal()
    with pytest.raises(DecisionRefused, match="limit of 80") as e:
        r.insure("P1", 81)
    assert e.value.rule == "R-X6"
    r.insure("P1", 50).stand("P1", 1).stand("P1", 2).finish()
    assert r.m.dealer_natural()
    assert r.insurance_net("P1") == 100


def test_case_10_insurance_below_the_minimum_chip_is_refused(play: Start) -> None:
    r = play(CASINO, "TS 9H AD TH 9S").bet("P1", 1, 100).bet("P1", 2, 60).deal()
    with pytest.raises(DecisionRefused, match="minimum chip of 5") as e:
        r.insure("P1", 3)
    assert e.value.rule == "R-C5"


# -- 11 --------------------------------------------------------------------------------

def test_case_11_even_money_is_paid_at_once(play: Start) -> None:
    r = casino(play, "AS TH AD KS 7C").even_money("P1", 1)
    assert r.net("P1", 1) == 10
    assert r.outcome("P1", 1) == f.EVEN_MONEY


def test_case_11_declined_even_money_then_dealer_nine_pays_3_to_2(play: Start) -> None:
    r = casino(play, "AS TH AD KS 7C 9D").stand("P2", 2).finish()
    assert r.dealer_cards() == ["AD", "9D"]
    assert r.net("P1", 1) == 15


def test_case_11_declined_even_money_then_dealer_natural_pushes(play: Start) -> None:
    r = casino(play, "AS TH AD KS 7C KD").stand("P2", 2).finish()
    assert r.net("P1", 1) == 0


# -- 12 --------------------------------------------------------------------------------

def test_case_12_777_mixed_suits_pays_3_to_1(play: Start) -> None:
    r = casino(play, "7S TH TD 7H 7C 7D 9D").hit("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["TD", "9D"]
    assert r.net("P1", 1) == 30


def test_case_12_678_suited_pays_5_to_1_against_dealer_21(play: Start) -> None:
    r = casino(play, "6C TH TD 7C 7H 8C 6D 5D").hit("P1", 1).stand("P2", 2).finish()
    assert r.m.dealer_total() == 21
    assert r.net("P1", 1) == 50


def test_case_12_777_suited_loses_to_dealer_natural(play: Start) -> None:
    r = casino(play, "7S TH AD 7S 7H 7S KD").hit("P1", 1).stand("P2", 2).finish()
    assert r.m.dealer_natural()
    assert r.net("P1", 1) == -10


def test_case_12_678_mixed_suits_is_an_ordinary_21(play: Start) -> None:
    r = casino(play, "6C TH TD 7D 7H 8C 9D").hit("P1", 1).stand("P2", 2).finish()
    assert r.net("P1", 1) == 10


def test_case_12_doubled_777_is_no_prize(play: Start) -> None:
    r = casino(play, "7S TH TD 7H 7C 7D 9D").double("P1", 1).stand("P2", 2).finish()
    assert r.net("P1", 1) == 20


# -- 13 --------------------------------------------------------------------------------

def test_case_13_box_total_over_the_table_maximum_is_refused(play: Start) -> None:
    r = play(CASINO, "").bet("P1", 1, 600)
    with pytest.raises(BetRefused, match="over the table maximum of 1000") as e:
        r.bet("P2", 1, 500)
    assert e.value.rule == "R-C8"


def test_case_13_a_fourth_bettor_on_a_box_is_refused(play: Start) -> None:
    r = play(CASINO, "").bet("P1", 1).bet("P2", 1).bet("P3", 1)
    with pytest.raises(BetRefused, match="3 bettors") as e:
        r.bet("P4", 1)
    assert e.value.rule == "R-C8"


def test_case_13_a_co_bettor_cannot_hit(play: Start) -> None:
    r = play(CASINO, "TS TH 9D 5S 7C").bet("P1", 1).bet("P2", 1).bet("P2", 2).deal()
    with pytest.raises(NotTheOwner, match="Only the box owner, P1") as e:
        r.hit("P2", 1)
    assert e.value.rule == "R-C4"


# -- 14 --------------------------------------------------------------------------------

def test_case_14_a_lone_player_on_one_box_is_not_dealt(play: Start) -> None:
    r = play(CASINO, "TS TH 9D 5S 7C").bet("P1", 1)
    with pytest.raises(DealRefused, match="at least 2 boxes") as e:
        r.deal()
    assert e.value.rule == "R-C8"
    assert r.m.phase == "betting"


def test_case_14_a_lone_player_on_two_boxes_is_dealt(play: Start) -> None:
    r = play(CASINO, "TS TH 9D 5S 7C").bet("P1", 1).bet("P1", 2).deal()
    assert r.m.phase == "playing"


def test_case_14_two_players_on_one_box_each_are_dealt(play: Start) -> None:
    r = play(CASINO, "TS TH 9D 5S 7C").bet("P1", 1).bet("P2", 2).deal()
    assert r.m.phase == "playing"


# -- wild21: deal order box 1..3, dealer face down, box 1..3, dealer face up ------------

def test_case_15_wild_draw_forfeits_others_dealer_draws_to_21_and_pushes(play: Start) -> None:
    r = wild(play, "TS 9H 8C TD 7S 5H 9C 9D W 2D").stand("P1", 1).hit("P2", 2)
    forfeited = [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    assert {(x.bettor, x.box) for x in forfeited} == {("P1", 1), ("P3", 3)}
    assert r.m.turn() is None
    r.finish()
    assert r.dealer_cards() == ["TD", "9D", "2D"]
    assert r.outcome("P2", 2) == f.PUSHED
    assert r.net("P1", 1) == -10
    assert r.net("P3", 3) == -10


def test_case_16_dealer_busts_the_wild_hand_wins_the_forfeits_stay(play: Start) -> None:
    r = wild(play, "TS 9H 8C TD 7S 5H 9C 6D W TH").stand("P1", 1).hit("P2", 2).finish()
    assert r.dealer_cards() == ["TD", "6D", "TH"]
    assert r.net("P2", 2) == 10
    assert r.outcome("P1", 1) == f.FORFEITED
    assert r.outcome("P3", 3) == f.FORFEITED


def test_case_17_dealer_face_up_wild_card_makes_21_and_forfeits_nobody(play: Start) -> None:
    r = wild(play, "TS TH 9C 5D 7S AH 5S W 4S").stand("P1", 1).hit("P3", 3).stand("P3", 3)
    assert not [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    r.finish()
    assert r.dealer_cards() == ["5D", "W"]
    assert r.m.dealer_total() == 21
    assert r.outcome("P2", 2) == f.PUSHED  # T,A is an ordinary 21 in wild21 (R-X11)
    assert r.net("P1", 1) == -10
    assert r.net("P3", 3) == -10


def test_the_hole_card_is_recorded_face_down_until_the_dealer_turns_it_over(
        play: Start) -> None:
    # R-S2, R-H2: wild21's first dealer card is dealt face down. The deal records where it
    # went, not its face, which is recorded when the dealer turns it over: until then nobody
    # reading the record knows the dealer's hand (here the wild card: 21, R-W5).
    r = wild(play, "TS 9H 8C W 7S 5H 9C 6D TH")
    (hole,) = [x for x in r.facts if isinstance(x, f.CardDealt) and not x.face_up]
    assert (type(hole), hole.card, hole.position) == (f.CardDealt, "hidden", 3)
    assert "W" not in [x.card for x in r.facts if isinstance(x, f.CardDealt)]
    assert r.m.view()["dealer"]["cards"] == ["hidden", "6D"]
    r.stand("P1", 1).hit("P2", 2).stand("P3", 3).finish()
    (turned,) = [x for x in r.facts if isinstance(x, f.HoleCardRevealed)]
    assert (turned.card, turned.position) == ("W", 3)
    assert r.dealer_cards() == ["W", "6D"]
    assert r.m.dealer_total() == 21
    assert [r.outcome(f"P{n}", n) for n in (1, 2, 3)] == [f.LOST] * 3
    assert not [x for x in r.facts if isinstance(x, f.StakeForfeited)]


def test_case_18_two_wild_cards_in_the_deal_exempt_both_holders(play: Start) -> None:
    r = wild(play, "W 9H TC TD 7S 5H W 9D 2D")
    forfeited = [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    assert [(x.bettor, x.box) for x in forfeited] == [("P2", 2)]
    # Both holders are named, in seat order, whichever box is counted first.
    assert forfeited[0].reason == ("forfeited: P1 (box 1) and P3 (box 3) hold wild cards after "
                                   "the deal (R-W2, R-W3)")
    assert r.m.turn() is None
    r.finish()
    assert r.outcome("P1", 1) == f.PUSHED
    assert r.outcome("P3", 3) == f.PUSHED


def test_case_19_dealer_draws_until_above_every_live_total(play: Start) -> None:
    r = wild(play, "TS TH TD 7S KH 8D 2C AC", players=2).stand("P1", 1).stand("P2", 2).finish()
    assert r.dealer_cards() == ["TD", "8D", "2C", "AC"]
    assert r.net("P1", 1) == -10
    assert r.net("P2", 2) == -10

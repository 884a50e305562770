"""Basic strategy for the `casino` preset: ENHC, 6 decks, S17, DAS, early surrender vs 10."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.cards import STANDARD_DECK, WILD, Card
from ledger.plays import Play
from ledger.strategy import basic_strategy, choose

H, S, D, P, R = Play.HIT, Play.STAND, Play.DOUBLE, Play.SPLIT, Play.SURRENDER
ALL = frozenset(Play)
NO_SURRENDER = ALL - {R}
HIT_STAND = frozenset({H, S})


def hand(*codes: str) -> list[Card]:
    return [Card(c) for c in codes]


def play(cards: str, upcard: str, legal: frozenset[Play] = ALL) -> Play:
    return basic_strategy(hand(*cards.split()), Card(upcard), legal)


# Hard totals


def test_hard_8_hits_against_6() -> None:
    assert play("5S 3H", "6D") == H


def test_hard_9_doubles_against_3_to_6_and_hits_against_2_and_7() -> None:
    assert [play("5S 4H", up) for up in ("2D", "3D", "6D", "7D")] == [H, D, D, H]


def test_hard_10_doubles_against_9_but_hits_against_10_and_ace_without_hole_card() -> None:
    assert [play("6S 4H", up) for up in ("9D", "KD", "AD")] == [D, H, H]


def test_hard_11_doubles_against_9_but_hits_against_10_and_ace_without_hole_card() -> None:
    assert [play("6S 5H", up) for up in ("9D", "TD", "AD")] == [D, H, H]


def test_hard_12_stands_against_4_to_6_and_hits_against_2_3_and_7() -> None:
    assert [play("TS 2H", up) for up in ("2D", "3D", "4D", "6D", "7D")] == [H, H, S, S, H]


def test_hard_13_stands_against_2() -> None:
    assert play("TS 3H", "2D") == S


def test_hard_16_stands_against_6_and_hits_against_7() -> None:
    assert [play("TS 6H", up) for up in ("6D", "7D")] == [S, H]


def test_hard_17_stands_even_against_an_ace() -> None:
    assert play("TS 7H", "AD") == S


def test_three_card_hard_total_plays_like_two_card_total() -> None:
    assert play("5S 4H 3C", "3D") == H
    assert play("5S 4H 3C", "4D") == S
    assert play("5S 4H 3C", "7D") == H


# Soft totals


def test_soft_13_doubles_against_5_and_6_only() -> None:
    assert [play("AS 2H", up) for up in ("4D", "5D", "6D", "7D")] == [H, D, D, H]


def test_soft_16_doubles_against_4_to_6() -> None:
    assert [play("AS 5H", up) for up in ("3D", "4D", "6D")] == [H, D, D]


def test_soft_17_doubles_against_3_to_6_and_hits_against_2() -> None:
    assert [play("AS 6H", up) for up in ("2D", "3D", "6D", "7D")] == [H, D, D, H]


def test_soft_18_stands_against_2_7_8_doubles_3_to_6_hits_9_10_ace() -> None:
    ups = ("2D", "3D", "6D", "7D", "8D", "9D", "QD", "AD")
    assert [play("AS 7H", up) for up in ups] == [S, D, D, S, S, H, H, H]


def test_soft_19_stands_against_6_when_dealer_stands_on_soft_17() -> None:
    assert play("AS 8H", "6D") == S


def test_multi_card_soft_total_is_read_from_the_soft_chart() -> None:
    assert play("AS 2H 4C", "8D") == H  # soft 17
    assert play("AS 3H 4C", "8D") == S  # soft 18


# Pairs


def test_aces_split_against_10_but_hit_against_an_ace_without_hole_card() -> None:
    assert [play("AS AH", up) for up in ("6D", "TD", "AD")] == [P, P, H]


def test_eights_split_against_9_but_not_against_10_or_ace() -> None:
    assert play("8S 8H", "9D") == P
    assert play("8S 8H", "TD") == R
    assert play("8S 8H", "TD", NO_SURRENDER) == H
    assert play("8S 8H", "AD", NO_SURRENDER) == H


def test_nines_split_against_8_and_9_but_stand_against_7_and_10() -> None:
    assert [play("9S 9H", up) for up in ("6D", "7D", "8D", "9D", "KD")] == [P, S, P, P, S]


def test_tens_never_split_and_mixed_ten_values_count_as_a_pair() -> None:
    assert play("KS TH", "6D") == S
    assert play("KS QH", "5D") == S


def test_fives_are_played_as_hard_10() -> None:
    assert [play("5S 5H", up) for up in ("9D", "TD")] == [D, H]


def test_fours_split_only_against_5_and_6_with_double_after_split() -> None:
    assert [play("4S 4H", up) for up in ("4D", "5D", "6D", "7D")] == [H, P, P, H]


def test_twos_threes_and_sevens_split_against_2_to_7() -> None:
    for pair in ("2S 2H", "3S 3H", "7S 7H"):
        assert [play(pair, up) for up in ("2D", "7D", "8D")] == [P, P, H]


def test_sixes_split_against_2_to_6_and_hit_against_7() -> None:
    assert [play("6S 6H", up) for up in ("2D", "6D", "7D")] == [P, P, H]


# Surrender (early, before the dealer's second card; never against an ace, R-C1)


def test_hard_16_against_10_surrenders_when_allowed() -> None:
    assert play("TS 6H", "KD") == R


def test_hard_14_and_15_against_10_surrender_when_allowed() -> None:
    assert play("TS 4H", "TD") == R
    assert play("9S 6H", "JD") == R


def test_sevens_against_10_surrender_as_hard_14() -> None:
    assert play("7S 7H", "TD") == R


def test_hard_13_against_10_hits_rather_than_surrenders() -> None:
    assert play("TS 3H", "TD") == H


def test_hard_16_against_9_surrenders_but_eights_split() -> None:
    assert play("TS 6H", "9D") == R
    assert play("8S 8H", "9D") == P


def test_hard_15_against_9_hits() -> None:
    assert play("TS 5H", "9D") == H


def test_hard_16_against_an_ace_hits() -> None:
    assert play("TS 6H", "AD", NO_SURRENDER) == H


# Fallbacks when the preferred play is not legal


def test_double_else_hit_when_double_is_not_legal() -> None:
    assert play("6S 5H", "6D", HIT_STAND) == H


def test_double_else_stand_on_soft_18_when_double_is_not_legal() -> None:
    assert play("AS 7H", "4D", HIT_STAND) == S


def test_surrender_else_hit_on_hard_16_against_10_after_the_window() -> None:
    assert play("TS 6H", "TD", HIT_STAND) == H


def test_three_card_hard_16_against_10_hits_because_surrender_is_not_offered() -> None:
    assert play("TS 4H 2C", "TD", HIT_STAND) == H


def test_surrender_else_stand_resolves_a_chart_cell_in_that_order() -> None:
    assert choose("Rs", ALL) == R
    assert choose("Rs", HIT_STAND) == S


def test_split_else_play_the_hard_total_when_no_more_hands_are_allowed() -> None:
    assert play("8S 8H", "6D", NO_SURRENDER - {P}) == S  # hard 16 vs 6 stands
    assert play("8S 8H", "9D", HIT_STAND) == H  # hard 16 vs 9, surrender gone: hit


def test_split_else_play_the_soft_total_for_aces() -> None:
    assert play("AS AH", "6D", HIT_STAND) == H


def test_split_else_play_the_hard_total_for_fours_and_nines() -> None:
    assert play("4S 4H", "5D", ALL - {P}) == H  # hard 8 vs 5
    assert play("9S 9H", "6D", HIT_STAND) == S  # hard 18


def test_after_a_double_only_stand_is_left() -> None:
    assert play("6S 5H", "6D", frozenset({S})) == S


def test_no_legal_play_is_an_error() -> None:
    with pytest.raises(ValueError, match="no legal play"):
        play("TS 6H", "TD", frozenset())


# Ended hands and the dealer's wild card


def test_twenty_one_stands() -> None:
    assert play("AS KH", "TD") == S
    assert play("7S 7H 7C", "6D") == S


def test_a_hand_with_the_wild_card_stands() -> None:
    assert basic_strategy([Card("5S"), WILD], Card("TD"), ALL) == S


def test_a_busted_hand_stands_if_asked() -> None:
    assert play("TS 6H 9C", "TD") == S


def test_an_ended_hand_returns_a_legal_play_when_stand_is_not_offered() -> None:
    assert basic_strategy([WILD], Card("TD"), frozenset({H})) == H


def test_a_single_card_split_hand_hits() -> None:
    assert play("8S", "TD", HIT_STAND) == H


def test_against_a_wild_upcard_surrender_else_hit_toward_21() -> None:
    assert basic_strategy(hand("TS", "9H"), WILD, ALL) == R
    assert basic_strategy(hand("TS", "9H"), WILD, HIT_STAND) == H


# Property: the answer is always legal

cards = st.sampled_from(STANDARD_DECK)


@settings(max_examples=500, deadline=None)
@given(
    player=st.lists(st.one_of(cards, st.just(WILD)), min_size=2, max_size=3),
    upcard=cards,
    extra=st.sets(st.sampled_from([D, P, R])),
)
def test_the_answer_is_always_one_of_the_legal_plays(
    player: list[Card], upcard: Card, extra: set[Play]
) -> None:
    legal = HIT_STAND | extra
    assert basic_strategy(player, upcard, legal) in legal

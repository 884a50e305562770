"""Cards and hand values (R-G1, R-G6, R-W1); the shoe: shuffle, cut, commitment (R-H1..R-H4).

The shuffle is driven through its ``randbelow`` parameter by plain functions written here, so the
expected permutations are worked out by hand, not by a second copy of the algorithm.
"""

from __future__ import annotations

import hashlib
import inspect
import secrets
from collections import Counter
from collections.abc import Callable

import pytest

from api.services import Services
from ledger.application import GameLedger
from ledger.cards import (
    STANDARD_DECK,
    WILD,
    Card,
    describe,
    hand_total,
    is_ace,
    is_card,
    is_ten_value,
    is_two_card_21,
    point_value,
    rank,
    suit,
)
from ledger.errors import LedgerError, ShoeExhausted
from ledger.sealing import ShoeSealer
from ledger.shoe import (
    COMMITMENT_SCHEME,
    SALT_BYTES,
    Shoe,
    canonical_order,
    commitment,
    composition_findings,
    cut_position,
    fresh_order,
    new_salt,
    verify_commitment,
)


def cards(text: str) -> list[Card]:
    return [Card(c) for c in text.split()]


# -- card codes and values (R-G1) -------------------------------------------------------

def test_a_standard_deck_holds_52_distinct_cards_of_4_suits_and_13_ranks() -> None:
    assert len(STANDARD_DECK) == 52
    assert len(set(STANDARD_DECK)) == 52
    assert Counter(suit(c) for c in STANDARD_DECK) == dict.fromkeys("SHDC", 13)
    assert Counter(rank(c) for c in STANDARD_DECK) == dict.fromkeys("A23456789TJQK", 4)
    assert WILD not in STANDARD_DECK


@pytest.mark.parametrize(("code", "value"), [
    ("AS", 1), ("2H", 2), ("9D", 9), ("TC", 10), ("JS", 10), ("QH", 10), ("KD", 10),
])
def test_point_value_counts_the_ace_as_1_and_every_ten_value_card_as_10(
        code: str, value: int) -> None:
    assert point_value(Card(code)) == value


def test_ten_value_cards_are_ten_jack_queen_and_king_but_not_the_wild_card() -> None:
    assert [is_ten_value(Card(c)) for c in ("TS", "JH", "QD", "KC", "9S", "AS", "W")] == [
        True, True, True, True, False, False, False]


def test_the_wild_card_has_rank_w_no_suit_and_is_recognised() -> None:
    assert rank(WILD) == "W"
    assert suit(WILD) == ""
    assert is_card(WILD)
    assert Card("AS") != WILD
    assert not is_ace(WILD)


@pytest.mark.parametrize("code", ["AS", "TD", "KC", "2H", "W"])
def test_is_card_accepts_real_cards_and_the_wild_card(code: str) -> None:
    assert is_card(code)


@pytest.mark.parametrize("code", ["", "1S", "AX", "10S", "as", "w", "WW", "A", "ASS"])
def test_is_card_refuses_unknown_codes(code: str) -> None:
    assert not is_card(code)


# -- hand totals (R-G1, R-W1) -------------------------------------------------------------

@pytest.mark.parametrize(("hand", "total", "soft"), [
    ("", 0, False),
    ("TS 7H", 17, False),
    ("KS QH", 20, False),
    ("AS 6H", 17, True),
    ("AS 6H TD", 17, False),
    ("AS AH", 12, True),
    ("AS AH 9D", 21, True),
    ("AS AH AD AC", 14, True),
    ("AS AH AD AC 7S", 21, True),
    ("AS AH AD AC 8S", 12, False),
    ("AS KH", 21, True),
    ("AS 5H 5D", 21, True),
    ("TS 6H 9D", 25, False),
    ("9S AH AD", 21, True),
    ("9S AH AD 5C", 16, False),
])
def test_a_hand_total_is_the_best_total_counting_one_ace_as_11_when_it_fits(
        hand: str, total: int, soft: bool) -> None:
    assert hand_total(cards(hand)) == (total, soft)


@pytest.mark.parametrize("hand", ["W", "W 5S", "5S W", "TS 6H W", "AS W", "AS AH W", "2S 3C W"])
def test_a_hand_holding_the_wild_card_is_exactly_21_and_never_soft(hand: str) -> None:
    assert hand_total(cards(hand)) == (21, False)


# -- naturals (R-G6, R-X11) --------------------------------------------------------------

@pytest.mark.parametrize("hand", ["AS KH", "KH AS", "AD TC", "JS AC", "QD AH"])
def test_an_ace_and_a_ten_value_card_as_two_cards_make_a_two_card_21(hand: str) -> None:
    assert is_two_card_21(cards(hand))


@pytest.mark.parametrize("hand", ["AS W", "W KH", "AS AH", "TS KH", "AS 5H 5D", "AS 9H",
                                  "AS", "AS KH 2C"])
def test_other_hands_are_not_a_two_card_21(hand: str) -> None:
    assert not is_two_card_21(cards(hand))


# -- describe ------------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "text"), [
    ("7S", "7\u2660"), ("TD", "10\u2666"), ("AH", "A\u2665"), ("QC", "Q\u2663"), ("W", "wild"),
])
def test_describe_shows_rank_and_suit_symbol_and_ten_as_10(code: str, text: str) -> None:
    assert describe(Card(code)) == text


# -- the shuffle (R-H1) ----------------------------------------------------------------------

def identity(n: int) -> int:
    """Always the top of the range: Fisher–Yates then swaps every card with itself."""
    return n - 1


def always_zero(n: int) -> int:
    return 0


def test_a_six_deck_one_wild_shoe_holds_each_card_six_times_and_one_wild_card() -> None:
    order = fresh_order(6, 1)
    assert len(order) == 313
    counts = Counter(order)
    assert counts[WILD] == 1
    assert {c: counts[c] for c in STANDARD_DECK} == dict.fromkeys(STANDARD_DECK, 6)
    assert set(counts) == {*STANDARD_DECK, WILD}


@pytest.mark.parametrize(("decks", "wild"), [(1, 0), (6, 0), (8, 4)])
def test_fresh_order_composition_follows_decks_and_wild_cards(decks: int, wild: int) -> None:
    order = fresh_order(decks, wild, always_zero)
    assert len(order) == 52 * decks + wild
    assert Counter(order) == Counter(list(STANDARD_DECK) * decks + [WILD] * wild)


def test_a_randbelow_that_never_swaps_leaves_the_decks_in_order_then_the_wild_cards() -> None:
    assert fresh_order(2, 1, identity) == [*STANDARD_DECK, *STANDARD_DECK, WILD]


def test_a_randbelow_always_zero_rotates_the_order_left_by_one() -> None:
    # i = n-1 .. 1 each swaps position i with position 0: card k ends at k-1, card 0 at the end.
    assert fresh_order(1, 0, always_zero) == [*STANDARD_DECK[1:], STANDARD_DECK[0]]


def test_a_single_chosen_swap_moves_the_wild_card_to_the_front() -> None:
    def swap_last_with_first(n: int) -> int:
        return 0 if n == 53 else n - 1

    order = fresh_order(1, 1, swap_last_with_first)
    assert order == [WILD, *STANDARD_DECK[1:], STANDARD_DECK[0]]


def test_two_chosen_swaps_give_the_hand_worked_permutation() -> None:
    # n = 53: i=52 swaps with 10, i=51 swaps with 52 (itself), i=50 swaps with 0, rest identity.
    picks = {53: 10, 51: 0}

    def chosen(n: int) -> int:
        return picks.get(n, n - 1)

    deck = [*STANDARD_DECK, WILD]
    expected = list(deck)
    expected[52], expected[10] = deck[10], WILD
    expected[50], expected[0] = deck[0], deck[50]
    assert fresh_order(1, 1, chosen) == expected


def test_the_shuffle_asks_randbelow_for_shrinking_bounds_i_plus_1() -> None:
    bounds: list[int] = []

    def recording(n: int) -> int:
        bounds.append(n)
        return n // 2

    fresh_order(1, 1, recording)
    assert bounds == list(range(53, 1, -1))


def test_the_default_source_of_the_shuffle_is_secrets_randbelow() -> None:
    default = inspect.signature(fresh_order).parameters["randbelow"].default
    assert default is secrets.randbelow
    assert inspect.signature(Shoe.shuffle).parameters["randbelow"].default is secrets.randbelow


def test_the_ledger_and_the_api_shuffle_with_secrets_randbelow_unless_told_otherwise() -> None:
    # The shuffle's source is passed down from the ledger: its default, and the API's ledger
    # built without LEDGER_RANDBELOW, must be the secure one (R-H1).
    assert inspect.signature(GameLedger.__init__).parameters["randbelow"].default \
        is secrets.randbelow
    services = Services({"PERSISTENCE_MODULE": "eventsourcing.popo"}, ShoeSealer.new_key())
    ledger = services.ledger()
    try:
        assert ledger._randbelow is secrets.randbelow
    finally:
        ledger.close()


def test_a_real_shuffle_is_a_permutation_of_the_shoe() -> None:
    order = fresh_order(6, 1)
    assert sorted(order) == sorted([*list(STANDARD_DECK) * 6, WILD])


def test_shoe_shuffle_uses_the_given_randbelow() -> None:
    shoe = Shoe.shuffle(1, 0, 75, always_zero)
    assert shoe.reveal() == (*STANDARD_DECK[1:], STANDARD_DECK[0])


# -- the cut card (R-H4) -----------------------------------------------------------------

@pytest.mark.parametrize(("size", "percent", "cut"), [
    (312, 75, 234), (313, 75, 234), (52, 75, 39), (100, 50, 50), (313, 90, 281),
])
def test_the_cut_card_sits_at_the_penetration_percentage_rounded_down(
        size: int, percent: int, cut: int) -> None:
    assert cut_position(size, percent) == cut


def test_a_shuffled_six_deck_one_wild_shoe_puts_the_cut_card_at_75_percent() -> None:
    shoe = Shoe.shuffle(6, 1, 75)
    assert shoe.size == 313
    assert shoe.cut == 234
    assert shoe.position == 0
    assert not shoe.cut_card_out


# -- drawing ----------------------------------------------------------------------------

def test_draw_returns_each_card_with_its_position_in_order() -> None:
    shoe = Shoe(cards("AS KH 7D"), cut=2)
    assert [shoe.draw() for _ in range(3)] == [("AS", 0), ("KH", 1), ("7D", 2)]
    assert shoe.position == 3
    assert shoe.remaining == 0


def test_a_shoe_resumed_at_a_position_draws_from_there() -> None:
    shoe = Shoe(cards("AS KH 7D 2C"), cut=3, position=2)
    assert shoe.draw() == ("7D", 2)
    assert shoe.remaining == 1


def test_the_cut_card_is_out_once_the_position_reaches_it() -> None:
    shoe = Shoe(cards("AS KH 7D 2C"), cut=2)
    shoe.draw()
    assert not shoe.cut_card_out
    shoe.draw()
    assert shoe.cut_card_out


def test_drawing_from_an_empty_shoe_raises_shoe_exhausted_and_keeps_the_position() -> None:
    shoe = Shoe(cards("AS"), cut=1)
    shoe.draw()
    with pytest.raises(ShoeExhausted) as e:
        shoe.draw()
    assert isinstance(e.value, LedgerError)
    assert e.value.rule == "R-H4"
    assert e.value.message.endswith(".")
    assert shoe.position == 1


@pytest.mark.parametrize(("cut", "position"), [(0, 0), (4, 0), (2, -1), (2, 4)])
def test_a_shoe_refuses_a_cut_card_or_position_outside_the_order(cut: int, position: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        Shoe(cards("AS KH 7D"), cut=cut, position=position)


def test_reveal_gives_the_whole_order_whatever_has_been_drawn() -> None:
    shoe = Shoe(cards("AS KH 7D"), cut=2)
    shoe.draw()
    assert shoe.reveal() == ("AS", "KH", "7D")


# -- commitment (R-H2) ------------------------------------------------------------------

ORDER = cards("AS KH 7D W 2C")
SALT = bytes(range(32))


def test_the_canonical_order_is_the_card_codes_joined_by_commas() -> None:
    assert canonical_order(ORDER) == b"AS,KH,7D,W,2C"


def test_the_commitment_is_sha256_of_scheme_salt_hex_and_order() -> None:
    expected = hashlib.sha256(
        COMMITMENT_SCHEME.encode() + b"\n" + SALT.hex().encode() + b"\n" + b"AS,KH,7D,W,2C"
    ).hexdigest()
    assert commitment(ORDER, SALT) == expected
    assert COMMITMENT_SCHEME == "pitboss-shoe-v1"


def test_a_revealed_order_and_salt_verify_against_their_commitment() -> None:
    c = commitment(ORDER, SALT)
    assert verify_commitment([str(x) for x in ORDER], SALT.hex(), c)


def test_a_full_shuffled_shoe_verifies_after_its_reveal() -> None:
    shoe = Shoe.shuffle(6, 1, 75)
    salt = new_salt()
    c = commitment(shoe.reveal(), salt)
    assert verify_commitment(list(shoe.reveal()), salt.hex(), c)


def test_swapping_two_cards_of_the_order_fails_verification() -> None:
    c = commitment(ORDER, SALT)
    swapped = ["KH", "AS", "7D", "W", "2C"]
    assert not verify_commitment(swapped, SALT.hex(), c)


def test_dropping_or_adding_a_card_fails_verification() -> None:
    c = commitment(ORDER, SALT)
    assert not verify_commitment(["AS", "KH", "7D", "W"], SALT.hex(), c)
    assert not verify_commitment(["AS", "KH", "7D", "W", "2C", "3C"], SALT.hex(), c)


def test_a_wrong_salt_fails_verification() -> None:
    c = commitment(ORDER, SALT)
    other = bytes(31) + b"\x01"
    assert not verify_commitment([str(x) for x in ORDER], other.hex(), c)


@pytest.mark.parametrize("salt_hex", ["zz", "0", "not hex", "00 1"])
def test_a_salt_that_is_not_hex_fails_verification(salt_hex: str) -> None:
    c = commitment(ORDER, SALT)
    assert not verify_commitment([str(x) for x in ORDER], salt_hex, c)


@pytest.mark.parametrize("bad", ["XX", "1S", "", "as", "10D"])
def test_an_unknown_card_code_in_the_reveal_fails_verification(bad: str) -> None:
    c = commitment(ORDER, SALT)
    assert not verify_commitment(["AS", "KH", bad, "W", "2C"], SALT.hex(), c)


def test_a_tampered_commitment_fails_verification() -> None:
    c = commitment(ORDER, SALT)
    flipped = ("0" if c[0] != "0" else "1") + c[1:]
    assert not verify_commitment([str(x) for x in ORDER], SALT.hex(), flipped)
    assert not verify_commitment([str(x) for x in ORDER], SALT.hex(), c.upper())


def test_a_commitment_with_non_ascii_characters_fails_verification_without_raising() -> None:
    assert not verify_commitment([str(x) for x in ORDER], SALT.hex(), "\u00e9" * 64)


def test_the_commitment_depends_on_the_salt() -> None:
    assert commitment(ORDER, SALT) != commitment(ORDER, bytes(32))


def test_the_commitment_depends_on_the_order() -> None:
    assert commitment(ORDER, SALT) != commitment(list(reversed(ORDER)), SALT)


def test_a_commitment_is_64_lowercase_hex_characters_and_deterministic() -> None:
    c = commitment(ORDER, SALT)
    assert c == commitment(list(ORDER), bytes(SALT))
    assert len(c) == 64
    assert set(c) <= set("0123456789abcdef")


def test_a_new_salt_is_32_random_bytes() -> None:
    a, b = new_salt(), new_salt()
    assert len(a) == len(b) == SALT_BYTES == 32
    assert a != b


def make_randbelow(values: list[int]) -> Callable[[int], int]:
    it = iter(values)

    def randbelow(n: int) -> int:
        return next(it)

    return randbelow


def test_the_same_randbelow_answers_give_the_same_shoe_and_commitment() -> None:
    answers = [n // 3 for n in range(313, 1, -1)]
    a = fresh_order(6, 1, make_randbelow(answers))
    b = fresh_order(6, 1, make_randbelow(answers))
    assert a == b
    assert commitment(a, SALT) == commitment(b, SALT)


def test_a_revealed_order_is_checked_for_the_cards_a_shoe_of_its_size_holds() -> None:
    order = [str(c) for c in fresh_order(2, 1)]
    assert composition_findings(order, 2, 1, 105) == []
    swapped = list(order)
    swapped[order.index("KH")] = "AS"
    assert composition_findings(swapped, 2, 1, 105) == [
        "the revealed order is not 2 decks and 1 wild cards (R-H1): AS 3 times, not 2, "
        "KH 1 times, not 2"]
    (size, cards) = composition_findings(order[:-1], 2, 1, 105)
    assert size == "the revealed order holds 104 cards; the shoe was recorded with 105 (R-H1)"
    assert cards.startswith("the revealed order is not 2 decks and 1 wild cards (R-H1): ")
    stacked = ["AS" if c[0] in "TJQK" else c for c in order]
    (finding,) = composition_findings(stacked, 2, 1, 105)
    assert finding.endswith(", and 9 other cards")  # 16 tens and the ace: 8 named

"""Every refusal of the round machine: its type, its rule, a readable sentence, and no change.

Each test brings a round to the moment of the request and asks for something a rule forbids. A
refusal must raise the typed error naming the rule (R-…) it enforces with a sentence a dealer
understands, and must leave the round exactly as it was: same state, no fact emitted (the machine
reports every fact it emits to a recording sink, so even a fact emitted before a late refusal
would show), and no card taken from the shoe.

Casino deal order (R-G2): box 1, box 2 (, box 3), dealer, box 1, box 2 (, box 3), then the play.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ledger.engine import facts as f
from ledger.engine.machine import BETTING_CHANGES_MAX, RULINGS_MAX, Legal, RoundMachine
from ledger.engine.readjudicate import readjudicate
from ledger.errors import (
    BetRefused,
    DealRefused,
    DecisionRefused,
    LedgerError,
    NameRefused,
    NotTheOwner,
    NotYourTurn,
    RoundClosed,
)
from ledger.rules import CASINO, CASINO_WILD, WILD21, RuleSet, TableLimits
from tests.scripted import Scripted, StackedShoe


class Watched(Scripted):
    """A scripted round whose machine reports every fact it emits to ``emitted``."""

    def __init__(self, rules: RuleSet, cards: str, limits: TableLimits | None = None) -> None:
        super().__init__(rules, cards, limits)
        self.emitted: list[f.Fact] = []
        self.m = RoundMachine(rules, limits or TableLimits(), sink=self._record)

    def _record(self, fact: f.Fact) -> None:
        self.emitted.append(fact)
        self.m.apply(fact)


def snapshot(m: RoundMachine) -> Any:
    """Everything a refusal must leave alone."""
    boxes = [(b.number, list(b.bettors), dict(b.initial), list(b.order), b.was_split,
              [(list(h.cards), dict(h.stakes), h.status, h.done, h.doubled, h.stood,
                h.split_aces) for h in b.hands])
             for b in m.boxes.values()]
    return (m.view(reveal_hole=True), m.phase, boxes, list(m.box_order), list(m.dealer),
            m.window_open, m.pending, dict(m.insurance), dict(m.open_stakes), m.staked,
            dict(m.results), m.paid_back, m.house, m.dealer_result, m.void_reason,
            list(m.rulings), m.hole_revealed)


def assert_sentence(text: str) -> None:
    assert text[:1].isupper(), text
    assert text.endswith("."), text
    assert len(text.split()) >= 4, text
    assert not any(bad in text for bad in ("{", "}", "None", "Traceback", "<")), text


def refused(r: Watched, kind: type[LedgerError], rule: str, action: Callable[[], object],
            match: str | None = None) -> LedgerError:
    """Run ``action`` and check it is refused with ``kind`` and ``rule`` and changed nothing."""
    before = snapshot(r.m)
    counts = (len(r.facts), len(r.emitted), r.shoe.position)
    with pytest.raises(kind, match=match) as info:
        action()
    err = info.value
    assert type(err) is kind, f"{type(err).__name__}: {err}"
    assert err.rule == rule, str(err)
    assert_sentence(err.message)
    assert str(err) == (f"{err.message} ({rule})" if rule else err.message)
    assert snapshot(r.m) == before
    assert (len(r.facts), len(r.emitted), r.shoe.position) == counts
    return err


def table(cards: str = "", limits: TableLimits | None = None,
          rules: RuleSet = CASINO) -> Watched:
    return Watched(rules, cards, limits)


def two_boxes(cards: str, rules: RuleSet = CASINO, limits: TableLimits | None = None,
              stake: int = 10) -> Watched:
    """P1 owns box 1, P2 owns box 2, dealt."""
    return Watched(rules, cards, limits).bet("P1", 1, stake).bet("P2", 2, stake).deal()


def shared_box(cards: str, co_bettors: int = 1) -> Watched:
    """P1 owns box 1 with co-bettors P2 (and P3); box 2 belongs to P4. Dealt."""
    r = Watched(CASINO, cards).bet("P1", 1)
    for n in range(2, 2 + co_bettors):
        r.bet(f"P{n}", 1)
    return r.bet("P4", 2).deal()


# == betting (R-C8, R-X14, R-M1) ==============================================================

def test_a_stake_below_the_table_minimum_is_refused() -> None:
    r = table().bet("P1", 2)
    refused(r, BetRefused, "R-C8", lambda: r.bet("P1", 1, 9), match="below the table minimum")


def test_a_stake_over_the_table_maximum_on_an_empty_box_is_refused() -> None:
    r = table()
    refused(r, BetRefused, "R-C8", lambda: r.bet("P1", 1, 1001),
            match="over the table maximum of 1000")


def test_stakes_of_several_bettors_over_the_table_maximum_of_one_box_are_refused() -> None:
    r = table().bet("P1", 1, 600).bet("P2", 1, 390)
    refused(r, BetRefused, "R-C8", lambda: r.bet("P3", 1, 20), match="would hold 1010")
    r.bet("P3", 1, 10)  # exactly the maximum is accepted
    assert sum(r.m.boxes[1].initial.values()) == 1000


def test_the_table_maximum_is_per_box_not_per_table() -> None:
    r = table().bet("P1", 1, 1000)
    r.bet("P1", 2, 1000)
    refused(r, BetRefused, "R-C8", lambda: r.bet("P2", 2, 10))


def test_a_fourth_bettor_on_a_box_is_refused() -> None:
    r = table().bet("P1", 1).bet("P2", 1).bet("P3", 1)
    refused(r, BetRefused, "R-C8", lambda: r.bet("P4", 1), match="3 bettors")


def test_a_second_stake_by_the_same_bettor_on_one_box_is_refused() -> None:
    r = table().bet("P1", 1, 50)
    refused(r, BetRefused, "R-X14", lambda: r.bet("P1", 1, 20), match="already has a stake")


def test_a_stake_is_raised_by_withdrawing_and_placing_again() -> None:
    r = table().bet("P1", 1, 50)
    r._log(r.m.withdraw_stake("P1", 1))
    r.bet("P1", 1, 70)
    assert r.m.boxes[1].initial == {"P1": 70}


@pytest.mark.parametrize("box", [0, -1, 8, 100])
def test_a_box_number_outside_the_table_is_refused(box: int) -> None:
    r = table()
    refused(r, BetRefused, "R-C8", lambda: r.bet("P1", box), match="does not exist")


def test_a_box_number_beyond_a_small_tables_boxes_is_refused() -> None:
    r = table(limits=TableLimits(boxes=3)).bet("P1", 3)
    refused(r, BetRefused, "R-C8", lambda: r.bet("P1", 4), match="boxes 1 to 3")


@pytest.mark.parametrize("box", [1.5, "2"])
def test_a_box_number_that_is_not_a_whole_number_is_refused(box: Any) -> None:
    r = table()
    refused(r, BetRefused, "R-C8", lambda: r.bet("P1", box))


@pytest.mark.parametrize("amount", [0, -10, 10.0, 10.5, "10", True, False, None])
def test_an_amount_that_is_not_a_positive_whole_number_is_refused(amount: Any) -> None:
    r = table()
    refused(r, BetRefused, "R-M1", lambda: r.bet("P1", 1, amount),
            match="positive whole number")


def test_an_amount_that_is_not_a_multiple_of_the_minimum_unit_is_refused() -> None:
    r = table(limits=TableLimits(min_unit=5))
    refused(r, BetRefused, "R-M2", lambda: r.bet("P1", 1, 12), match="minimum unit 5")


def test_an_amount_above_the_largest_supported_is_refused() -> None:
    r = table(limits=TableLimits(table_max=10**12))
    refused(r, BetRefused, "R-M1", lambda: r.bet("P1", 1, 10**12 + 1),
            match="at most 1000000000000 minor units")


@pytest.mark.parametrize("bettor", ["", "x" * 65, None, 7, "ann ", "a\tb"])
def test_a_bettor_without_a_proper_name_is_refused(bettor: Any) -> None:
    r = table()
    # RULES.md has no rule on names: none is cited. A name too long was a BetRefused naming no
    # field, one with a space around it a NameRefused (the ledger's check of a player's name).
    error = refused(r, NameRefused, "", lambda: r.bet(bettor, 1),
                    match="A bettor is 1 to 64 printable characters without surrounding spaces")
    assert error.field == "bettor"


def test_withdrawing_a_stake_nobody_placed_is_refused() -> None:
    r = table().bet("P1", 1)
    refused(r, BetRefused, "R-X14", lambda: r.m.withdraw_stake("P1", 2), match="no stake")


def test_withdrawing_another_bettors_stake_is_refused() -> None:
    r = table().bet("P1", 1)
    refused(r, BetRefused, "R-X14", lambda: r.m.withdraw_stake("P2", 1), match="P2 has no stake")


def test_placing_a_stake_after_betting_closed_is_a_bet_refused() -> None:
    # It was a DecisionRefused, where every other refusal of a stake is a BetRefused.
    r = two_boxes("TS 9H 7D 6S 7C")
    refused(r, BetRefused, "R-C8", lambda: r.bet("P3", 3), match="Betting is closed")


def test_withdrawing_a_stake_after_betting_closed_is_a_bet_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 7C")
    refused(r, BetRefused, "R-C8", lambda: r.m.withdraw_stake("P1", 1),
            match="Betting is closed")


def test_closing_betting_twice_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 7C 2D")
    refused(r, DecisionRefused, "R-C8", lambda: r.deal())


# == the deal (R-C8) =========================================================================

def test_dealing_with_no_stake_is_refused() -> None:
    r = table("TS 9H 7D 6S 7C")
    refused(r, DealRefused, "R-C8", lambda: r.deal(), match="No stake")


def test_dealing_after_every_stake_was_withdrawn_is_refused() -> None:
    r = table("TS 9H 7D 6S 7C").bet("P1", 1)
    r._log(r.m.withdraw_stake("P1", 1))
    refused(r, DealRefused, "R-C8", lambda: r.deal())


def test_dealing_to_a_lone_player_on_one_box_is_refused() -> None:
    r = table("TS 9H 7D 6S 7C").bet("P1", 1)
    refused(r, DealRefused, "R-C8", lambda: r.deal(), match="at least 2 boxes")


def test_a_lone_player_at_a_table_of_fewer_boxes_than_he_must_play_is_told_to_wait() -> None:
    # "must play at least 2 boxes" asked for what a table of one box cannot hold.
    r = table("TS 9H 7D 6S 7C", limits=TableLimits(boxes=1)).bet("P1", 1)
    refused(r, DealRefused, "R-C8", lambda: r.deal(),
            match="this table has 1: another player must stake before the cards are dealt")


def test_a_two_card_21_in_a_game_without_naturals_stood_and_cannot_surrender() -> None:
    # It stands automatically (R-G4), and the turn passed it by; surrender was offered and
    # taken all the same, half the stake given up on a 21.
    plain = CASINO.evolve(name="no naturals", naturals=False, insurance=False,
                          even_money=False)
    r = Watched(plain, "AS 9H 7D KH 8C").bet("P1", 1).bet("P2", 2).deal()
    refused(r, DecisionRefused, "R-X3", lambda: r.surrender("P1", 1),
            match="A hand of 21 stands automatically")


def test_a_split_box_whose_first_hand_busted_is_refused_surrender_as_any_split_box() -> None:
    # Its second hand still live, it was told "Box 1 is already bust" (R-G3).
    r = two_boxes("8S 9H 7D 8H 9C 5D TS KS").split("P1", 1).hit("P1", 1, 0)
    assert [h.status for h in r.m.boxes[1].hands] == ["bust", "live"]
    refused(r, DecisionRefused, "R-X3", lambda: r.surrender("P1", 1), match="window has closed")


@pytest.mark.parametrize("first", ["stand", "wild card"])
def test_a_split_box_is_refused_surrender_as_a_split_box_whatever_its_first_hand_did(
        first: str) -> None:
    # With hand 1 still live: "a box that stood cannot surrender", "a hand holding the wild
    # card has ended its turn", said of the box from its first hand.
    if first == "stand":
        r = two_boxes("8S 9H 7D 8H 9C 2D 3D").split("P1", 1).stand("P1", 1, 0)
    else:
        r = two_boxes("8S 9H 7D 8H 9C W 3D", CASINO_WILD).split("P1", 1)
    refused(r, DecisionRefused, "R-X3", lambda: r.surrender("P1", 1), match="window has closed")


def test_even_money_on_a_split_box_is_refused_as_a_split_box_whatever_its_first_hand_did() -> None:
    # Its first hand bust, the box was told "already bust" (R-G3), with hand 1 live.
    r = two_boxes("8S 9H AD 8H 9C 6D TC 3D").split("P1", 1).hit("P1", 1, 0)
    assert [h.status for h in r.m.boxes[1].hands] == ["bust", "live"]
    refused(r, DecisionRefused, "R-C6", lambda: r.even_money("P1", 1),
            match="Box 1 does not hold a natural: it was split")


def test_a_lone_player_at_a_one_box_table_no_second_stake_fits_is_told_no_round_can_be_dealt(
        ) -> None:
    # Opened before such tables were refused: "another player must stake" sent the dealer to a
    # stake over the table maximum, then to one below its minimum.
    r = table("TS 9H 7D 6S 7C", limits=TableLimits(boxes=1, table_min=10, table_max=15))
    r.bet("P1", 1)
    refused(r, DealRefused, "R-C8", lambda: r.deal(),
            match="takes no second stake .* no round can be dealt under the limits this one "
                  "started with; a manager voids it")
    assert r.m.to_finish().startswith("a manager voids it")  # a round keeps its limits


def test_a_lone_player_whose_stakes_fill_every_box_is_told_to_withdraw_one() -> None:
    # One bettor a box, two boxes, three to play alone: "another player must stake", who was
    # then refused on either box.
    rules = CASINO.evolve(name="two seats", bettors_per_box=1, min_boxes_lone_player=3)
    r = Watched(rules, "TS 9H 7D 6S 7C", TableLimits(boxes=2)).bet("P1", 1).bet("P1", 2)
    refused(r, DealRefused, "R-C8", lambda: r.deal(),
            match="where his stakes leave no box another player may stake on .*: he withdraws "
                  "one")
    with pytest.raises(BetRefused, match="the most this table allows"):
        r.m.place_stake("P2", 2, 10)


def test_a_lone_player_whose_stake_leaves_no_room_for_a_second_is_told_to_lower_it() -> None:
    # "Another player must stake": 10 was over the box's maximum, 5 below the table minimum.
    r = table("TS 9H 7D 6S 7C", limits=TableLimits(boxes=1, table_min=10, table_max=100))
    r.bet("P1", 1, 95)
    refused(r, DealRefused, "R-C8", lambda: r.deal(),
            match="his stakes of 95 leave no room for another player's minimum of 10: he "
                  "lowers them")


def test_a_lone_player_whose_second_box_was_withdrawn_is_not_dealt() -> None:
    r = table("TS 9H 7D 6S 7C").bet("P1", 1).bet("P1", 2)
    r._log(r.m.withdraw_stake("P1", 2))
    refused(r, DealRefused, "R-C8", lambda: r.deal(), match="only player")


def test_a_lone_player_with_a_co_bettor_on_his_box_is_dealt() -> None:
    r = table("TS 9H 7D 6S 7C").bet("P1", 1).bet("P2", 1).deal()
    assert r.m.phase == "playing"


@pytest.mark.parametrize("decision", ["hit", "stand", "double", "split"])
def test_a_playing_decision_before_the_deal_is_refused(decision: str) -> None:
    r = table("TS 9H 7D 6S 7C").bet("P1", 1).bet("P2", 2)
    refused(r, DecisionRefused, "R-G2", lambda: getattr(r, decision)("P1", 1),
            match="Betting is still open")


def test_dealer_play_and_insurance_before_the_deal_are_refused() -> None:
    r = table("TS 9H 7D 6S 7C").bet("P1", 1).bet("P2", 2)
    refused(r, DecisionRefused, "R-G2", lambda: r.dealer())
    refused(r, DecisionRefused, "R-G2", lambda: r.insure("P1", 5))


# == who decides and when (R-C4, R-C3, R-G4) ====================================================

PLAYS = ["hit", "stand", "double", "split"]


@pytest.mark.parametrize("decision", PLAYS)
@pytest.mark.parametrize("who", ["P2", "P4", "P9"])
def test_a_playing_decision_by_anyone_but_the_owner_is_refused(decision: str, who: str) -> None:
    # Box 1: P1 owns 8,8 with co-bettor P2; box 2 belongs to P4; P9 has no stake.
    r = shared_box("8S 9H 7D 8H 9C")
    refused(r, NotTheOwner, "R-C4", lambda: getattr(r, decision)(who, 1),
            match="Only the box owner, P1")


@pytest.mark.parametrize("decision", PLAYS)
def test_a_later_box_acting_before_an_earlier_one_is_refused(decision: str) -> None:
    r = two_boxes("8S 9H 7D 8H 9C")
    refused(r, NotYourTurn, "R-C3", lambda: getattr(r, decision)("P2", 2),
            match="this box's turn: box 1, hand 0 plays first \\(hands play left to right")


def test_a_split_hand_acting_before_the_hand_to_its_left_is_refused() -> None:
    r = two_boxes("8S 9H 7D 8H 9C 2D").split("P1", 1)
    refused(r, NotYourTurn, "R-C3", lambda: r.hit("P1", 1, 1), match="hand 0 plays first")


@pytest.mark.parametrize("play", ["double", "split"])
def test_a_split_hand_waiting_for_its_turn_is_told_so_not_that_it_never_may(play: str) -> None:
    # With its one card, it was refused a double "only on its first two cards" (R-C2), which
    # it may well make once its turn comes (and a split the same way).
    r = two_boxes("8S 9H 7D 8H 9C 2D").split("P1", 1)
    refused(r, NotYourTurn, "R-C3", lambda: getattr(r, play)("P1", 1, 1),
            match="hand 0 plays first")


@pytest.mark.parametrize(("play", "said"), [("double", "This game has no doubling"),
                                            ("split", "This game has no splitting")])
def test_a_play_the_game_does_not_have_is_said_so_before_the_turn(play: str, said: str) -> None:
    # "It is not this box's turn" invited a player to wait for a play no turn would allow.
    rules = CASINO.evolve(name="plain", double=False, split=False)
    r = Watched(rules, "8S 8H 7D 9S 8C").bet("P1", 1).bet("P2", 2).deal()
    refused(r, DecisionRefused, "R-C2" if play == "double" else "R-C3",
            lambda: getattr(r, play)("P2", 2), match=said)


@pytest.mark.parametrize(("play", "said", "rule"), [
    ("double", "This game has no doubling", "R-C2"),
    ("surrender", "This game has no surrender", "R-C1"),
    ("insure", "This game has no insurance", "R-C5")])
def test_a_play_the_game_lacks_is_said_so_while_an_answer_is_awaited(play: str, said: str,
                                                                    rule: str) -> None:
    # "P2 must first answer the owner's split on box 1" sent P4 to wait for a play no answer
    # would allow.
    rules = CASINO.evolve(name="plain", double=False, surrender=False, insurance=False,
                          even_money=False)
    r = Watched(rules, "8S 9H AD 8H 9C 2D").bet("P1", 1).bet("P2", 1).bet("P4", 2).deal()
    r.split("P1", 1)
    assert r.m.pending is not None
    action = {"double": lambda: r.double("P4", 2), "surrender": lambda: r.surrender("P4", 2),
              "insure": lambda: r.insure("P4", 5)}[play]
    refused(r, DecisionRefused, rule, action, match=said)


def test_a_double_while_a_co_bettor_must_answer_is_refused_naming_the_answer() -> None:
    # The hand held its first two cards, and was told it could be doubled only on them.
    r = shared_box("5S 9H 7D 6H 9C TD").double("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: r.double("P1", 1),
            match="P2 must first answer the owner's double on box 1")


# A hand of box 1 whose turn has ended, the rule that ended it, and why (a hit, double or
# split there is refused by its own rule first).
FINISHED: dict[str, tuple[Callable[[], Watched], int, str, str]] = {
    "stood": (lambda: two_boxes("8S 9H 7D 8H 9C").stand("P1", 1), 0, "R-X3",
              "standing is final"),
    "doubled": (lambda: two_boxes("6S 9H 7D 5S 9C 2C").double("P1", 1), 0, "R-C2",
                "doubled hand takes one card"),
    "split ace": (lambda: two_boxes("AS 9H 7D AH 9C 5C 6C").split("P1", 1), 0, "R-C3",
                  "split ace takes one card"),
    "wild card": (lambda: two_boxes("9S 9H 7D W 9C", CASINO_WILD), 0, "R-W1",
                  "holds a wild card"),
    "21": (lambda: two_boxes("5S 9H 7D 6S 9C TD").hit("P1", 1), 0, "R-G4",
           "21 stands automatically"),
}


@pytest.mark.parametrize("finished", FINISHED)
def test_standing_on_a_finished_hand_cites_what_finished_it(finished: str) -> None:
    make, hand, rule, why = FINISHED[finished]
    r = make()
    assert r.m.boxes[1].hands[hand].done
    refused(r, NotYourTurn, rule, lambda: r.stand("P1", 1, hand),
            match=f"finished its turn: .*{why}")


@pytest.mark.parametrize("decision", PLAYS)
def test_a_playing_decision_on_a_hand_that_stood_is_refused(decision: str) -> None:
    r = two_boxes("8S 9H 7D 8H 9C").stand("P1", 1)
    refused(r, NotYourTurn, "R-X3", lambda: getattr(r, decision)("P1", 1),
            match="finished its turn: it stood")


def test_a_hit_on_a_hand_that_went_over_21_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 9C 8D").hit("P1", 1)
    assert r.m.boxes[1].hands[0].status == "bust"
    refused(r, NotYourTurn, "R-G3", lambda: r.hit("P1", 1), match="finished its turn")


def test_a_hit_on_a_hand_of_21_is_refused() -> None:
    r = two_boxes("5S 9H 7D 6S 9C TD").hit("P1", 1)
    assert r.m.boxes[1].hands[0].cards == ["5S", "6S", "TD"]
    refused(r, DecisionRefused, "R-G4", lambda: r.hit("P1", 1), match="21 stands automatically")


@pytest.mark.parametrize("decision", ["hit", "double", "split"])
def test_a_decision_on_a_split_hand_given_the_wild_card_is_refused_in_the_same_words(
        decision: str) -> None:
    # A hit said "A hand of 21 stands automatically.", a double or split the words here.
    r = two_boxes("8S 9H 7D 8H 9C W 5C", CASINO_WILD).split("P1", 1)
    assert r.m.boxes[1].hands[0].cards == ["8S", "W"]
    refused(r, DecisionRefused, "R-W1", lambda: getattr(r, decision)("P1", 1, 0),
            match=r"^A hand holding the wild card has ended its turn\. \(R-W1\)$")


def test_a_decision_on_a_box_without_a_stake_is_refused() -> None:
    r = two_boxes("8S 9H 7D 8H 9C")
    refused(r, DecisionRefused, "R-C8", lambda: r.hit("P1", 5), match="Box 5 has no stake")


def test_a_decision_on_a_hand_that_does_not_exist_is_refused() -> None:
    r = two_boxes("8S 9H 7D 8H 9C")
    refused(r, DecisionRefused, "R-C3", lambda: r.hit("P1", 1, 1), match="no hand 1")


# == hit, double, split (R-C2, R-C3) =============================================================

def test_a_hit_after_a_double_is_refused() -> None:
    r = two_boxes("5S 9H 7D 6S 9C 2D").double("P1", 1)
    refused(r, DecisionRefused, "R-C2", lambda: r.hit("P1", 1), match="doubled")


@pytest.mark.parametrize("hand", [0, 1])
def test_a_hit_on_split_aces_is_refused(hand: int) -> None:
    r = two_boxes("AS 9H 7D AH 9C 5D 6C").split("P1", 1)
    refused(r, DecisionRefused, "R-C3", lambda: r.hit("P1", 1, hand), match="exactly one card")


def test_a_double_on_a_natural_is_refused() -> None:
    r = two_boxes("AS 9H 7D KS 9C")
    refused(r, DecisionRefused, "R-C2", lambda: r.double("P1", 1), match="natural")


def test_a_double_on_three_cards_is_refused() -> None:
    r = two_boxes("2S 9H 7D 3S 9C 4D").hit("P1", 1)
    refused(r, DecisionRefused, "R-C2", lambda: r.double("P1", 1), match="first two cards")


def test_a_double_on_split_aces_is_refused() -> None:
    r = two_boxes("AS 9H 7D AH 9C 5D 6C").split("P1", 1)
    refused(r, DecisionRefused, "R-C2", lambda: r.double("P1", 1, 0), match="Split aces")


def test_a_double_after_a_split_is_allowed_except_on_aces() -> None:
    r = two_boxes("8S 9H 7D 8H 9C 3D 2C 4C").split("P1", 1).double("P1", 1, 0)
    assert r.m.boxes[1].hands[0].stakes == {"P1": 20}


def test_a_split_of_two_cards_of_different_values_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 9C")
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1), match="same value")


def test_a_split_of_an_ace_and_a_nine_is_refused() -> None:
    r = two_boxes("AS 9H 7D 9S 9C")
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1), match="same value")


def test_a_king_and_a_ten_count_as_a_pair() -> None:
    r = two_boxes("KS 9H 7D TS 9C 2D 3D").split("P1", 1)
    assert [h.cards for h in r.m.boxes[1].hands] == [["KS", "2D"], ["TS"]]


def test_a_split_of_three_cards_is_refused() -> None:
    r = two_boxes("4S 9H 7D 4H 9C 2D").hit("P1", 1)
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1), match="two first cards")


def test_a_split_beyond_three_hands_is_refused() -> None:
    r = two_boxes("8S 9H 7D 8H 9C 8D 8C").split("P1", 1).split("P1", 1, 0)
    assert len(r.m.boxes[1].hands) == 3
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1, 0), match="3 hands")


def test_a_split_beyond_a_house_limit_of_two_hands_is_refused() -> None:
    rules = CASINO.evolve(max_hands_per_box=2)
    r = two_boxes("8S 9H 7D 8H 9C 8D", rules=rules).split("P1", 1)
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1, 0), match="2 hands")


def test_a_split_at_a_house_limit_of_one_hand_says_one_hand() -> None:
    rules = CASINO.evolve(max_hands_per_box=1)
    r = two_boxes("8S 9H 7D 8H 9C 8D", rules=rules)
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1), match="already has 1 hand,")


def test_a_resplit_of_aces_is_refused() -> None:
    r = two_boxes("AS 9H 7D AH 9C AD 6C").split("P1", 1)
    assert r.m.boxes[1].hands[0].cards == ["AS", "AD"]
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1, 0), match="aces")


# == surrender (R-C1, R-X3, R-C4) ==============================================================

def test_surrender_against_a_dealer_ace_is_refused() -> None:
    r = two_boxes("TS 9H AD 6S 9C")
    refused(r, DecisionRefused, "R-C1", lambda: r.surrender("P1", 1), match="upcard is an ace")


def test_surrender_after_a_card_has_left_the_shoe_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 5C 2D").hit("P1", 1)
    refused(r, DecisionRefused, "R-X3", lambda: r.surrender("P2", 2), match="window has closed")


def test_surrender_of_a_box_whose_turn_has_not_come_is_allowed_in_the_window() -> None:
    r = two_boxes("TS 9H 7D 6S 5C").surrender("P2", 2)
    assert r.outcome("P2", 2) == f.SURRENDERED


def test_surrender_after_standing_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 5C").stand("P1", 1)
    refused(r, DecisionRefused, "R-X3", lambda: r.surrender("P1", 1), match="Standing is final")


def test_surrender_after_a_split_is_refused() -> None:
    r = two_boxes("8S 9H 7D 8H 9C 2D 3D").split("P1", 1)
    refused(r, DecisionRefused, "R-X3", lambda: r.surrender("P1", 1), match="window has closed")


def test_surrender_after_a_double_is_refused() -> None:
    r = two_boxes("5S 9H 7D 6S 9C 2D").double("P1", 1)
    refused(r, DecisionRefused, "R-X3", lambda: r.surrender("P1", 1), match="window has closed")


def test_surrender_of_a_natural_is_refused() -> None:
    r = two_boxes("AS 9H TD KS 9C")
    refused(r, DecisionRefused, "R-C1", lambda: r.surrender("P1", 1), match="natural")


def test_surrender_by_a_co_bettor_is_refused() -> None:
    r = shared_box("TS 9H 7D 6S 9C")
    refused(r, NotTheOwner, "R-C4", lambda: r.surrender("P2", 1), match="Only the box owner, P1")


def test_surrendering_a_box_twice_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 9C").surrender("P1", 1)
    refused(r, DecisionRefused, "R-C1", lambda: r.surrender("P1", 1), match="already surrendered")


def test_surrender_of_a_box_forfeited_at_the_deal_says_so_before_the_dealers_ace() -> None:
    # Both are true; the box's own state is what a dealer can act on (it said "the upcard").
    r = two_boxes("TS W AD 6S 7C", rules=CASINO_WILD)
    refused(r, DecisionRefused, "R-W2", lambda: r.surrender("P1", 1),
            match="Box 1 is already forfeited")


def test_surrender_of_a_box_without_a_stake_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 9C")
    refused(r, DecisionRefused, "R-C8", lambda: r.surrender("P1", 4), match="Box 4 has no stake")


# == insurance (R-C5, R-X6, R-X3) ===============================================================

def test_insurance_against_a_non_ace_upcard_is_refused() -> None:
    r = two_boxes("TS 9H KD 6S 9C")
    refused(r, DecisionRefused, "R-C5", lambda: r.insure("P1", 5), match="upcard is an ace")


def test_a_second_insurance_by_one_player_is_refused() -> None:
    r = Watched(CASINO, "TS 9H AD 6S 9C").bet("P1", 1, 100).bet("P1", 2, 100).deal()
    r.insure("P1", 20)
    refused(r, DecisionRefused, "R-C5", lambda: r.insure("P1", 20), match="one per player")


def test_insurance_over_half_the_players_stakes_is_refused() -> None:
    r = two_boxes("TS 9H AD 6S 9C", stake=15)
    refused(r, DecisionRefused, "R-X6", lambda: r.insure("P1", 8),
            match=r"limit of 7: half of his stakes at the table \(15\), rounded down\.")
    r.insure("P1", 7)
    assert r.m.insurance == {"P1": 7}


def test_the_insurance_cap_named_is_a_whole_minimum_unit() -> None:
    # Half of 15 is 7, which a minimum unit of 5 does not allow: the most that can go is 5.
    limits = TableLimits(min_unit=5, min_chip=5, table_min=15)
    r = two_boxes("TS 9H AD 6S 9C", limits=limits, stake=15)
    # Said so: "half of his stakes" alone gave a cashier the wrong arithmetic.
    refused(r, DecisionRefused, "R-X6", lambda: r.insure("P1", 10),
            match=r"limit of 5: half of his stakes at the table \(15\), rounded down to the "
                  r"table's minimum unit of 5\.")
    r.insure("P1", 5)
    assert r.m.insurance == {"P1": 5}


@pytest.mark.parametrize("amount", [5, 10])
def test_insurance_out_of_reach_is_said_so_whatever_the_amount(amount: int) -> None:
    # Half of a stake of 10 is 5, below the minimum chip of 10: 10 was "over the limit of 5",
    # 5 "below the minimum chip of 10".
    limits = TableLimits(min_chip=10, table_min=10)
    r = two_boxes("TS 9H AD 6S 9C", limits=limits, stake=10)
    refused(r, DecisionRefused, "R-X6", lambda: r.insure("P1", amount),
            match=r"^P1 cannot insure: the most he may, 5 \(half of his stakes at the table "
                  r"\(10\)\), is below the minimum chip of 10\.")


def test_the_insurance_cap_counts_the_players_co_bets() -> None:
    r = Watched(CASINO, "TS 9H AD 6S 9C").bet("P1", 1, 10).bet("P2", 2, 10).bet("P1", 2, 20)
    r.deal()
    refused(r, DecisionRefused, "R-X6", lambda: r.insure("P1", 16), match="limit of 15")
    r.insure("P1", 15)


def test_insurance_below_the_minimum_chip_is_refused() -> None:
    r = two_boxes("TS 9H AD 6S 9C", stake=100)
    refused(r, DecisionRefused, "R-C5", lambda: r.insure("P1", 4), match="minimum chip of 5")


def test_insurance_after_a_card_has_left_the_shoe_is_refused() -> None:
    r = two_boxes("TS 9H AD 6S 9C 2D").hit("P1", 1)
    refused(r, DecisionRefused, "R-X3", lambda: r.insure("P2", 5), match="window has closed")


def test_insurance_by_a_player_with_no_stake_is_refused() -> None:
    r = two_boxes("TS 9H AD 6S 9C")
    refused(r, DecisionRefused, "R-C5", lambda: r.insure("P9", 5), match="P9 has no stake")


@pytest.mark.parametrize("amount", [0, -5, 5.0, True, "5"])
def test_insurance_of_an_amount_that_is_not_a_positive_whole_number_is_refused(
        amount: Any) -> None:
    r = two_boxes("TS 9H AD 6S 9C")
    refused(r, BetRefused, "R-M1", lambda: r.insure("P1", amount))


# == even money (R-C6, R-X3) ===================================================================

def test_even_money_without_a_natural_is_refused() -> None:
    r = two_boxes("TS 9H AD 9S 9C")
    refused(r, DecisionRefused, "R-C6", lambda: r.even_money("P1", 1), match="natural")


def test_even_money_against_a_non_ace_upcard_is_refused() -> None:
    r = two_boxes("AS 9H 9D KS 9C")
    refused(r, DecisionRefused, "R-C6", lambda: r.even_money("P1", 1), match="dealer's ace")


def test_even_money_after_a_card_has_left_the_shoe_is_refused() -> None:
    r = two_boxes("AS 9H AD KS 5C 2D").hit("P2", 2)
    refused(r, DecisionRefused, "R-X3", lambda: r.even_money("P1", 1), match="window has closed")


def test_even_money_taken_twice_is_refused() -> None:
    r = two_boxes("AS 9H AD KS 9C").even_money("P1", 1)
    refused(r, DecisionRefused, "R-C6", lambda: r.even_money("P1", 1),
            match="P1 has already taken even money on box 1")


def test_even_money_on_a_natural_forfeited_to_a_wild_card_cites_the_forfeit() -> None:
    # casino_wild: box 1 (P1) is dealt the wild card first, forfeiting P2's A,K on box 2.
    r = two_boxes("W AS AD 9S KH", CASINO_WILD)
    assert r.m.boxes[2].hands[0].status == "forfeited"
    refused(r, DecisionRefused, "R-W2", lambda: r.even_money("P2", 2),
            match="already forfeited")


def test_even_money_taken_then_the_box_forfeited_is_refused_as_taken() -> None:
    # casino_wild: co-bettor P3 takes even money on box 1's natural, then P2 draws the wild
    # card and box 1 is forfeited: P3's stake was not (R-W2), yet he was told it was.
    r = Watched(CASINO_WILD, "AS 9H AD KC 5D W 9C").bet("P1", 1, 20).bet("P3", 1, 10)
    r.bet("P2", 2, 30).deal().even_money("P3", 1).hit("P2", 2)
    assert r.m.boxes[1].hands[0].status == "forfeited"
    refused(r, DecisionRefused, "R-C6", lambda: r.even_money("P3", 1),
            match="P3 has already taken even money on box 1")


def test_even_money_by_a_bettor_without_a_stake_on_the_box_is_refused() -> None:
    r = two_boxes("AS 9H AD KS 9C")
    refused(r, DecisionRefused, "R-C6", lambda: r.even_money("P2", 1), match="P2 has no open")


# == co-bettor answers (R-C4, R-X9) ============================================================

def test_a_co_bettor_answering_before_his_turn_is_refused() -> None:
    r = shared_box("5S 9H 7D 6S 9C 2D", co_bettors=2).double("P1", 1)
    assert r.m.pending is not None
    assert r.m.pending.bettors == ("P2", "P3")
    refused(r, NotYourTurn, "R-X9", lambda: r.answer("P3", 1, 0, True), match="P2 answers")


@pytest.mark.parametrize("who", ["P4", "P9", "P1"])
def test_an_answer_by_a_bettor_who_was_not_asked_is_refused(who: str) -> None:
    r = shared_box("5S 9H 7D 6S 9C 2D").double("P1", 1)
    refused(r, DecisionRefused, "R-C4", lambda: r.answer(who, 1, 0, True),
            match="no double or split to answer")


def test_an_answer_with_nothing_to_answer_is_refused() -> None:
    r = shared_box("5S 9H 7D 6S 9C 2D")
    refused(r, DecisionRefused, "R-C4", lambda: r.answer("P2", 1, 0, True))


def test_an_answer_about_another_hand_is_refused() -> None:
    r = shared_box("8S 9H 7D 8H 9C 2D").split("P1", 1)
    refused(r, DecisionRefused, "R-C4", lambda: r.answer("P2", 1, 1, True))
    refused(r, DecisionRefused, "R-C4", lambda: r.answer("P2", 2, 0, True))


@pytest.mark.parametrize("decision", ["stand", "hit", "double", "split"])
def test_another_box_cannot_play_while_a_co_bettor_answer_is_pending(decision: str) -> None:
    r = shared_box("5S 9H 7D 6S 9C 2D").double("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: getattr(r, decision)("P4", 2),
            match="P2 must first answer")


def test_the_owner_cannot_stand_while_a_co_bettor_answer_is_pending() -> None:
    r = shared_box("5S 9H 7D 6S 9C 2D").double("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: r.stand("P1", 1), match="P2 must first answer")


@pytest.mark.parametrize("hand", [0, 1])
def test_split_hands_cannot_play_while_a_co_bettor_answer_is_pending(hand: int) -> None:
    r = shared_box("8S 9H 7D 8H 9C 2D").split("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: r.hit("P1", 1, hand), match="P2 must first answer")


def test_the_dealer_cannot_play_while_a_co_bettor_answer_is_pending() -> None:
    r = shared_box("5S 9H 7D 6S 9C 2D").double("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: r.dealer(), match="P2 must answer")


def test_surrender_is_refused_while_a_co_bettor_answer_is_pending() -> None:
    r = shared_box("5S 9H 7D 6S 9C 2D").double("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: r.surrender("P4", 2))


def test_insurance_is_refused_while_a_co_bettor_answer_is_pending() -> None:
    r = shared_box("5S 9H AD 6S 9C 2D").double("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: r.insure("P4", 5))


def test_even_money_is_refused_while_a_co_bettor_answer_is_pending() -> None:
    r = shared_box("5S AH AD 6S KC 2D").double("P1", 1)
    refused(r, NotYourTurn, "R-X9", lambda: r.even_money("P4", 2))


# == the dealer and settlement (R-C3, R-G5) ====================================================

def test_the_dealer_cannot_play_before_every_hand_has_finished() -> None:
    r = two_boxes("TS 9H 7D 6S 9C").stand("P1", 1)
    refused(r, NotYourTurn, "R-C3", lambda: r.dealer(), match="Box 2, hand 0 has not finished")


def test_settling_before_the_dealer_has_played_is_refused() -> None:
    r = two_boxes("TS 9H 7D 6S 9C").stand("P1", 1).stand("P2", 2)
    refused(r, DecisionRefused, "R-G5", lambda: r.settle(), match="dealer")


# == closed rounds (R-V1, R-V2) ================================================================

def commands(r: Watched) -> dict[str, Callable[[], object]]:
    d = r.shoe.draw
    m = r.m
    return {
        "place_stake": lambda: m.place_stake("P1", 3, 10),
        "withdraw_stake": lambda: m.withdraw_stake("P1", 1),
        "close_betting": lambda: m.close_betting(d),
        "hit": lambda: m.hit("P1", 1, 0, d),
        "stand": lambda: m.stand("P1", 1, 0, d),
        "double": lambda: m.double("P1", 1, 0, d),
        "split": lambda: m.split("P1", 1, 0, d),
        "answer": lambda: m.answer("P2", 1, 0, True, d),
        "surrender": lambda: m.surrender("P1", 1),
        "insure": lambda: m.insure("P1", 5),
        "take_even_money": lambda: m.take_even_money("P1", 1),
        "play_dealer": lambda: m.play_dealer(d),
        "settle": lambda: m.settle(),
        "void": lambda: m.void("late complaint"),
    }


COMMANDS = list(commands(Watched(CASINO, "")))


def settled_round() -> Watched:
    r = two_boxes("8S 9H 7D 8H 9C TD").stand("P1", 1).stand("P2", 2).finish()
    assert r.m.phase == "settled"
    return r


def voided_round() -> Watched:
    r = two_boxes("8S 9H 7D 8H 9C")
    r._log(r.m.void("wrong shoe loaded"))
    assert r.m.phase == "voided"
    return r


@pytest.mark.parametrize("command", COMMANDS)
def test_any_decision_on_a_settled_round_is_refused(command: str) -> None:
    r = settled_round()
    refused(r, RoundClosed, "R-V2", commands(r)[command], match="settled")


@pytest.mark.parametrize("command", COMMANDS)
def test_any_decision_on_a_voided_round_is_refused(command: str) -> None:
    r = voided_round()
    refused(r, RoundClosed, "R-V1", commands(r)[command], match="voided")


def test_a_ruling_on_a_voided_round_is_refused_as_rulings_are_on_settled_rounds_only() -> None:
    # It cited the void (R-V1), where the rule that refuses it is the ruling's (R-V2).
    r = voided_round()
    refused(r, RoundClosed, "R-V2", lambda: r.m.record_ruling("misdeal", [3], {"P1": 10}),
            match="A ruling is recorded only on a settled round; this one was voided")


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "void"])
def test_a_round_whose_shoe_was_abandoned_takes_nothing_but_its_void(command: str) -> None:
    # Its view said box 1 was to act, and settle's refusal sent the dealer to a play refused.
    r = two_boxes("8S 9H 7D 8H 9C TD")  # P1 8,8 and P2 9,9 against a 7: P1 to act
    r._log(r.m.abandon_shoe("shoe key lost"))
    view = r.m.view()
    assert (view["turn"], view["pending"], view["window_open"]) == (None, None, False)
    assert r.m.legal() == [Legal("void")]
    assert r.m.to_finish() == "a manager voids it (its shoe was abandoned)"
    refused(r, DealRefused, "R-V1", commands(r)[command],
            match=r"^The round's shoe was abandoned \(shoe key lost\): no card can be dealt "
                  r"from it, and the round takes no more stakes or decisions; a manager voids "
                  r"it\.")


def test_a_round_at_the_cap_with_every_stake_withdrawn_is_told_a_manager_voids_it() -> None:
    # "No stake has been placed": a hundred had, and were withdrawn, at the cap.
    r = Watched(CASINO, "TS 9H 7D 6S 9C TD")
    while r.m.facts < BETTING_CHANGES_MAX:
        r.bet("P1", 1)
        r.m.withdraw_stake("P1", 1)
    refused(r, DealRefused, "R-C8", lambda: r.deal(),
            match=r"^No stake is on any box; there is nothing to deal: this round has taken "
                  r"the 200 stakes placed and withdrawn it takes at most, so a manager voids it")


def test_voiding_a_settled_round_is_refused_pointing_to_a_ruling() -> None:
    # It said the round "takes no more decisions": a manager was not told what to do instead.
    r = settled_round()
    refused(r, RoundClosed, "R-V2", lambda: r.m.void("dealer misread a card"),
            match="a settled round is not voided: a manager corrects it with a ruling")


@pytest.mark.parametrize("reason", ["", "   "])
def test_a_void_without_a_reason_is_refused(reason: str) -> None:
    r = two_boxes("8S 9H 7D 8H 9C")
    refused(r, DecisionRefused, "R-V1", lambda: r.m.void(reason), match="needs a reason")


# == rulings (R-V2) ===========================================================================

def test_a_ruling_on_a_settled_round_is_recorded() -> None:
    r = settled_round()
    results, house = dict(r.m.results), r.m.house
    out = r.m.record_ruling("  card misread ", [5], {"P1": 10, "P2": -4})
    assert out == [f.RulingRecorded(reason="card misread", corrects=[5],
                                    adjustments={"P1": 10, "P2": -4})]
    assert r.m.results == {**results, "P1": results["P1"] + 10, "P2": results["P2"] - 4}
    assert r.m.house == house - 6


def test_a_ruling_on_an_unsettled_round_is_refused() -> None:
    r = two_boxes("8S 9H 7D 8H 9C")
    refused(r, DecisionRefused, "R-V2", lambda: r.m.record_ruling("early", [1], {"P1": 10}),
            match="settled")


@pytest.mark.parametrize("reason", ["", "  "])
def test_a_ruling_without_a_reason_is_refused(reason: str) -> None:
    r = settled_round()
    refused(r, DecisionRefused, "R-V2", lambda: r.m.record_ruling(reason, [5], {"P1": 10}),
            match="needs a reason")


@pytest.mark.parametrize("corrects", [[], [0], [-1], [True], ["5"], [5, 5]])
def test_a_ruling_that_names_no_valid_event_is_refused(corrects: list[Any]) -> None:
    r = settled_round()
    refused(r, DecisionRefused, "R-V2",
            lambda: r.m.record_ruling("misread", corrects, {"P1": 10}), match="event versions")


def test_a_voided_rounds_hands_are_returned_not_settled() -> None:
    m, shoe = RoundMachine(CASINO, TableLimits()), StackedShoe("AS TH TD KS 7C 5D 6D")
    m.place_stake("P1", 1, 10)
    m.place_stake("P2", 2, 10)
    m.close_betting(shoe.draw)
    m.void("misdeal")
    assert [b["hands"][0]["settled"] for b in m.view()["boxes"]] == [False, False]


def test_a_round_takes_a_bounded_number_of_rulings() -> None:
    r = settled_round()
    for n in range(RULINGS_MAX):
        r.m.record_ruling(f"correction {n}", [5], {"P1": 1})
    # A limit on a round's size, which no rule states: none is cited.
    refused(r, DecisionRefused, "",
            lambda: r.m.record_ruling("one more", [5], {"P1": 1}), match="the most one round")


def test_a_round_takes_a_bounded_number_of_stakes_placed_and_withdrawn() -> None:
    # One stake placed and withdrawn over and over grew a round, and every read of it, without
    # end (80,000 events: a 68 MB replay).
    r = Watched(CASINO, "TS 9H 7D 6S 9C TD")
    while r.m.facts < BETTING_CHANGES_MAX:
        r.bet("P1", 1)
        r.m.withdraw_stake("P1", 1)
    refused(r, BetRefused, "", lambda: r.bet("P1", 1),
            match="the most one round takes: no stake is left on it: a manager voids it")
    refused(r, BetRefused, "", lambda: r.m.withdraw_stake("P1", 1),
            match="the most one round")
    assert [x.decision for x in r.m.legal()] == ["void"]  # nor are they offered
    # A limit on requests, not a rule: a round recorded before it, with more, re-adjudicates.
    r.m.betting_changes_max = None
    r.bet("P1", 1).bet("P2", 2)
    r.m.betting_changes_max = BETTING_CHANGES_MAX
    refused(r, BetRefused, "", lambda: r.bet("P3", 3),
            match="deal it with the stakes in place, or a manager voids it")
    r.deal().stand("P1", 1).stand("P2", 2).finish()
    recorded = list(r.emitted)
    assert r.m.facts > BETTING_CHANGES_MAX + 2
    assert readjudicate(CASINO, TableLimits(), recorded) == []


def test_the_advice_at_the_cap_on_stakes_placed_and_withdrawn_is_advice_that_can_be_taken() -> None:
    # At one change left, "withdraw it and place the new amount": the withdrawal was taken, the
    # new stake refused, and the box left with none.
    r = Watched(CASINO, "TS 9H 7D 6S 9C TD")
    while r.m.facts < BETTING_CHANGES_MAX - 2:
        r.bet("P1", 1)
        r.m.withdraw_stake("P1", 1)
    r.bet("P1", 1)
    refused(r, BetRefused, "R-X14", lambda: r.bet("P1", 1, 20),
            match="already has a stake on box 1; it stays as it is, as this round takes one "
                  "more stake placed or withdrawn at most")
    # At the cap, a lone player's stakes that cannot be dealt (R-C8): "deal it" was said.
    r = Watched(CASINO.evolve(name="three boxes", min_boxes_lone_player=3), "TS 9H 7D 6S 9C TD")
    while r.m.facts < BETTING_CHANGES_MAX - 2:
        r.bet("P1", 3)
        r.m.withdraw_stake("P1", 3)
    r.bet("P1", 1).bet("P1", 2)
    refused(r, BetRefused, "", lambda: r.bet("P1", 3),
            match=r"its stakes cannot be dealt \(P1 is the only player and must play at least "
                  r"3 boxes\): a manager voids it\.")
    # And the deal's own refusal asks for no stake the round can no longer take.
    refused(r, DealRefused, "R-C8", lambda: r.deal(),
            match=r"must play at least 3 boxes: this round has taken the 200 stakes placed and "
                  r"withdrawn it takes at most, so a manager voids it\. \(R-C8\)$")


def test_a_ruling_names_only_events_the_round_has() -> None:
    r = settled_round()
    last = 1 + len(r.facts)  # the round's start, then one event per fact
    assert r.m.record_ruling("misread", [1, last], {"P1": 10})
    r = settled_round()
    refused(r, DecisionRefused, "R-V2",
            lambda: r.m.record_ruling("misread", [last + 1], {"P1": 10}),
            match=f"from 1 to {last}")


@pytest.mark.parametrize("adjustments", [{}, {"P1": 0}, {"P1": 10, "P2": 0}, {"P1": 1.5},
                                         {"P1": True}, {"P1": 10**12 + 1}, {"P1": -10**12 - 1}])
def test_a_ruling_with_zero_or_non_whole_amounts_is_refused(adjustments: dict[str, Any]) -> None:
    r = settled_round()
    refused(r, DecisionRefused, "R-V2",
            lambda: r.m.record_ruling("misread", [5], adjustments), match="non-zero whole")


def test_a_ruling_for_a_player_who_had_no_stake_is_refused() -> None:
    r = settled_round()
    refused(r, DecisionRefused, "R-V2",
            lambda: r.m.record_ruling("misread", [5], {"P1": 10, "P9": -10}),
            match="P9 had no stake")


# == wild21: options that game does not have (R-S2) ==============================================
# Deal order: box 1, 2, 3, dealer face down, box 1, 2, 3, dealer face up.

def wild21_round(cards: str) -> Watched:
    return Watched(WILD21, cards).bet("P1", 1).bet("P2", 2).bet("P3", 3).deal()


WILD21_DEAL = "8S 5H 9C TD 8H 6H 7C AD"  # box 1 8,8; box 2 5,6; box 3 9,7; dealer T, A up


def test_wild21_has_no_double() -> None:
    r = wild21_round(WILD21_DEAL)
    refused(r, DecisionRefused, "R-C2", lambda: r.double("P1", 1), match="no doubling")


def test_wild21_has_no_split() -> None:
    r = wild21_round(WILD21_DEAL)
    refused(r, DecisionRefused, "R-C3", lambda: r.split("P1", 1), match="no splitting")


def test_wild21_has_no_surrender() -> None:
    r = wild21_round(WILD21_DEAL)
    refused(r, DecisionRefused, "R-C1", lambda: r.surrender("P2", 2), match="no surrender")


def test_wild21_has_no_insurance_even_against_an_ace() -> None:
    r = wild21_round(WILD21_DEAL)
    assert r.m.upcard == "AD"
    refused(r, DecisionRefused, "R-C5", lambda: r.insure("P1", 5), match="no insurance")


def test_wild21_has_no_even_money() -> None:
    r = wild21_round("AS 5H 9C TD KH 6H 7C AD")
    refused(r, DecisionRefused, "R-C6", lambda: r.even_money("P1", 1), match="no even money")


def test_wild21_allows_one_bettor_per_box() -> None:
    r = Watched(WILD21, "").bet("P1", 1)
    refused(r, BetRefused, "R-C8", lambda: r.bet("P2", 1), match="most this table allows")


def test_wild21_hand_holding_the_wild_card_takes_no_hit() -> None:
    r = wild21_round("W 5H 9C TD 8H 6H 7C 9D")
    refused(r, DecisionRefused, "R-W1", lambda: r.hit("P1", 1))


# == casino_wild: the wild card ends the turn (R-W1) =============================================

def test_a_hand_dealt_the_wild_card_takes_no_hit() -> None:
    r = two_boxes("W 9H 7D 6S 7C", rules=CASINO_WILD)
    refused(r, DecisionRefused, "R-W1", lambda: r.hit("P1", 1))


def test_a_hand_that_drew_the_wild_card_takes_no_further_hit() -> None:
    r = two_boxes("TS 9H 7D 4S 7C W", rules=CASINO_WILD).hit("P1", 1)
    assert r.m.boxes[1].hands[0].cards == ["TS", "4S", "W"]
    refused(r, DecisionRefused, "R-W1", lambda: r.hit("P1", 1))


def test_a_hand_holding_the_wild_card_cannot_double() -> None:
    r = two_boxes("W 9H 7D 6S 7C", rules=CASINO_WILD)
    refused(r, DecisionRefused, "R-W1", lambda: r.double("P1", 1))


def test_a_hand_holding_the_wild_card_cannot_surrender() -> None:
    r = two_boxes("W 9H 7D 6S 7C", rules=CASINO_WILD)
    refused(r, DecisionRefused, "R-W1", lambda: r.surrender("P1", 1), match="wild card")


def test_a_forfeited_hand_takes_no_hit() -> None:
    r = two_boxes("W 9H 7D 6S 7C", rules=CASINO_WILD)
    assert r.m.boxes[2].hands[0].status == "forfeited"
    refused(r, NotYourTurn, "R-W2", lambda: r.hit("P2", 2), match="forfeited")

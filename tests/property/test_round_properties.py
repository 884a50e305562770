"""Properties of whole rounds, over random shoes, tables, stakes and legal decisions.

Each property is checked against an independent reading of the recorded facts
(:class:`Oracle`) rather than against the machine's own bookkeeping: the facts are the
ledger, so what they say must hold by RULES.md on its own.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from ledger.cards import HIDDEN
from ledger.engine import facts as f
from ledger.engine.machine import DECISIONS, HAND_STATUSES, PHASES, RoundMachine
from ledger.errors import LedgerError
from ledger.rules import CASINO_WILD, RuleSet, TableLimits
from tests.property.strategies import (
    POOL,
    PRESETS,
    SETTLED,
    STRANGER,
    VOID_REASON,
    VOIDED,
    Run,
    command_for,
    execute,
    play_round,
    recording_machine,
    rounds,
    shoes,
    table_limits,
)
from tests.scripted import Scripted, StackedShoe

# 500 examples each; PITBOSS_PROPERTY_EXAMPLES raises it for a longer search.
EXAMPLES = max(500, int(os.environ.get("PITBOSS_PROPERTY_EXAMPLES", "500")))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Key = tuple[str, str, int, int]  # (line, bettor, box, hand), as the facts name a stake


# ------------------------------------------------------------------------ the oracle

def total(cards: list[str]) -> int:
    """R-G1, R-W1: the best total of a hand; a wild card makes it 21."""
    if "W" in cards:
        return 21
    points = sum(min("A23456789TJQK".index(c[0]) + 1, 10) for c in cards)
    if any(c[0] == "A" for c in cards) and points <= 11:
        points += 10
    return points


def two_card_21(cards: list[str]) -> bool:
    return len(cards) == 2 and "W" not in cards and total(cards) == 21


@dataclass
class OHand:
    cards: list[str]
    status: str = "live"  # live, bust, surrendered, forfeited
    ended: bool = False
    doubled: bool = False
    split_aces: bool = False


@dataclass
class OBox:
    bettors: list[str] = field(default_factory=list)
    hands: dict[int, OHand] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    was_split: bool = False

    @property
    def owner(self) -> str:
        return self.bettors[0]


class Oracle:
    """Reads facts one by one and notes every rule they break, by property."""

    def __init__(self, rules: RuleSet, min_unit: int) -> None:
        self.rules = rules
        self.unit = min_unit
        self.phase = "betting"
        self.boxes: dict[int, OBox] = {}
        self.box_order: list[int] = []
        self.players: list[str] = []
        self.dealer: list[str] = []
        self.initial_left = 0
        self.open: dict[Key, int] = {}
        self.closed: Counter[Key] = Counter()
        self.staked = 0
        self.returned = 0
        self.house = 0
        self.nets: dict[str, int] = {}
        self.expected_forfeits: set[Key] | None = None
        self.ending: f.Fact | None = None
        self.problems: dict[str, list[str]] = {}

    def problem(self, kind: str, text: str) -> None:
        self.problems.setdefault(kind, []).append(text)

    def feed_all(self, facts: list[f.Fact]) -> Oracle:
        for x in facts:
            self.feed(x)
        self.check_forfeits_done()
        return self

    # -- reading

    def hands_in_order(self) -> list[tuple[int, int, OHand]]:
        return [(n, h, self.boxes[n].hands[h]) for n in self.box_order
                for h in self.boxes[n].order]

    def turn(self) -> tuple[int, int] | None:
        for n, h, hand in self.hands_in_order():
            if not hand.ended:
                return n, h
        return None

    def natural(self, box: int, hand: OHand) -> bool:
        return self.rules.naturals and not self.boxes[box].was_split and \
            two_card_21(hand.cards)

    def prize(self, box: int, hand: OHand) -> bool:
        """R-C7, R-X7: 777, or 678 of one suit, as the first three cards of a plain hand."""
        c = hand.cards
        if not self.rules.prizes or self.boxes[box].was_split or hand.doubled or len(c) != 3 \
                or "W" in c:
            return False
        ranks = sorted(x[0] for x in c)
        return ranks == ["7", "7", "7"] or (ranks == ["6", "7", "8"]
                                            and len({x[1] for x in c}) == 1)

    def live_stakes(self, box: int, hand_id: int) -> list[Key]:
        hand = self.boxes[box].hands[hand_id]
        if hand.status != "live":
            return []
        return [k for k in self.open if k[0] == f.MAIN and k[2] == box and k[3] == hand_id]

    def live_hands(self) -> list[tuple[int, int, OHand]]:
        """Hands whose result is still open: live and holding an open main stake."""
        return [(n, h, hand) for n, h, hand in self.hands_in_order()
                if self.live_stakes(n, h)]

    # -- facts

    def feed(self, x: f.Fact) -> None:
        if self.ending is not None:
            self.problem("stakes", f"{x} follows the end of the round {self.ending}")
        if self.expected_forfeits is not None and not isinstance(x, f.StakeForfeited):
            self.check_forfeits_done()
        handler = getattr(self, "on_" + type(x).__name__)
        handler(x)

    def on_StakePlaced(self, x: f.StakePlaced) -> None:
        b = self.boxes.setdefault(x.box, OBox())
        b.bettors.append(x.bettor)
        self.open_stake((f.MAIN, x.bettor, x.box, 0), x.amount)

    def on_StakeWithdrawn(self, x: f.StakeWithdrawn) -> None:
        b = self.boxes[x.box]
        b.bettors.remove(x.bettor)
        if not b.bettors:
            del self.boxes[x.box]
        key = (f.MAIN, x.bettor, x.box, 0)
        if self.open.pop(key, None) != x.amount:
            self.problem("stakes", f"withdrawn {key} was not held as {x.amount}")
        self.staked -= x.amount

    def on_BettingClosed(self, x: f.BettingClosed) -> None:
        self.phase = "dealing"
        self.box_order = list(x.boxes)
        self.players = list(x.players)
        self.nets = dict.fromkeys(x.players, 0)
        if sorted(self.boxes) != self.box_order:
            self.problem("stakes", f"betting closed on boxes {x.boxes}, staked {self.boxes}")
        for b in self.boxes.values():
            b.hands = {0: OHand([])}
            b.order = [0]
        self.initial_left = 2 * len(x.boxes) + (2 if self.rules.dealer_hole_card else 1)

    def on_CardDealt(self, x: f.CardDealt) -> None:
        if (x.card == "W") != isinstance(x, f.WildCardDrawn):
            self.problem("ended", f"{x}: the wild card fact and the card disagree")
        if x.box == f.DEALER:
            if self.phase == "playing" and self.turn() is not None:
                self.problem("dealer", f"dealer card {x.card} before every hand ended")
            if not x.face_up and x.card != HIDDEN:
                self.problem("dealer", f"{x}: a face-down card recorded with its face")
            self.dealer.append(x.card)
        else:
            self.card_to_hand(x)
        if self.phase == "dealing":
            self.initial_left -= 1
            if not self.initial_left:
                self.end_initial_deal()

    on_WildCardDrawn = on_CardDealt

    def card_to_hand(self, x: f.CardDealt) -> None:
        box = self.boxes[x.box]
        hand = box.hands[x.hand]
        if hand.ended:
            self.problem("ended", f"{x.card} dealt to box {x.box}, hand {x.hand} after it "
                                  f"ended ({hand})")
        if self.phase == "playing" and self.turn() != (x.box, x.hand):
            self.problem("ended", f"{x.card} dealt to box {x.box}, hand {x.hand} out of turn "
                                  f"(turn {self.turn()}, R-X4)")
        hand.cards.append(x.card)
        if self.phase != "playing":
            return
        t = total(hand.cards)
        if t > 21:
            hand.status, hand.ended = "bust", True
        elif t == 21 or hand.doubled or (hand.split_aces and len(hand.cards) == 2):
            hand.ended = True
        if x.card == "W":  # R-W2: every live box of another owner is forfeited at once
            self.expect_forfeits({box.owner})

    def end_initial_deal(self) -> None:
        self.phase = "playing"
        for _, _, hand in self.hands_in_order():
            if total(hand.cards) == 21:  # naturals and wild cards stand (R-G4, R-W1)
                hand.ended = True
        drawers = {self.boxes[n].owner for n, _, hand in self.hands_in_order()
                   if "W" in hand.cards}
        if drawers:  # R-W3: handled together; every holder is exempt
            self.expect_forfeits(drawers)

    def expect_forfeits(self, drawers: set[str]) -> None:
        expected = {k for n, h, _ in self.hands_in_order()
                    if self.boxes[n].owner not in drawers for k in self.live_stakes(n, h)}
        self.expected_forfeits = expected | (self.expected_forfeits or set())

    def check_forfeits_done(self) -> None:
        if self.expected_forfeits:
            self.problem("wild", f"stakes not forfeited by a wild card (R-W2): "
                                 f"{sorted(self.expected_forfeits)}")
        self.expected_forfeits = None

    def on_HoleCardRevealed(self, x: f.HoleCardRevealed) -> None:
        if self.dealer[:1] != [HIDDEN] or x.card == HIDDEN:
            self.problem("dealer", f"revealed {x.card}, the hole card was {self.dealer[:1]}")
        self.dealer[0] = x.card

    def turn_action(self, x: f.HandHit | f.HandStood | f.HandDoubled | f.HandSplit) -> OHand:
        hand = self.boxes[x.box].hands[x.hand]
        if hand.ended or self.turn() != (x.box, x.hand):
            self.problem("ended", f"{type(x).__name__} on box {x.box}, hand {x.hand}: not its "
                                  f"turn or already ended (turn {self.turn()})")
        if x.player != self.boxes[x.box].owner:
            self.problem("ended", f"{x} by somebody other than the owner (R-C4)")
        return hand

    def on_HandHit(self, x: f.HandHit) -> None:
        self.turn_action(x)

    def on_HandStood(self, x: f.HandStood) -> None:
        self.turn_action(x).ended = True

    def on_HandDoubled(self, x: f.HandDoubled) -> None:
        hand = self.turn_action(x)
        if len(hand.cards) != 2 or hand.doubled or hand.split_aces:
            self.problem("ended", f"double on {hand} (R-C2)")
        hand.doubled = True
        self.raise_stake((f.MAIN, x.player, x.box, x.hand), x.amount)

    def on_DoubleMatched(self, x: f.DoubleMatched) -> None:
        self.raise_stake((f.MAIN, x.bettor, x.box, x.hand), x.amount)

    def on_DoubleDeclined(self, x: f.DoubleDeclined) -> None:
        pass

    def on_HandSplit(self, x: f.HandSplit) -> None:
        box = self.boxes[x.box]
        hand = self.turn_action(x)
        if len(hand.cards) != 2 or x.new_hand in box.hands:
            self.problem("ended", f"split of {hand} into hand {x.new_hand} (R-C3)")
        moved = hand.cards.pop()
        new = OHand([moved])
        if moved[0] == "A":
            hand.split_aces = new.split_aces = True
        box.hands[x.new_hand] = new
        box.order.insert(box.order.index(x.hand) + 1, x.new_hand)
        box.was_split = True
        self.open_split((f.MAIN, x.player, x.box, x.hand), x.new_hand, x.amount)

    def on_SplitMatched(self, x: f.SplitMatched) -> None:
        self.open_split((f.MAIN, x.bettor, x.box, x.hand), x.new_hand, x.amount)

    def on_SplitDeclined(self, x: f.SplitDeclined) -> None:
        pass

    def on_InsurancePlaced(self, x: f.InsurancePlaced) -> None:
        self.open_stake((f.INSURANCE, x.bettor, 0, 0), x.amount)

    def on_BoxSurrendered(self, x: f.BoxSurrendered) -> None:
        for hand in self.boxes[x.box].hands.values():
            if hand.ended:
                self.problem("ended", f"box {x.box} surrendered after its hand ended")
            hand.status, hand.ended = "surrendered", True

    def on_StakeSettled(self, x: f.StakeSettled) -> None:
        key = (x.line, x.bettor, x.box, x.hand)
        self.closed[key] += 1
        held = self.open.pop(key, None)
        if held is None:
            self.problem("stakes", f"{key} settled but not open (settled "
                                   f"{self.closed[key]} times)")
        elif held != x.held:
            self.problem("stakes", f"{key} settled as {x.held}, held {held}")
        self.check_settlement(x)
        self.check_outcome(x)
        net = x.released + x.won - x.held
        self.nets[x.bettor] = self.nets.get(x.bettor, 0) + net
        self.returned += x.released + x.won
        self.house += x.lost - x.won

    def expected_outcome(self, x: f.StakeSettled) -> tuple[str, tuple[int, int]]:
        """What a stake settled at the end must get (R-G5..R-G7, R-C5, R-C7, R-W4)."""
        rules = self.rules
        dealer_natural = rules.naturals and two_card_21(self.dealer)
        if x.line == f.INSURANCE:
            return (f.WON, rules.insurance_pays) if dealer_natural else (f.LOST, (0, 1))
        hand = self.boxes[x.box].hands[x.hand]
        natural = self.natural(x.box, hand)
        if dealer_natural:
            return (f.PUSHED, (0, 1)) if natural else (f.LOST, (0, 1))
        if natural:
            return f.WON, rules.natural_pays
        if self.prize(x.box, hand):
            if sorted(c[0] for c in hand.cards) == ["6", "7", "8"]:
                return f.WON, rules.prize_678_suited
            suited = len({c[1] for c in hand.cards}) == 1
            return f.WON, rules.prize_777_suited if suited else rules.prize_777_mixed
        dealer, player = total(self.dealer), total(hand.cards)
        if dealer > 21 or player > dealer:
            return f.WON, (1, 1)
        return (f.PUSHED, (0, 1)) if player == dealer else (f.LOST, (0, 1))

    def check_outcome(self, x: f.StakeSettled) -> None:
        """Each settlement happens when and as the rules say."""
        got = (x.outcome, tuple(x.rate))
        if isinstance(x, f.StakeForfeited):
            return  # checked against the wild card that caused it
        if self.phase == "settling":
            want = self.expected_outcome(x)
        elif x.outcome == f.LOST:  # at once: only a hand over 21 (R-G3)
            hand = self.boxes[x.box].hands[x.hand]
            want = (f.LOST, (0, 1)) if hand.status == "bust" else ("not lost yet", (0, 1))
        elif x.outcome == f.SURRENDERED:
            want = (f.SURRENDERED, (1, 2))
        elif x.outcome == f.EVEN_MONEY:
            hand = self.boxes[x.box].hands[x.hand]
            ok = self.natural(x.box, hand) and self.dealer[0][0] == "A"
            want = (f.EVEN_MONEY, (1, 1)) if ok else ("no even money", (0, 1))
        else:
            want = ("not settled before the dealer finishes", (0, 1))
        if got != want:
            self.problem("payouts", f"{x}: expected {want} (dealer {self.dealer})")

    def on_StakeForfeited(self, x: f.StakeForfeited) -> None:
        key = (x.line, x.bettor, x.box, x.hand)
        if self.expected_forfeits is None or key not in self.expected_forfeits:
            owner = self.boxes[x.box].owner
            self.problem("wild", f"{key} of box owner {owner} forfeited though not expected "
                                 f"(drawer {x.cause_player}, R-W2/R-W3/R-X8)")
        else:
            self.expected_forfeits.discard(key)
        self.on_StakeSettled(x)
        hand = self.boxes[x.box].hands[x.hand]
        hand.status, hand.ended = "forfeited", True

    def on_DealerFinished(self, x: f.DealerFinished) -> None:
        self.phase = "settling"
        if x.cards != self.dealer or x.total != total(self.dealer):
            self.problem("dealer", f"{x} does not match the dealer's cards {self.dealer}")

    def on_RoundSettled(self, x: f.RoundSettled) -> None:
        self.ending = x
        if self.open:
            self.problem("stakes", f"round settled with open stakes {sorted(self.open)}")
        mine = (self.staked, self.returned, self.house, self.nets)
        if (x.staked, x.returned, x.house_result, x.results) != mine:
            self.problem("money", f"RoundSettled {x} but the facts give staked, returned, "
                                  f"house, results = {mine}")
        if x.staked != x.returned + x.house_result or sum(x.results.values()) + \
                x.house_result != 0:
            self.problem("money", f"RoundSettled {x} breaks conservation (R-M4)")

    def on_RoundVoided(self, x: f.RoundVoided) -> None:
        self.ending = x
        released: dict[str, int] = {}
        for (_, bettor, _, _), held in self.open.items():
            released[bettor] = released.get(bettor, 0) + held
        reversals = {b: -net for b, net in self.nets.items() if net}
        if x.released != released or x.reversals != reversals:
            self.problem("money", f"{x}: open stakes {released}, results to undo {reversals}"
                                  " (R-X13)")
        self.open.clear()

    def on_RulingRecorded(self, x: f.RulingRecorded) -> None:
        self.problem("stakes", f"unexpected ruling {x}")

    # -- money

    def open_stake(self, key: Key, amount: int) -> None:
        if key in self.open or self.closed[key]:
            self.problem("stakes", f"{key} opened twice")
        self.check_amount(key, amount)
        self.open[key] = amount
        self.staked += amount

    def raise_stake(self, key: Key, amount: int) -> None:
        held = self.open.get(key)
        if held is None:
            self.problem("stakes", f"double on {key}, which is not open")
        elif amount != held:
            self.problem("stakes", f"double of {key} by {amount}, the stake is {held} (R-C2)")
        self.check_amount(key, amount)
        self.open[key] = (held or 0) + amount
        self.staked += amount

    def open_split(self, key: Key, new_hand: int, amount: int) -> None:
        held = self.open.get(key)
        if held != amount:
            self.problem("stakes", f"split of {key} with {amount}, the stake is {held} (R-C3)")
        self.open_stake((key[0], key[1], key[2], new_hand), amount)

    def check_amount(self, key: Key, amount: int) -> None:
        if type(amount) is not int or amount <= 0 or amount % self.unit:
            self.problem("money", f"{key}: amount {amount!r} is not a positive multiple of "
                                  f"{self.unit} (R-M1)")

    def check_settlement(self, x: f.StakeSettled) -> None:
        """R-M2, R-X5: each settlement balances, pays whole units, records the remainder."""
        problems = []
        if x.released + x.lost != x.held or not 0 <= x.released <= x.held or x.won < 0:
            problems.append("released + lost != held")
        if x.won % self.unit or x.released % self.unit:
            problems.append(f"not rounded to the unit {self.unit}")
        num, den = x.rate
        rest = Fraction(*x.remainder)
        if x.outcome in (f.WON, f.EVEN_MONEY):
            exact, paid = Fraction(x.held * num, den), x.won
            if x.released != x.held:
                problems.append("a win does not release the stake")
        elif x.outcome == f.SURRENDERED:
            exact, paid = Fraction(x.held * num, den), x.released
            if x.won:
                problems.append("a surrender wins")
        else:
            exact, paid = Fraction(0), 0
            if x.won or rest or (x.outcome == f.PUSHED and x.released != x.held) or \
                    (x.outcome in (f.LOST, f.FORFEITED) and x.released):
                problems.append(f"a {x.outcome} stake moves the wrong amounts")
        if exact - paid != rest or not 0 <= rest < self.unit:
            problems.append(f"remainder {x.remainder} for {x.held} at {x.rate} paid {paid}")
        if problems:
            self.problem("money", f"{x}: {'; '.join(problems)}")


def check(run: Run, *kinds: str) -> Oracle:
    oracle = Oracle(run.rules, run.limits.min_unit).feed_all(run.facts)
    found = {k: v for k, v in oracle.problems.items() if k in kinds}
    assert not found, f"{found}\n{run.script()}"
    return oracle


# --------------------------------------------------------------------------- properties

@PROPERTY
@given(run=rounds())
def test_every_stake_settles_exactly_once(run: Run) -> None:
    """Property 1: every stake opened is closed once, by a settlement or by the void."""
    oracle = check(run, "stakes")
    m = run.machine
    assert m.phase in (SETTLED, VOIDED)
    assert not m.open_stakes, f"open stakes left: {m.open_stakes}"
    assert run.log == run.facts
    if m.phase == SETTLED:
        assert not oracle.open
        assert all(n == 1 for n in oracle.closed.values()), oracle.closed
    # The machine's open stakes agree with the facts after every step.
    replay = Oracle(run.rules, run.limits.min_unit)
    for step in run.steps:
        for x in step.facts:
            replay.feed(x)
        assert replay.open == step.open_after, (step.command, replay.open, step.open_after)


@PROPERTY
@given(run=rounds())
def test_money_is_conserved(run: Run) -> None:
    """Property 2 (R-M2, R-M4, R-X13): held = released + lost; results + house = 0; and
    every stake gets what the rules give it (R-G3, R-G5..R-G7, R-C1, R-C5..R-C7)."""
    oracle = check(run, "money", "payouts")
    m = run.machine
    assert sum(m.results.values()) + m.house == 0
    settlements = [x for x in run.facts if isinstance(x, f.StakeSettled)]
    assert sum(x.held for x in settlements) == sum(x.released + x.lost for x in settlements)
    if m.phase == VOIDED:
        assert not any(m.results.values()), m.results
        assert m.house == 0, m.house
        assert isinstance(run.facts[-1], f.RoundVoided)
    else:
        (end,) = [x for x in run.facts if isinstance(x, f.RoundSettled)]
        assert end is run.facts[-1]
        assert end.results == m.results == oracle.nets
        assert end.house_result == m.house
        assert set(end.results) == set(oracle.players)


@PROPERTY
@given(run=rounds())
def test_state_is_a_pure_function_of_facts(run: Run) -> None:
    """Property 3 (R-V1): replaying the facts rebuilds the very same round, step by step."""
    fresh = RoundMachine(run.rules, run.limits)
    # What legal() offered after each step is what the next step saw before it.
    legal_after = [s.legal_before for s in run.steps[1:]] + [run.machine.legal()]
    for step, legal in zip(run.steps, legal_after, strict=True):
        for x in step.facts:
            fresh.apply(x)
        assert fresh.view() == step.after, step.command
        assert fresh.view(reveal_hole=True) == step.after_hole, step.command
        assert fresh.legal() == legal, step.command
        # What the API document lists, for clients that switch on them.
        assert {x.decision for x in legal} <= set(DECISIONS), step.command
        assert step.after["phase"] in PHASES
        assert {h["status"] for b in step.after["boxes"] for h in b["hands"]} <= \
            set(HAND_STATUSES)
    assert fresh.open_stakes == run.machine.open_stakes
    assert (fresh.staked, fresh.paid_back, fresh.house) == \
        (run.machine.staked, run.machine.paid_back, run.machine.house)


@PROPERTY
@given(run=rounds())
def test_commands_over_the_recorded_cards_give_the_recorded_facts(run: Run) -> None:
    """Property 4: re-adjudication: the same commands over the same cards, the same facts."""
    log: list[f.Fact] = []
    again = recording_machine(run.rules, run.limits, log)
    shoe = StackedShoe(" ".join(run.cards), start=run.start)
    for step in run.steps:
        assert execute(again, step.command, shoe) == step.facts, step.command
        assert again.view() == step.after
    assert log == run.log
    assert not shoe.left()


@PROPERTY
@given(run=rounds())
def test_no_hand_is_dealt_after_it_ends(run: Run) -> None:
    """Property 5 (R-G3, R-G4, R-C1..R-C3, R-W1, R-W2): no card after a hand ends, hands
    play left to right, only the owner acts; no InvariantBroken ever (it would propagate)."""
    check(run, "ended")


@PROPERTY
@given(run=rounds())
def test_the_dealer_follows_its_policy(run: Run) -> None:
    """Property 6 (R-G8, R-X2, R-X10, R-W5, R-W6)."""
    check(run, "dealer")
    rules = run.rules
    initial = 2 if rules.dealer_hole_card else 1
    starts = [i for i, s in enumerate(run.steps) if s.command == ("play_dealer",)]
    turned = {x.position: x.card for x in run.facts if isinstance(x, f.HoleCardRevealed)}
    dealer = [turned.get(x.position, x.card) for x in run.facts
              if isinstance(x, f.CardDealt) and x.box == f.DEALER]
    if not starts:
        assert len(dealer) <= initial, dealer
        return
    (at,) = starts
    before = Oracle(rules, run.limits.min_unit).feed_all(
        [x for s in run.steps[:at] for x in s.facts])
    live = before.live_hands()
    dependent = [(n, h) for n, h, hand in live
                 if not (before.natural(n, hand) or before.prize(n, hand))]
    insured = any(k[0] == f.INSURANCE for k in before.open)
    finished = any(isinstance(x, f.DealerFinished) for x in run.steps[at].facts)
    drawn = dealer[initial:]
    up = dealer[initial - 1]
    why = f"dealer {dealer}, live {[(n, h, x.cards) for n, h, x in live]}\n{run.script()}"
    if rules.dealer_policy == "stand_17":
        for i in range(initial, len(dealer)):
            so_far = dealer[:i]
            assert "W" not in so_far, why
            assert not two_card_21(so_far), why
            if i >= 2:
                assert total(so_far) < 17, why  # soft 17 stands
        if not finished:
            return  # the shoe ran out while the dealer drew (R-H4)
        if up == "W":
            assert not drawn, why  # R-X10
        elif dependent:
            assert total(dealer) >= 17 or two_card_21(dealer) or "W" in dealer, why
        else:  # R-X2, R-G8: at most the second card, only to see a natural
            peek = (live or insured) and (up[0] == "A" or total([up]) == 10)
            assert len(drawn) == (1 if peek else 0), why
    else:
        best = max((total(hand.cards) for _, _, hand in live), default=0)
        for i in range(initial, len(dealer)):
            so_far = dealer[:i]
            assert live, why  # R-W6
            assert "W" not in so_far, why  # R-W5
            assert total(so_far) < 21, why
            assert total(so_far) <= best, why
        if finished and live and "W" not in dealer:
            assert total(dealer) >= 21 or total(dealer) > best, why


@PROPERTY
@given(data=st.data())
def test_refusals_change_nothing(data: st.DataObject) -> None:
    """Property 7: an illegal command raises a LedgerError naming a rule (R-...) and leaves
    the view and the facts as they were; every choice legal() offers is accepted."""
    run = play_round(data.draw, attempts=True)
    assert run.machine.phase in (SETTLED, VOIDED)


@PROPERTY
@given(run=rounds())
def test_wild_cards_forfeit_exactly_the_other_owners_live_boxes(run: Run) -> None:
    """R-W2, R-W3, R-X8: a wild card forfeits every live box of another owner, at once;
    holders of a wild card in the initial deal are all exempt, whatever their seats."""
    check(run, "wild")


# ------------------------------------------------------------------ a stateful model

class RoundCommands(RuleBasedStateMachine):
    """Any command in any order: each is either accepted or refused with a rule id and no
    change; after every command the facts rebuild the live round and break no rule."""

    @initialize(rules=st.sampled_from(PRESETS), limits=table_limits(), data=st.data())
    def open_round(self, rules: RuleSet, limits: TableLimits, data: st.DataObject) -> None:
        self.log: list[f.Fact] = []
        self.m = recording_machine(rules, limits, self.log)
        self.data = data
        _, _, self.shoe = data.draw(shoes(rules, 3))
        seats = data.draw(st.lists(st.tuples(st.sampled_from(POOL), st.integers(1, 4)),
                                   max_size=4))
        for bettor, box in seats:  # a few valid stakes to start from
            self.attempt(("place_stake", bettor, box, limits.table_min))

    def attempt(self, cmd: tuple[Any, ...]) -> None:
        m = self.m
        before, count = m.view(reveal_hole=True), len(self.log)
        try:
            out = execute(m, cmd, self.shoe)
        except LedgerError as e:
            refusal = e
        else:
            assert out == self.log[count:], cmd
            return
        assert refusal.rule.startswith("R-"), (cmd, refusal)
        assert len(self.log) == count, cmd
        assert m.view(reveal_hole=True) == before, cmd

    @rule(bettor=st.sampled_from([*POOL, STRANGER]), box=st.integers(0, 13),
          amount=st.sampled_from([10, 25, 50, 100, 333]) | st.integers(-5, 1200))
    def place_stake(self, bettor: str, box: int, amount: int) -> None:
        self.attempt(("place_stake", bettor, box, amount))

    @rule(bettor=st.sampled_from([*POOL, STRANGER]), box=st.integers(0, 13))
    def withdraw_stake(self, bettor: str, box: int) -> None:
        self.attempt(("withdraw_stake", bettor, box))

    @rule()
    def close_betting(self) -> None:
        self.attempt(("close_betting",))

    @rule()
    def decide(self) -> None:
        """A valid stake or the deal while betting; then a decision legal() offers, which is
        always accepted (void aside: see ``void``)."""
        m, draw = self.m, self.data.draw
        if m.phase == "betting":
            lim = m.limits
            if m.boxes and bool(draw(st.booleans())):
                self.attempt(("close_betting",))
            else:
                self.attempt(("place_stake", draw(st.sampled_from(POOL)),
                              draw(st.integers(1, lim.boxes)), lim.table_min))
            return
        choices = [x for x in m.legal() if x.decision != "void"]
        if choices:
            execute(m, command_for(draw(st.sampled_from(choices)), m, draw), self.shoe)

    @rule()
    def decide_again(self) -> None:
        self.decide()

    @rule(decision=st.sampled_from(["hit", "stand", "double", "split", "surrender",
                                    "even_money", "insure", "answer", "play_dealer", "settle"]),
          player=st.sampled_from([*POOL, STRANGER]), box=st.integers(0, 8),
          hand=st.integers(-1, 3), amount=st.integers(-5, 600), match=st.booleans())
    def anything(self, decision: str, player: str, box: int, hand: int, amount: int,
                 match: bool) -> None:
        cmd = {"hit": (decision, player, box, hand), "stand": (decision, player, box, hand),
               "double": (decision, player, box, hand), "split": (decision, player, box, hand),
               "surrender": (decision, player, box), "even_money": (decision, player, box),
               "insure": (decision, player, amount),
               "answer": (decision, player, box, hand, match),
               "play_dealer": (decision,), "settle": (decision,)}[decision]
        self.attempt(cmd)

    @rule(chance=st.integers(0, 20), reason=st.sampled_from(["", " ", VOID_REASON]))
    def void(self, chance: int, reason: str) -> None:
        if chance == 0 or not reason.strip():
            self.attempt(("void", reason))

    def teardown(self) -> None:
        if hasattr(self, "m"):
            event(f"round ends {self.m.phase}")

    @invariant()
    def facts_rebuild_the_round(self) -> None:
        m = self.m
        fresh = RoundMachine(m.rules, m.limits)
        for x in self.log:
            fresh.apply(x)
        assert fresh.view(reveal_hole=True) == m.view(reveal_hole=True)
        assert fresh.legal() == m.legal()
        oracle = Oracle(m.rules, m.limits.min_unit).feed_all(self.log)
        assert not oracle.problems, oracle.problems
        assert oracle.open == m.open_stakes
        assert sum(m.results.values()) + m.house == 0
        if m.phase == VOIDED:
            assert not any(m.results.values())


TestRoundCommands = RoundCommands.TestCase
# An extra to the seven properties: 300 programs of up to 50 commands keep the suite near a
# minute on two cores.
TestRoundCommands.settings = settings(max_examples=EXAMPLES * 3 // 5, stateful_step_count=50,
                                      deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow,
                                                             HealthCheck.data_too_large])


# ------------------------------------------------------- regressions the search found

def test_a_wild_card_as_the_last_card_of_the_deal_exempts_every_holder() -> None:
    """R-W3: in casino_wild the last card of the initial deal goes to the last box; when it
    is a wild card, its holder and every other holder are exempt together (it used to
    forfeit P1's box at once, as if drawn in play)."""
    r = Scripted(CASINO_WILD, "W 9H TD 9C W 7S").bet("P1", 1).bet("P2", 2).deal()
    assert not [x for x in r.facts if isinstance(x, f.StakeForfeited)]
    r.finish()
    assert r.outcome("P1", 1) == f.WON
    assert r.outcome("P2", 2) == f.WON
    assert not Oracle(CASINO_WILD, 1).feed_all(r.facts).problems

"""The round state machine: every rule of RULES.md for one round, as commands and facts.

Commands (``place_stake``, ``hit``, ``play_dealer``...) check the rules and decide
which facts happen; :meth:`RoundMachine.apply` turns a fact into state and is the
only code that assigns. Replaying the recorded facts of a round through
``apply`` rebuilds it exactly; running the commands again over the recorded
cards and decisions reproduces the recorded facts (the re-adjudication check).

Cards come from outside through a ``draw`` callable returning ``(card, position)``
so the machine never touches randomness or I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from math import gcd
from typing import Any, NamedTuple

from ledger.cards import HIDDEN, WILD, Card, hand_total, is_ace, is_ten_value, is_two_card_21
from ledger.engine import facts as f
from ledger.errors import (
    BetRefused,
    DealRefused,
    DecisionRefused,
    InvariantBroken,
    LedgerError,
    NotTheOwner,
    NotYourTurn,
    RoundClosed,
    ShoeExhausted,
)
from ledger.names import check_name
from ledger.plays import Play
from ledger.rules import AMOUNT_MAX, RuleSet, TableLimits, undealable

Draw = Callable[[], tuple[Card, int]]
Peek = Callable[[int], Card]  # the face of the card dealt from a position, to turn it over
StakeKey = tuple[str, str, int, int]  # (line, bettor, box, hand)
Refusal = tuple[str, str]  # (sentence, rule id); an empty sentence allows
NO: Refusal = ("", "")

BETTING = "betting"
DEALING = "dealing"
PLAYING = "playing"
SETTLING = "settling"
SETTLED = "settled"
VOIDED = "voided"

LIVE = "live"
BUST = "bust"
SURRENDERED = "surrendered"
FORFEITED = "forfeited"
# Every value a round's view may show, for clients that switch on them.
PHASES = (BETTING, DEALING, PLAYING, SETTLING, SETTLED, VOIDED)
HAND_STATUSES = (LIVE, BUST, SURRENDERED, FORFEITED)
_PHASE_REFUSALS = {  # why a command of another phase is refused now
    BETTING: ("Betting is still open; no cards have been dealt.", "R-G2"),
    DEALING: ("The cards are being dealt.", "R-G2"),
    PLAYING: ("Betting is closed: no bet changes after the deal.", "R-C8"),
    SETTLING: ("The dealer has finished; the round only awaits settlement.", "R-G5"),
}
REASON_MAX_CHARS = 500
RULINGS_MAX = 20  # per round: each is served with the round's state, in every replay frame
# Stakes placed and withdrawn before the deal, per round: every replay and check of the round
# reads them all (placing and withdrawing one stake over and over grew a round to 80,000 events).
BETTING_CHANGES_MAX = 200
_STATUS_RULE = {BUST: "R-G3", SURRENDERED: "R-C1", FORFEITED: "R-W2"}


# The rule setting that puts a play in the game at all.
_IN_GAME = {Play.DOUBLE: "double", Play.SPLIT: "split"}
_WINDOW_CLOSED = ("The surrender window has closed: a card has left the shoe since the deal.",
                  "R-X3")
_SPLIT_OR_DOUBLED = ("A box cannot be surrendered after a split or a double.", "R-C1")


def _finished(h: Hand) -> tuple[str, str]:
    """Why a hand's turn is over, and the rule that ends it."""
    if h.status != LIVE:
        return f"it is {h.status}", _STATUS_RULE[h.status]
    if WILD in h.cards:
        return "it holds a wild card", "R-W1"
    if h.doubled:
        return "a doubled hand takes one card and stands", "R-C2"
    if h.split_aces:
        return "a split ace takes one card and stands", "R-C3"
    if hand_total(h.cards)[0] == 21:
        return "21 stands automatically", "R-G4"
    return "it stood, and standing is final", "R-X3"


class Legal(NamedTuple):
    """One decision somebody may make now: ``player`` is empty for the dealer's actions."""

    decision: str
    player: str = ""
    box: int = 0
    hand: int = 0


DECISIONS = ("place_stake", "withdraw_stake", "close_betting", *(p.value for p in Play), "match",
             "decline", "insure", "even_money", "play_dealer", "settle", "void")


class Hand:
    __slots__ = ("cards", "done", "doubled", "split_aces", "stakes", "status", "stood")

    def __init__(self, stakes: dict[str, int], cards: list[Card] | None = None) -> None:
        self.cards: list[Card] = cards or []
        self.stakes = stakes  # bettor -> amount on this hand, doubles included
        self.doubled = False
        self.done = False
        self.stood = False
        self.split_aces = False
        self.status = LIVE


class Box:
    __slots__ = ("bettors", "hands", "initial", "number", "order", "was_split")

    def __init__(self, number: int) -> None:
        self.number = number
        self.bettors: list[str] = []  # the first is the owner (R-C8 terms)
        self.initial: dict[str, int] = {}
        self.hands: list[Hand] = []  # by id; ids never change
        self.order: list[int] = []  # hand ids left to right (R-X4)
        self.was_split = False

    @property
    def owner(self) -> str:
        return self.bettors[0]


class Pending(NamedTuple):
    """Co-bettors who must answer the owner's double or split (R-C4, R-X9)."""

    kind: str  # "double" or "split"
    box: int
    hand: int
    new_hand: int
    bettors: tuple[str, ...]


def payout(stake: int, ratio: tuple[int, int] | list[int], min_unit: int) -> tuple[int, list[int]]:
    """``stake * num / den`` rounded down to ``min_unit``, and the remainder (R-M2, R-X5).

    The remainder is what rounding down took off the exact amount, in minor units as
    ``[num, den]`` in lowest terms: a fraction of one unit, or several whole units when
    ``min_unit`` is above 1 (``[0, 1]`` when nothing was rounded).
    """
    num, den = ratio
    paid = stake * num // (den * min_unit) * min_unit
    rest = stake * num - paid * den
    common = gcd(rest, den)
    return paid, [rest // common, den // common]


class RoundMachine:
    """One round at one table under one rule set and its table limits."""

    def __init__(self, rules: RuleSet, limits: TableLimits,
                 sink: Callable[[f.Fact], None] | None = None) -> None:
        self.rules = rules
        self.limits = limits
        self.phase = BETTING
        self.boxes: dict[int, Box] = {}
        self.box_order: list[int] = []
        self.dealer: list[Card] = []
        self.dealer_positions: list[int] = []
        self.hole_revealed = not rules.dealer_hole_card
        self.window_open = False
        self.pending: Pending | None = None
        self.insurance: dict[str, int] = {}
        self.open_stakes: dict[StakeKey, int] = {}
        self.staked = 0  # every amount ever held in this round
        self.results: dict[str, int] = {}  # bettor -> net result of settled stakes
        self.paid_back = 0  # released + won over settled stakes
        self.even_money_taken: set[tuple[str, int]] = set()  # (bettor, box) (R-C6)
        self.shoe_lost: str | None = None  # why the round's shoe was abandoned, if it was
        self.house = 0  # lost - won over settled stakes
        self.dealer_result: f.DealerFinished | None = None
        self.void_reason = ""
        self.rulings: list[f.RulingRecorded] = []
        self.facts = 0  # facts applied: the round's events are versions 1 (its start) to facts + 1
        self._sink = sink or self.apply
        self._out: list[f.Fact] = []
        self._turn: tuple[int, int] | bool | None = False  # turn() cache; False: unknown
        self._initial_cards_left = 0
        self.betting_changes_max: int | None = BETTING_CHANGES_MAX

    # ------------------------------------------------------------------ reading

    def box(self, number: int) -> Box:
        try:
            return self.boxes[number]
        except KeyError:
            raise DecisionRefused(f"Box {number} has no stake in this round.", "R-C8") from None

    def hand(self, box: int, hand: int) -> Hand:
        b = self.box(box)
        if not 0 <= hand < len(b.hands):
            raise DecisionRefused(f"Box {box} has no hand {hand}.", "R-C3")
        return b.hands[hand]

    def hands_in_order(self) -> Iterator[tuple[Box, int, Hand]]:
        for number in self.box_order:
            b = self.boxes[number]
            for h in b.order:
                yield b, h, b.hands[h]

    def turn(self) -> tuple[int, int] | None:
        """The hand whose owner must act now, left to right (R-C3, R-X4)."""
        if self._turn is False:
            self._turn = self._find_turn()
        return self._turn  # type: ignore[return-value]

    def _find_turn(self) -> tuple[int, int] | None:
        if self.phase != PLAYING:
            return None
        for b, h, hand in self.hands_in_order():
            if not hand.done:
                return b.number, h
        return None

    @property
    def upcard(self) -> Card | None:
        """The dealer's visible card: the first, or the second under a hole-card deal."""
        index = 1 if self.rules.dealer_hole_card else 0
        return self.dealer[index] if len(self.dealer) > index else None

    def is_natural(self, b: Box, hand: Hand) -> bool:
        """R-G6: ace and ten-value as the first two cards of an unsplit box."""
        return (self.rules.naturals and not b.was_split and len(hand.cards) == 2
                and is_two_card_21(hand.cards))

    def prize(self, b: Box, hand: Hand) -> tuple[str, tuple[int, int]] | None:
        """R-C7, R-X7: 777 or suited 678 as the first three cards of an unsplit,
        undoubled hand, as (name, rate); None otherwise. A wild card never makes a prize."""
        if not self.rules.prizes or b.was_split or hand.doubled or len(hand.cards) != 3:
            return None
        cards = hand.cards
        if WILD in cards:
            return None
        ranks = sorted(c[0] for c in cards)
        suited = cards[0][1] == cards[1][1] == cards[2][1]
        if ranks == ["7", "7", "7"]:
            if suited:
                return "777_suited", self.rules.prize_777_suited
            return "777_mixed", self.rules.prize_777_mixed
        if ranks == ["6", "7", "8"] and suited:
            return "678_suited", self.rules.prize_678_suited
        return None

    def dealer_total(self) -> int:
        return hand_total(self.dealer)[0]

    def dealer_natural(self) -> bool:
        return self.rules.naturals and is_two_card_21(self.dealer)

    def stakes_of(self, bettor: str) -> int:
        """A bettor's initial stakes at the table, co-bets included (R-X6)."""
        return sum(b.initial.get(bettor, 0) for b in self.boxes.values())

    def players(self) -> list[str]:
        seen: dict[str, None] = {}
        for number in sorted(self.boxes):
            for bettor in self.boxes[number].bettors:
                seen[bettor] = None
        return list(seen)

    # --------------------------------------------------------------- commands

    def _emit(self, fact: f.Fact) -> None:
        self._sink(fact)
        self._out.append(fact)

    def _begin(self) -> None:
        self._out = []

    def _end(self) -> list[f.Fact]:
        out, self._out = self._out, []
        return out

    def _require_phase(self, *phases: str,
                       refusal: type[DecisionRefused | BetRefused] = DecisionRefused,
                       dealer: bool = False) -> None:
        """Refuse a command of another phase (``refusal``: a stake's is a bet refused). On a
        round whose shoe was abandoned, a stake, the deal or a player's play too; the dealer's
        play (``dealer``) only if it needs a card (refused as it asks for one)."""
        if self.shoe_lost is not None and self.phase in (BETTING, PLAYING) \
                and len(phases) == 1:  # (not a void)
            out = self._dealer_plays_without_a_card()
            if dealer and out:
                return
            then = ("the dealer plays it out, needing no card, and settles it, or a manager "
                    "voids it" if out else "a manager voids it")
            raise DealRefused(f"The round's shoe was abandoned ({self.shoe_lost}): no card can "
                              "be dealt from it, and the round takes no more stakes or "
                              f"decisions; {then}.", "R-V1")
        if phases == (SETTLED,) and self.phase == VOIDED:  # a ruling
            raise RoundClosed("A ruling is recorded only on a settled round; this one was "
                              "voided, every stake returned.", "R-V2")
        if self.phase in (SETTLED, VOIDED) and self.phase not in phases:
            raise RoundClosed(f"The round is {self.phase} and takes no more decisions.",
                              "R-V2" if self.phase == SETTLED else "R-V1")
        if self.phase not in phases:
            if phases == (SETTLING,):
                raise DecisionRefused("The dealer has not finished; settlement comes after "
                                      "the dealer's play.", "R-G5")
            if phases == (SETTLED,):
                raise DecisionRefused("A ruling is recorded only on a settled round.", "R-V2")
            sentence, rule = _PHASE_REFUSALS[self.phase]
            raise refusal(sentence, rule)

    def place_stake(self, bettor: str, box: int, amount: int) -> list[f.Fact]:
        """R-C8, R-X14, R-M1: a stake on a box while betting is open."""
        self._require_phase(BETTING, refusal=BetRefused)
        self._require_betting_change()
        _check_bettor(bettor)
        lim = self.limits
        if type(box) is not int or not 1 <= box <= lim.boxes:
            raise BetRefused(f"Box {box} does not exist: this table has boxes 1 to {lim.boxes}.",
                             "R-C8")
        _check_amount(amount, lim.min_unit)
        if amount < lim.table_min:
            raise BetRefused(f"A stake of {amount} is below the table minimum of "
                             f"{lim.table_min}.", "R-C8")
        existing = self.boxes.get(box)
        if existing is not None:
            if bettor in existing.initial:
                # Withdrawing it and staking again takes two changes: with one left, the
                # withdrawal would be taken and the new stake refused.
                cap = self.betting_changes_max
                then = ("withdraw it and place the new amount" if cap is None
                        or cap - self.facts >= 2 else "it stays as it is, as this round takes "
                        "one more stake placed or withdrawn at most")
                raise BetRefused(f"{bettor} already has a stake on box {box}; {then}.",
                                 "R-X14")
            if len(existing.bettors) >= self.rules.bettors_per_box:
                raise BetRefused(f"Box {box} already has {len(existing.bettors)} "
                                 f"bettor{'s' if len(existing.bettors) > 1 else ''}, the most "
                                 "this table allows.", "R-C8")
            total = sum(existing.initial.values())
        else:
            total = 0
        if total + amount > lim.table_max:
            raise BetRefused(f"Box {box} would hold {total + amount} in stakes, over the table "
                             f"maximum of {lim.table_max}.", "R-C8")
        self._begin()
        self._emit(f.StakePlaced(bettor=bettor, box=box, amount=amount))
        return self._end()

    def withdraw_stake(self, bettor: str, box: int) -> list[f.Fact]:
        """R-X14, R-C8: a stake comes off the box while betting is open."""
        self._require_phase(BETTING, refusal=BetRefused)
        self._require_betting_change()
        b = self.boxes.get(box)
        if b is None or bettor not in b.initial:
            raise BetRefused(f"{bettor} has no stake on box {box} to withdraw.", "R-X14")
        self._begin()
        self._emit(f.StakeWithdrawn(bettor=bettor, box=box, amount=b.initial[bettor]))
        return self._end()

    def _betting_changes_spent(self) -> bool:
        """A limit on requests, not a rule of the game: a round re-adjudicated as recorded
        (``betting_changes_max`` None) may hold more, recorded before the limit was."""
        cap = self.betting_changes_max
        return cap is not None and self.facts >= cap  # only stakes placed and withdrawn so far

    def to_finish(self) -> str:
        """What finishes the round from here (one still in play), as a refusal to go past it
        says."""
        if self.shoe_lost is not None and self.phase in (BETTING, PLAYING):
            return ("the dealer plays and settles it (no card is needed), or a manager voids it"
                    if self._dealer_plays_without_a_card() else
                    "a manager voids it (its shoe was abandoned)")
        if self.phase == BETTING:
            if undealable(self.rules, self.limits) is not None:
                return ("a manager voids it (no round can be dealt under the limits it started "
                        "with)")
            if self._betting_changes_spent() and (not self.boxes or self._deal_refusal()):
                return ("a manager voids it (it takes no more stakes placed or withdrawn, and "
                        + ("has none to deal)" if not self.boxes else
                           "cannot deal those it holds)"))
            return "the dealer deals it once stakes are in place, or a manager voids it"
        return {DEALING: "the dealer deals it", PLAYING: "its hands are played, then the "
                "dealer plays and settles it", SETTLING: "the dealer settles it"}.get(
                    self.phase, "the dealer finishes it") + ", or a manager voids it"

    def _require_betting_change(self) -> None:
        if self._betting_changes_spent():
            undealt, _ = self._deal_problem()
            then = ("no stake is left on it: a manager voids it" if not self.boxes else
                    f"its stakes cannot be dealt ({undealt}): a manager voids it"
                    if undealt else "deal it with the stakes in place, or a manager voids it")
            # A limit on requests (no rule of RULES.md states it): no rule cited.
            raise BetRefused(f"This round has taken {BETTING_CHANGES_MAX} stakes placed and "
                             f"withdrawn, the most one round takes: {then}.")

    def close_betting(self, draw: Draw) -> list[f.Fact]:
        """Close betting and make the initial deal (R-C8, R-G2, R-W3)."""
        self._require_phase(BETTING)
        reason = self._deal_refusal()
        if reason:
            raise DealRefused(reason, "R-C8")
        players = self.players()
        self._begin()
        self._emit(f.BettingClosed(players=players, boxes=sorted(self.boxes)))
        try:
            self._initial_deal(draw)
        except ShoeExhausted:
            return self._void_exhausted()
        return self._end()

    def _deal_refusal(self) -> str:
        """Why the cards cannot be dealt now, and what is to be done ("" if they can)."""
        problem, remedy = self._deal_problem()
        if problem and remedy and self._betting_changes_spent():
            # No stake can be placed or withdrawn: what would mend it cannot be done.
            remedy = (f"this round has taken the {BETTING_CHANGES_MAX} stakes placed and "
                      "withdrawn it takes at most, so a manager voids it")
        return f"{problem}: {remedy}." if remedy else f"{problem}." if problem else ""

    def _deal_problem(self) -> tuple[str, str]:
        """Why the cards cannot be dealt ("" if they can), and the stakes that would mend it
        ("" if none would)."""
        players = self.players()
        if not players:
            return ("No stake is on any box; there is nothing to deal",
                    "stakes are placed before the cards are dealt")
        need = self.rules.min_boxes_lone_player
        if len(players) != 1 or len(self.boxes) >= need:
            return "", ""
        lim, alone = self.limits, f"{players[0]} is the only player, who must play at " \
            f"least {need} boxes,"
        if lim.boxes >= need:
            return (f"{players[0]} is the only player and must play at least {need} boxes",
                    "he stakes on more boxes before the cards are dealt")
        # Told to do what the table cannot hold: opened so before tables were checked for it
        # (R-C8, ``undealable``).
        if undealable(self.rules, lim) is not None:
            return (f"{alone} at a table of one box that takes no second stake (its maximum of "
                    f"{lim.table_max} against its minimum of {lim.table_min}, or its rules): "
                    "no round can be dealt under the limits this one started with; a manager "
                    "voids it, and gives the table other limits or rules for the next"), ""
        staked = sum(self.boxes[min(self.boxes)].initial.values())
        if lim.boxes == 1 and lim.table_max - staked < lim.table_min:
            return (f"{alone} and this table has 1, whose maximum of {lim.table_max} his "
                    f"stakes of {staked} leave no room for another player's minimum of "
                    f"{lim.table_min}",
                    "he lowers them (withdraws and stakes again) before the cards are dealt")
        if not self._room_for_a_stake():
            return (f"{alone} and this table has {lim.boxes}, where his stakes leave no box "
                    "another player may stake on (its bettors or its maximum)",
                    "he withdraws one, so that another player can stake before the cards are "
                    "dealt")
        return (f"{alone} and this table has {lim.boxes}",
                "another player must stake before the cards are dealt")

    def _dealer_plays_without_a_card(self) -> bool:
        """Whether the dealer's play may come now and would neither draw a card nor turn one
        over (every hand decided before: bust, say), tried on a copy (R-G8)."""
        if self.phase != PLAYING or self.pending is not None or self.turn() is not None:
            return False
        trial = copy.deepcopy(self)
        trial._sink = trial.apply  # its facts are the copy's alone, whoever records this one's
        trial.shoe_lost = None  # played as if the shoe were there, each card refused

        def no_card() -> tuple[Card, int]:
            raise _CardNeeded

        def no_face(_: int) -> Card:
            raise _CardNeeded

        try:
            trial.play_dealer(no_card, no_face)
        except _CardNeeded:
            return False
        return True

    def _room_for_a_stake(self) -> bool:
        """Whether some box takes another bettor's minimum stake (R-C8)."""
        lim = self.limits
        return lim.boxes > len(self.boxes) or any(
            len(b.bettors) < self.rules.bettors_per_box
            and sum(b.initial.values()) + lim.table_min <= lim.table_max
            for b in self.boxes.values())

    def _initial_deal(self, draw: Draw) -> None:
        hole = self.rules.dealer_hole_card
        for number in self.box_order:
            self._deal_card(number, 0, draw)
        self._deal_card(f.DEALER, 0, draw, face_up=not hole)
        for number in self.box_order:
            self._deal_card(number, 0, draw)
        if hole:
            self._deal_card(f.DEALER, 0, draw)
        # R-W3: wild cards of the initial deal are handled together, after it.
        held = [n for n in self.box_order if WILD in self.boxes[n].hands[0].cards]
        if held:
            holders = [(self.boxes[n].owner, n) for n in held]
            self._forfeit({owner for owner, _ in holders}, held[0],
                          _deal_forfeit_reason(holders))
        self._proceed(draw)

    def hit(self, player: str, box: int, hand: int, draw: Draw) -> list[f.Fact]:
        self._owner_turn(player, box, hand, Play.HIT, lambda _, h: _hit_refusal(h))
        self._begin()
        self._emit(f.HandHit(player=player, box=box, hand=hand))
        return self._drawing(lambda: self._deal_then_proceed(box, hand, draw))

    def stand(self, player: str, box: int, hand: int, draw: Draw) -> list[f.Fact]:
        self._owner_turn(player, box, hand, Play.STAND)
        self._begin()
        self._emit(f.HandStood(player=player, box=box, hand=hand))
        return self._drawing(lambda: self._proceed(draw))

    def double(self, player: str, box: int, hand: int, draw: Draw) -> list[f.Fact]:
        """R-C2: an extra stake equal to the original, exactly one more card."""
        h = self._owner_turn(player, box, hand, Play.DOUBLE, self._double_refusal)
        self._begin()
        self._emit(f.HandDoubled(player=player, box=box, hand=hand, amount=h.stakes[player]))
        if self.pending is None:
            return self._drawing(lambda: self._deal_then_proceed(box, hand, draw))
        return self._end()

    def split(self, player: str, box: int, hand: int, draw: Draw) -> list[f.Fact]:
        """R-C3: two cards of one value become two hands, each with the original stake."""
        h = self._owner_turn(player, box, hand, Play.SPLIT, self._split_refusal)
        b = self.boxes[box]
        self._begin()
        self._emit(f.HandSplit(player=player, box=box, hand=hand, new_hand=len(b.hands),
                               amount=h.stakes[player]))
        if self.pending is None:
            return self._drawing(lambda: self._proceed(draw))
        return self._end()

    def answer(self, bettor: str, box: int, hand: int, match: bool, draw: Draw) -> list[f.Fact]:
        """R-C4, R-X9: a co-bettor matches or declines the owner's double or split."""
        self._require_phase(PLAYING)
        p = self.pending
        if p is None or (p.box, p.hand) != (box, hand) or bettor not in p.bettors:
            raise DecisionRefused(f"{bettor} has no double or split to answer on box {box}, "
                                  f"hand {hand}.", "R-C4")
        if p.bettors[0] != bettor:
            raise NotYourTurn(f"{p.bettors[0]} answers before {bettor}.", "R-X9")
        amount = self.boxes[box].hands[hand].stakes[bettor]  # the same again as his own stake
        self._begin()
        if p.kind == "double":
            self._emit(f.DoubleMatched(bettor=bettor, box=box, hand=hand, amount=amount) if match
                       else f.DoubleDeclined(bettor=bettor, box=box, hand=hand))
        else:
            self._emit(f.SplitMatched(bettor=bettor, box=box, hand=hand, new_hand=p.new_hand,
                                      amount=amount) if match
                       else f.SplitDeclined(bettor=bettor, box=box, hand=hand))
        if self.pending is None:
            if p.kind == "double":
                return self._drawing(lambda: self._deal_then_proceed(box, hand, draw))
            return self._drawing(lambda: self._proceed(draw))
        return self._end()

    def surrender(self, player: str, box: int) -> list[f.Fact]:
        """R-C1, R-C4, R-X3: the owner gives up the box; every stake loses half."""
        self._require_phase(PLAYING)
        b = self.box(box)
        if player != b.owner:
            raise NotTheOwner(f"Only the box owner, {b.owner}, may surrender box {box}.", "R-C4")
        reason, rule = self._surrender_refusal(b)
        if reason:  # before an answer awaited: "this game has no surrender" stays so
            raise DecisionRefused(reason, rule)
        self._require_no_pending()
        self._begin()
        self._emit(f.BoxSurrendered(player=player, box=box))
        hand = b.hands[0]
        for bettor, held in hand.stakes.items():
            if (f.MAIN, bettor, box, 0) in self.open_stakes:
                back, rest = payout(held, (1, 2), self.limits.min_unit)
                self._settle(bettor, box, 0, f.SURRENDERED, held, released=back, won=0,
                             rate=[1, 2], remainder=rest, reason=SURRENDERED_REASON)
        return self._drawing(lambda: None)

    def insure(self, bettor: str, amount: int) -> list[f.Fact]:
        """R-C5, R-X6: one insurance bet, up to half the player's initial stakes."""
        self._require_phase(PLAYING)
        _check_amount(amount, self.limits.min_unit)
        reason, rule = self._insurance_refusal(bettor)
        if reason:  # before an answer awaited, as a surrender's
            raise DecisionRefused(reason, rule)
        self._require_no_pending()
        cap, chip = self._insurance_cap(bettor), self.limits.min_chip
        if amount > cap or cap < chip:
            stakes, unit = self.stakes_of(bettor), self.limits.min_unit
            rounded = "" if cap * 2 == stakes else ", rounded down" + (
                f" to the table's minimum unit of {unit}" if unit > 1 else "")
            limit = f"half of his stakes at the table ({stakes}){rounded}"
            if cap < chip:  # else each refusal sends him to the other: over it, below a chip
                raise DecisionRefused(f"{bettor} cannot insure: the most he may, {cap} ({limit}), "
                                      f"is below the minimum chip of {chip}.", "R-X6")
            raise DecisionRefused(f"Insurance of {amount} is over {bettor}'s limit of {cap}: "
                                  f"{limit}.", "R-X6")
        if amount < chip:
            raise DecisionRefused(f"Insurance of {amount} is below the minimum chip of "
                                  f"{chip}.", "R-C5")
        self._begin()
        self._emit(f.InsurancePlaced(bettor=bettor, amount=amount))
        return self._end()

    def take_even_money(self, bettor: str, box: int) -> list[f.Fact]:
        """R-C6: a natural against an ace is paid 1:1 at once, if the bettor asks."""
        self._require_phase(PLAYING)
        reason, rule = self._even_money_refusal(bettor, box)
        if reason:  # before an answer awaited, as a surrender's
            raise DecisionRefused(reason, rule)
        self._require_no_pending()
        held = self.open_stakes[(f.MAIN, bettor, box, 0)]
        won, rest = payout(held, (1, 1), self.limits.min_unit)
        self._begin()
        self._settle(bettor, box, 0, f.EVEN_MONEY, held, released=held, won=won, rate=[1, 1],
                     remainder=rest, reason=EVEN_MONEY_REASON)
        return self._end()

    def play_dealer(self, draw: Draw, peek: Peek | None = None) -> list[f.Fact]:
        """The dealer's play by the rule set's policy (R-G8, R-X2, R-W5, R-W6); ``peek``
        gives the face of the hole card, dealt face down (R-S2, ``wild21``), to turn it
        over."""
        self._require_phase(PLAYING, dealer=True)
        if self.pending is not None:
            raise NotYourTurn(f"{self.pending.bettors[0]} must answer the owner's "
                              f"{self.pending.kind} first.", "R-X9")
        t = self.turn()
        if t is not None:
            raise NotYourTurn(f"Box {t[0]}, hand {t[1]} has not finished; the dealer plays "
                              "after every box (hands play left to right, box by box).", "R-C3")
        self._begin()
        return self._drawing(lambda: self._dealer_draws(draw, peek))

    def settle(self) -> list[f.Fact]:
        """Settle every open stake against the dealer's result (R-G5..R-G7, R-C5, R-C7)."""
        self._require_phase(SETTLING)
        self._begin()
        for key in list(self.open_stakes):
            self._settle_at_end(key)
        self._emit(f.RoundSettled(staked=self.staked, returned=self.paid_back,
                                  house_result=self.house, results=dict(self.results)))
        return self._end()

    def void(self, reason: str) -> list[f.Fact]:
        """R-V1, R-X13: a manager voids an unfinished round; every stake is returned."""
        if self.phase == SETTLED:
            raise RoundClosed("The round is settled, and a settled round is not voided: a "
                              "manager corrects it with a ruling.", "R-V2")
        self._require_phase(BETTING, DEALING, PLAYING, SETTLING)
        if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX_CHARS:
            raise DecisionRefused(f"A void needs a reason of 1 to {REASON_MAX_CHARS} characters.",
                                  "R-V1")
        self._begin()
        self._emit(self._void_fact(reason.strip()))
        return self._end()

    def abandon_shoe(self, reason: str) -> list[f.Fact]:
        """The round's shoe is abandoned, its key lost: a round in play takes no more stakes
        or decisions (:meth:`_require_phase`)."""
        self._require_phase(BETTING, DEALING, PLAYING, SETTLING)
        self._begin()
        self._emit(f.ShoeAbandoned(reason=reason))
        return self._end()

    def record_ruling(self, reason: str, corrects: list[int],
                      adjustments: dict[str, int]) -> list[f.Fact]:
        """R-V2: a manager's ruling on a settled round, by compensating amounts."""
        self._require_phase(SETTLED)
        if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX_CHARS:
            raise DecisionRefused(f"A ruling needs a reason of 1 to {REASON_MAX_CHARS} "
                                  "characters.", "R-V2")
        if len(self.rulings) >= RULINGS_MAX:
            # A limit on a round's size (no rule of RULES.md states it): no rule cited.
            raise DecisionRefused(f"This round has {RULINGS_MAX} rulings, the most one round "
                                  "takes; it records no more.")
        last = self.facts + 1
        if not corrects or any(type(v) is not int or not 1 <= v <= last for v in corrects) \
                or len(set(corrects)) != len(corrects):
            raise DecisionRefused(f"A ruling must name the event versions it corrects, each "
                                  f"once, from 1 to {last}, the round's events so far.", "R-V2")
        if not adjustments or any(type(a) is not int or a == 0 or abs(a) > AMOUNT_MAX
                                  for a in adjustments.values()):
            raise DecisionRefused(f"A ruling must move a non-zero whole amount, at most "
                                  f"{AMOUNT_MAX}, for each player it names.", "R-V2")
        unknown = [p for p in adjustments if p not in self.results]
        if unknown:
            raise DecisionRefused(f"{unknown[0]} had no stake in this round.", "R-V2")
        self._begin()
        self._emit(f.RulingRecorded(reason=reason.strip(), corrects=list(corrects),
                                    adjustments=dict(adjustments)))
        return self._end()

    # ------------------------------------------------------ command internals

    def _drawing(self, body: Callable[[], object]) -> list[f.Fact]:
        """Run a command's drawing part; an empty shoe voids the round (R-H4)."""
        try:
            body()
        except ShoeExhausted:
            return self._void_exhausted()
        return self._end()

    def _void_exhausted(self) -> list[f.Fact]:
        self._emit(self._void_fact("the shoe ran out of cards mid-round (R-H4)"))
        return self._end()

    def _void_fact(self, reason: str) -> f.RoundVoided:
        released: dict[str, int] = {}
        for (_, bettor, _, _), held in self.open_stakes.items():
            released[bettor] = released.get(bettor, 0) + held
        reversals = {b: -net for b, net in self.results.items() if net}
        return f.RoundVoided(reason=reason, released=released, reversals=reversals)

    def _owner_turn(self, player: str, box: int, hand: int, play: Play,
                    refusal: Callable[[Box, Hand], Refusal] | None = None) -> Hand:
        self._require_phase(PLAYING)
        b = self.box(box)
        h = self.hand(box, hand)
        if player != b.owner:
            raise NotTheOwner(f"Only the box owner, {b.owner}, may {play.value} on box {box}.",
                              "R-C4")
        # A co-bettor's answer awaited, or another hand's turn, first: a hand waiting for its
        # turn (a split hand with one card) was refused a double as if it never could be.
        if refusal is not None and not getattr(self.rules, _IN_GAME.get(play, ""), True):
            reason, rule = refusal(b, h)  # "this game has no doubling": no answer or turn
            raise DecisionRefused(reason, rule)  # will change it
        self._require_no_pending()
        t = self.turn()
        if t != (box, hand) and not h.done:
            whose = "box's" if t is not None and t[0] != box else "hand's"
            raise NotYourTurn(f"It is not this {whose} turn: box {t[0] if t else '-'}, hand "
                              f"{t[1] if t else '-'} plays first (hands play left to right, "
                              "box by box).", "R-C3")
        # Then what the play itself cannot do, before a finished hand's turn: "a hand is
        # doubled only on its first two cards" says more of a doubled hand than that it is done.
        if refusal is not None:
            reason, rule = refusal(b, h)
            if reason:
                raise DecisionRefused(reason, rule)
        if t != (box, hand):
            why, rule = _finished(h)
            raise NotYourTurn(f"Box {box}, hand {hand} has finished its turn: {why}.", rule)
        return h

    def _require_no_pending(self) -> None:
        if self.pending is not None:
            raise NotYourTurn(f"{self.pending.bettors[0]} must first answer the owner's "
                              f"{self.pending.kind} on box {self.pending.box}.", "R-X9")

    def _double_refusal(self, b: Box, h: Hand) -> Refusal:
        if not self.rules.double:
            return "This game has no doubling.", "R-C2"
        if WILD in h.cards:
            return "A hand holding the wild card has ended its turn.", "R-W1"
        if h.split_aces:
            return "Split aces cannot be doubled.", "R-C2"
        if self.is_natural(b, h):
            return "A natural cannot be doubled.", "R-C2"
        if len(h.cards) != 2 or h.doubled:
            return "A hand may be doubled only on its first two cards.", "R-C2"
        return NO

    def _split_refusal(self, b: Box, h: Hand) -> Refusal:
        if not self.rules.split:
            return "This game has no splitting.", "R-C3"
        if WILD in h.cards:
            return "A hand holding the wild card has ended its turn.", "R-W1"
        if h.split_aces:
            return "A hand made by splitting aces is not split again.", "R-C3"
        if len(h.cards) != 2 or h.doubled:
            return "Only a hand of two first cards may be split.", "R-C3"
        first, second = h.cards
        if _split_value(first) != _split_value(second):
            return "Only two cards of the same value may be split.", "R-C3"
        if len(b.hands) >= self.rules.max_hands_per_box:
            count = len(b.hands)
            return (f"Box {b.number} already has {count} hand{'s' if count != 1 else ''}, the "
                    "most a box may play."), "R-C3"
        return NO

    def _surrender_refusal(self, b: Box) -> Refusal:
        if not self.rules.surrender:
            return "This game has no surrender.", "R-C1"
        hand = b.hands[0]
        if b.was_split:  # its first hand's standing is not the box's; cards left the shoe
            return _WINDOW_CLOSED if not self.window_open else _SPLIT_OR_DOUBLED
        if hand.status != LIVE:
            return f"Box {b.number} is already {hand.status}.", _STATUS_RULE[hand.status]
        if WILD in hand.cards:
            return "A hand holding the wild card has ended its turn.", "R-W1"
        if hand.stood:
            return "Standing is final: a box that stood cannot surrender.", "R-X3"
        if not self.window_open:
            return _WINDOW_CLOSED
        if self.upcard is not None and is_ace(self.upcard):
            return "Surrender is not allowed when the dealer's upcard is an ace.", "R-C1"
        if hand.doubled:
            return _SPLIT_OR_DOUBLED
        if self.is_natural(b, hand):
            return "A natural cannot be surrendered.", "R-C1"
        if hand_total(hand.cards)[0] == 21:  # two cards, in a game without naturals
            return ("A hand of 21 stands automatically (R-G4), and standing is final: a box "
                    "that stood cannot surrender."), "R-X3"
        return NO

    def _insurance_cap(self, bettor: str) -> int:
        """R-X6: half the bettor's stakes at the table, down to a whole minimum unit (R-M2),
        the most insurance that can be placed."""
        unit = self.limits.min_unit
        return self.stakes_of(bettor) // 2 // unit * unit

    def _insurance_refusal(self, bettor: str) -> Refusal:
        if not self.rules.insurance:
            return "This game has no insurance.", "R-C5"
        if self.upcard is None or not is_ace(self.upcard):
            return "Insurance is offered only when the dealer's upcard is an ace.", "R-C5"
        if not self.window_open:
            return ("The insurance window has closed: a card has left the shoe since the "
                    "deal."), "R-X3"
        if bettor in self.insurance:
            return f"{bettor} already has an insurance bet; one per player.", "R-C5"
        if self.stakes_of(bettor) == 0:
            return f"{bettor} has no stake at this table.", "R-C5"
        return NO

    def _even_money_refusal(self, bettor: str, box: int) -> Refusal:
        if not self.rules.even_money:
            return "This game has no even money.", "R-C6"
        b = self.box(box)
        hand = b.hands[0]
        if b.was_split:  # its first hand's standing is not the box's
            return f"Box {box} does not hold a natural: it was split.", "R-C6"
        if (f.MAIN, bettor, box, 0) not in self.open_stakes:
            if (bettor, box) in self.even_money_taken:  # whatever became of the box since
                return f"{bettor} has already taken even money on box {box}.", "R-C6"
            if bettor in b.bettors and hand.status != LIVE:
                return f"Box {box} is already {hand.status}.", _STATUS_RULE[hand.status]
            return f"{bettor} has no open stake on box {box}.", "R-C6"
        if not self.is_natural(b, hand) or hand.status != LIVE:
            return f"Box {box} does not hold a natural.", "R-C6"
        if self.upcard is None or not is_ace(self.upcard):
            return "Even money is offered only against a dealer's ace.", "R-C6"
        if not self.window_open:
            return ("The even money window has closed: a card has left the shoe since the "
                    "deal."), "R-X3"
        return NO

    def _deal_card(self, box: int, hand: int, draw: Draw, face_up: bool = True) -> None:
        card, position = draw()
        if not face_up:
            # Recorded without its face, which anyone reading the events would otherwise
            # know before the players have played (a wild card too: R-W5 waits for the
            # reveal). The face is recorded when the card is turned over.
            self._emit(f.CardDealt(card=HIDDEN, position=position, box=box, hand=hand,
                                   face_up=False))
            return
        if card == HIDDEN:
            raise InvariantBroken(f"the card dealt face up from position {position} has no "
                                  "face")
        in_play = self.phase == PLAYING  # the initial deal's last card starts play (R-W3)
        kind = f.WildCardDrawn if card == WILD else f.CardDealt
        self._emit(kind(card=card, position=position, box=box, hand=hand, face_up=face_up))
        if box == f.DEALER or not in_play:
            return
        h = self.boxes[box].hands[hand]
        if h.status == BUST:
            for bettor, held in h.stakes.items():
                self._settle(bettor, box, hand, f.LOST, held, released=0, won=0, rate=[0, 1],
                             remainder=[0, 1], reason="hand over 21 (R-G3)")
        elif card == WILD:
            self._forfeit({self.boxes[box].owner}, box)

    def _forfeit(self, drawers: set[str], cause_box: int, reason: str | None = None) -> None:
        """R-W2, R-W3, R-X8: every live box not owned by a drawer loses its main stakes.
        ``cause_box`` is the drawer's box (the first in seat order when several players hold
        a wild card after the deal; ``reason`` then names them all)."""
        cause_player = self.boxes[cause_box].owner
        reason = reason or wild_draw_reason(cause_player, cause_box)
        for b, h, hand in list(self.hands_in_order()):
            if b.owner in drawers or hand.status != LIVE:
                continue
            for bettor, held in hand.stakes.items():
                if (f.MAIN, bettor, b.number, h) in self.open_stakes:
                    self._emit(f.StakeForfeited(
                        line=f.MAIN, bettor=bettor, box=b.number, hand=h, outcome=f.FORFEITED,
                        held=held, released=0, lost=held, won=0, rate=[0, 1], remainder=[0, 1],
                        reason=reason,
                        cause_box=cause_box, cause_player=cause_player))

    def _deal_then_proceed(self, box: int, hand: int, draw: Draw) -> None:
        self._deal_card(box, hand, draw)
        self._proceed(draw)

    def _proceed(self, draw: Draw) -> None:
        """Deal split hands their second card as their turn comes (R-X4)."""
        while self.pending is None:
            t = self.turn()
            if t is None:
                return
            h = self.boxes[t[0]].hands[t[1]]
            if len(h.cards) != 1:
                return
            self._deal_card(t[0], t[1], draw)

    def _settle(self, bettor: str, box: int, hand: int, outcome: str, held: int, *,
                released: int, won: int, rate: list[int], remainder: list[int], reason: str,
                line: str = f.MAIN, prize: str = "") -> None:
        self._emit(f.StakeSettled(line=line, bettor=bettor, box=box, hand=hand, outcome=outcome,
                                  held=held, released=released, lost=held - released, won=won,
                                  rate=rate, remainder=remainder, reason=reason, prize=prize))

    # -------------------------------------------------------------- the dealer

    def _dependent_hands(self) -> tuple[int | None, bool]:
        """(the highest total of a live hand whose result depends on the dealer's total, None
        if there is none; whether any main stake still waits). A natural or a prize hand
        waits on the dealer's natural alone (R-G6, R-C7, R-X2)."""
        best: int | None = None
        waits = False
        for b, h, hand in self.hands_in_order():
            if hand.status != LIVE or not any((f.MAIN, bettor, b.number, h) in self.open_stakes
                                              for bettor in hand.stakes):
                continue
            waits = True
            if not (self.is_natural(b, hand) or self.prize(b, hand)):
                total = hand_total(hand.cards)[0]
                best = total if best is None else max(best, total)
        return best, waits

    def _dealer_draws(self, draw: Draw, peek: Peek | None) -> None:
        rules = self.rules
        if rules.dealer_hole_card:
            position, card = self.dealer_positions[0], self.dealer[0]
            if card == HIDDEN:  # (rounds recorded before hole cards were hidden have its face)
                if peek is None:
                    raise InvariantBroken("the hole card cannot be turned over without the "
                                          "shoe it was dealt from")
                card = peek(position)  # a face: the shoe's, or the record's (readjudicate)
            self._emit(f.HoleCardRevealed(card=card, position=position))
        best, waits = self._dependent_hands()
        if WILD in self.dealer:
            pass  # R-W5, R-X10: the dealer is 21 and draws nothing
        elif rules.dealer_policy == "beat_players" and best is not None:
            if len(self.dealer) == 1:
                # No hole card (rules of a table's own): the second card comes first, as it
                # would at any table (R-G2), and may make a dealer natural (R-G7).
                self._deal_card(f.DEALER, 0, draw)
            # Beating the hands that depend on its total: a natural or a prize hand beside
            # them cannot be beaten by drawing (R-X2), and chasing one paid hands already
            # beaten when the dealer bust.
            while self._dealer_may_beat(best):
                self._deal_card(f.DEALER, 0, draw)
        elif best is not None:
            while self._dealer_wants_card():
                self._deal_card(f.DEALER, 0, draw)
        elif (waits or self.insurance) and len(self.dealer) == 1:
            up = self.dealer[0]
            if is_ace(up) or is_ten_value(up):
                self._deal_card(f.DEALER, 0, draw)  # R-X2: only to see a natural
        total, _ = hand_total(self.dealer)
        self._emit(f.DealerFinished(total=total, natural=self.dealer_natural(),
                                    bust=total > 21, cards=list(self.dealer)))

    def _dealer_may_beat(self, best: int) -> bool:
        """R-W6: below 21 and not above the highest live player total (of the hands that
        depend on the dealer's)."""
        if WILD in self.dealer:
            return False
        total = hand_total(self.dealer)[0]
        return total < 21 and total <= best

    def _dealer_wants_card(self) -> bool:
        """R-G8: draw to 16, stand on every 17 (soft 17 too unless the rules say hit)."""
        if WILD in self.dealer or self.dealer_natural():
            return False
        total, soft = hand_total(self.dealer)
        if len(self.dealer) < 2:
            return True
        return total < 17 or (total == 17 and soft and self.rules.dealer_hits_soft_17)

    # ------------------------------------------------------------ settlement

    def _settle_at_end(self, key: StakeKey) -> None:
        line, bettor, box, hand_id = key
        held = self.open_stakes[key]
        unit = self.limits.min_unit
        if line == f.INSURANCE:
            if self.dealer_natural():
                won, rest = payout(held, self.rules.insurance_pays, unit)
                self._settle(bettor, 0, 0, f.WON, held, released=held, won=won,
                             rate=list(self.rules.insurance_pays), remainder=rest,
                             reason="insurance against a dealer natural (R-C5)",
                             line=f.INSURANCE)
            else:
                self._settle(bettor, 0, 0, f.LOST, held, released=0, won=0, rate=[0, 1],
                             remainder=[0, 1], reason="no dealer natural (R-C5)",
                             line=f.INSURANCE)
            return
        b = self.boxes[box]
        hand = b.hands[hand_id]
        outcome, released, ratio, reason = self._judge(b, hand_id, hand, bettor, held)
        won, rest = payout(held, ratio, unit) if outcome == f.WON else (0, [0, 1])
        prize = self.prize(b, hand) if outcome == f.WON else None
        self._settle(bettor, box, hand_id, outcome, held, released=released, won=won,
                     rate=list(ratio), remainder=rest, reason=reason,
                     prize=prize[0] if prize else "")

    def _judge(self, b: Box, hand_id: int, hand: Hand, bettor: str,
               held: int) -> tuple[str, int, tuple[int, int], str]:
        """Outcome, amount released, win ratio and reason for one stake at the end."""
        natural = self.is_natural(b, hand)
        if self.dealer_natural():
            if natural:
                return f.PUSHED, held, (0, 1), "natural against a dealer natural (R-G6)"
            if self.rules.dealer_natural_takes == "original_only":
                if hand_id != 0:
                    return f.PUSHED, held, (0, 1), "split stake released (R-X12)"
                extra = held - b.initial[bettor] if bettor in b.initial else 0
                return f.LOST, extra, (0, 1), "dealer natural takes the original stake (R-X12)"
            return f.LOST, 0, (0, 1), "dealer natural takes every stake on the box (R-G7)"
        if natural:
            return f.WON, held, self.rules.natural_pays, "natural (R-G6)"
        prize = self.prize(b, hand)
        if prize is not None:
            return f.WON, held, prize[1], f"prize hand {prize[0]} (R-C7)"
        dealer = self.dealer_total()
        player = hand_total(hand.cards)[0]
        if dealer > 21:
            return f.WON, held, (1, 1), "dealer over 21 (R-G5)"
        if player > dealer:
            return f.WON, held, (1, 1), f"{player} beats the dealer's {dealer} (R-G5)"
        if player == dealer:
            return f.PUSHED, held, (0, 1), f"{player} ties the dealer's {dealer} (R-G5)"
        return f.LOST, 0, (0, 1), f"{player} loses to the dealer's {dealer} (R-G5)"

    # ------------------------------------------------------------- legal now

    def legal_plays(self, box: int, hand: int) -> list[Play]:
        """The plays the owner of the hand whose turn it is may make now."""
        if self.pending is not None or self.turn() != (box, hand):
            return []
        b = self.boxes[box]
        h = b.hands[hand]
        plays = [Play.STAND]
        if not (h.doubled or h.split_aces):
            plays.append(Play.HIT)
        if not self._double_refusal(b, h)[0]:
            plays.append(Play.DOUBLE)
        if not self._split_refusal(b, h)[0]:
            plays.append(Play.SPLIT)
        if not self._surrender_refusal(b)[0]:
            plays.append(Play.SURRENDER)
        return plays

    def legal(self) -> list[Legal]:
        """Every decision somebody may make now, and by whom."""
        phase = self.phase
        if self.shoe_lost is not None and phase in (BETTING, PLAYING):
            return [*([Legal("play_dealer")] if self._dealer_plays_without_a_card() else []),
                    Legal("void")]
        if phase == BETTING:
            out = [] if self._betting_changes_spent() else [Legal("place_stake"),
                                                             Legal("withdraw_stake")]
            if not self._deal_refusal():
                out.append(Legal("close_betting"))
            return [*out, Legal("void")]
        if phase == SETTLING:
            return [Legal("settle"), Legal("void")]
        if phase != PLAYING:
            return []
        out = []
        if self.pending is not None:
            p = self.pending
            return [Legal("match", p.bettors[0], p.box, p.hand),
                    Legal("decline", p.bettors[0], p.box, p.hand), Legal("void")]
        t = self.turn()
        if t is not None:
            owner = self.boxes[t[0]].owner
            out += [Legal(p.value, owner, t[0], t[1]) for p in self.legal_plays(*t)
                    if p != Play.SURRENDER]
        for number in self.box_order:
            b = self.boxes[number]
            if not self._surrender_refusal(b)[0]:
                out.append(Legal(Play.SURRENDER.value, b.owner, number, 0))
            for bettor in b.bettors:
                if (f.MAIN, bettor, number, 0) in self.open_stakes and \
                        not self._even_money_refusal(bettor, number)[0]:
                    out.append(Legal("even_money", bettor, number, 0))
        for bettor in self.players():
            if not self._insurance_refusal(bettor)[0] and \
                    self._insurance_cap(bettor) >= self.limits.min_chip:
                out.append(Legal("insure", bettor))
        if t is None:
            out.append(Legal("play_dealer"))
        out.append(Legal("void"))
        return out

    # ------------------------------------------------------------------ apply

    def apply(self, fact: f.Fact) -> None:
        """Assign the state a fact describes. No checks of rules here: facts are history."""
        self._turn = False
        self.facts += 1
        _APPLY[type(fact)](self, fact)

    def _on_shoe_abandoned(self, e: f.ShoeAbandoned) -> None:
        self.shoe_lost = e.reason

    def _on_stake_placed(self, e: f.StakePlaced) -> None:
        b = self.boxes.get(e.box)
        if b is None:
            b = self.boxes[e.box] = Box(e.box)
        b.bettors.append(e.bettor)
        b.initial[e.bettor] = e.amount
        self._open((f.MAIN, e.bettor, e.box, 0), e.amount)

    def _on_stake_withdrawn(self, e: f.StakeWithdrawn) -> None:
        b = self.boxes[e.box]
        b.bettors.remove(e.bettor)
        del b.initial[e.bettor]
        if self.open_stakes.pop((f.MAIN, e.bettor, e.box, 0)) != e.amount:
            raise InvariantBroken("a withdrawn stake differs from the stake placed")
        self.staked -= e.amount
        if not b.bettors:
            del self.boxes[e.box]

    def _on_betting_closed(self, e: f.BettingClosed) -> None:
        self.phase = DEALING
        self.box_order = list(e.boxes)
        self._initial_cards_left = 2 * len(e.boxes) + (2 if self.rules.dealer_hole_card else 1)
        for number in self.box_order:
            b = self.boxes[number]
            b.hands = [Hand(dict(b.initial))]
            b.order = [0]
        for bettor in e.players:
            self.results.setdefault(bettor, 0)

    def _on_card(self, e: f.CardDealt) -> None:
        card = Card(e.card)
        if e.box == f.DEALER:
            self.dealer.append(card)
            self.dealer_positions.append(e.position)
            if self.phase == PLAYING:
                self.window_open = False
        else:
            hand = self.boxes[e.box].hands[e.hand]
            if hand.done:
                raise InvariantBroken(f"a card was dealt to box {e.box}, hand {e.hand} after "
                                      "it ended")
            hand.cards.append(card)
            if self.phase == PLAYING:
                self.window_open = False
                _after_card(hand)
        if self.phase == DEALING:
            self._initial_cards_left -= 1
        if self.phase == DEALING and not self._initial_cards_left:
            self.phase = PLAYING
            self.window_open = True
            for _, _, hand in self.hands_in_order():
                if hand_total(hand.cards)[0] == 21:  # naturals and wild cards (R-G4, R-W1)
                    hand.done = True

    def _on_hole_revealed(self, e: f.HoleCardRevealed) -> None:
        if e.position != self.dealer_positions[0] or self.dealer[0] not in (HIDDEN, e.card):
            raise InvariantBroken(f"the hole card turned over, {e.card} from position "
                                  f"{e.position}, is not the one dealt face down")
        self.dealer[0] = Card(e.card)
        self.hole_revealed = True

    def _on_hit(self, e: f.HandHit) -> None:
        pass  # the card that follows carries the change

    def _on_stood(self, e: f.HandStood) -> None:
        hand = self.boxes[e.box].hands[e.hand]
        hand.done = hand.stood = True

    def _on_doubled(self, e: f.HandDoubled) -> None:
        hand = self.boxes[e.box].hands[e.hand]
        hand.doubled = True
        self._raise_stake(e.player, e.box, e.hand, e.amount)
        self._await_answers("double", e.box, e.hand, e.hand, e.player)

    def _on_double_matched(self, e: f.DoubleMatched) -> None:
        self._raise_stake(e.bettor, e.box, e.hand, e.amount)
        self._answered(e.bettor)

    def _on_declined(self, e: f.DoubleDeclined | f.SplitDeclined) -> None:
        self._answered(e.bettor)

    def _on_split(self, e: f.HandSplit) -> None:
        b = self.boxes[e.box]
        hand = b.hands[e.hand]
        card = hand.cards.pop()
        new = Hand({e.player: e.amount}, [card])
        b.hands.append(new)
        b.order.insert(b.order.index(e.hand) + 1, e.new_hand)
        b.was_split = True
        if is_ace(card):
            hand.split_aces = new.split_aces = True
        self._open((f.MAIN, e.player, e.box, e.new_hand), e.amount)
        self._await_answers("split", e.box, e.hand, e.new_hand, e.player)

    def _on_split_matched(self, e: f.SplitMatched) -> None:
        self.boxes[e.box].hands[e.new_hand].stakes[e.bettor] = e.amount
        self._open((f.MAIN, e.bettor, e.box, e.new_hand), e.amount)
        self._answered(e.bettor)

    def _on_insurance(self, e: f.InsurancePlaced) -> None:
        self.insurance[e.bettor] = e.amount
        self._open((f.INSURANCE, e.bettor, 0, 0), e.amount)

    def _on_surrendered(self, e: f.BoxSurrendered) -> None:
        for hand in self.boxes[e.box].hands:
            hand.status = SURRENDERED
            hand.done = True

    def _on_settled(self, e: f.StakeSettled) -> None:
        key = (e.line, e.bettor, e.box, e.hand)
        held = self.open_stakes.pop(key, None)
        if held is None:
            raise InvariantBroken(f"stake {key} settled twice or never placed")
        if held != e.held or e.released + e.lost != e.held or min(e.released, e.lost,
                                                                   e.won) < 0:
            raise InvariantBroken(f"settlement of {key} does not balance what was held")
        net = e.released + e.won - e.held
        if e.outcome == f.EVEN_MONEY:
            self.even_money_taken.add((e.bettor, e.box))
        self.results[e.bettor] = self.results.get(e.bettor, 0) + net
        self.paid_back += e.released + e.won
        self.house -= net

    def _on_forfeited(self, e: f.StakeForfeited) -> None:
        self._on_settled(e)
        hand = self.boxes[e.box].hands[e.hand]
        hand.status = FORFEITED
        hand.done = True

    def _on_dealer_finished(self, e: f.DealerFinished) -> None:
        self.phase = SETTLING
        self.window_open = False
        self.dealer_result = e

    def _on_round_settled(self, e: f.RoundSettled) -> None:
        if self.open_stakes:
            raise InvariantBroken(f"round settled with open stakes: {sorted(self.open_stakes)}")
        if e.staked != self.paid_back + self.house or e.house_result != self.house \
                or sum(self.results.values()) + self.house != 0:
            raise InvariantBroken("round totals break conservation (R-M4)")
        self.phase = SETTLED

    def _on_voided(self, e: f.RoundVoided) -> None:
        self.phase = VOIDED
        self.void_reason = e.reason
        self.open_stakes.clear()
        for bettor, amount in e.reversals.items():
            self.results[bettor] = self.results.get(bettor, 0) + amount
            self.house -= amount
        if any(self.results.values()) or self.house:
            raise InvariantBroken("a void left a bettor or the house with a result (R-X13)")

    def _on_ruling(self, e: f.RulingRecorded) -> None:
        self.rulings.append(e)
        for player, amount in e.adjustments.items():
            self.results[player] = self.results.get(player, 0) + amount
            self.house -= amount

    # ------------------------------------------------------- apply helpers

    def _open(self, key: StakeKey, amount: int) -> None:
        if key in self.open_stakes:
            raise InvariantBroken(f"stake {key} opened twice")
        self.open_stakes[key] = amount
        self.staked += amount

    def _raise_stake(self, bettor: str, box: int, hand: int, amount: int) -> None:
        self.boxes[box].hands[hand].stakes[bettor] += amount
        self.open_stakes[(f.MAIN, bettor, box, hand)] += amount
        self.staked += amount

    def _await_answers(self, kind: str, box: int, hand: int, new_hand: int, owner: str) -> None:
        others = tuple(b for b in self.boxes[box].hands[hand].stakes if b != owner)
        self.pending = Pending(kind, box, hand, new_hand, others) if others else None

    def _answered(self, bettor: str) -> None:
        p = self.pending
        if p is None or bettor not in p.bettors:
            raise InvariantBroken(f"{bettor} answered a double or split nobody asked")
        rest = tuple(b for b in p.bettors if b != bettor)
        self.pending = p._replace(bettors=rest) if rest else None

    # ------------------------------------------------------------------ views

    def view(self, reveal_hole: bool = False) -> dict[str, Any]:
        """The round as a terminal or a replay shows it (never the shoe)."""
        dealer: list[str] = list(self.dealer)
        if dealer and not (self.hole_revealed or reveal_hole):
            dealer[0] = "hidden"
        boxes = []
        for number in sorted(self.boxes):
            b = self.boxes[number]
            hands = [{
                "hand": h, "cards": list(b.hands[h].cards),
                "total": hand_total(b.hands[h].cards)[0] if b.hands[h].cards else 0,
                "soft": hand_total(b.hands[h].cards)[1] if b.hands[h].cards else False,
                "status": b.hands[h].status, "doubled": b.hands[h].doubled,
                "stood": b.hands[h].stood, "done": b.hands[h].done,
                "natural": self.is_natural(b, b.hands[h]),
                "settled": self.phase != VOIDED and not any(
                    (f.MAIN, bettor, number, h) in self.open_stakes
                    for bettor in b.hands[h].stakes),
                "stakes": dict(b.hands[h].stakes),
            } for h in b.order]
            boxes.append({"box": number, "owner": b.owner, "bettors": list(b.bettors),
                          "stakes": dict(b.initial), "hands": hands})
        # A round whose shoe was abandoned waits for nobody's play (``legal``).
        t = self.turn() if self.shoe_lost is None else None
        pending = self.pending if self.shoe_lost is None else None
        shown = [Card(c) for c in dealer if c != "hidden"]
        total, soft = hand_total(shown) if shown else (0, False)
        return {
            "phase": self.phase,
            "boxes": boxes,
            "dealer": {"cards": dealer, "total": total, "soft": soft},
            "turn": {"box": t[0], "hand": t[1]} if t else None,
            "pending": ({"kind": pending.kind, "box": pending.box, "hand": pending.hand,
                         "bettors": list(pending.bettors)} if pending else None),
            "window_open": self.window_open and self.shoe_lost is None,
            "insurance": dict(self.insurance),
            "staked": self.staked,
            "results": dict(self.results),
            "house_result": self.house,
            "void_reason": self.void_reason or None,
            "rulings": [{"reason": r.reason, "corrects": list(r.corrects),
                         "adjustments": dict(r.adjustments)} for r in self.rulings],
        }


def _after_card(hand: Hand) -> None:
    """The state of a hand after a card in play (R-G3, R-G4, R-W1, R-C2, R-C3)."""
    total = hand_total(hand.cards)[0]
    if total > 21:
        hand.status = BUST
        hand.done = True
    elif total == 21 or hand.doubled or (hand.split_aces and len(hand.cards) == 2):
        hand.done = True


SURRENDERED_REASON = "surrendered by the owner (R-C1)"
EVEN_MONEY_REASON = "even money taken against an ace (R-C6)"
# Reasons as rounds recorded them before they cited their rule: the round check takes them.
REASONS_BEFORE = {SURRENDERED_REASON: "surrendered by the owner",
                  EVEN_MONEY_REASON: "even money taken against an ace"}


def wild_draw_reason(player: str, box: int) -> str:
    """A forfeiture's reason when one player's hand received a wild card (R-W2)."""
    return f"forfeited: {player} drew the wild card on box {box} (R-W2)"


def _deal_forfeit_reason(holders: list[tuple[str, int]]) -> str | None:
    """A forfeiture's reason when several players hold a wild card after the deal (R-W3):
    each of them is named, in seat order. None for one holder, whose forfeitures read as
    any wild draw's (R-W2)."""
    if len(holders) < 2:
        return None
    named = [f"{player} (box {box})" for player, box in holders]
    return (f"forfeited: {', '.join(named[:-1])} and {named[-1]} hold wild cards after the "
            "deal (R-W2, R-W3)")


def _hit_refusal(hand: Hand) -> Refusal:
    if hand.doubled:
        return "This hand was doubled and takes exactly one more card.", "R-C2"
    if hand.split_aces:
        return "Split aces receive exactly one card each; this hand takes no more.", "R-C3"
    if hand.status == LIVE and WILD in hand.cards:
        return "A hand holding the wild card has ended its turn.", "R-W1"  # as for a double
    if hand.status == LIVE and hand.cards and hand_total(hand.cards)[0] >= 21:
        return "A hand of 21 stands automatically.", "R-G4"
    return "", ""


def _split_value(card: Card) -> int:
    return 10 if is_ten_value(card) else (1 if is_ace(card) else int(card[0]))


def _check_bettor(bettor: str) -> None:
    check_name("bettor", bettor, field="bettor")


def _check_amount(amount: int, min_unit: int) -> None:
    if type(amount) is not int or amount <= 0:
        raise BetRefused("An amount is a positive whole number of minor units.", "R-M1")
    if amount % min_unit:
        raise BetRefused(f"An amount must be a multiple of the minimum unit {min_unit}.", "R-M2")
    if amount > AMOUNT_MAX:
        raise BetRefused(f"An amount is at most {AMOUNT_MAX} minor units.", "R-M1")


class _CardNeeded(Exception):
    """A trial of the dealer's play asked for a card (:meth:`_dealer_plays_without_a_card`)."""


_APPLY: dict[type, Callable[[RoundMachine, Any], None]] = {
    f.ShoeAbandoned: RoundMachine._on_shoe_abandoned,
    f.StakePlaced: RoundMachine._on_stake_placed,
    f.StakeWithdrawn: RoundMachine._on_stake_withdrawn,
    f.BettingClosed: RoundMachine._on_betting_closed,
    f.CardDealt: RoundMachine._on_card,
    f.WildCardDrawn: RoundMachine._on_card,
    f.HoleCardRevealed: RoundMachine._on_hole_revealed,
    f.HandHit: RoundMachine._on_hit,
    f.HandStood: RoundMachine._on_stood,
    f.HandDoubled: RoundMachine._on_doubled,
    f.DoubleMatched: RoundMachine._on_double_matched,
    f.DoubleDeclined: RoundMachine._on_declined,
    f.HandSplit: RoundMachine._on_split,
    f.SplitMatched: RoundMachine._on_split_matched,
    f.SplitDeclined: RoundMachine._on_declined,
    f.InsurancePlaced: RoundMachine._on_insurance,
    f.BoxSurrendered: RoundMachine._on_surrendered,
    f.StakeSettled: RoundMachine._on_settled,
    f.StakeForfeited: RoundMachine._on_forfeited,
    f.DealerFinished: RoundMachine._on_dealer_finished,
    f.RoundSettled: RoundMachine._on_round_settled,
    f.RoundVoided: RoundMachine._on_voided,
    f.RulingRecorded: RoundMachine._on_ruling,
}

__all__ = ["Draw", "Legal", "LedgerError", "RoundMachine", "payout"]  # noqa: RUF022

"""Re-adjudication: run the rules again over a round's recorded cards and decisions.

A recorded round is a list of facts. Each command of the machine starts with a
fact that names it (a stake, a hit, the dealer's first card...), so the
commands can be read back from the facts, replayed on a fresh machine with a
shoe that deals exactly the recorded cards, and the facts they produce compared
with the recorded ones. Any difference means the recorded settlement does not
follow the rules of that round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ledger.cards import HIDDEN, Card
from ledger.engine import facts as f
from ledger.engine.machine import REASONS_BEFORE, SETTLING, RoundMachine, wild_draw_reason
from ledger.errors import InvariantBroken, LedgerError, ShoeExhausted
from ledger.rules import RuleSet, TableLimits


class RecordedCards:
    """Deals the recorded cards, in their recorded order and positions, and turns a face-down
    card over as recorded."""

    def __init__(self, facts: Sequence[f.Fact]) -> None:
        self._cards = [(Card(x.card), x.position) for x in facts if isinstance(x, f.CardDealt)]
        self._faces = {x.position: Card(x.card) for x in facts
                       if isinstance(x, f.HoleCardRevealed | f.CardDealt)}
        self._next = 0
        self.ran_out = False  # asked for a card past the last one recorded

    def __call__(self) -> tuple[Card, int]:
        if self._next >= len(self._cards):
            self.ran_out = True
            raise ShoeExhausted()
        self._next += 1
        card, position = self._cards[self._next - 1]
        return self._faces.get(position, card), position  # a face-down card as turned over

    def peek(self, position: int) -> Card:
        face = self._faces.get(position, HIDDEN)
        if face == HIDDEN:
            raise InvariantBroken(f"the record does not say which card was dealt face down "
                                  f"from position {position}")
        return face


Command = Callable[[RoundMachine, RecordedCards], list[f.Fact]]


def as_recorded_today(fact: f.Fact) -> f.Fact:
    """A face-down card as a deal records it: rounds recorded before hole cards were hidden
    hold its face (their reveal repeats it, so nothing is lost in the comparison)."""
    if isinstance(fact, f.CardDealt) and not fact.face_up and fact.card != HIDDEN:
        return f.CardDealt(card=HIDDEN, position=fact.position, box=fact.box, hand=fact.hand,
                           face_up=False)
    return fact


def as_worded_then(produced: f.Fact, recorded: f.Fact) -> f.Fact:
    """A settlement whose reason is worded as rounds recorded it before: a surrender's or even
    money's without its rule, or a forfeiture at the deal naming the first holder of a wild
    card alone, as a wild draw's does (R-W3). Every other field must still match."""
    if not (isinstance(produced, f.StakeSettled) and type(recorded) is type(produced)):
        return produced
    then = REASONS_BEFORE.get(produced.reason)
    if isinstance(produced, f.StakeForfeited):
        then = wild_draw_reason(produced.cause_player, produced.cause_box)
    if recorded.reason == then:
        return dataclasses.replace(produced, reason=then)
    return produced


def command_for(fact: f.Fact, machine: RoundMachine) -> Command | None:
    """The command a recorded fact starts, or None if no command starts with it."""
    match fact:
        case f.StakePlaced(bettor=b, box=x, amount=a):
            return lambda m, d: m.place_stake(b, x, a)
        case f.StakeWithdrawn(bettor=b, box=x):
            return lambda m, d: m.withdraw_stake(b, x)
        case f.BettingClosed():
            return lambda m, d: m.close_betting(d)
        case f.HandHit(player=p, box=x, hand=h):
            return lambda m, d: m.hit(p, x, h, d)
        case f.HandStood(player=p, box=x, hand=h):
            return lambda m, d: m.stand(p, x, h, d)
        case f.HandDoubled(player=p, box=x, hand=h):
            return lambda m, d: m.double(p, x, h, d)
        case f.HandSplit(player=p, box=x, hand=h):
            return lambda m, d: m.split(p, x, h, d)
        case f.DoubleMatched(bettor=b, box=x, hand=h) | f.SplitMatched(bettor=b, box=x, hand=h):
            return lambda m, d: m.answer(b, x, h, True, d)
        case f.DoubleDeclined(bettor=b, box=x, hand=h) | f.SplitDeclined(bettor=b, box=x, hand=h):
            return lambda m, d: m.answer(b, x, h, False, d)
        case f.BoxSurrendered(player=p, box=x):
            return lambda m, d: m.surrender(p, x)
        case f.InsurancePlaced(bettor=b, amount=a):
            return lambda m, d: m.insure(b, a)
        case f.HoleCardRevealed() | f.DealerFinished() | f.CardDealt(box=f.DEALER):
            return lambda m, d: m.play_dealer(d, d.peek)
        case f.RoundSettled():
            return lambda m, d: m.settle()
        case f.StakeSettled(bettor=b, box=x) if machine.phase != SETTLING:
            return lambda m, d: m.take_even_money(b, x)
        case f.StakeSettled():
            return lambda m, d: m.settle()
        case f.RoundVoided(reason=r):
            return lambda m, d: m.void(r)
        case f.ShoeAbandoned(reason=r):
            return lambda m, d: m.abandon_shoe(r)
        case f.RulingRecorded(reason=r, corrects=c, adjustments=adj):
            return lambda m, d: m.record_ruling(r, list(c), dict(adj))
    return None


def readjudicate(rules: RuleSet, limits: TableLimits, recorded: Sequence[f.Fact],
                 versions: Sequence[int] | None = None) -> list[str]:
    """Findings (empty when the rules reproduce every recorded fact exactly). ``versions``:
    the event version each fact was recorded at, to name it by (else its place, from 1)."""

    def at(i: int) -> str:
        return f"v{versions[i]}" if versions is not None else f"fact {i + 1}"

    machine = RoundMachine(rules, limits)
    machine.betting_changes_max = None  # rounds recorded before that limit may hold more
    cards = RecordedCards(recorded)
    recorded = [as_recorded_today(fact) for fact in recorded]
    findings: list[str] = []
    i = 0
    while i < len(recorded):
        command = command_for(recorded[i], machine)
        if command is None:
            return [f"{at(i)} ({type(recorded[i]).__name__}) starts no command"]
        try:
            produced = command(machine, cards)
        except LedgerError as e:
            # The first event the rules refuse after those before it: which one was altered,
            # this one or one before it, the chain shows.
            return [f"{at(i)} ({type(recorded[i]).__name__}) is refused by the rules, given the "
                    f"events before it: {e}"]
        except InvariantBroken as e:  # the record is not one the rules could have made
            return [f"{at(i)} ({type(recorded[i]).__name__}) cannot be replayed: {e}"]
        expected = list(recorded[i:i + len(produced)])
        for j, want in enumerate(expected):
            produced[j] = as_worded_then(produced[j], want)
        if produced != expected:
            for j, (want, got) in enumerate(zip(expected, produced, strict=False)):
                if want != got:
                    if cards.ran_out and isinstance(got, f.RoundVoided) and \
                            not isinstance(want, f.RoundVoided):
                        # Not a shoe that ran out: the record stops short of the rules.
                        findings.append(f"{at(i + j)}: recorded {want}; the rules deal one "
                                        "more card at this point, and the record holds none")
                    else:
                        findings.append(f"{at(i + j)}: recorded {want}, the rules give {got}")
                    break
            else:
                findings.append(f"{at(i)}: the rules give {len(produced)} facts, "
                                f"{len(expected)} recorded")
            return findings
        i += len(produced)
    return findings

"""Hypothesis strategies that play whole rounds through the round machine.

:func:`play_round` sets a table under a random preset and random table limits (R-X15),
places random stakes (R-C8), deals from a random shoe and then makes random decisions
chosen among :meth:`RoundMachine.legal` until the round is settled or voided. Every
command, the facts it produced and the view around it are kept in a :class:`Run`, so a
property can check the round afterwards, replay its facts or re-run its commands.

Shoes are either a real shuffled shoe (R-H1, from a drawn seed; sometimes started near its
end so that it runs out, R-H4) or a biased :class:`~tests.scripted.StackedShoe` built from a
drawn list of card codes over a small palette (many aces, tens, sevens, wild cards...), which
reaches the rare paths: resplits, split aces, prizes, naturals, dealer naturals, wild draws.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from hypothesis import note
from hypothesis import strategies as st

from ledger.cards import HIDDEN, SUITS, WILD, Card
from ledger.engine import facts as f
from ledger.engine.machine import Legal, RoundMachine
from ledger.errors import DealRefused, LedgerError, ShoeExhausted
from ledger.rules import CASINO, CASINO_WILD, WILD21, RuleSet, TableLimits
from ledger.shoe import Shoe
from tests.scripted import StackedShoe

T = TypeVar("T")
Drawer = Callable[[st.SearchStrategy[T]], T]
Command = tuple[Any, ...]

PRESETS = (CASINO, WILD21, CASINO_WILD)
POOL = ("P1", "P2", "P3", "P4")
STRANGER = "P9"
VOID_REASON = "manager's decision"

SETTLED = "settled"
VOIDED = "voided"
ENDED = (SETTLED, VOIDED)
# Ranks in the order hypothesis shrinks towards: the ones that make rare paths first.
RARE_FIRST = "AT78692345JQK"


@dataclass
class Step:
    """One command that was accepted, with what it did."""

    command: Command
    facts: list[f.Fact]
    before: dict[str, Any]
    after: dict[str, Any]
    after_hole: dict[str, Any]  # the view with the hole card shown
    legal_before: list[Legal]
    open_after: dict[tuple[str, str, int, int], int]


@dataclass
class Run:
    """A whole round: its settings, shoe, commands and every fact, in order."""

    rules: RuleSet
    limits: TableLimits
    shoe_kind: str
    start: int
    machine: RoundMachine
    steps: list[Step] = field(default_factory=list)
    log: list[f.Fact] = field(default_factory=list)  # every fact, as the sink received it
    refused_deals: int = 0
    shoe: Dealing = field(default_factory=lambda: NoShoe())

    @property
    def facts(self) -> list[f.Fact]:
        return [x for s in self.steps for x in s.facts]

    @property
    def commands(self) -> list[Command]:
        return [s.command for s in self.steps]

    @property
    def cards(self) -> list[str]:
        """The cards dealt, in the order they left the shoe (a face-down card's face from the
        shoe: the deal records none)."""
        return [self.shoe.dealt(x.position) if x.card == HIDDEN else x.card
                for x in self.facts if isinstance(x, f.CardDealt)]

    def script(self) -> str:
        """A reproduction: settings, shoe and commands as code a test can paste."""
        lines = [f"rules={self.rules.name} limits={self.limits}",
                 f"shoe={self.shoe_kind} start={self.start} "
                 f"cards={' '.join(self.cards)!r}"]
        lines += [f"  {c!r}" for c in self.commands]
        lines.append(f"  -> {self.machine.phase}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "Run(\n" + self.script() + "\n)"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


class Dealing(Protocol):
    """A shoe as the machine's commands use it: the next card, and a face dealt face down."""

    def draw(self) -> tuple[Card, int]: ...

    def dealt(self, position: int) -> Card: ...


def execute(m: RoundMachine, cmd: Command, shoe: Dealing) -> list[f.Fact]:
    """Run one recorded command against a machine, dealing from ``shoe``."""
    name, *args = cmd
    if name in ("hit", "stand", "double", "split", "answer"):
        return getattr(m, name)(*args, shoe.draw)  # type: ignore[no-any-return]
    if name == "close_betting":
        return m.close_betting(shoe.draw)
    if name == "play_dealer":
        return m.play_dealer(shoe.draw, shoe.dealt)
    if name == "even_money":
        return m.take_even_money(*args)
    return getattr(m, name)(*args)  # type: ignore[no-any-return]


def recording_machine(rules: RuleSet, limits: TableLimits,
                      log: list[f.Fact]) -> RoundMachine:
    """A machine whose sink records every fact before applying it."""
    m: RoundMachine

    def sink(fact: f.Fact) -> None:
        log.append(fact)
        m.apply(fact)

    m = RoundMachine(rules, limits, sink)
    return m


# ----------------------------------------------------------------------- strategies

@st.composite
def table_limits(draw: Drawer[Any]) -> TableLimits:
    """R-X15: limits of the table; every amount a multiple of ``min_unit`` (1 or 5)."""
    unit = draw(st.sampled_from([1, 5]))
    table_min = draw(st.sampled_from([10, 25, 50]))
    table_max = draw(st.sampled_from([3 * table_min, 300, 1000, 5000]))
    min_chip = draw(st.sampled_from([c for c in (1, 5, 10) if c % unit == 0]))
    boxes = draw(st.integers(5, 12))
    return TableLimits(table_min=table_min, table_max=table_max, min_chip=min_chip,
                       min_unit=unit, boxes=boxes)


# Rank themes of biased shoes, each aimed at rare paths: naturals, even money and insurance;
# split aces; 777 and 678 prizes; resplits; long hands; stiff hands and busts; wild cards.
THEMES = ("ATJQK", "A", "A9T", "7", "678", "8", "A78", "23456", "6T", "9TW", "AW", "W")


@st.composite
def palette(draw: Drawer[Any], rules: RuleSet) -> list[Card]:
    """A few ranks in a few suits (plus the wild card in wild presets): a biased shoe."""
    ranks = list(RARE_FIRST) + (["W"] if rules.wild_cards else [])
    themes = [t for t in THEMES if rules.wild_cards or "W" not in t]
    if draw(st.booleans()):
        chosen = set(draw(st.sampled_from(themes)))
        if draw(st.booleans()):
            chosen.update(draw(st.sampled_from(themes)))
        chosen &= set(ranks)
    else:
        chosen = set(draw(st.lists(st.sampled_from(ranks), min_size=1, max_size=5)))
    suits = draw(st.lists(st.sampled_from(SUITS), min_size=1, max_size=4, unique=True))
    cards = [Card(r + s) for r in sorted(chosen) if r != "W" for s in suits]
    if "W" in chosen:
        cards.append(WILD)
    if not cards:  # a wild-only theme: wild cards and a few tens
        cards = [WILD, Card("TS")]
    return cards


@st.composite
def shoes(draw: Drawer[Any], rules: RuleSet, boxes: int) -> tuple[str, int, Dealing]:
    """A shoe for one round at ``boxes`` boxes: ``(kind, first position, shoe)``."""
    kind = draw(st.sampled_from(["biased", "shuffled", "biased", "shuffled-end", "biased"]))
    if kind.startswith("shuffled"):
        seed = draw(st.integers(0, 2**32 - 1))
        shoe = Shoe.shuffle(rules.decks, rules.wild_cards, rules.penetration_percent,
                            randbelow=random.Random(seed).randrange)
        start = 0
        if kind == "shuffled-end":  # near its end: the shoe may run out mid-round (R-H4)
            start = shoe.size - draw(st.integers(0, 40))
            shoe = Shoe(shoe.reveal(), shoe.cut, start)
        return f"{kind}:{seed}", start, shoe
    cards = draw(palette(rules))
    need = 2 * boxes + 2
    codes = draw(st.lists(st.sampled_from(cards), min_size=need + 2, max_size=need + 60))
    if draw(st.integers(0, 2)) == 0:  # the dealer shows an ace: insurance, even money
        upcard = 2 * boxes + 1 if rules.dealer_hole_card else boxes
        codes[upcard] = draw(st.sampled_from([Card("A" + s) for s in SUITS]))
    return "biased", 0, StackedShoe(" ".join(codes))


class NoShoe:
    """The shoe before betting closes, and the one a refused command is given."""

    def draw(self) -> tuple[Card, int]:
        raise AssertionError("a refused command drew a card")

    def dealt(self, position: int) -> Card:
        raise AssertionError("a refused command turned a card over")


def _amount(draw: Drawer[Any], low: int, high: int, unit: int) -> int:
    """A multiple of ``unit`` in ``[low, high]`` (the range must hold one)."""
    return unit * int(draw(st.integers(-(-low // unit), high // unit)))


def command_for(choice: Legal, m: RoundMachine, draw: Drawer[Any]) -> Command:
    """The command that makes a decision legal() offers (an insurance amount is drawn)."""
    d, player, box, hand = choice
    if d in ("hit", "stand", "double", "split"):
        return (d, player, box, hand)
    if d in ("surrender", "even_money"):
        return (d, player, box)
    if d == "insure":
        lim = m.limits
        cap = max(m.stakes_of(player) // 2, lim.min_chip)  # a stale choice may be refused
        return (d, player, _amount(draw, lim.min_chip, cap, lim.min_unit))
    if d in ("match", "decline"):
        return ("answer", player, box, hand, d == "match")
    if d in ("play_dealer", "settle"):
        return (d,)
    if d == "void":
        return (d, VOID_REASON)
    raise AssertionError(f"legal() offered an unknown decision {choice}")


# ----------------------------------------------------------------------- the driver

class Player:
    """Plays one round; with ``attempts`` also tries illegal commands between steps."""

    def __init__(self, draw: Drawer[Any], attempts: bool) -> None:
        self.draw = draw
        self.attempts = attempts
        rules = draw(st.sampled_from(PRESETS))
        limits = draw(table_limits())
        self.log: list[f.Fact] = []
        self.m = recording_machine(rules, limits, self.log)
        self.box_count = draw(st.integers(1, 5))
        self.shoe: Dealing = NoShoe()  # drawn when betting closes, for the boxes staked
        self.run = Run(rules, limits, "none", 0, self.m, log=self.log)
        # ~1 round in 8 is voided by a manager at a random step (R-V1).
        self.void_at = draw(st.integers(0, 24)) if draw(st.integers(0, 7)) == 0 else -1
        self.attempts_made = 0

    # -- steps

    def command(self, cmd: Command) -> list[f.Fact]:
        m = self.m
        note(f"command {cmd!r}")
        before, legal_before, count = m.view(), m.legal(), len(self.log)
        out = execute(m, cmd, self.shoe)
        assert out == self.log[count:], f"{cmd}: the facts returned are not the facts applied"
        self.run.steps.append(Step(cmd, out, before, m.view(), m.view(reveal_hole=True),
                                   legal_before, dict(m.open_stakes)))
        return out

    def refused(self, cmd: Command) -> LedgerError:
        """The command must be refused by a LedgerError naming a rule, changing nothing."""
        m = self.m
        before, before_hole, count = m.view(), m.view(reveal_hole=True), len(self.log)
        try:
            execute(m, cmd, NoShoe())
        except ShoeExhausted as e:  # pragma: no cover - a refusal never draws
            raise AssertionError(f"{cmd} drew from the shoe") from e
        except LedgerError as e:
            refusal = e
        else:
            raise AssertionError(f"{cmd} is not in legal() {m.legal()} but was accepted")
        assert refusal.rule.startswith("R-"), f"{cmd} refused without a rule id: {refusal!r}"
        assert len(self.log) == count, f"refused {cmd} still recorded {self.log[count:]}"
        assert m.view() == before, f"refused {cmd} changed the view"
        assert m.view(reveal_hole=True) == before_hole, f"refused {cmd} changed the hole"
        self.attempts_made += 1
        return refusal

    # -- the round

    def play(self) -> Run:
        self.bet()
        step = 0
        while self.m.phase not in ENDED:
            step += 1
            assert step < 400, "the round never ends"
            if self.attempts:
                self.illegal_attempts()
            legal = self.m.legal()
            assert legal, f"nobody may do anything in phase {self.m.phase}"
            choices = [x for x in legal if x.decision != "void"]
            if step == self.void_at or not choices:
                assert Legal("void") in legal
                self.command(("void", VOID_REASON))
                continue
            self.command(self.to_command(self.draw(st.sampled_from(choices))))
        if self.attempts:
            for _ in range(self.draw(st.integers(1, 3))):
                self.illegal_attempts()
        return self.run

    def bet(self) -> None:
        draw, m, rules, lim = self.draw, self.m, self.run.rules, self.run.limits
        numbers = draw(st.lists(st.integers(1, lim.boxes), min_size=self.box_count,
                                max_size=self.box_count, unique=True))
        per_bettor_max = lim.table_max // rules.bettors_per_box
        placements: list[tuple[str, int, int]] = []
        for n in numbers:
            bettors = draw(st.lists(st.sampled_from(POOL), min_size=1,
                                    max_size=rules.bettors_per_box, unique=True))
            placements += [(b, n, _amount(draw, lim.table_min, per_bettor_max, lim.min_unit))
                           for b in bettors]
        placements = draw(st.permutations(placements))  # the first on a box owns it
        for bettor, box, amount in placements:
            self.command(("place_stake", bettor, box, amount))
            if self.attempts:
                self.betting_refusals(bettor, box)
        if draw(st.integers(0, 5)) == 0:  # R-X14: withdraw a stake and place it again
            bettor, box, _ = draw(st.sampled_from(placements))
            self.command(("withdraw_stake", bettor, box))
            amount = _amount(draw, lim.table_min, per_bettor_max, lim.min_unit)
            self.command(("place_stake", bettor, box, amount))
        players = m.players()
        if len(players) == 1 and len(m.boxes) < rules.min_boxes_lone_player:
            e = self.refused(("close_betting",))
            assert isinstance(e, DealRefused), e
            assert e.rule == "R-C8", e
            self.run.refused_deals += 1
            free = min(set(range(1, lim.boxes + 1)) - set(m.boxes))
            self.command(("place_stake", players[0], free, lim.table_min))
        if self.void_at == 0:
            self.command(("void", VOID_REASON))
            return
        self.run.shoe_kind, self.run.start, self.shoe = draw(shoes(rules, len(m.boxes)))
        self.run.shoe = self.shoe
        self.command(("close_betting",))

    def to_command(self, choice: Legal) -> Command:
        return command_for(choice, self.m, self.draw)

    # -- illegal attempts (property 7)

    def betting_refusals(self, bettor: str, box: int) -> None:
        lim = self.run.limits
        self.refused(("place_stake", bettor, box, lim.table_min))  # R-X14
        bad = self.draw(st.sampled_from([0, -lim.min_unit, lim.table_min - 1,
                                         lim.table_max + lim.min_unit]))
        self.refused(("place_stake", STRANGER, box, bad))
        self.refused(("place_stake", STRANGER, lim.boxes + 1, lim.table_min))
        self.refused(("withdraw_stake", STRANGER, box))
        self.refused(("hit", bettor, box, 0))

    def illegal_attempts(self) -> None:
        for _ in range(self.draw(st.integers(0, 2))):
            cmd = self.random_attempt()
            if cmd is not None:
                self.refused(cmd)

    def random_attempt(self) -> Command | None:
        """A random command, or None when it happens to be legal now.

        Three kinds: wild guesses (any name, box and hand), near misses (real players,
        boxes and hands) and stale decisions (one that legal() offered at an earlier step).
        """
        draw, m, lim = self.draw, self.m, self.run.limits
        mode = draw(st.sampled_from(["stale", "near", "wild"]))
        stale = list(dict.fromkeys(x for s in self.run.steps for x in s.legal_before
                                   if x.player or x.decision in ("play_dealer", "settle")))
        if mode == "stale" and stale:
            return self.unless_legal(self.to_command(draw(st.sampled_from(stale))))
        decision = draw(st.sampled_from([
            "hit", "stand", "double", "split", "surrender", "even_money", "insure", "match",
            "decline", "play_dealer", "settle", "void", "place_stake", "withdraw_stake",
            "close_betting"]))
        if mode == "near" and m.boxes:
            player = draw(st.sampled_from([*m.players(), STRANGER]))
            box = draw(st.sampled_from(sorted(m.boxes)))
            hand = draw(st.integers(0, len(m.boxes[box].hands)))
        else:
            player = draw(st.sampled_from([*POOL, STRANGER]))
            box = draw(st.integers(0, 8))
            hand = draw(st.integers(-1, 3))
        if decision in ("hit", "stand", "double", "split"):
            cmd: Command = (decision, player, box, hand)
        elif decision in ("surrender", "even_money", "withdraw_stake"):
            cmd = (decision, player, box)
        elif decision == "insure":
            cap = m.stakes_of(player) // 2
            amount = draw(st.integers(-5, 600) | st.integers(min(lim.min_chip, cap) - 1, cap + 1))
            cmd = (decision, player, amount)
        elif decision in ("match", "decline"):
            cmd = ("answer", player, box, hand, decision == "match")
        elif decision == "void":
            cmd = (decision, draw(st.sampled_from(["", "   ", VOID_REASON])))
        elif decision == "place_stake":
            cmd = (decision, player, box, lim.table_min)
        else:
            cmd = (decision,)
        return self.unless_legal(cmd)

    def unless_legal(self, cmd: Command) -> Command | None:
        """The command, or None when legal() offers it now (with a valid amount)."""
        m, lim, legal = self.m, self.run.limits, self.m.legal()
        name, *args = cmd
        if name in ("place_stake", "withdraw_stake", "close_betting"):
            return None if m.phase == "betting" else cmd
        if name == "answer":
            player, box, hand, match = args
            ok = Legal("match" if match else "decline", player, box, hand) in legal
        elif name in ("hit", "stand", "double", "split"):
            ok = Legal(name, *args) in legal
        elif name in ("surrender", "even_money"):
            ok = Legal(name, args[0], args[1], 0) in legal
        elif name == "insure":
            player, amount = args
            ok = (Legal(name, player) in legal and amount % lim.min_unit == 0
                  and lim.min_chip <= amount <= m.stakes_of(player) // 2)
        elif name == "void":
            ok = Legal(name) in legal and bool(args[0].strip())
        else:
            ok = Legal(name) in legal
        return None if ok else cmd


def play_round(draw: Drawer[Any], attempts: bool = False) -> Run:
    """Play one random round to its end (settled or voided)."""
    return Player(draw, attempts).play()


@st.composite
def rounds(draw: Drawer[Any]) -> Run:
    """A whole random round, played with legal decisions only."""
    return play_round(draw)

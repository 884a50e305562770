"""Engine benchmark: rounds per second and the player's return under basic strategy.

Plays rounds through the pure round machine (no I/O): three boxes owned by three
players, the given preset (``casino`` by default), basic strategy for every
decision, a fresh shuffled shoe whenever the cut card is out (R-H4). Prints the
rate and the player's mean result per unit staked with its 95% confidence
interval, where "staked" is each box's initial stake (doubles and splits are
part of the result, the usual definition of a game's house edge).

    python -m bench.engine --rounds 1000000
"""

from __future__ import annotations

import math
import sys
import time

from bench.common import arguments
from ledger.engine.facts import StakeSettled
from ledger.engine.machine import RoundMachine
from ledger.plays import Play
from ledger.rules import PRESETS, RuleSet, TableLimits
from ledger.shoe import Shoe
from ledger.strategy import basic_strategy

STAKE = 100
BOXES = 3


def play_round(rules: RuleSet, limits: TableLimits, shoe: Shoe) -> list[int]:
    """One round; returns each box's net result in minor units."""
    m = RoundMachine(rules, limits)
    draw = shoe.draw
    for box in range(1, BOXES + 1):
        m.place_stake(f"P{box}", box, STAKE)
    out = m.close_betting(draw)
    while (t := m.turn()) is not None:
        box, hand = t
        owner = f"P{box}"
        cards = m.boxes[box].hands[hand].cards
        play = basic_strategy(cards, m.upcard or cards[0], m.legal_plays(box, hand))
        if play is Play.SURRENDER:
            out += m.surrender(owner, box)
        else:
            out += getattr(m, play.value)(owner, box, hand, draw)
    if m.phase == "playing":
        out += m.play_dealer(draw, shoe.dealt)
        out += m.settle()
    nets = [0] * BOXES
    for fact in out:
        if isinstance(fact, StakeSettled):
            nets[fact.box - 1] += fact.released + fact.won - fact.held
    return nets


def run(preset: str, rounds: int, progress: bool) -> dict[str, float]:
    rules = PRESETS[preset]
    limits = TableLimits(table_max=10_000)
    shoe = Shoe.shuffle(rules.decks, rules.wild_cards, rules.penetration_percent)
    n = total = total_sq = 0
    shoes = 1
    started = time.perf_counter()
    step = max(rounds // 20, 1)
    for i in range(rounds):
        if shoe.cut_card_out:
            shoe = Shoe.shuffle(rules.decks, rules.wild_cards, rules.penetration_percent)
            shoes += 1
        for net in play_round(rules, limits, shoe):  # exact sums in minor units
            n += 1
            total += net
            total_sq += net * net
        if progress and (i + 1) % step == 0:
            print(f"  {i + 1:>10,} rounds", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    mean = total / n / STAKE
    sd = math.sqrt(max(total_sq / n / STAKE**2 - mean * mean, 0.0))
    half = 1.96 * sd / math.sqrt(n)
    return {"rounds": rounds, "shoes": shoes, "seconds": elapsed, "rate": rounds / elapsed,
            "mean": mean, "ci_low": mean - half, "ci_high": mean + half, "sd": sd}


QUICK_LOOK = ("--rounds", "200", "--quiet")


def main() -> None:
    parser = arguments(__doc__, QUICK_LOOK)
    parser.add_argument("--rounds", type=int, default=100_000, help="rounds played")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="casino",
                        help="the rules played")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args()
    r = run(args.preset, args.rounds, not args.quiet)
    print(f"preset {args.preset}: {r['rounds']:,} rounds ({BOXES} boxes, basic strategy, "
          f"{r['shoes']:,} shoes) in {r['seconds']:.1f} s")
    print(f"rounds per second: {r['rate']:,.0f} (one core)")
    print(f"player result per unit staked: {r['mean'] * 100:+.3f}% "
          f"(95% CI {r['ci_low'] * 100:+.3f}% .. {r['ci_high'] * 100:+.3f}%, "
          f"sd {r['sd']:.3f} per box)")


if __name__ == "__main__":
    main()

"""Random rounds through the GameLedger, every preset, on both stores (hypothesis).

After every command the round rebuilt from its stored events equals the live one;
at the end the rules re-run over the recorded cards and decisions reproduce the
recorded facts, and all balances plus the house equal buy-ins minus cash-outs (R-M4).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from itertools import count
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.aggregates.round import Round
from ledger.application import GameLedger
from ledger.errors import InsufficientChips
from ledger.rules import PRESETS

MakeLedger = Callable[..., GameLedger]
CHIPS = 2_000
_names = count(1)

EXAMPLES = {"memory": 60, "postgres": 15}


def decide(app: GameLedger, r: UUID, rid: Callable[[], str], data: st.DataObject) -> bool:
    """Make one random legal decision; False when the round has ended."""
    state = app.round_state(r)
    legal = [d for d in state["legal"] if d["decision"] != "void"]
    if state["phase"] in ("settled", "voided"):
        return False
    if not legal or data.draw(st.integers(0, 60)) == 0:
        app.void(rid(), "manager", r, "random void")
        return True
    d = data.draw(st.sampled_from(legal))
    with contextlib.suppress(InsufficientChips):  # legal by the rules, but short of chips
        _decide(app, r, rid, data, d)
    return True


def _decide(app: GameLedger, r: UUID, rid: Callable[[], str], data: st.DataObject,
            d: dict[str, Any]) -> None:
    name, who, box, hand = d["decision"], d["player"], d["box"], d["hand"]
    if name in ("hit", "stand", "double", "split"):
        getattr(app, name)(rid(), "dealer", r, who, box, hand)
    elif name in ("match", "decline"):
        app.answer(rid(), "dealer", r, who, box, hand, name == "match")
    elif name == "surrender":
        app.surrender(rid(), "dealer", r, who, box)
    elif name == "even_money":
        app.even_money(rid(), "dealer", r, who, box)
    elif name == "insure":
        cap = app.repository.get(r).machine.stakes_of(who) // 2
        app.insure(rid(), "dealer", r, who, data.draw(st.integers(5, max(cap, 5))))
    else:
        getattr(app, name)(rid(), "dealer", r)


def rebuilt_equals_live(app: GameLedger, r: UUID) -> None:
    live = app.round_state(r)  # the ledger's working copy, the one its commands act on
    rebuilt: Round = app.repository.get(r, version=live["version"])  # the stored events only
    view = rebuilt.machine.view()
    assert {k: live[k] for k in view} == view
    assert live["legal"] == [d._asdict() for d in rebuilt.machine.legal()]


class SeededShuffle:
    """A reproducible ``randbelow`` for the ledger's shuffle, reseeded by each example."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def __call__(self, bound: int) -> int:
        return self.rng.randrange(bound)


def play_random_round(app: GameLedger, shuffle: SeededShuffle, data: st.DataObject) -> None:
    shuffle.rng.seed(data.draw(st.integers(0, 2**32), label="shoe seed"))
    n = next(_names)
    ids = count(1)

    def rid() -> str:
        return f"x{n}-{next(ids)}"

    preset = data.draw(st.sampled_from(sorted(PRESETS)), label="preset")
    table = app.open_table(rid(), "boss", f"table-{n}", PRESETS[preset])
    players = [f"p{n}-{i}" for i in range(data.draw(st.integers(1, 3), label="players"))]
    for p in players:
        app.open_account(rid(), "cashier", p)
        app.buy_in(rid(), "cashier", p, CHIPS)
    r = app.start_round(rid(), "dealer", table)
    lone = len(players) == 1 and PRESETS[preset].min_boxes_lone_player > 1
    for i, box in enumerate(data.draw(st.lists(st.integers(1, 7), min_size=2 if lone else 1,
                                               max_size=5, unique=True), label="boxes")):
        bettor = players[i % len(players)]
        amount = data.draw(st.integers(10, 300), label="stake")
        with contextlib.suppress(InsufficientChips):
            app.place_stake(rid(), "dealer", r, bettor, box, amount)
    if any(d["decision"] == "close_betting" for d in app.round_state(r)["legal"]):
        app.deal(rid(), "dealer", r)
    else:
        app.void(rid(), "manager", r, "no game")
    rebuilt_equals_live(app, r)
    for _ in range(60):
        if not decide(app, r, rid, data):
            break
        rebuilt_equals_live(app, r)
    assert app.round_state(r)["phase"] in ("settled", "voided")
    assert app.check_round(r) == []
    cash_out = data.draw(st.integers(0, 1), label="cash out") * app.balance(players[0])["available"]
    if cash_out:
        app.cash_out(rid(), "cashier", players[0], cash_out)
    totals = sum(app.balance(p)["total"] for p in players) + app.house(table)["total"]
    assert totals == CHIPS * len(players) - cash_out
    assert all(app.balance(p)["held"] == 0 for p in players)


def test_random_rounds_replay_readjudicate_and_conserve_money(
        make_ledger: MakeLedger, store: str) -> None:
    shuffle = SeededShuffle()
    app = make_ledger(shuffle)

    @settings(max_examples=EXAMPLES[store], deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(data=st.data())
    def one_round(data: Any) -> None:
        play_random_round(app, shuffle, data)

    one_round()

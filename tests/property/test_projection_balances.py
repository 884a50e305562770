"""After any random play, the projections agree with the ledger's aggregates.

Each example plays a few rounds of random legal decisions (with voids, rulings, co-bettors,
withdrawals, cash-outs) on one or two tables under random presets, while the projections
follow in batches of random sizes. Then: every projected balance equals its account
aggregate, every house result its house account, every round row its round's figures, the
table/day house wins add up to the house's result, and a rebuild (of one projection, a
different one from example to example) gives an identical view.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.rules import RuleSet
from projections.engine import NAMES
from projections.queries import ReadModels
from projections.rebuild import rebuild
from projections.settings import GamingDay
from tests.integration.test_projections_support import (
    RULE_SETS,
    Casino,
    dump,
    engine,
)

EXAMPLES = int(os.environ.get("PITBOSS_PROJECTION_EXAMPLES", "10"))
PLAYERS = ("P1", "P2", "P3", "P4")


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4),
       presets=st.lists(st.sampled_from(RULE_SETS), min_size=1, max_size=2),
       batches=st.lists(st.integers(1, 60), min_size=1, max_size=4),
       cash_outs=st.booleans())
def test_projections_agree_with_the_aggregates_after_random_play(
        postgres_env: Callable[[], dict[str, str]], seed: int, rounds: int,
        presets: list[RuleSet], batches: list[int], cash_outs: bool) -> None:
    env = postgres_env()
    rng = random.Random(seed)
    casino = Casino.on(env, seed=seed)
    reads = ReadModels(env)
    try:
        casino.fund(*PLAYERS, chips=rng.choice([2_000, 50_000]))
        tables = [casino.table(f"T{i}", rules) for i, rules in enumerate(presets)]
        played: list[UUID] = []
        with engine(env) as e:
            for i in range(rounds):
                played.append(casino.random_round(tables[i % len(tables)], PLAYERS, rng))
                if cash_outs and rng.random() < 0.5:
                    player = rng.choice(PLAYERS)
                    available = casino.ledger.balance(player)["available"]
                    if available:
                        casino.ledger.cash_out(casino.rid(), "cashier", player,
                                               rng.randint(1, available))
                for _ in range(rng.randint(0, 2)):
                    e.step(rng.choice(batches))
            e.catch_up(rng.choice(batches))
        check(casino, reads, tables, played)
        name = rng.choice(NAMES)
        incremental = dump(env, [name])
        rebuild(env, name, batch_size=rng.choice(batches))
        assert dump(env, [name]) == incremental
    finally:
        reads.close()
        casino.close()


def check(casino: Casino, reads: ReadModels, tables: list[UUID], played: list[UUID]) -> None:
    ledger = casino.ledger
    assert reads.check_balances(ledger)["findings"] == []
    for player in PLAYERS:
        (row,) = reads.balances(player=player)["items"]
        aggregate = ledger.balance(player)
        assert (row["available"], row["held"]) == (aggregate["available"], aggregate["held"])
    houses = {UUID(h["table_id"]): h["result"] for h in reads.house_results(limit=500)["items"]}
    assert houses == {t: ledger.house(t)["available"] for t in tables}
    rows = {UUID(r["round_id"]): r for r in reads.search_rounds(limit=200)["items"]}
    assert set(rows) == set(played)
    for round_id, row in rows.items():
        state = ledger.round_state(round_id)
        ended = state["phase"] in ("settled", "voided")
        assert row["status"] == (state["phase"] if ended else "open")
        assert (row["total_staked"], row["house_result"]) == (state["staked"],
                                                              state["house_result"])
    today = GamingDay().day_of(datetime.now(UTC))
    # The desk's days hold every buy-in and cash-out the balances count.
    desk = [reads.cashier_day(day, limit=500) for day in (today - timedelta(days=1), today)]
    everyone = reads.balances(limit=500)["items"]
    for name, kind in (("bought_in", "buy_in"), ("cashed_out", "cash_out")):
        listed = sum(m["amount"] for d in desk for m in d["items"] if m["kind"] == kind)
        assert sum(t[name] for d in desk for t in d["currencies"]) == listed == sum(
            b[name] for b in everyone)
    for table in tables:
        days = reads.table_day_report(table, today - timedelta(days=1), today)
        assert sum(d["house_win"] for d in days) == houses[table]
        assert sum(d["rounds_played"] for d in days) == sum(
            1 for r in rows.values() if UUID(r["table_id"]) == table)
        for day in days:  # each day's figures are the sums of the rounds listed behind it
            behind = reads.table_day_rounds(table, date.fromisoformat(day["gaming_day"]),
                                            limit=500)
            assert behind["complete"]
            assert behind["next_cursor"] is None
            for name in ("staked", "paid_out", "house_win", "rulings"):
                assert day[name] == behind["figures"][name] == sum(
                    r[name] for r in behind["items"])
            assert day["rounds_settled"] == sum(r["settled"] for r in behind["items"])

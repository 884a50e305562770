"""The cashier's desk per gaming day: buy-ins and cash-outs per currency and per cashier, and
the movements behind them, on the table/day report's gaming days."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta

import pytest

from ledger.errors import InvariantBroken, QueryRefused
from projections.queries import ReadModels
from projections.rebuild import rebuild
from projections.settings import GamingDay
from tests.integration.test_projections_support import (
    Casino,
    Clock,
    Env,
    connect,
    engine,
    new_york_days,
)
from tests.integration.test_projections_support import new_york as local

FUNDS = 10_000_000


@pytest.fixture
def env(postgres_env: Callable[[], Env]) -> Env:
    return new_york_days(postgres_env())


class Desk:
    """Two days at the desk: Monday 3 March's gaming day ends at 06:00 on Tuesday."""

    def __init__(self, env: Env) -> None:
        self.clock = Clock(local(3, 8))
        self.casino = c = Casino.on(env, seed=5, clock=self.clock)
        c.fund("P1", "P2")  # EUR, by "cashier", Monday
        ledger = c.ledger
        self.clock.set(local(4, 5, 59))  # still Monday's gaming day
        ledger.cash_out(c.rid(), "cashier", "P1", 50)
        self.clock.set(local(4, 6, 0))  # Tuesday's
        ledger.buy_in(c.rid(), "cage-2", "P2", 70)
        ledger.open_account(c.rid(), "cage-2", "P3", "USD")
        ledger.buy_in(c.rid(), "cage-2", "P3", 500)
        ledger.cash_out(c.rid(), "cashier", "P3", 120)


@pytest.fixture
def desk(env: Env) -> Iterator[Desk]:
    desk = Desk(env)
    with engine(env) as e:
        e.catch_up(50)
    yield desk
    desk.casino.close()


@pytest.fixture
def reads(env: Env) -> Iterator[ReadModels]:
    models = ReadModels(env)
    yield models
    models.close()


def totals(**figures: int) -> dict[str, int]:
    return {**figures, "net": figures["bought_in"] - figures["cashed_out"]}


def test_a_days_buy_ins_and_cash_outs_per_currency_and_cashier(desk: Desk,
                                                               reads: ReadModels) -> None:
    monday = reads.cashier_day(date(2025, 3, 3))
    assert monday["starts_at"] == "2025-03-03T11:00:00+00:00"  # 06:00 EST
    assert monday["complete"]
    assert monday["currencies"] == [{"currency": "EUR", **totals(
        buy_ins=2, bought_in=2 * FUNDS, cash_outs=1, cashed_out=50)}]
    assert monday["cashiers"] == [{"cashier": "cashier", "currency": "EUR", **totals(
        buy_ins=2, bought_in=2 * FUNDS, cash_outs=1, cashed_out=50)}]
    assert [(m["kind"], m["player"], m["amount"]) for m in monday["items"]] == [
        ("buy_in", "P1", FUNDS), ("buy_in", "P2", FUNDS), ("cash_out", "P1", 50)]
    assert monday["movements_listed"] == 3
    assert monday["last_notification_id"] == max(m["notification_id"] for m in monday["items"])
    tuesday = reads.cashier_day(date(2025, 3, 4))
    assert tuesday["currencies"] == [
        {"currency": "EUR", **totals(buy_ins=1, bought_in=70, cash_outs=0, cashed_out=0)},
        {"currency": "USD", **totals(buy_ins=1, bought_in=500, cash_outs=1, cashed_out=120)}]
    assert [(g["cashier"], g["currency"], g["net"]) for g in tuesday["cashiers"]] == [
        ("cage-2", "EUR", 70), ("cage-2", "USD", 500), ("cashier", "USD", -120)]
    assert tuesday["cashiers_listed"] == 3
    (cash_out,) = [m for m in tuesday["items"] if m["kind"] == "cash_out"]
    statement = desk.casino.ledger.account_entries("P3")["items"]
    assert (cash_out["cashier"], cash_out["version"]) == ("cashier", statement[-1]["version"])
    wednesday = reads.cashier_day(date(2025, 3, 5))
    assert (wednesday["currencies"], wednesday["items"], wednesday["last_notification_id"]) == (
        [], [], None)


def test_a_desk_page_lists_the_first_cashiers_and_says_how_many_there_are(
        desk: Desk, reads: ReadModels, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every cashier key of the day was listed, on every page: 400 keys, 64 KB a page.
    whole = reads.cashier_day(date(2025, 3, 4))
    monkeypatch.setattr("projections.queries.CASHIERS_SHOWN_MAX", 2)
    cut = reads.cashier_day(date(2025, 3, 4), limit=1)
    assert cut["cashiers"] == whole["cashiers"][:2]
    assert cut["cashiers_listed"] == whole["cashiers_listed"] == 3
    assert (cut["currencies"], cut["movements_listed"], cut["last_notification_id"]) == (
        whole["currencies"], whole["movements_listed"], whole["last_notification_id"])


def test_a_desk_page_says_how_far_the_view_has_read_the_log(desk: Desk, env: Env,
                                                            reads: ReadModels) -> None:
    read = reads.cashier_day(date(2025, 3, 4))
    assert read["lag_events"] == 0
    assert read["position"] == read["ledger_head"] > 0
    desk.clock.set(local(4, 7))
    desk.casino.ledger.buy_in(desk.casino.rid(), "cage-2", "P2", 30)  # stored, not read
    behind = reads.cashier_day(date(2025, 3, 4))
    assert behind["position"] == read["position"]
    assert behind["ledger_head"] - behind["position"] == behind["lag_events"] > 0
    assert behind["movements_listed"] == read["movements_listed"]
    with engine(env) as e:
        e.catch_up(50)
    caught_up = reads.cashier_day(date(2025, 3, 4))
    assert caught_up["position"] == caught_up["ledger_head"] == behind["ledger_head"]
    assert caught_up["movements_listed"] == read["movements_listed"] + 1


def test_a_days_movements_come_a_page_at_a_time_under_that_day_s_cursor(
        desk: Desk, reads: ReadModels) -> None:
    monday = date(2025, 3, 3)
    pages, cursor = [], None
    while True:
        page = reads.cashier_day(monday, limit=1, cursor=cursor)
        pages += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == reads.cashier_day(monday)["items"]
    first = reads.cashier_day(monday, limit=1)
    with pytest.raises(QueryRefused, match="under other filters") as refused:
        reads.cashier_day(date(2025, 3, 4), cursor=first["next_cursor"])
    assert refused.value.field == "cursor"
    with pytest.raises(QueryRefused, match="1 to 500 movements"):
        reads.cashier_day(monday, limit=501)


def test_movements_that_are_not_what_a_balance_counts_are_reported_broken(
        desk: Desk, env: Env, reads: ReadModels) -> None:
    with connect(env) as conn:
        conn.execute("UPDATE balances_accounts SET bought_in = bought_in + 1 WHERE owner = 'P1'")
    with pytest.raises(InvariantBroken, match=(
            f"P1's movements at the desk come to {FUNDS} bought in and 50 cashed out; the "
            rf"balance counts {FUNDS + 1} and 50 \(R-M4\)")):
        reads.cashier_day(date(2025, 3, 3))
    assert reads.cashier_day(date(2025, 3, 4))["complete"]  # P1 did not come to the desk


@pytest.mark.parametrize(("altered", "said"), [
    # P1's buy-in taken away: the cash-out after it no longer follows from nothing before it.
    (["DELETE FROM balances_movements WHERE owner = 'P1' AND kind = 'buy_in'"],
     rf"P1's cash-out of 50 \(version 3 of account [0-9a-f-]+\) leaves {FUNDS} bought in and "
     r"50 cashed out; the movements before it and its amount come to 0 and 50 \(R-M4\)"),
    # Its totals changed, the cash-out's too, to keep the balance's: the buy-in is the one.
    (["UPDATE balances_movements SET bought_in_after = bought_in_after + 1 WHERE owner = 'P1'",
      "UPDATE balances_accounts SET bought_in = bought_in + 1 WHERE owner = 'P1'"],
     rf"P1's buy-in of {FUNDS} \(version 2 of account [0-9a-f-]+\) leaves {FUNDS + 1} bought "
     rf"in and 0 cashed out; the movements before it and its amount come to {FUNDS} and 0 "),
])
def test_a_movement_that_does_not_follow_the_one_before_it_is_reported_broken(
        desk: Desk, env: Env, reads: ReadModels, altered: list[str], said: str) -> None:
    with connect(env) as conn:
        for statement in altered:
            conn.execute(statement)
    with pytest.raises(InvariantBroken, match=said):
        reads.cashier_day(date(2025, 3, 3))


def test_a_view_made_before_the_desk_was_kept_is_partial_until_rebuilt(
        desk: Desk, env: Env) -> None:
    with connect(env) as conn:
        conn.execute("DROP TABLE balances_movements")
        conn.execute("DROP TABLE balances_settings")
    desk.clock.set(datetime.now(UTC) + timedelta(days=1))  # buy-ins after the upgrade
    desk.casino.ledger.buy_in(desk.casino.rid(), "cashier", "P1", 5)
    desk.casino.ledger.buy_in(desk.casino.rid(), "cashier", "P1", 6)
    with engine(env) as e:  # the worker's start makes the part, then counts the buy-ins
        e.catch_up(50)
    later = GamingDay("America/New_York", time(6)).day_of(desk.clock.now)
    with ReadModels(env) as reads:
        monday = reads.cashier_day(date(2025, 3, 3))
        assert (monday["complete"], monday["items"]) == (False, [])
        after = reads.cashier_day(later)
        # Whatever its time, a day may miss a movement counted before the upgrade (stamped
        # ahead by a server whose clock ran fast): partial until a rebuild.
        assert not after["complete"]
        assert [(m["player"], m["amount"]) for m in after["items"]] == [("P1", 5), ("P1", 6)]
        with connect(env) as conn:  # the totals still speak for the balance
            conn.execute("UPDATE balances_accounts SET cashed_out = 1 WHERE owner = 'P1'")
        with pytest.raises(InvariantBroken, match="the balance counts"):
            reads.cashier_day(later)
        with connect(env) as conn:
            conn.execute("UPDATE balances_accounts SET cashed_out = 50 WHERE owner = 'P1'")
    rebuild(env, "balances")
    with ReadModels(env) as reads:
        monday = reads.cashier_day(date(2025, 3, 3))
        assert monday["complete"]
        assert monday["movements_listed"] == 3
        assert reads.cashier_day(later)["movements_listed"] == 2


def test_the_desk_tables_of_the_commits_before_its_own_are_made_again(
        desk: Desk, env: Env) -> None:
    # A few commits kept the movements as balances_cashier, marked in a settings column of
    # another name: the owner's start failed on the missing column.
    with connect(env) as conn:
        conn.execute("DROP TABLE balances_movements")
        conn.execute("DROP TABLE balances_settings")
        conn.execute("CREATE TABLE balances_cashier (account_id uuid, version bigint)")
        conn.execute("CREATE TABLE balances_settings (singleton boolean PRIMARY KEY, "
                     "cashier_listed_after timestamptz)")
    with engine(env) as e:
        e.catch_up(50)
    with ReadModels(env) as reads:
        assert not reads.cashier_day(date(2025, 3, 3))["complete"]
    with connect(env) as conn:
        assert conn.execute("SELECT to_regclass('balances_cashier')").fetchone() == (None,)
    rebuild(env, "balances")
    with ReadModels(env) as reads:
        assert reads.cashier_day(date(2025, 3, 3))["movements_listed"] == 3

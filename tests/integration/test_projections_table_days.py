"""The table/day report: gaming days in the casino's zone from its day start, money counted
on the day it moved, held chips and open rounds carried over night, "no activity" rows for
days the table was open without a round, nothing for days it was closed."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID
from zoneinfo import available_timezones

import pytest

from ledger.errors import InvariantBroken, QueryRefused
from ledger.rules import CASINO
from projections.queries import ReadModels
from projections.rebuild import rebuild
from projections.settings import DAY_MAX, DAY_MIN, GamingDay, ProjectionSetupError
from projections.worker import run_worker
from tests.integration.test_projections_support import (
    NEW_YORK,
    Casino,
    Clock,
    Env,
    connect,
    engine,
    new_york_days,
)
from tests.integration.test_projections_support import new_york as local


@pytest.fixture
def env(postgres_env: Callable[[], Env]) -> Env:
    return new_york_days(postgres_env())


class Week:
    """A table's week in New York (daylight saving time starts on Sunday 9 March)."""

    def __init__(self, env: Env) -> None:
        self.clock = Clock(local(3, 8))
        self.casino = c = Casino.on(env, seed=3, clock=self.clock)
        c.fund("P1", "P2")
        self.table = c.table("T1", CASINO)  # Monday 3 March, 08:00
        self.clock.set(local(4, 5, 59))  # still Monday's gaming day
        self.before_start = c.simple_round(self.table)
        self.clock.set(local(4, 6, 0))  # Tuesday's gaming day begins
        self.at_start = c.simple_round(self.table)
        self.clock.set(local(5, 5, 58))  # Tuesday's gaming day, late: bets, deal...
        self.overnight = c.do("start_round", self.table)
        c.do("place_stake", self.overnight, "P1", 1, 100)
        c.do("place_stake", self.overnight, "P2", 2, 100)
        c.do("deal", self.overnight)
        self.clock.set(local(5, 6, 1))  # ...and it is settled on Wednesday's
        c.finish(self.overnight)
        self.clock.set(local(6, 12))  # closed Thursday noon, reopened Sunday 20:00
        c.ledger.close_table(c.rid(), "manager", self.table, "refurbishing")
        self.clock.set(local(9, 20))
        c.ledger.reopen_table(c.rid(), "manager", self.table)


@pytest.fixture
def week(env: Env) -> Iterator[Week]:
    week = Week(env)
    with engine(env) as e:
        e.catch_up(50)
    yield week
    week.casino.close()


@pytest.fixture
def reads(env: Env) -> Iterator[ReadModels]:
    models = ReadModels(env)
    yield models
    models.close()


def by_day(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["gaming_day"]: row for row in rows}


def test_a_report_covers_366_days_and_no_more(week: Week, reads: ReadModels) -> None:
    # 2024-03-10 to 2025-03-10, both included, span 366 days (29 February 2024 among them).
    days = by_day(reads.table_day_report(week.table, date(2024, 3, 10), date(2025, 3, 10)))
    assert days["2025-03-03"]["rounds_played"] == 1
    with pytest.raises(QueryRefused, match=re.escape("A report covers at most 366 days.")):
        reads.table_day_report(week.table, date(2024, 3, 9), date(2025, 3, 10))


def test_rounds_either_side_of_the_day_start_fall_on_their_own_gaming_days(
        week: Week, reads: ReadModels) -> None:
    days = by_day(reads.table_day_report(week.table, date(2025, 3, 2), date(2025, 3, 10)))
    monday, tuesday, wednesday = days["2025-03-03"], days["2025-03-04"], days["2025-03-05"]
    assert (monday["rounds_played"], tuesday["rounds_played"]) == (1, 2)
    assert monday["starts_at"] == "2025-03-03T11:00:00+00:00"  # 06:00 EST
    assert monday["staked"] == 200
    assert monday["paid_out"] + monday["house_win"] == 200
    # The overnight round: staked on Tuesday, still held and open at its end...
    assert tuesday["staked"] == 400
    assert (tuesday["held_at_day_end"], tuesday["open_rounds_at_day_end"]) == (200, 1)
    assert tuesday["rounds_settled"] == 1
    # ...settled on Wednesday.
    assert (wednesday["rounds_played"], wednesday["rounds_settled"]) == (0, 1)
    assert wednesday["staked"] == 0
    assert wednesday["paid_out"] + wednesday["house_win"] == 200
    assert (wednesday["held_at_day_end"], wednesday["open_rounds_at_day_end"]) == (0, 0)
    assert not wednesday["no_activity"]
    house = week.casino.ledger.house(week.table)["available"]
    assert sum(day["house_win"] for day in days.values()) == house


def test_days_the_table_was_open_without_a_round_say_no_activity(week: Week,
                                                                  reads: ReadModels) -> None:
    days = by_day(reads.table_day_report(week.table, date(2025, 3, 2), date(2025, 3, 10)))
    # Sunday 2 March: not yet open. Friday 7 and Saturday 8: closed all day.
    assert sorted(days) == ["2025-03-03", "2025-03-04", "2025-03-05", "2025-03-06",
                            "2025-03-09", "2025-03-10"]
    for day in ("2025-03-06", "2025-03-09", "2025-03-10"):
        row = days[day]
        assert row["no_activity"], day
        assert (row["rounds_played"], row["staked"], row["house_win"]) == (0, 0, 0)
        assert row["held_at_day_end"] == 0
    # Sunday's gaming day starts at 06:00 EDT, after the clocks went forward.
    assert days["2025-03-09"]["starts_at"] == "2025-03-09T10:00:00+00:00"


def test_no_activity_is_claimed_only_for_days_the_view_has_read(week: Week, env: Env,
                                                                 reads: ReadModels) -> None:
    # A round on Monday 10 March that the view has not read yet. It has read up to the
    # reopening on Sunday at 20:00, so from then on it claims nothing, though the table was
    # open; Thursday, read in full, still is a "no activity" day.
    week.clock.set(local(10, 9))
    week.casino.simple_round(week.table)
    days = by_day(reads.table_day_report(week.table, date(2025, 3, 2), date(2025, 3, 12)))
    assert sorted(days)[-2:] == ["2025-03-05", "2025-03-06"]
    assert days["2025-03-06"]["no_activity"]
    with engine(env) as e:
        e.catch_up(50)
    days = by_day(reads.table_day_report(week.table, date(2025, 3, 2), date(2025, 3, 12)))
    assert days["2025-03-10"]["rounds_played"] == 1
    assert not days["2025-03-10"]["no_activity"]
    assert days["2025-03-09"]["no_activity"]
    assert days["2025-03-11"]["no_activity"]  # open, read, nothing played


def test_a_day_is_read_to_its_end_once_the_view_has_read_a_minute_past_it(week: Week,
                                                                         env: Env,
                                                                         reads: ReadModels
                                                                         ) -> None:
    # Read up to the reopening on Sunday 9 March at 20:00 (local), then a round at 21:00.
    week.clock.set(local(9, 21))
    week.casino.simple_round(week.table)
    with engine(env) as e:
        e.catch_up(50)
    # Stored, not read: a round stamped 30 s after Sunday's gaming day ended (Monday 06:00),
    # which an append may take to store, and one at 09:00.
    week.clock.set(local(10, 6) + timedelta(seconds=30))
    week.casino.simple_round(week.table)
    week.clock.set(local(10, 9))
    week.casino.simple_round(week.table)

    def read_to_end() -> dict[str, bool]:
        rows = reads.table_day_report(week.table, date(2025, 3, 3), date(2025, 3, 10))
        return {row["gaming_day"]: row["read_to_day_end"] for row in rows}

    sunday = date(2025, 3, 9)
    assert read_to_end() == {"2025-03-03": True, "2025-03-04": True, "2025-03-05": True,
                             "2025-03-06": True, "2025-03-09": False}
    page = listed(reads, week.table, sunday)
    assert (page["read_to_day_end"], page["lag_events"] > 0) == (False, True)
    assert page["position"] < page["ledger_head"]
    with engine(env) as e:  # the round 30 s past the end, alone: not yet a minute past it
        while listed(reads, week.table, date(2025, 3, 10))["rounds_listed"] == 0:
            assert e.step(1)[0], "the log ended before the round was read"
    assert not read_to_end()["2025-03-09"]
    assert not listed(reads, week.table, sunday)["read_to_day_end"]
    with engine(env) as e:
        e.catch_up(50)
    assert all(read_to_end().values())  # the days are long over by this machine's clock
    page = listed(reads, week.table, sunday)
    assert (page["read_to_day_end"], page["lag_events"]) == (True, 0)
    assert page["position"] == page["ledger_head"]
    # A day to come is not read to its end, caught up or not.
    assert not listed(reads, week.table, date(2099, 3, 9))["read_to_day_end"]


def test_a_view_made_by_an_earlier_version_claims_no_activity_as_it_did(
        week: Week, env: Env, reads: ReadModels) -> None:
    # Its settings gain applied_until, empty until the next table or round event is counted:
    # until then the report claims what it claimed before, not nothing at all.
    with connect(env) as conn:
        conn.execute("ALTER TABLE table_days_settings DROP COLUMN applied_until")
    with engine(env) as e:
        e.catch_up(50)
    week.casino.ledger.buy_in(week.casino.rid(), "cashier", "P1", 5)  # not counted yet
    days = by_day(reads.table_day_report(week.table, date(2025, 3, 2), date(2025, 3, 10)))
    assert [d for d, row in sorted(days.items()) if row["no_activity"]] == [
        "2025-03-06", "2025-03-09", "2025-03-10"]
    # Behind, with no time to say how far: no day is said read to its end.
    assert not any(row["read_to_day_end"] for row in days.values())
    assert not listed(reads, week.table, date(2025, 3, 3))["read_to_day_end"]


def test_a_changed_gaming_day_applies_after_a_rebuild(week: Week, env: Env) -> None:
    utc_env = {**env, "PITBOSS_GAMING_DAY_TZ": "UTC", "PITBOSS_GAMING_DAY_START": "12:00"}
    # Not unasked: a rebuild from a shell without the service's settings moved every closed
    # day's figures and said nothing.
    with pytest.raises(ProjectionSetupError, match=r"from 06:00 America/New_York; these "
                       r"settings say 12:00 UTC .* add --new-gaming-day"):
        rebuild(utc_env, "table_days")
    with ReadModels(env) as reads:
        assert by_day(reads.table_day_report(week.table, date(2025, 3, 3), date(2025, 3, 3)))[
            "2025-03-03"]["starts_at"] == "2025-03-03T11:00:00+00:00"  # 06:00 New York
    rebuild(utc_env, "table_days", new_gaming_day=True)
    with ReadModels(env) as reads:  # whatever the reader's environment says, the view decides
        days = by_day(reads.table_day_report(week.table, date(2025, 3, 3), date(2025, 3, 5)))
    assert days["2025-03-03"]["starts_at"] == "2025-03-03T12:00:00+00:00"
    # 05:59 and 06:00 New York on the 4th (10:59Z, 11:00Z) now both fall before noon UTC:
    # the gaming day of the 3rd; the overnight round (10:58Z on the 5th) that of the 4th.
    assert days["2025-03-03"]["rounds_played"] == 2
    assert days["2025-03-04"]["rounds_played"] == 1
    assert days["2025-03-04"]["open_rounds_at_day_end"] == 0  # settled 11:01Z on the 5th


def test_the_worker_says_when_the_settings_differ_from_the_view(
        week: Week, env: Env, caplog: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()
    stop.set()  # start, report, stop
    log = logging.getLogger("pitboss.test.days")
    with caplog.at_level(logging.WARNING, logger=log.name):
        run_worker({**env, "PITBOSS_GAMING_DAY_START": "08:30"}, stop, batch_size=10,
                   poll_interval_s=1.0, log=log)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "from 06:00 America/New_York" in warning
    assert "08:30 America/New_York" in warning
    assert "rebuild table_days" in warning


def test_a_zone_under_another_name_is_the_same_gaming_day(week: Week, env: Env,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    # US/Eastern is a link to America/New_York: the worker asked for a rebuild that would change
    # nothing, and a rebuild would have been refused as moving every day.
    aliased = {**env, "PITBOSS_GAMING_DAY_TZ": "US/Eastern"}
    stop = threading.Event()
    stop.set()
    log = logging.getLogger("pitboss.test.days")
    with caplog.at_level(logging.WARNING, logger=log.name):
        run_worker(aliased, stop, batch_size=10, poll_interval_s=1.0, log=log)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    rebuild(aliased, "table_days")
    assert not GamingDay("America/Detroit", time(6)).counts_as(
        GamingDay("America/New_York", time(6)))  # another zone, the same offsets today
    # Two zones that keep one clock under other abbreviations count the same days too.
    assert GamingDay("GMT", time(6)).counts_as(GamingDay("UTC", time(6)))
    # And two that kept one clock since 1970, the years a ledger holds, though not before.
    assert GamingDay("Europe/Monaco", time(6)).counts_as(GamingDay("Europe/Paris", time(6)))
    # Whatever they call daylight time (Dublin its winter), and however they write their rule.
    assert GamingDay("Europe/Dublin", time(6)).counts_as(GamingDay("Europe/London", time(6)))
    assert GamingDay("Asia/Riyadh", time(6)).counts_as(GamingDay("Africa/Nairobi", time(6)))
    assert not GamingDay("Europe/London", time(6)).counts_as(GamingDay("UTC", time(6)))


@pytest.mark.parametrize(("tz", "start", "at", "day"), [
    ("America/New_York", "06:00", local(4, 5, 59), date(2025, 3, 3)),
    ("America/New_York", "06:00", local(4, 6, 0), date(2025, 3, 4)),
    ("America/New_York", "06:00", datetime(2025, 3, 9, 9, 59, tzinfo=UTC), date(2025, 3, 8)),
    ("America/New_York", "06:00", datetime(2025, 3, 9, 10, 0, tzinfo=UTC), date(2025, 3, 9)),
    ("UTC", "00:00", datetime(2025, 3, 9, 0, 0, tzinfo=UTC), date(2025, 3, 9)),
    ("Asia/Kolkata", "06:00", datetime(2025, 3, 9, 0, 29, tzinfo=UTC), date(2025, 3, 8)),
    ("Asia/Kolkata", "06:00", datetime(2025, 3, 9, 0, 30, tzinfo=UTC), date(2025, 3, 9)),
    # A start inside the hour the clocks skip (02:30 on 30 March) or repeat (26 October):
    # the day begins at the instant bounds() gives, 01:30 and 00:30 UTC.
    ("Europe/Paris", "02:30", datetime(2025, 3, 30, 1, 10, tzinfo=UTC), date(2025, 3, 29)),
    ("Europe/Paris", "02:30", datetime(2025, 3, 30, 1, 30, tzinfo=UTC), date(2025, 3, 30)),
    ("Europe/Paris", "02:30", datetime(2025, 10, 26, 0, 10, tzinfo=UTC), date(2025, 10, 25)),
    ("Europe/Paris", "02:30", datetime(2025, 10, 26, 1, 10, tzinfo=UTC), date(2025, 10, 26)),
    # A start in a skipped hour just before midnight, and a repeated hour across midnight.
    ("America/Nuuk", "23:30", datetime(2025, 3, 30, 1, 10, tzinfo=UTC), date(2025, 3, 28)),
    ("America/Moncton", "00:00", datetime(2000, 10, 29, 3, 30, tzinfo=UTC), date(2000, 10, 29)),
])
def test_an_instant_belongs_to_the_gaming_day_whose_start_it_follows(
        tz: str, start: str, at: datetime, day: date) -> None:
    gaming_day = GamingDay.from_env({"PITBOSS_GAMING_DAY_TZ": tz,
                                     "PITBOSS_GAMING_DAY_START": start})
    assert gaming_day.day_of(at) == day
    begins, ends = gaming_day.bounds(day)
    assert begins <= at < ends


@pytest.mark.parametrize("start", [time(0, 0), time(23, 59)])
def test_the_first_and_last_gaming_days_have_bounds_in_every_time_zone(start: time) -> None:
    for tz in sorted(available_timezones()):
        for day in (DAY_MIN, DAY_MAX):
            begins, ends = GamingDay(tz, start).bounds(day)
            assert begins < ends


def test_a_gaming_day_with_the_clocks_going_forward_lasts_23_hours() -> None:
    begins, ends = GamingDay("America/New_York", time(6)).bounds(date(2025, 3, 8))
    assert (ends - begins).total_seconds() == 23 * 3600


@pytest.mark.parametrize(("key", "value", "sentence"), [
    ("PITBOSS_GAMING_DAY_TZ", "Mars/Olympus", "not an IANA time zone"),
    ("PITBOSS_GAMING_DAY_START", "6am", "HH:MM"),
    ("PITBOSS_GAMING_DAY_START", "24:00", "HH:MM"),
])
def test_a_bad_gaming_day_setting_is_refused_by_name(key: str, value: str,
                                                     sentence: str) -> None:
    with pytest.raises(ProjectionSetupError, match=sentence):
        GamingDay.from_env({key: value})


def test_the_round_times_are_what_the_ledger_recorded(week: Week, reads: ReadModels) -> None:
    rows = {UUID(r["round_id"]): r for r in reads.search_rounds(table_id=week.table)["items"]}
    started = datetime.fromisoformat(rows[week.before_start]["started_at"])
    assert started.astimezone(NEW_YORK).strftime("%H:%M") == "05:59"
    ended = datetime.fromisoformat(rows[week.overnight]["ended_at"])
    assert ended.astimezone(NEW_YORK).strftime("%d %H:%M") == "05 06:01"


def test_a_voided_round_is_no_round_open_at_the_days_end_and_a_withdrawal_no_payout(
        env: Env) -> None:
    # Only days without a void were asserted: a void left its round counted open, and a stake
    # withdrawn counted as paid out, without a test noticing.
    clock = Clock(local(3, 9))
    casino = Casino.on(env, seed=3, clock=clock)
    casino.fund("P1", "P2")
    table = casino.table("T1", CASINO)
    voided = casino.do("start_round", table)
    casino.do("place_stake", voided, "P1", 1, 100)
    casino.do("withdraw_stake", voided, "P1", 1)
    casino.do("place_stake", voided, "P1", 1, 50)
    casino.do("place_stake", voided, "P2", 2, 100)
    casino.ledger.void(casino.rid(), "manager", voided, "a misdeal")
    clock.set(local(3, 10))
    casino.simple_round(table)  # 100 each
    with engine(env) as e:
        e.catch_up(100)
    with ReadModels(env) as reads:
        (day,) = reads.table_day_report(table, date(2025, 3, 3), date(2025, 3, 3))
    assert (day["rounds_played"], day["rounds_settled"], day["rounds_voided"]) == (2, 1, 1)
    assert (day["open_rounds_at_day_end"], day["held_at_day_end"]) == (0, 0)
    assert day["staked"] == 150 + 200
    assert day["house_win"] == casino.ledger.house(table)["available"]
    assert day["paid_out"] + day["house_win"] == day["staked"]
    casino.close()


# ------------------------------------------------------------------ the rounds behind a day


def listed(reads: ReadModels, table: UUID, day: date, **page: Any) -> dict[str, Any]:
    return reads.table_day_rounds(table, day, **page)


def test_a_days_rounds_are_listed_with_what_the_day_counts_of_each(week: Week,
                                                                  reads: ReadModels) -> None:
    # The round index finds rounds by the day they started; the overnight round's settlement
    # counts on Wednesday, which no round started: only this list shows where it came from.
    tuesday = listed(reads, week.table, date(2025, 3, 4))
    assert [UUID(r["round_id"]) for r in tuesday["items"]] == [week.at_start, week.overnight]
    assert tuesday["complete"]
    assert tuesday["rounds_listed"] == 2
    overnight = tuesday["items"][1]
    assert (overnight["started"], overnight["settled"], overnight["staked"],
            overnight["held_delta"], overnight["round_no"]) == (True, False, 200, 200, 3)
    wednesday = listed(reads, week.table, date(2025, 3, 5))
    (settled,) = wednesday["items"]
    assert UUID(settled["round_id"]) == week.overnight
    assert (settled["started"], settled["settled"], settled["staked"]) == (False, True, 0)
    assert settled["paid_out"] + settled["house_win"] == 200 == -settled["held_delta"]
    report = by_day(reads.table_day_report(week.table, date(2025, 3, 3), date(2025, 3, 10)))
    for day, row in report.items():  # the day's figures, as reported, are its rounds' sums
        rounds = listed(reads, week.table, date.fromisoformat(day))
        figures, items = rounds["figures"], rounds["items"]
        assert {k: v for k, v in figures.items() if k != "held_delta"} == {
            k: row[k] for k in figures if k != "held_delta"}, day
        for name in ("staked", "paid_out", "house_win", "held_delta", "rulings"):
            assert figures[name] == sum(r[name] for r in items), (day, name)
        for name, flag in (("rounds_played", "started"), ("rounds_settled", "settled"),
                           ("rounds_voided", "voided")):
            assert figures[name] == sum(r[flag] for r in items), (day, name)
    assert listed(reads, week.table, date(2025, 3, 7))["items"] == []  # closed all day


def test_a_ruling_days_later_lists_its_round_on_the_ruling_s_day(week: Week,
                                                                 reads: ReadModels,
                                                                 env: Env) -> None:
    week.clock.set(local(10, 9))
    week.casino.do("record_ruling", week.at_start, "paid short", [2], {"P1": 10})
    with engine(env) as e:
        e.catch_up(50)
    monday = listed(reads, week.table, date(2025, 3, 10))
    (ruled,) = monday["items"]
    assert (UUID(ruled["round_id"]), ruled["rulings"], ruled["paid_out"],
            ruled["house_win"]) == (week.at_start, 1, 10, -10)
    assert (monday["figures"]["rulings"], monday["figures"]["rounds_played"]) == (1, 0)


def test_a_days_rounds_come_a_page_at_a_time_under_that_day_s_cursor(week: Week,
                                                                    reads: ReadModels) -> None:
    tuesday = date(2025, 3, 4)
    first = listed(reads, week.table, tuesday, limit=1)
    assert first["rounds_listed"] == 2
    assert first["next_cursor"] is not None
    second = listed(reads, week.table, tuesday, limit=1, cursor=first["next_cursor"])
    assert [r["round_id"] for r in first["items"] + second["items"]] == [
        r["round_id"] for r in listed(reads, week.table, tuesday)["items"]]
    assert second["next_cursor"] is None
    with pytest.raises(QueryRefused, match="under other filters") as refused:
        listed(reads, week.table, date(2025, 3, 5), cursor=first["next_cursor"])
    assert refused.value.field == "cursor"
    with pytest.raises(QueryRefused, match="1 to 500 rounds"):
        listed(reads, week.table, tuesday, limit=501)


def test_a_day_whose_figures_are_not_its_rounds_sums_is_reported_broken(
        week: Week, env: Env, reads: ReadModels) -> None:
    with connect(env) as conn:
        conn.execute("DELETE FROM table_days_round_days WHERE round_id = %s", (week.overnight,))
    with pytest.raises(InvariantBroken, match=r"not the sums of its rounds' \(R-M4\)"):
        listed(reads, week.table, date(2025, 3, 4))


def test_a_view_made_before_rounds_were_listed_says_which_days_lists_are_whole(
        week: Week, env: Env) -> None:
    with connect(env) as conn:
        conn.execute("DROP TABLE table_days_round_days")
        conn.execute("ALTER TABLE table_days_settings DROP COLUMN rounds_listed_after")
    week.clock.set(datetime.now(UTC) + timedelta(days=1))  # a round after the upgrade
    later = week.casino.simple_round(week.table)
    with engine(env) as e:  # the worker's start makes the part, then counts the round
        e.catch_up(50)
    with ReadModels(env) as reads:
        tuesday = listed(reads, week.table, date(2025, 3, 4))
        assert (tuesday["complete"], tuesday["items"]) == (False, [])
        assert tuesday["figures"]["rounds_played"] == 2  # the day's figures as counted then
        day = GamingDay("America/New_York", time(6)).day_of(week.clock.now)
        after = listed(reads, week.table, day)
        assert after["complete"]
        assert [UUID(r["round_id"]) for r in after["items"]] == [later]
    rebuild(env, "table_days")
    with ReadModels(env) as reads:
        tuesday = listed(reads, week.table, date(2025, 3, 4))
    assert tuesday["complete"]
    assert [UUID(r["round_id"]) for r in tuesday["items"]] == [week.at_start, week.overnight]


def test_a_view_upgraded_before_a_day_that_starts_in_a_repeated_hour_lists_that_day_whole(
        postgres_env: Callable[[], Env]) -> None:
    # Days from 01:30 New York: the day after the last one counted starts in the hour the
    # clocks repeat (7 November 2027). The upgrade dated that start by PostgreSQL's reading of
    # 01:30 (the second, 06:30Z), the report by Python's (the first, 05:30Z): the whole day,
    # every round of which the view listed, answered complete: false.
    env = {**postgres_env(), "PITBOSS_GAMING_DAY_TZ": "America/New_York",
           "PITBOSS_GAMING_DAY_START": "01:30"}
    clock = Clock(datetime(2027, 11, 6, 12, 0, tzinfo=NEW_YORK))
    casino = Casino.on(env, seed=2, clock=clock)
    try:
        casino.fund("P1", "P2")
        table = casino.table("T1", CASINO)
        casino.simple_round(table)
        with engine(env) as e:
            e.catch_up(50)
        with connect(env) as conn:  # as a view made before the rounds behind a day were listed
            conn.execute("DROP TABLE table_days_round_days")
            conn.execute("ALTER TABLE table_days_settings DROP COLUMN rounds_listed_after")
        with engine(env) as e:
            e.catch_up(50)
        clock.set(datetime(2027, 11, 7, 10, 0, tzinfo=NEW_YORK))
        later = casino.simple_round(table)
        with engine(env) as e:
            e.catch_up(50)
        with ReadModels(env) as reads:
            day = listed(reads, table, date(2027, 11, 7))
        assert day["starts_at"] == "2027-11-07T05:30:00+00:00"
        assert day["complete"]
        assert [UUID(r["round_id"]) for r in day["items"]] == [later]
    finally:
        casino.close()


def test_a_view_upgraded_after_counting_days_ahead_of_the_database_clock_lists_them_as_partial(
        week: Week, env: Env) -> None:
    # A server whose clock ran ahead stamped a round two days on, and a view made before
    # applied_until was kept counted it: marked as listed from the database's now(), that day
    # said it was complete, and its figures, without a round behind them, a broken invariant.
    week.clock.set(datetime.now(UTC) + timedelta(days=2))
    ahead = week.casino.simple_round(week.table)
    with engine(env) as e:
        e.catch_up(50)
    with connect(env) as conn:
        conn.execute("DROP TABLE table_days_round_days")
        conn.execute("ALTER TABLE table_days_settings DROP COLUMN rounds_listed_after, "
                     "DROP COLUMN applied_until")
    with engine(env) as e:
        e.catch_up(50)
    day = GamingDay("America/New_York", time(6)).day_of(week.clock.now)
    with ReadModels(env) as reads:
        listed_ahead = listed(reads, week.table, day)
        assert (listed_ahead["complete"], listed_ahead["items"]) == (False, [])
        assert listed_ahead["figures"]["rounds_played"] == 1
        week.clock.set(week.clock.now + timedelta(days=1))  # the day after is listed whole
        later = week.casino.simple_round(week.table)
        with engine(env) as e:
            e.catch_up(50)
        after = listed(reads, week.table, day + timedelta(days=1))
    assert after["complete"]
    assert [UUID(r["round_id"]) for r in after["items"]] == [later]
    assert ahead != later


def test_a_walk_of_a_days_rounds_shows_when_the_day_changed_under_it(
        week: Week, env: Env, reads: ReadModels) -> None:
    tuesday = date(2025, 3, 4)
    first = listed(reads, week.table, tuesday, limit=1)
    week.clock.set(local(4, 23))  # a ruling still on Tuesday's gaming day
    week.casino.do("record_ruling", week.at_start, "paid short", [2], {"P1": 10})
    with engine(env) as e:
        e.catch_up(50)
    second = listed(reads, week.table, tuesday, limit=1, cursor=first["next_cursor"])
    assert second["last_notification_id"] > first["last_notification_id"]
    assert second["figures"]["rulings"] == first["figures"]["rulings"] + 1

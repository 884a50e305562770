"""Helpers for the projection tests (no tests here): a casino to play rounds at, random legal
play, an injectable clock, and a dump of every view's rows to compare views exactly."""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import psycopg
from psycopg import sql

from ledger.application import GameLedger
from ledger.errors import LedgerError
from ledger.rules import CASINO, CASINO_WILD, WILD21, RuleSet, TableLimits
from ledger.sealing import ShoeSealer
from projections.engine import NAMES, PROJECTION_CLASSES, Engine

Env = dict[str, str]
PARTS = {cls.name: cls.view_class.parts for cls in PROJECTION_CLASSES}
# One deck and four wild cards: wild cards, forfeits and new shoes come often.
WILD_HEAVY = CASINO_WILD.evolve(name="wild heavy", decks=1, wild_cards=4)
RULE_SETS: tuple[RuleSet, ...] = (CASINO, WILD_HEAVY, WILD21)
SETTLED, VOIDED = "settled", "voided"


class Clock:
    """A clock the test sets: ``GameLedger(clock=clock)`` records its times."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(microseconds=1)  # distinct, increasing times
        return self.now

    def set(self, now: datetime) -> None:
        self.now = now


NEW_YORK = ZoneInfo("America/New_York")


def new_york(day: int, hour: int, minute: int = 0) -> datetime:
    """A moment of March 2025 in New York (the clocks go forward on Sunday 9 March)."""
    return datetime(2025, 3, day, hour, minute, tzinfo=NEW_YORK)


def new_york_days(env: Env) -> Env:
    """``env`` with gaming days that start at 06:00 in New York."""
    return {**env, "PITBOSS_GAMING_DAY_TZ": "America/New_York",
            "PITBOSS_GAMING_DAY_START": "06:00"}


class Casino:
    """A GameLedger with request ids that never repeat, and funded players."""

    def __init__(self, ledger: GameLedger) -> None:
        self.ledger = ledger
        self._ids = count(1)
        self._prefix = uuid.uuid4().hex[:8]

    @classmethod
    def on(cls, env: Env, *, seed: int | None = None, clock: Any = None,
           randbelow: Any = None, shoe_key: bytes | None = None) -> Casino:
        kwargs: dict[str, Any] = {}
        if clock is not None:
            kwargs["clock"] = clock
        if randbelow is not None:
            kwargs["randbelow"] = randbelow
        elif seed is not None:
            kwargs["randbelow"] = random.Random(seed).randrange
        return cls(GameLedger(env=env, shoe_key=shoe_key or ShoeSealer.new_key(), **kwargs))

    def rid(self) -> str:
        return f"{self._prefix}-{next(self._ids)}"

    def table(self, name: str, rules: RuleSet = CASINO,
              limits: TableLimits | None = None) -> UUID:
        return self.ledger.open_table(self.rid(), "boss", name, rules, limits)

    def fund(self, *players: str, chips: int = 10_000_000) -> None:
        for player in players:
            self.ledger.open_account(self.rid(), "cashier", player)
            self.ledger.buy_in(self.rid(), "cashier", player, chips)

    def do(self, use_case: str, *args: Any) -> Any:
        return getattr(self.ledger, use_case)(self.rid(), "dealer", *args)

    def simple_round(self, table: UUID, players: Sequence[str] = ("P1", "P2"),
                     stake: int = 100) -> UUID:
        """Everyone stands; the dealer plays; the round settles."""
        r = self.do("start_round", table)
        for box, player in enumerate(players, 1):
            self.do("place_stake", r, player, box, stake)
        self.do("deal", r)
        return self.finish(r)

    def finish(self, r: UUID) -> UUID:
        """Stand on every hand still to play, play the dealer, settle."""
        for _ in range(30):
            state = self.ledger.round_state(r)
            if state["phase"] in (SETTLED, VOIDED):
                return r
            legal = {d["decision"]: d for d in state["legal"]}
            if "stand" in legal:
                d = legal["stand"]
                self.do("stand", r, d["player"], d["box"], d["hand"])
            elif "play_dealer" in legal:
                self.do("play_dealer", r)
            elif "settle" in legal:
                self.do("settle", r)
            else:
                raise AssertionError(f"no way forward in {state['legal']}")
        raise AssertionError("the round did not end")

    def random_round(self, table: UUID, players: Sequence[str], rng: random.Random, *,
                     void_rate: float = 0.05, ruling_rate: float = 0.2) -> UUID:
        """A round of random legal decisions (``round_state()['legal']``), sometimes voided,
        sometimes corrected by a ruling afterwards."""
        ledger = self.ledger
        r: UUID = self.do("start_round", table)
        chosen = rng.sample(list(players), k=rng.randint(2, min(3, len(players))))
        placed = 0
        for box, player in enumerate(chosen, 1):
            try:
                self.do("place_stake", r, player, box, rng.choice([10, 25, 50, 100, 300]))
                placed += 1
            except LedgerError:
                pass  # short of chips after a cash-out: sits this round out
        others = [p for p in players if p != chosen[0]]
        if rng.random() < 0.3 and others:
            co_bettor = rng.choice(others)
            try:
                self.do("place_stake", r, co_bettor, 1, 20)
                if rng.random() < 0.4:
                    self.do("withdraw_stake", r, co_bettor, 1)
                    if rng.random() < 0.5:  # and stakes again
                        self.do("place_stake", r, co_bettor, 1, 30)
            except LedgerError:
                pass  # one bettor per box (wild21), no stake on box 1, or short of chips
        if placed < 2 or rng.random() < void_rate:
            self.do("void", r, "dealer misdealt")
            return r
        self.do("deal", r)
        for _ in range(100):
            state = ledger.round_state(r)
            if state["phase"] in (SETTLED, VOIDED):
                break
            if rng.random() < void_rate / 10:
                self.do("void", r, "manager's decision")
                break
            legal = [d for d in state["legal"] if d["decision"] != "void"]
            self._decide(r, rng.choice(legal))
        else:
            raise AssertionError("the round did not end")
        state = ledger.round_state(r)
        if state["phase"] == SETTLED and rng.random() < ruling_rate:
            player = rng.choice(sorted(state["results"]))
            with contextlib.suppress(LedgerError):  # taking back more than the player has
                self.do("record_ruling", r, "paid short", [2],
                        {player: rng.choice([-5, 10, 35])})
        return r

    def _decide(self, r: UUID, d: dict[str, Any]) -> None:
        kind, player, box, hand = d["decision"], d["player"], d["box"], d["hand"]
        try:
            if kind in ("hit", "stand", "double", "split"):
                self.do(kind, r, player, box, hand)
            elif kind in ("match", "decline"):
                self.do("answer", r, player, box, hand, kind == "match")
            elif kind == "surrender":
                self.do("surrender", r, player, box)
            elif kind == "even_money":
                self.do("even_money", r, player, box)
            elif kind == "insure":
                self.do("insure", r, player, 5)
            elif kind in ("play_dealer", "settle"):
                self.do(kind, r)
            else:
                raise AssertionError(f"unexpected decision {d}")
        except LedgerError:
            pass  # a random choice may still be refused; the round goes on

    def close(self) -> None:
        self.ledger.close()


def connect(env: Env) -> psycopg.Connection[Any]:
    conn = psycopg.connect(host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
                           dbname=env["POSTGRES_DBNAME"], user=env["POSTGRES_USER"],
                           password=env["POSTGRES_PASSWORD"], autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}").format(
        sql.Identifier(env["POSTGRES_SCHEMA"])))
    return conn


def dump(env: Env, names: Sequence[str] = NAMES) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every live view table, sorted: equal dumps mean identical views."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with connect(env) as conn:
        for name in names:
            for part in PARTS[name]:
                table = f"{name}_{part}"
                rows = conn.execute(sql.SQL("SELECT * FROM {}").format(
                    sql.Identifier(table))).fetchall()
                out[table] = sorted(rows, key=repr)
    return out


def positions(env: Env) -> dict[str, int]:
    with connect(env) as conn:
        return {name: (conn.execute(sql.SQL(
            "SELECT notification_id FROM {} WHERE application_name = 'Ledger'").format(
            sql.Identifier(f"{name}_tracking"))).fetchone() or (0,))[0]
            for name in NAMES}


@contextmanager
def engine(env: Env, **kwargs: Any) -> Iterator[Engine]:
    e = Engine(env, **kwargs)
    try:
        yield e
    finally:
        e.close()


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0,
               what: str = "the condition") -> float:
    """Poll until ``condition()``; the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.01)
    return time.monotonic() - started


def head(env: Env) -> int:
    with connect(env) as conn:
        row = conn.execute("SELECT coalesce(max(notification_id), 0) FROM ledger_events"
                           ).fetchone()
        return int(row[0]) if row else 0

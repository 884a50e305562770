"""Ledger benchmark: the GameLedger on PostgreSQL against the disk's raw commit rate.

One run, synchronous_commit as the server has it (on by default), measures:

(a) raw single-row INSERT transactions with psycopg (one INSERT of a ~300-byte
    bytea and one COMMIT per transaction): before, during (a few after every
    round of (b)/(c)) and after the ledger phases, since a disk's commit latency
    drifts; (b)/(a) is taken against the interleaved "during" figure;
(b) player decisions (hit, stand, double, split, surrender) per second through
    GameLedger, one writer, timing the decision calls only; and (b)/(a);
(c) full rounds per second: three players with a box each under basic strategy,
    start_round, three stakes, deal, the decisions, play_dealer and settle;
(d) the time to build one round's frame-by-frame replay, p50 and p99;
(e) where one decision's time goes: the aggregates lent by the working set, any
    store reads (receipt lookup, version query, loads, catch-ups), the save and its
    insert statement; then the write path alone, piece by piece;
(f) what if: decisions that do not name the round version they were made on (the ledger
    then reads the round from the store first), against those that do;
(g) the raw insert of (a) after the connection sat idle 0.5 to 10 ms: PostgreSQL answers
    more slowly after a pause, which every real terminal (and an HTTP layer) imposes.

The database is a fresh embedded PostgreSQL in a temporary folder (stopped and
removed at the end), or ``DATABASE_URL`` when set (then in a temporary schema,
dropped at the end).

    python -m bench.ledger --rounds 300 --inserts 3000
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.persistence import StoredEvent

from bench.common import (
    DECISIONS,
    Database,
    arguments,
    database,
    load_average,
    progress,
    quantile,
    server_facts,
)
from ledger.aggregates.round import Round
from ledger.application import GameLedger
from ledger.plays import Play
from ledger.rules import CASINO, TableLimits
from ledger.sealing import ShoeSealer
from ledger.strategy import basic_strategy

STAKE = 100
BOXES = 3
BUY_IN = 100_000_000
PAYLOAD_BYTES = 300
DEALER = "dealer"
CASHIER = "cashier"
PHASES = ("start_round", "place_stake", "deal", *DECISIONS, "play_dealer", "settle")


# --------------------------------------------------------------------------- (a) raw inserts


class RawInserts:
    """Single-row INSERT transactions (autocommit off: one INSERT, one COMMIT) on one
    connection, into a plain table; every transaction's latency is kept. psycopg sends the
    BEGIN on its own, so a transaction is three round trips; the ledger's append is one
    autocommitted statement, and (e) times an autocommitted raw INSERT beside it."""

    TABLE = "bench_raw_inserts"

    def __init__(self, db: Database) -> None:
        self.conn = db.connect(autocommit=False)
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {self.TABLE} "
                          "(id bigserial PRIMARY KEY, payload bytea NOT NULL)")
        self.conn.commit()
        self.payload = os.urandom(PAYLOAD_BYTES)
        self.statement = f"INSERT INTO {self.TABLE} (payload) VALUES (%s)"

    def run(self, n: int) -> list[float]:
        latencies = []
        conn, statement, payload = self.conn, self.statement, (self.payload,)
        for _ in range(n):
            t0 = time.perf_counter()
            conn.execute(statement, payload, prepare=True)
            conn.commit()
            latencies.append(time.perf_counter() - t0)
        return latencies

    def block(self, n: int, label: str) -> dict[str, float]:
        latencies: list[float] = []
        step = max(n // 4, 1)
        while len(latencies) < n:
            latencies += self.run(min(step, n - len(latencies)))
            progress(f"(a) {label}: {len(latencies):,}/{n:,} inserts")
        return summary(latencies)

    def close(self) -> None:
        self.conn.close()


def summary(latencies: list[float]) -> dict[str, float]:
    """Rate as transactions per second of transaction time, and latency quantiles."""
    total = sum(latencies)
    return {"n": len(latencies), "seconds": total, "rate": len(latencies) / total,
            "p50_ms": quantile(latencies, 0.5) * 1e3, "p99_ms": quantile(latencies, 0.99) * 1e3}


def round_trip_ms(db: Database, n: int = 500) -> float:
    """Latency (p50) of one query round trip without a commit: SELECT 1."""
    samples = []
    with db.connect(autocommit=True) as conn:
        for _ in range(n):
            t0 = time.perf_counter()
            conn.execute("SELECT 1")
            samples.append(time.perf_counter() - t0)
    return quantile(samples, 0.5) * 1e3


# --------------------------------------------------------------------------- the ledger driver


@dataclass
class Timings:
    """Seconds and calls per use case."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # this thread's
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, name: str, seconds: float, cpu: float) -> None:
        self.seconds[name] += seconds
        self.cpu[name] += cpu
        self.calls[name] += 1

    def total(self, names: tuple[str, ...]) -> tuple[int, float]:
        return (sum(self.calls[n] for n in names), sum(self.seconds[n] for n in names))


class Driver:
    """Plays rounds at one table through GameLedger, three players with a box each."""

    def __init__(self, app: GameLedger, tag: str) -> None:
        self.app = app
        self.tag = tag
        self._ids = itertools.count(1)
        self.players = [f"{tag}-P{box}" for box in range(1, BOXES + 1)]
        self.table_id = app.open_table(self.rid(), "boss", f"{tag}-table", CASINO,
                                       TableLimits(table_max=10_000))
        for player in self.players:
            app.open_account(self.rid(), CASHIER, player)
            app.buy_in(self.rid(), CASHIER, player, BUY_IN)
        self.rounds: list[UUID] = []
        self.driver_seconds = 0.0  # reading the round to choose the next play (not the ledger)
        self.on_decision: Callable[[bool], None] | None = None
        self.name_version = True  # decisions name the round version they were made on

    def rid(self) -> str:
        return f"{self.tag}-{next(self._ids)}"

    def _call(self, timings: Timings, name: str, method: Callable[..., Any],
              *args: Any, **kwargs: Any) -> Any:
        c0, t0 = time.thread_time(), time.perf_counter()
        result = method(*args, **kwargs)
        timings.add(name, time.perf_counter() - t0, time.thread_time() - c0)
        return result

    def _follow(self, round_id: UUID, state: Round | None) -> Round:
        """The round as stored, brought up to date from its new events (the driver's view)."""
        t0 = time.perf_counter()
        gt = state.version if state is not None else None
        for event in self.app.events.get(round_id, gt=gt):
            state = event.mutate(state)  # type: ignore[attr-defined]
        assert isinstance(state, Round)
        self.driver_seconds += time.perf_counter() - t0
        return state

    def play_round(self, timings: Timings) -> None:
        app, call = self.app, self._call
        round_id = call(timings, "start_round", app.start_round, self.rid(), DEALER,
                        self.table_id)
        self.rounds.append(round_id)
        for box, player in enumerate(self.players, 1):
            call(timings, "place_stake", app.place_stake, self.rid(), DEALER, round_id, player,
                 box, STAKE)
        call(timings, "deal", app.deal, self.rid(), DEALER, round_id)
        state = self._follow(round_id, None)
        while (turn := state.machine.turn()) is not None:
            m = state.machine
            box, hand = turn
            owner = self.players[box - 1]
            cards = m.boxes[box].hands[hand].cards
            play = basic_strategy(cards, m.upcard or cards[0], m.legal_plays(box, hand))
            if self.on_decision is not None:
                self.on_decision(True)
            try:
                # As a terminal does: the decision names the round version it was shown.
                seen = {"expected": state.version} if self.name_version else {}
                if play is Play.SURRENDER:
                    call(timings, "surrender", app.surrender, self.rid(), owner, round_id, owner,
                         box, **seen)
                else:
                    call(timings, play.value, getattr(app, play.value), self.rid(), owner,
                         round_id, owner, box, hand, **seen)
            finally:
                if self.on_decision is not None:
                    self.on_decision(False)
            state = self._follow(round_id, state)
        if state.machine.phase == "playing":
            call(timings, "play_dealer", app.play_dealer, self.rid(), DEALER, round_id)
            call(timings, "settle", app.settle, self.rid(), DEALER, round_id)


def play(driver: Driver, rounds: int, label: str) -> None:
    timings = Timings()
    step = max(rounds // 5, 1)
    for i in range(rounds):
        driver.play_round(timings)
        if (i + 1) % step == 0:
            progress(f"{label}: {i + 1:,}/{rounds:,} rounds")


# --------------------------------------------------------------------------- (e) profile


class Profiler:
    """Inclusive time and calls of the ledger's internal steps, during decisions only,
    keyed by their nesting ("save (_save)/insert transaction"). Wraps attributes of one
    application instance; the ledger's code is not changed."""

    def __init__(self, app: GameLedger) -> None:
        self.app = app
        self.active = False
        self.stack: list[str] = []
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.decisions = 0
        self.decision_seconds = 0.0
        self.rows = 0
        self.saves = 0
        self._t0 = 0.0
        self._patched: list[tuple[Any, str, Any]] = []

    def on_decision(self, starting: bool) -> None:
        if starting:
            self.active = True
            self._t0 = time.perf_counter()
        else:
            self.decision_seconds += time.perf_counter() - self._t0
            self.decisions += 1
            self.active = False

    def _enter(self, name: str) -> str:
        self.stack.append(name)
        return "/".join(self.stack)

    def _leave(self, key: str, t0: float) -> None:
        self.stack.pop()
        self.seconds[key] += time.perf_counter() - t0
        self.calls[key] += 1

    def wrap(self, owner: Any, attribute: str, name: str | Callable[..., str]) -> None:
        original = getattr(owner, attribute)
        self._patched.append((owner, attribute, original))

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return original(*args, **kwargs)
            label = name if isinstance(name, str) else name(*args, **kwargs)
            key = self._enter(label)
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._leave(key, t0)

        setattr(owner, attribute, timed)

    def wrap_context(self, owner: Any, attribute: str, name: str) -> None:
        original = getattr(owner, attribute)
        self._patched.append((owner, attribute, original))

        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            if not self.active:
                with original(*args, **kwargs) as value:
                    yield value
                return
            key = self._enter(name)
            t0 = time.perf_counter()
            try:
                with original(*args, **kwargs) as value:
                    self._leave(key, t0)  # the checkout only
                    key = ""
                    yield value
            finally:
                if key:
                    self._leave(key, t0)

        setattr(owner, attribute, timed)

    def install(self) -> None:
        app = self.app
        recorder = app.recorder
        datastore = recorder.datastore  # type: ignore[attr-defined]
        self.wrap(app, "_answer", "receipt lookup (_answer)")
        self.wrap(app, "_version", "version query (_version)")
        self.wrap(app, "_get", lambda cls, *_, **__: f"working set [{cls.__name__}]")
        self.wrap(app, "_load", "load from the store")
        self.wrap(app, "_catch_up", "catch up from the store")
        self.wrap(app, "_save", "save (_save)")
        self.wrap(recorder, "insert_events", "insert transaction")
        counted = recorder.insert_events

        def count_rows(stored_events: Any, **kwargs: Any) -> Any:
            if self.active:
                self.rows += len(stored_events)
                self.saves += 1
            return counted(stored_events, **kwargs)

        self._patched.append((recorder, "insert_events", counted))
        recorder.insert_events = count_rows  # type: ignore[method-assign]
        self.wrap(recorder, "select_events", "select_events")
        if getattr(app, "snapshots", None) is not None:
            self.wrap(app.snapshots.recorder, "select_events", "select snapshots")  # type: ignore[union-attr]
        self.wrap_context(datastore, "get_connection", "pool checkout")
        self.wrap(app.mapper, "to_domain_event", "decode events")
        self.wrap(app.mapper, "to_stored_event", "encode events")

    def uninstall(self) -> None:
        for owner, attribute, original in reversed(self._patched):
            setattr(owner, attribute, original)
        self._patched.clear()

    def report(self) -> list[str]:
        n = max(self.decisions, 1)
        per = self.decision_seconds / n * 1e3
        lines = [f"  one decision, mean of {self.decisions:,}: {per:.3f} ms "
                 "(inclusive times and calls per decision; nested steps indented, "
                 "rare ones hidden)"]
        top = 0.0
        for key in sorted(self.seconds, key=lambda k: (k.split("/")[0], k)):
            depth = key.count("/")
            label = key.rsplit("/", 1)[-1]
            ms = self.seconds[key] / n * 1e3
            calls = self.calls[key] / n
            if depth == 0:
                top += self.seconds[key]
            elif calls < 0.01:  # e.g. an account snapshot inside _save, every 200 events
                continue
            lines.append(f"  {'  ' * depth}{label:<{44 - 2 * depth}} {ms:7.3f} ms  "
                         f"{calls:5.2f} calls  {ms / per * 100:5.1f}%")
        rest = (self.decision_seconds - top) / n * 1e3
        lines.append(f"  {'other (engine, events, fingerprint, ...)':<44} {rest:7.3f} ms  "
                     f"{'':11}  {rest / per * 100:5.1f}%")
        checkouts = sum(c for k, c in self.calls.items() if k.endswith("pool checkout")) / n
        lines.append(f"  pool checkouts per decision: {checkouts:.2f}; rows per insert "
                     f"transaction: {self.rows / max(self.saves, 1):.2f}")
        return lines


# --------------------------------------------------------------------------- (d) replay


def replays(app: GameLedger, rounds: list[UUID]) -> dict[str, float]:
    samples = []
    frames = 0
    for round_id in rounds:
        t0 = time.perf_counter()
        frames += len(app.replay(round_id))
        samples.append(time.perf_counter() - t0)
    return {"n": len(rounds), "p50_ms": quantile(samples, 0.5) * 1e3,
            "p99_ms": quantile(samples, 0.99) * 1e3, "mean_frames": frames / len(rounds)}


# --------------------------------------------------------------------------- (e) write path


class _PlainEvents(Application[UUID]):
    """The library's own recorder: table lock, NOTIFY and INSERT in one pipelined
    transaction, through its pool."""

    name = "BenchPlain"


class _ChainedEvents(Application[UUID]):
    """The ledger's recorder: one call of its insert function (append lock, NOTIFY, hash
    chain, INSERT) on a connection kept for appending."""

    name = "BenchChained"
    env = {"APPLICATION_RECORDER_TOPIC": "ledger.storage:LedgerRecorder"}  # noqa: RUF012


def write_path(db: Database, raw: RawInserts, n: int,
               rows: int) -> list[tuple[str, dict[str, float]]]:
    """The write path piece by piece, variants taken in turn so the disk's drift hits all."""
    payload = os.urandom(PAYLOAD_BYTES)

    def events(k: int) -> list[StoredEvent]:
        originator = uuid.uuid4()
        return [StoredEvent(originator_id=originator, originator_version=v,
                            topic="bench:Event", state=payload) for v in range(1, k + 1)]

    plain, chained = _PlainEvents(env=db.env()), _ChainedEvents(env=db.env())
    autocommitted = db.connect(autocommit=True)
    try:
        variants: list[tuple[str, Callable[[], Any]]] = [
            ("raw INSERT + COMMIT (psycopg, (a))", lambda: raw.run(1)),
            ("raw INSERT autocommitted (one round trip)",
             lambda: autocommitted.execute(raw.statement, (payload,), prepare=True)),
            ("insert_events, 1 row, library recorder",
             lambda: plain.recorder.insert_events(events(1))),
            ("insert_events, 1 row, the ledger's recorder",
             lambda: chained.recorder.insert_events(events(1))),
            (f"insert_events, {rows} rows, library recorder",
             lambda: plain.recorder.insert_events(events(rows))),
            (f"insert_events, {rows} rows, the ledger's recorder",
             lambda: chained.recorder.insert_events(events(rows))),
        ]
        samples: list[list[float]] = [[] for _ in variants]
        for _, call in variants:  # warm the pools and prepared statements
            call()
        for _ in range(n):
            for i, (_, call) in enumerate(variants):
                t0 = time.perf_counter()
                call()
                samples[i].append(time.perf_counter() - t0)
        return [(label, summary(x)) for (label, _), x in zip(variants, samples, strict=True)]
    finally:
        plain.close()
        chained.close()
        autocommitted.close()


# --------------------------------------------------------------------------- main


def new_ledger(db: Database) -> GameLedger:
    return GameLedger(env=db.env(), shoe_key=ShoeSealer.new_key())


def run(args: argparse.Namespace) -> None:
    with database("pb-bench-") as db:
        raw = RawInserts(db)
        try:
            report(db, raw, args)
        finally:
            raw.close()


def report(db: Database, raw: RawInserts, args: argparse.Namespace) -> None:
    out = print
    facts = server_facts(db)
    out(f"database: {db.where}")
    out(f"server: PostgreSQL {facts['server_version']}; synchronous_commit="
        f"{facts['synchronous_commit']}, fsync={facts['fsync']}, wal_sync_method="
        f"{facts['wal_sync_method']}, full_page_writes={facts['full_page_writes']}, "
        f"commit_delay={facts['commit_delay']}")
    out(f"client: psycopg {psycopg.__version__} ({psycopg.pq.__impl__}), "
        f"{os.cpu_count()} CPUs")
    out(f"load average at start: {load_average()} "
        "(other processes on these CPUs slow every round trip)")
    rt = round_trip_ms(db)
    out(f"one round trip without commit (p50): SELECT 1 {rt:.3f} ms")
    out("")

    a_before = raw.block(args.inserts, "before")
    app = new_ledger(db)
    try:
        driver = Driver(app, "main")
        play(driver, args.warmup, "warm-up")
        # (b) and (c), with raw inserts interleaved between rounds: the same disk, the same
        # minutes, so their ratio does not depend on the drift of the commit latency.
        per_round = max(1, -(-args.inserts // args.rounds))
        timings = Timings()
        interleaved: list[float] = []
        step = max(args.rounds // 5, 1)
        started = time.perf_counter()
        raw_seconds = 0.0
        for i in range(args.rounds):
            driver.play_round(timings)
            t0 = time.perf_counter()
            interleaved += raw.run(per_round)
            raw_seconds += time.perf_counter() - t0
            if (i + 1) % step == 0:
                progress(f"(b)(c): {i + 1:,}/{args.rounds:,} rounds")
        wall = time.perf_counter() - started - raw_seconds
        a_after = raw.block(args.inserts, "after")
        a_mid = summary(interleaved)

        out(f"(a) raw single-row INSERT transactions ({PAYLOAD_BYTES}-byte bytea, one INSERT + "
            "COMMIT each, autocommit off, one connection)")
        for label, a in (("before", a_before), ("during", a_mid), ("after", a_after)):
            note = f" ({per_round} after each round of (b)(c))" if label == "during" else ""
            out(f"    {label:<6} {a['n']:>7,} in {a['seconds']:5.2f} s: {a['rate']:8,.0f} "
                f"rows/s  (latency p50 {a['p50_ms']:.3f} ms, p99 {a['p99_ms']:.3f} ms){note}")
        out("")

        n_dec, s_dec = timings.total(DECISIONS)
        b = n_dec / s_dec
        out(f"(b) player decisions through GameLedger, one writer ({args.rounds:,} rounds, "
            f"{BOXES} boxes, basic strategy; decision calls timed alone)")
        mix = ", ".join(f"{d} {timings.calls[d]:,}" for d in DECISIONS if timings.calls[d])
        out(f"    {n_dec:,} decisions ({mix}) in {s_dec:.2f} s")
        cpu_dec = sum(timings.cpu[d] for d in DECISIONS)
        out(f"    decisions per second: {b:,.0f}  (mean {s_dec / n_dec * 1e3:.3f} ms, of which "
            f"{cpu_dec / n_dec * 1e3:.3f} ms Python CPU in this process; the rest waits on "
            "PostgreSQL and the disk)")
        out(f"    (b)/(a): {b / a_mid['rate']:.2f} against (a) during  (target >= 0.60); "
            f"{b / a_before['rate']:.2f} against (a) before, {b / a_after['rate']:.2f} "
            "against (a) after")
        out("")

        n_all, s_all = timings.total(PHASES)
        out(f"(c) full rounds ({BOXES} players, one box each, basic strategy)")
        out(f"    {args.rounds / s_all:,.1f} rounds/s counting the ledger calls only "
            f"({s_all / args.rounds * 1e3:.2f} ms per round, {n_all / args.rounds:.1f} calls "
            "per round)")
        out(f"    {args.rounds / wall:,.1f} rounds/s wall clock, with the bench reading the "
            f"round to choose each play ({driver.driver_seconds / args.rounds * 1e3:.2f} ms per "
            "round)")
        out("    per call:")
        for name in PHASES:
            if timings.calls[name]:
                ms = timings.seconds[name] / timings.calls[name] * 1e3
                share = timings.seconds[name] / s_all * 100
                out(f"      {name:<12} {timings.calls[name]:>7,} calls  {ms:7.3f} ms each  "
                    f"{share:5.1f}% of round time")
        out("")

        sample = driver.rounds[-args.replays:]
        progress(f"(d) replaying {len(sample)} rounds")
        d = replays(app, sample)
        out(f"(d) replay(round_id) of {d['n']} settled rounds ({d['mean_frames']:.1f} frames "
            f"each): p50 {d['p50_ms']:.2f} ms, p99 {d['p99_ms']:.2f} ms")
        out("")

        progress(f"(e) profiling {args.profile_rounds} rounds")
        profiler = Profiler(app)
        profiler.install()
        driver.on_decision = profiler.on_decision
        profiled: list[float] = []
        try:
            for _ in range(args.profile_rounds):
                driver.play_round(Timings())
                profiled += raw.run(per_round)
        finally:
            driver.on_decision = None
            profiler.uninstall()
        a_e = summary(profiled)
        out(f"(e) where one decision's time goes ({args.profile_rounds} rounds, instrumented, "
            "which adds a little)")
        for line in profiler.report():
            out(line)
        out(f"    for scale: raw INSERT + COMMIT p50 {a_e['p50_ms']:.3f} ms (mean "
            f"{1e3 / a_e['rate']:.3f} ms) in the same minutes; one round trip "
            f"{rt:.3f} ms")
        rows = max(1, round(profiler.rows / max(profiler.saves, 1)))
    finally:
        app.close()

    if args.write_path:
        progress(f"(e) write path, {args.write_path} transactions per variant")
        out("    the write path alone, variants in turn (mean latency, p50, p99):")
        for label, w in write_path(db, raw, args.write_path, rows):
            out(f"      {label:<46} {1e3 / w['rate']:7.3f} ms  {w['p50_ms']:7.3f}  "
                f"{w['p99_ms']:7.3f}")

    if args.what_if:
        what_if(db, raw, args, per_round, out)
    if args.idle_gap:
        idle_gaps(raw, args.idle_gap, out)
    out("")
    out(f"load average at end: {load_average()}")


def idle_gaps(raw: RawInserts, n: int, out: Callable[..., None]) -> None:
    """(g) The same raw insert after the connection sat idle a while, gaps taken in turn:
    what a terminal that pauses between decisions (or an HTTP layer) costs the database."""
    gaps_ms = (0.0, 0.5, 1.5, 3.0, 10.0)
    samples: list[list[float]] = [[] for _ in gaps_ms]
    for i in range(n):
        for k, gap in enumerate(gaps_ms):
            if gap:
                time.sleep(gap / 1e3)
            samples[k] += raw.run(1)
        if (i + 1) % max(n // 4, 1) == 0:
            progress(f"(g) {i + 1:,}/{n:,} inserts per gap")
    out("")
    out(f"(g) raw INSERT + COMMIT after the connection was idle ({n} each, gaps in turn)")
    for gap, x in zip(gaps_ms, samples, strict=True):
        f = summary(x)
        out(f"    idle {gap:4.1f} ms before: p50 {f['p50_ms']:.3f} ms, mean "
            f"{1e3 / f['rate']:.3f} ms")


def what_if(db: Database, raw: RawInserts, args: argparse.Namespace, per_round: int,
            out: Callable[..., None]) -> None:
    """(f) Decisions that name the round version they were made on against decisions that
    do not, each on a GameLedger and table of its own, a round of each in turn so the drift
    of the commit latency hits both alike."""
    variants: tuple[tuple[str, bool], ...] = (
        ("naming the version shown (as (b))", True),
        ("not naming it: round read first", False),
    )
    apps = [new_ledger(db) for _ in variants]
    try:
        drivers = [Driver(app, f"what-if{i}") for i, app in enumerate(apps)]
        for d, (_, name_version) in zip(drivers, variants, strict=True):
            d.name_version = name_version
        for d in drivers:
            play(d, args.warmup, "(f) warm-up")
        timings = [Timings() for _ in drivers]
        interleaved: list[float] = []
        step = max(args.what_if // 5, 1)
        for r in range(args.what_if):
            for d, t in zip(drivers, timings, strict=True):
                d.play_round(t)
            interleaved += raw.run(per_round)
            if (r + 1) % step == 0:
                progress(f"(f): {r + 1:,}/{args.what_if:,} rounds per variant")
    finally:
        for app in apps:
            app.close()
    a = summary(interleaved)
    out("")
    out(f"(f) what if: decisions naming the round version against not naming it "
        f"({args.what_if} rounds each, a round of each in turn; a separate GameLedger each, "
        "same database)")
    for (label, _), t in zip(variants, timings, strict=True):
        n, s = t.total(DECISIONS)
        out(f"    {label:<38} {n / s:7,.0f} decisions/s (mean {s / n * 1e3:.3f} ms), "
            f"(b)/(a) {n / s / a['rate']:.2f}")
    out(f"    (a) during: {a['rate']:,.0f} rows/s (p50 {a['p50_ms']:.3f} ms)")


QUICK_LOOK = ("--rounds", "4", "--inserts", "20", "--warmup", "1", "--replays", "2",
              "--profile-rounds", "2", "--write-path", "10", "--what-if", "2", "--idle-gap", "5")


def main() -> None:
    parser = arguments(__doc__, QUICK_LOOK)
    parser.add_argument("--rounds", type=int, default=300, help="timed rounds for (b) and (c)")
    parser.add_argument("--inserts", type=int, default=3000,
                        help="raw INSERT transactions in each (a) measurement: before, "
                        "during, after")
    parser.add_argument("--warmup", type=int, default=20, help="untimed rounds first")
    parser.add_argument("--replays", type=int, default=200, help="rounds replayed for (d)")
    parser.add_argument("--profile-rounds", type=int, default=60,
                        help="instrumented rounds for (e)")
    parser.add_argument("--write-path", type=int, default=300, metavar="N",
                        help="transactions per write-path variant for (e)")
    parser.add_argument("--what-if", type=int, default=60, metavar="ROUNDS",
                        help="rounds per variant for (f), naming the version and not; "
                        "0 skips it")
    parser.add_argument("--idle-gap", type=int, default=300, metavar="N",
                        help="raw inserts per idle gap for (g)")
    args = parser.parse_args()
    if args.rounds < 1 or args.inserts < 1:
        parser.error("--rounds and --inserts must be at least 1")
    args.replays = max(1, min(args.replays, args.rounds + args.warmup))
    run(args)


if __name__ == "__main__":
    main()

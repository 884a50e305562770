"""Projection benchmark: catch-up over a large stored log, and lag under maximum write load.

One run, synchronous_commit as the server has it (on by default):

1. **Log.** A sample of rounds is played through GameLedger (basic strategy, three players a
   table, a few voids, rulings and cash-outs), then copied with fresh ids (every aggregate id,
   in the rows and inside the JSON) and times shifted an hour per copy, straight into the
   event table (COPY, under the ledger's append lock, each row chained), until the
   log holds ``--events`` events. Generation time is not a measured figure.
2. **Baselines**, over the whole log, in pages of ``--batch``: reading the notifications
   (``select_notifications``) only, then reading and decoding every one of them
   (``mapper.to_domain_event``).
3. **Catch-up per projection**: each projection alone from event 0 into fresh tables, in
   batches of ``--batch`` (one transaction per batch), then all three together (one read
   shared). Events per second = log events passed / seconds; and against the baselines.
4. **Library runner** (one transaction per event), balances, for ``--stock-seconds``.
5. **Check**: every projected balance against its aggregate (``ReadModels.check_balances``).
6. **Searches**: ``--search-rounds`` synthetic rounds loaded straight into a round index of
   their own; each search shape's first page and the next 20 pages by cursor, timed.
7. **Lag under load**: the worker (``run_worker``, in its own process, as ``pitboss project``
   runs it) follows the log while ``--writers`` processes play rounds flat out for
   ``--lag-seconds``. Every 20 ms the head id is sampled; its lag is the time until every
   projection's tracking row has passed it.

The database is a fresh embedded PostgreSQL in a temporary folder (stopped and removed at the
end), or ``DATABASE_URL`` when set (then in a temporary schema, dropped at the end).

    python -m bench.projections                      # 1,000,000 events
    python -m bench.projections --events 200000 --lag-seconds 10
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import logging
import multiprocessing
import re
import signal
import threading
import time
import uuid
from collections import Counter, deque
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.projection import ProjectionRunner
from psycopg import sql

from bench.common import Database, arguments, database, progress, quantile, server_facts
from ledger.application import GameLedger
from ledger.plays import Play
from ledger.rules import CASINO, CASINO_WILD, TableLimits
from ledger.sealing import ShoeSealer
from ledger.storage import GENESIS, append_lock_key, link
from ledger.strategy import basic_strategy
from projections.balances import BalancesProjection, BalancesView
from projections.base import NEXT
from projections.engine import NAMES, Engine, Reader
from projections.queries import ReadModels
from projections.worker import run_worker

UUID_HEX = re.compile(r'"_type_":"uuid_hex","_data_":"([0-9a-f]{32})"')
UUID_DASHED = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
DATETIME = re.compile(r'"_type_":"datetime_iso","_data_":"([^"]+)"')
COPY_ROWS = 50_000
SAMPLE_INTERVAL_S = 0.02
SERVER_SETTINGS = ("server_version", "synchronous_commit", "fsync", "wal_sync_method")


# --------------------------------------------------------------------------- playing


class Table:
    """A table with three funded players who play basic strategy."""

    def __init__(self, app: GameLedger, tag: str, rules: Any = CASINO) -> None:
        self.app = app
        self.tag = tag
        self._ids = itertools.count(1)
        self.players = [f"{tag}-P{box}" for box in (1, 2, 3)]
        self.table_id = app.open_table(self.rid(), "boss", f"{tag}-table", rules,
                                       TableLimits(table_max=10_000))
        for player in self.players:
            app.open_account(self.rid(), "cashier", player)
            app.buy_in(self.rid(), "cashier", player, 100_000_000)

    def rid(self) -> str:
        return f"{self.tag}-{next(self._ids)}"

    def play_round(self, n: int) -> None:
        app = self.app
        r = app.start_round(self.rid(), "dealer", self.table_id)
        for box, player in enumerate(self.players, 1):
            app.place_stake(self.rid(), "dealer", r, player, box, 100)
        if n % 40 == 39:
            app.void(self.rid(), "manager", r, "wrong limits")
            return
        app.deal(self.rid(), "dealer", r)
        while True:
            m: Any = app.repository.get(r).machine
            turn = m.turn()
            if turn is None:
                break
            box, hand = turn
            owner = self.players[box - 1]
            cards = m.boxes[box].hands[hand].cards
            play = basic_strategy(cards, m.upcard or cards[0], m.legal_plays(box, hand))
            if play is Play.SURRENDER:
                app.surrender(self.rid(), "dealer", r, owner, box)
            else:
                getattr(app, play.value)(self.rid(), "dealer", r, owner, box, hand)
        if m.phase == "playing":
            app.play_dealer(self.rid(), "dealer", r)
            app.settle(self.rid(), "dealer", r)
            if n % 25 == 24:
                app.record_ruling(self.rid(), "manager", r, "paid short", [2],
                                  {self.players[0]: 10})
        if n % 10 == 9:
            app.cash_out(self.rid(), "cashier", self.players[1], 50)


def play_sample(env: dict[str, str], rounds: int) -> int:
    app = GameLedger(env=env, shoe_key=ShoeSealer.new_key())
    try:
        tables = [Table(app, "S1", CASINO), Table(app, "S2", CASINO_WILD),
                  Table(app, "S3", CASINO)]
        for n in range(rounds):
            tables[n % 3].play_round(n // 3)
        return app.recorder.max_notification_id() or 0
    finally:
        app.close()


def writer_main(env: dict[str, str], tag: str, seconds: float, started: Any,
                counts: Any, index: int) -> None:
    """A writer process: plays rounds flat out until the deadline."""
    app = GameLedger(env=env, shoe_key=ShoeSealer.new_key())
    table = Table(app, tag, CASINO_WILD)
    started.wait()
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        table.play_round(n)
        n += 1
    counts[index] = n
    app.close()


def worker_main(env: dict[str, str], batch_size: int) -> None:
    """The projection worker as ``pitboss project`` runs it: SIGTERM stops it cleanly."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    logging.basicConfig(level=logging.WARNING)
    run_worker(env, stop, batch_size=batch_size, poll_interval_s=0.5,
               log=logging.getLogger("pitboss.projections"))


# --------------------------------------------------------------------------- copying the log


def copy_log(db: Database, sample_head: int, target: int) -> int:
    """Copy the sample's events with fresh ids until the log holds ``target`` events."""
    with db.connect() as conn:
        rows = conn.execute("SELECT originator_id, originator_version, topic, state "
                            "FROM ledger_events ORDER BY notification_id").fetchall()
    ids = {row[0].hex for row in rows}
    texts = [bytes(row[3]).decode() for row in rows]
    for text in texts:
        ids.update(UUID_HEX.findall(text))
        ids.update(UUID(u).hex for u in UUID_DASHED.findall(text))
    copies = max(0, -(-(target - sample_head) // len(rows)))
    progress(f"copying {len(rows)} sample events {copies} times ({len(ids)} ids remapped)")
    inserted = 0
    buffer: list[tuple[UUID, int, str, bytes]] = []
    lock_key = append_lock_key(db.schema, "ledger_events")
    with db.connect() as conn:
        for k in range(1, copies + 1):
            mapping = {u: uuid.uuid5(UUID(u), f"copy-{k}").hex for u in ids}
            shift = timedelta(hours=k)
            for row, text in zip(rows, texts, strict=True):
                state = _rewrite(text, mapping, shift)
                buffer.append((UUID(mapping[row[0].hex]), row[1], row[2], state.encode()))
                if len(buffer) >= COPY_ROWS or sample_head + inserted + len(buffer) >= target:
                    inserted += _copy(conn, buffer, lock_key)
                    buffer = []
                    if sample_head + inserted >= target:
                        return sample_head + inserted
            if k % 20 == 0:
                progress(f"copy {k}/{copies}: {sample_head + inserted + len(buffer)} events")
        inserted += _copy(conn, buffer, lock_key)
    return sample_head + inserted


def _rewrite(text: str, mapping: dict[str, str], shift: timedelta) -> str:
    text = UUID_HEX.sub(lambda m: f'"_type_":"uuid_hex","_data_":"{mapping[m[1]]}"', text)
    text = UUID_DASHED.sub(lambda m: str(UUID(mapping.get(UUID(m[0]).hex, UUID(m[0]).hex))),
                           text)
    return DATETIME.sub(lambda m: '"_type_":"datetime_iso","_data_":"'
                        f'{(datetime.fromisoformat(m[1]) + shift).isoformat()}"', text)


def _copy(conn: psycopg.Connection[Any], rows: list[tuple[UUID, int, str, bytes]],
          lock_key: int) -> int:
    """Append ``rows`` as the ledger's insert function would: under its append lock, each row
    chained to the one before (ledger.storage)."""
    if not rows:
        return 0
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        head = conn.execute("SELECT chain_hash FROM ledger_events "
                            "ORDER BY notification_id DESC LIMIT 1").fetchone()
        previous = bytes(head[0]) if head is not None else GENESIS
        with conn.cursor().copy("COPY ledger_events (originator_id, originator_version, topic, "
                                "state, chain_hash) FROM STDIN") as copy:
            for originator_id, version, topic, state in rows:
                previous = link(previous, originator_id, version, topic, state)
                copy.write_row((originator_id, version, topic, state, previous))
    return len(rows)


# --------------------------------------------------------------------------- measuring


def rate(events: int, seconds: float) -> str:
    return f"{events / seconds:>10,.0f} events/s  ({events:,} in {seconds:6.1f} s)"


def read_baseline(env: dict[str, str], batch: int, decode: bool) -> tuple[int, float]:
    reader = Reader(env)
    try:
        start, n = 0, 0
        t0 = time.perf_counter()
        while True:
            page = reader.page(start, batch)
            if not page:
                break
            if decode:
                for notification in page:
                    reader.decode(notification)
            n += len(page)
            start = page[-1].id
        return n, time.perf_counter() - t0
    finally:
        reader.close()


def catch_up(env: dict[str, str], names: tuple[str, ...], batch: int, generation: str,
             reader: Reader) -> tuple[int, float]:
    with Engine(env, names=names, generation=generation, fresh=True, reader=reader) as e:
        t0 = time.perf_counter()
        n = e.catch_up(batch)
        seconds = time.perf_counter() - t0
        if generation == NEXT:
            for projection in e.projections:
                projection.view.drop()
    return n, seconds


def stock_runner(db: Database, env: dict[str, str], seconds: float) -> tuple[int, int, float]:
    """The library's ProjectionRunner on balances: log ids passed and events applied."""
    with db.connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS " + ", ".join(
            f"{BalancesView.base}_{part}" for part in ("tracking", *BalancesView.parts)))
    t0 = time.perf_counter()
    runner: ProjectionRunner[GameLedger, Any] = ProjectionRunner(
        application_class=GameLedger, projection_class=BalancesProjection,
        view_class=BalancesProjection.view_class, env=env)
    with runner:
        time.sleep(seconds)
        position = runner.view.max_tracking_id("Ledger") or 0
        elapsed = time.perf_counter() - t0
    with db.connect(autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM ledger_events WHERE notification_id <= %s "
                           "AND topic = ANY(%s)",
                           (position, list(BalancesProjection.topics))).fetchone()
    return position, int(row[0]) if row else 0, elapsed


def lag_under_load(db: Database, env: dict[str, str], writers: int, seconds: float,
                   batch: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    worker = ctx.Process(target=worker_main, args=(env, batch))
    worker.start()
    started = ctx.Event()
    counts = ctx.Array("i", writers)
    procs = [ctx.Process(target=writer_main, args=(env, f"W{i}-{uuid.uuid4().hex[:6]}",
                                                   seconds, started, counts, i))
             for i in range(writers)]
    for proc in procs:
        proc.start()
    time.sleep(3.0)  # writers open their tables; the worker starts and catches up
    lags: list[float] = []
    behind: list[int] = []
    pending: deque[tuple[int, float]] = deque()
    with db.connect(autocommit=True) as conn:
        head0 = _head(conn)
        started.set()
        t_start = time.monotonic()
        while any(p.is_alive() for p in procs) or pending:
            now = time.monotonic()
            head = _head(conn)
            pending.append((head, now))
            position = min(_positions(conn))
            while pending and pending[0][0] <= position:
                lags.append(now - pending.popleft()[1])
            behind.append(head - position)
            if now - t_start > seconds + 30:
                break
            time.sleep(SAMPLE_INTERVAL_S)
        written = _head(conn) - head0
        elapsed = time.monotonic() - t_start
    for proc in procs:
        proc.join(timeout=30)
    worker.terminate()  # SIGTERM: the worker stops cleanly
    worker.join(timeout=30)
    return {"writers": writers, "rounds": sum(counts[:]), "events": written,
            "write_rate": written / elapsed, "samples": len(lags),
            "lag_p50": quantile(lags, 0.5) if lags else float("nan"),
            "lag_p99": quantile(lags, 0.99) if lags else float("nan"),
            "lag_max": max(lags, default=float("nan")),
            "behind_max": max(behind, default=0),
            "worker_exit": worker.exitcode}


def _head(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT coalesce(max(notification_id), 0) FROM ledger_events").fetchone()
    return int(row[0]) if row else 0


def _positions(conn: psycopg.Connection[Any]) -> list[int]:
    out = []
    for name in NAMES:
        row = conn.execute(sql.SQL("SELECT notification_id FROM {} WHERE application_name = "
                                   "'Ledger'").format(sql.Identifier(f"{name}_tracking"))
                           ).fetchone()
        out.append(int(row[0]) if row else 0)
    return out


# --------------------------------------------------------------------------- searches


SEARCH_TABLES = 200
SEARCH_PLAYERS = 5000


def load_search_rounds(db: Database, rounds: int) -> dict[str, str]:
    """A schema of its own whose round index holds ``rounds`` synthetic rounds: 200 tables,
    5000 players (three a round), a round every 3 s; 1 in 31 with a wild card, 1 in 997 with
    a prize, 1 in 4999 with a ruling, 1 in 1000 voided, the last 200 open."""
    schema = f"{db.schema}_search" if db.schema != "public" else "search"
    with db.connect(autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0}").format(
            sql.Identifier(schema)))
    env = {**db.env(), "POSTGRES_SCHEMA": schema}
    ReadModels(env).close()
    with db.connect(autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("INSERT INTO round_index_tables SELECT md5('t' || i)::uuid, 'T' || i "
                     "FROM generate_series(0, %s::int) AS i", (SEARCH_TABLES - 1,))
        step = 500_000
        for low in range(1, rounds + 1, step):
            high = min(low + step - 1, rounds)
            conn.execute("""
                INSERT INTO round_index_rounds (round_id, table_id, round_no, started_at,
                    ended_at, rules_hash, rules_name, rules_version, currency, status, players,
                    total_staked, total_paid, house_result, held, wild_card, prize, ruling,
                    version, last_notification_id)
                SELECT md5('r' || i)::uuid, md5('t' || (i %% %(tables)s))::uuid,
                       i / %(tables)s + 1, at, CASE WHEN open THEN NULL ELSE at + interval '90 s'
                       END, 'hash', 'casino', 1, 'EUR',
                       CASE WHEN open THEN 'open' WHEN i %% 1000 = 0 THEN 'voided'
                            ELSE 'settled' END,
                       ARRAY['P' || (i %% %(players)s), 'P' || ((i * 7 + 1) %% %(players)s),
                             'P' || ((i * 13 + 2) %% %(players)s)],
                       300, CASE WHEN i %% 1000 = 0 THEN 300 ELSE 300 - (i %% 7) * 50 + 150 END,
                       CASE WHEN i %% 1000 = 0 THEN 0 ELSE (i %% 7) * 50 - 150 END, 0,
                       i %% 31 = 0, i %% 997 = 0, i %% 4999 = 0, 30, i
                FROM (SELECT i, timestamptz '2024-01-01 00:00Z' + i * interval '3 s' AS at,
                             i > %(rounds)s - 200 AS open
                      FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS i) AS g""",
                         {"tables": SEARCH_TABLES, "players": SEARCH_PLAYERS, "rounds": rounds,
                          "low": low, "high": high})
            conn.execute("INSERT INTO round_index_players SELECT DISTINCT p, r.started_at, "
                         "r.round_id, r.table_id FROM round_index_rounds AS r, unnest(r.players) "
                         "AS p WHERE r.last_notification_id BETWEEN %s AND %s", (low, high))
            progress(f"search rounds: {high:,} of {rounds:,}")
        conn.execute("VACUUM ANALYZE round_index_rounds")
        conn.execute("VACUUM ANALYZE round_index_players")
    return env


def search_latencies(env: dict[str, str], rounds: int) -> list[tuple[str, float, float, int]]:
    """Each search shape: first page (median of 5, ms), 20 pages on by cursor (ms), rows."""
    table = uuid.UUID(bytes=bytes.fromhex(_md5("t7")))
    middle = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=3 * rounds // 2)
    day = {"started_from": middle, "started_to": middle + timedelta(days=1)}
    shapes: list[tuple[str, dict[str, Any]]] = [
        ("all rounds", {}),
        ("one table", {"table_id": table}),
        ("one player", {"player": "P42"}),
        ("open", {"status": "open"}),
        ("voided", {"status": "voided"}),
        ("settled", {"status": "settled"}),
        ("wild card", {"wild_card": True}),
        ("prize", {"prize": True}),
        ("ruling", {"ruling": True}),
        ("one day", day),
        ("table + day", {"table_id": table, **day}),
        ("player + settled", {"player": "P42", "status": "settled"}),
        ("player + wild card", {"player": "P42", "wild_card": True}),
        ("table + prize", {"table_id": table, "prize": True}),
        ("no wild card, settled", {"wild_card": False, "status": "settled"}),
    ]
    reads = ReadModels(env)
    out = []
    try:
        for label, filters in shapes:
            firsts = []
            for _ in range(5):
                t0 = time.perf_counter()
                page = reads.search_rounds(limit=50, **filters)
                firsts.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rows = len(page["items"])
            for _ in range(20):
                if page["next_cursor"] is None:
                    break
                page = reads.search_rounds(limit=50, cursor=page["next_cursor"], **filters)
                rows += len(page["items"])
            out.append((label, quantile(firsts, 0.5) * 1000,
                        (time.perf_counter() - t0) * 1000, rows))
    finally:
        reads.close()
    return out


def _md5(text: str) -> str:
    """The id SQL's ``md5(text)::uuid`` made (an id, not a secret)."""
    return hashlib.md5(text.encode()).hexdigest()


# --------------------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> None:
    with database("pb-proj-") as db:
        env = db.env()
        print(f"database: {db.where}")
        facts = server_facts(db, SERVER_SETTINGS)
        print(f"server: {', '.join(f'{name}={value}' for name, value in facts.items())}")
        t0 = time.perf_counter()
        sample_head = play_sample(env, args.sample_rounds)
        progress(f"sample: {args.sample_rounds} rounds, {sample_head} events in "
                 f"{time.perf_counter() - t0:.1f} s")
        total = copy_log(db, sample_head, args.events) if args.events > sample_head \
            else sample_head
        with db.connect(autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE ledger_events")
            topics = Counter(dict(conn.execute(
                "SELECT topic, count(*) FROM ledger_events GROUP BY topic").fetchall()))
        progress(f"log ready: {total:,} events in {time.perf_counter() - t0:.0f} s")
        print(f"log: {total:,} events ({args.sample_rounds} sample rounds copied); "
              f"account events {sum(n for t, n in topics.items() if 'Account.' in t):,}, "
              f"round events {sum(n for t, n in topics.items() if 'Round.' in t):,}")
        print(f"batches of {args.batch} notifications, one transaction per projection and batch")
        print()
        read_n, read_s = read_baseline(env, args.batch, decode=False)
        print(f"read only (select_notifications)   {rate(read_n, read_s)}")
        dec_n, dec_s = read_baseline(env, args.batch, decode=True)
        decode_rate = dec_n / dec_s
        print(f"read + decode every event          {rate(dec_n, dec_s)}")
        reader = Reader(env)
        try:
            for name in NAMES:
                n, s = catch_up(env, (name,), args.batch, NEXT, reader)
                print(f"catch-up {name:<26}{rate(n, s)}  = {n / s / decode_rate:4.2f}x "
                      "read + decode")
            n, s = catch_up(env, NAMES, args.batch, "", reader)
            print(f"catch-up all three together       {rate(n, s)}  = "
                  f"{n / s / decode_rate:4.2f}x read + decode")
        finally:
            reader.close()
        if args.stock_seconds > 0:
            position, applied, s = stock_runner(db, env, args.stock_seconds)
            print(f"library runner, balances, 1 commit per event: {applied / s:,.0f} account "
                  f"events/s applied ({position / s:,.0f} log ids/s passed, {s:.0f} s)")
            with Engine(env, names=("balances",), fresh=True) as e:
                e.catch_up(args.batch)  # the batched view again, for the check and the lag
        if args.check:
            t1 = time.perf_counter()
            reads = ReadModels(env)
            ledger = GameLedger(env=env)
            try:
                findings = reads.check_balances(ledger)["findings"]
                accounts = len(reads.balances(limit=500)["items"])
            finally:
                ledger.close()
                reads.close()
            print(f"check_balances: {len(findings)} findings over every account "
                  f"({time.perf_counter() - t1:.1f} s){'' if not findings else ': ' + findings[0]}")
            assert accounts > 0
        print()
        if args.search_rounds > 0:
            t1 = time.perf_counter()
            search_env = load_search_rounds(db, args.search_rounds)
            progress(f"search rounds loaded in {time.perf_counter() - t1:.0f} s")
            print(f"round index searches over {args.search_rounds:,} rounds ({SEARCH_TABLES} "
                  f"tables, {SEARCH_PLAYERS} players), 50 a page:")
            for label, first_ms, pages_ms, rows in search_latencies(search_env,
                                                                     args.search_rounds):
                print(f"  {label:<24} first page {first_ms:7.1f} ms; next 20 pages "
                      f"{pages_ms:7.1f} ms ({rows} rows)")
            print()
        lag = lag_under_load(db, env, args.writers, args.lag_seconds, args.batch)
        print(f"lag under load: {lag['writers']} writer processes playing flat out for "
              f"{args.lag_seconds:.0f} s: {lag['rounds']} rounds, {lag['events']:,} events "
              f"({lag['write_rate']:,.0f} events/s written)")
        print(f"  lag (head seen -> every projection past it), {lag['samples']} samples: "
              f"p50 {lag['lag_p50'] * 1000:.0f} ms, p99 {lag['lag_p99'] * 1000:.0f} ms, "
              f"max {lag['lag_max'] * 1000:.0f} ms; most events behind at a sample: "
              f"{lag['behind_max']}; worker exit code {lag['worker_exit']} (SIGTERM)")


QUICK_LOOK = ("--events", "3000", "--sample-rounds", "5", "--stock-seconds", "1",
              "--lag-seconds", "1", "--writers", "1", "--search-rounds", "2000")


def main() -> None:
    parser = arguments(__doc__, QUICK_LOOK)
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="events in the stored log the projections catch up over ")
    parser.add_argument("--sample-rounds", type=int, default=90,
                        help="rounds played through the ledger, then copied to fill the log ")
    parser.add_argument("--batch", type=int, default=1000,
                        help="events per transaction")
    parser.add_argument("--stock-seconds", type=float, default=10.0,
                        help="seconds of the library's one-event-at-a-time runner ")
    parser.add_argument("--lag-seconds", type=float, default=20.0,
                        help="seconds of writing flat out while the lag is sampled ")
    parser.add_argument("--writers", type=int, default=2,
                        help="writer processes during the lag measurement")
    parser.add_argument("--search-rounds", type=int, default=2_000_000,
                        help="synthetic rounds in the round index searched (0: no searches) ")
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="skip the balance check")
    run(parser.parse_args())


if __name__ == "__main__":
    main()

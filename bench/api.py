"""API benchmark: player decisions through gunicorn against the same calls on GameLedger.

One run, on a fresh embedded PostgreSQL (or ``DATABASE_URL``, in a temporary schema):

(a) player decisions (hit, stand, double, split, surrender) per second and their latency
    p50/p99, with 1, 4 and 16 concurrent table terminals, each terminal its own table with
    three basic-strategy players; through HTTP (``pitboss serve``: gunicorn, threaded workers,
    each terminal on one kept-alive connection) and
    directly on a GameLedger in this process (one thread per terminal). Both name the round
    version they decided on (``If-Match``, ``expected=``), and a decision over HTTP answers
    with the round right after it, so the direct figure is the same work: the use case, then
    ``round_state`` at the version it returned. Latency is measured by the terminal (client
    side). For each level the report also splits an HTTP decision's mean into its time inside
    the app (Server-Timing) and the rest; at 1 terminal it runs the direct side again, idle
    before each decision as long as an HTTP decision takes beyond a direct one; and it ends
    with the verdict on the 1-terminal figures.
(b) a settled round's frame-by-frame replay: ``GET /audit/rounds/<id>/replay`` against
    ``GameLedger.replay`` on the same rounds, p50/p99;
(c) the HTTP layer alone: a decision request through the app in this process, with a
    ledger that answers at once (what the layer itself costs, whatever the machine's load);
(d) the floor under the app: the same request answered at once with canned bytes of a
    decision answer's size by a plain socket server in another process (on a new connection
    per request, as a client without keep-alive would, and on one kept alive), and by
    gunicorn as ``pitboss serve`` runs it on a WSGI app that answers at once; back to back
    and after the idle pause an HTTP decision leaves between two requests.

The HTTP layer should cost at most half again the direct call: (a) prints http/direct for the
p50, the mean and the throughput at each level, and (b) for the replay's p50. At 1 terminal
the comparison is like for like; at 4 and 16 the HTTP side runs in several worker processes
and the direct side in threads of one (the GIL), so there it is a comparison of deployments,
not of layers.

    python -m bench.api                       # about 2 minutes
    python -m bench.api --seconds 5 --workers 4 --threads 2 --terminals 1 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from api.auth import append_key, hash_key, new_key
from api.client import Client
from api.database import parse_database_url
from api.simulate import BUY_IN, PATHS, PLAYERS_PER_TABLE, STAKES, TablePlay, next_decision
from api.tables import COMMANDS
from bench.common import (
    DECISIONS,
    Database,
    arguments,
    database,
    load_average,
    progress,
    quantile,
)
from ledger.application import GameLedger
from ledger.rules import TableLimits, preset
from ledger.sealing import ShoeSealer

# The direct side plays the rounds TablePlay plays over HTTP: tables of this preset with its
# default limits, PLAYERS_PER_TABLE players bought in for BUY_IN, stakes drawn from STAKES, the
# dealer key's holder as the actor of every step.
PRESET = "casino"
KEY_NAMES = {role: f"bench-{role}" for role in ("dealer", "cashier", "auditor")}
# Each HTTP path's use case, as its view runs it.
_RUN_BY_PATH = {path.removeprefix("/"): run for _, path, _, run, _ in COMMANDS}


# --------------------------------------------------------------------------- the server


@dataclass
class Server:
    url: str
    keys: dict[str, str]


@contextlib.contextmanager
def server(db: Database, workers: int, threads: int, folder: str) -> Iterator[Server]:
    """``pitboss serve`` (gunicorn) on a free port, with one key per role."""
    keys_file = os.path.join(folder, "keys.jsonl")
    keys = {role: append_key(Path(keys_file), name, role) for role, name in KEY_NAMES.items()}
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": db.settings.url(), "PORT": str(port),
           "WEB_CONCURRENCY": str(workers), "PITBOSS_THREADS": str(threads),
           "PITBOSS_KEYS_FILE": keys_file,
           "PITBOSS_SHOE_KEY": ShoeSealer.new_key().hex(), "PITBOSS_LOG_LEVEL": "WARNING",
           # The access lines are built as served and written to /dev/null.
           "GUNICORN_CMD_ARGS": "--access-logfile=/dev/null"}
    if db.schema != "public":
        env["POSTGRES_SCHEMA"] = db.schema
    log = open(os.path.join(folder, "server.log"), "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen([sys.executable, "-m", "api.cli", "serve"], env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(url, process, folder)
        yield Server(url, keys)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _wait_for(url: str, process: subprocess.Popen[bytes], folder: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(os.path.join(folder, "server.log")) as log:
                raise RuntimeError(f"the server did not start:\n{log.read()[-2000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/healthz",
                                                                  timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError("the server did not answer /healthz within 60 s")


# --------------------------------------------------------------------------- terminals


@dataclass
class Samples:
    latencies: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)  # the app's own time (HTTP only)
    rounds: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, decision: str, seconds: float, server_ms: float | None = None) -> None:
        if decision in DECISIONS:
            with self.lock:
                self.latencies.append(seconds)
                if server_ms is not None:
                    self.server_ms.append(server_ms)

    def clear(self) -> None:
        self.latencies.clear()
        self.server_ms.clear()
        self.rounds = 0
        self.seconds = 0.0


class HttpTerminal:
    """A table played over HTTP (the same code as ``pitboss simulate``)."""

    def __init__(self, srv: Server, tag: str, samples: Samples, seed: int | None = None) -> None:
        self.samples = samples
        dealer = Client(srv.url, srv.keys["dealer"])
        self.table = TablePlay(dealer, Client(srv.url, srv.keys["cashier"]), PRESET,
                               name=f"http-{tag}", seed=seed, on_decision=self._record)
        self._dealer = dealer
        self.table.open()

    def _record(self, decision: str, seconds: float) -> None:
        self.samples.add(decision, seconds, self._dealer.last_server_ms)

    def play_round(self) -> None:
        self.table.play_round()

    def rounds(self) -> list[str]:
        return self.table.rounds

    def close(self) -> None:
        self.table.dealer.close()
        self.table.cashier.close()


class DirectTerminal:
    """An HttpTerminal's table, players, buy-ins, stakes and rounds, played on GameLedger: each
    step runs the use case of its HTTP view (api.tables), then round_state at the version the
    use case returned, as the view answers."""

    def __init__(self, ledger: GameLedger, tag: str, samples: Samples,
                 seed: int | None = None) -> None:
        self.ledger = ledger
        self.samples = samples
        self._random = random.Random(seed)  # the stakes, drawn as TablePlay draws them
        self.players = [f"direct-{tag}-P{n}" for n in range(1, PLAYERS_PER_TABLE + 1)]
        self.table = ledger.open_table(self.rid(), KEY_NAMES["dealer"], f"direct-{tag}",
                                       preset(PRESET), TableLimits())
        for player in self.players:
            ledger.open_account(self.rid(), KEY_NAMES["cashier"], player)
            ledger.buy_in(self.rid(), KEY_NAMES["cashier"], player, BUY_IN)
        self.pause_s = 0.0  # idle time before each decision (not timed)

    @staticmethod
    def rid() -> str:
        return str(uuid.uuid4())  # as the pitboss client makes an Idempotency-Key

    def play_round(self) -> None:
        round_id = self.ledger.start_round(self.rid(), KEY_NAMES["dealer"], self.table)
        state = self.ledger.round_state(round_id, 1)
        for box, player in enumerate(self.players, 1):
            amount = self._random.choice(STAKES)
            state = self._decide(round_id, state, "stakes",
                                 {"bettor": player, "box": box, "amount": amount})
        while state["phase"] not in ("settled", "voided"):
            decision, body = next_decision(state)
            if self.pause_s:
                time.sleep(self.pause_s)
            state = self._decide(round_id, state, PATHS[decision], body)

    def _decide(self, round_id: UUID, state: dict[str, Any], path: str,
                body: dict[str, Any] | None) -> dict[str, Any]:
        """What ``POST /rounds/<round_id>/<path>`` does for a decision made on ``state``
        (If-Match: its version); the round after it."""
        started = time.perf_counter()
        result = _RUN_BY_PATH[path](self.ledger, self.rid(), KEY_NAMES["dealer"], round_id,
                                    body or {}, state["version"])
        after = self.ledger.round_state(round_id, result["version"])
        self.samples.add(path, time.perf_counter() - started)
        return after


Terminal = HttpTerminal | DirectTerminal


def play_for(terminals: list[Terminal], samples: Samples, seconds: float) -> None:
    """Every terminal plays rounds in a thread of its own for ``seconds``."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def play(terminal: Terminal) -> None:
        try:
            while not stop.is_set():
                terminal.play_round()
                with samples.lock:
                    samples.rounds += 1
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=play, args=(t,)) for t in terminals]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    samples.seconds += time.perf_counter() - started
    if errors:
        raise errors[0]


def run_level(sides: dict[str, list[Terminal]], samples: dict[str, Samples], seconds: float,
              slices: int) -> None:
    """The sides take turns, ``slices`` times, so a drift of the machine hits both alike."""
    for side, terminals in sides.items():  # warm up: a round each, not sampled
        play_for(terminals, samples[side], 0)
        samples[side].clear()
    for _ in range(slices):
        for side, terminals in sides.items():
            play_for(terminals, samples[side], seconds / slices)


def figures(samples: Samples) -> dict[str, float]:
    lat = samples.latencies
    server = samples.server_ms
    return {"n": len(lat), "rate": len(lat) / samples.seconds, "p50": quantile(lat, 0.5) * 1e3,
            "p99": quantile(lat, 0.99) * 1e3, "mean": sum(lat) / len(lat) * 1e3,
            "rounds": samples.rounds,
            "server": sum(server) / len(server) if server else float("nan")}


# --------------------------------------------------------------------------- main


QUICK_LOOK = ("--seconds", "0.5", "--terminals", "1", "--workers", "1", "--threads", "2",
              "--replays", "2", "--slices", "1")


def main() -> None:
    parser = arguments(__doc__, QUICK_LOOK)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="timed seconds per concurrency level and side")
    parser.add_argument("--terminals", type=int, nargs="+", default=[1, 4, 16],
                        help="concurrent table terminals, one level each")
    parser.add_argument("--workers", type=int, default=2,
                        help="gunicorn worker processes, as pitboss serve runs")
    parser.add_argument("--threads", type=int, default=4,
                        help="request threads per worker, as pitboss serve runs")
    parser.add_argument("--replays", type=int, default=200, help="rounds replayed for (b)")
    parser.add_argument("--slices", type=int, default=5,
                        help="turns the two sides take within each level")
    args = parser.parse_args()
    with database("pb-api-") as db, tempfile.TemporaryDirectory(prefix="pb-api-") as folder:
        report(db, args, folder)


def report(db: Database, args: argparse.Namespace, folder: str) -> None:
    out = print
    out(f"database: {db.where}")
    out(f"machine: {os.cpu_count()} CPUs; load average at start {load_average()}")
    out(f"server: pitboss serve, gunicorn with {args.workers} workers of {args.threads} threads "
        "(threaded; each terminal keeps its connection, so it stays with one worker)")
    top = max(args.terminals)
    ledger = GameLedger(env=db.env(POSTGRES_POOL_SIZE=str(top + 2)),
                        shoe_key=ShoeSealer.new_key())
    one_http_ms = one_direct_ms = 0.0
    try:
        with server(db, args.workers, args.threads, folder) as srv:
            out(f"(a) player decisions, {args.seconds:g} s per level and side, "
                f"{PLAYERS_PER_TABLE} basic-strategy players per table")
            out(f"    {'terminals':>9}  {'side':<6} {'decisions/s':>11} {'p50 ms':>8} "
                f"{'p99 ms':>8} {'mean ms':>8} {'rounds':>7}   http/direct (time per decision)")
            http_rounds: list[str] = []
            for n in args.terminals:
                progress(f"(a) {n} terminal(s), over HTTP and directly, in turns")
                samples = {"http": Samples(), "direct": Samples()}
                # Terminal i of each side draws the same stakes.
                http = [HttpTerminal(srv, f"h{n}-{i}", samples["http"], seed=i)
                        for i in range(n)]
                sides: dict[str, list[Terminal]] = {
                    "http": list(http),
                    "direct": [DirectTerminal(ledger, f"d{n}-{i}", samples["direct"], seed=i)
                               for i in range(n)]}
                run_level(sides, samples, args.seconds, args.slices)
                h, d = figures(samples["http"]), figures(samples["direct"])
                for side, f in (("http", h), ("direct", d)):
                    ratio = ""
                    if side == "http":
                        ratio = (f"   p50 {h['p50'] / d['p50']:.2f}x, mean "
                                 f"{h['mean'] / d['mean']:.2f}x, throughput "
                                 f"{d['rate'] / h['rate']:.2f}x")
                    out(f"    {n:>9}  {side:<6} {f['rate']:>11,.0f} {f['p50']:>8.2f} "
                        f"{f['p99']:>8.2f} {f['mean']:>8.2f} {f['rounds']:>7,}{ratio}")
                out(f"    {'':>9}  of an HTTP decision's mean {h['mean']:.2f} ms, "
                    f"{h['server']:.2f} ms inside the app (Server-Timing), "
                    f"{h['mean'] - h['server']:.2f} ms in transport, gunicorn and the client")
                if n == 1:
                    paced(ledger, h, d, args.seconds, out)
                    one_http_ms, one_direct_ms = h["mean"], d["mean"]
                http_rounds += [r for t in http for r in t.rounds()]
                for t in http:
                    t.close()
            sample = http_rounds[-args.replays:]
            progress(f"(b) replaying {len(sample)} rounds")
            replay(srv, ledger, sample, out)
            layer_alone(ledger, out)
            transport_floor(out, pause_s=max(one_http_ms - one_direct_ms, 0.0) / 1e3,
                            threads=args.threads)
    finally:
        ledger.close()
    if 1 in args.terminals:
        verdict = "within" if one_http_ms <= 1.5 * one_direct_ms else "OVER"
        out(f"verdict: at 1 terminal an HTTP decision takes {one_http_ms / one_direct_ms:.2f}x "
            f"the direct call (mean), {verdict} the 1.5x budget")
    out(f"load average at end: {load_average()}")


def paced(ledger: GameLedger, h: dict[str, float], d: dict[str, float], seconds: float,
          out: Callable[..., None]) -> None:
    """The direct terminal again, idle before each decision as long as an HTTP decision takes
    beyond a direct one: PostgreSQL answers more slowly after an idle gap (even SELECT 1), so
    this is the direct call at the rhythm the HTTP side imposes on the database."""
    samples = Samples()
    desk = DirectTerminal(ledger, "paced", samples)
    desk.pause_s = max(h["mean"] - d["mean"], 0.0) / 1e3
    play_for([desk], samples, 0)
    samples.clear()
    play_for([desk], samples, seconds / 2)
    p = figures(samples)
    out(f"    {'':>9}  direct, idle {desk.pause_s * 1e3:.2f} ms before each decision: mean "
        f"{p['mean']:.2f} ms, p50 {p['p50']:.2f} ms (the database idles as between HTTP "
        f"decisions); http/paced mean {h['mean'] / p['mean']:.2f}x")


def layer_alone(ledger: GameLedger, out: Callable[..., None], n: int = 2000) -> None:
    """(c) The HTTP layer's own cost, in this process: a decision request through the app
    (Flask's test client: no socket, no gunicorn) with a ledger that answers at once."""
    from api.app import create_app
    from api.auth import ApiKey

    desk = DirectTerminal(ledger, "layer", Samples())
    round_id = ledger.start_round(desk.rid(), "bench", desk.table)
    for box, player in enumerate(desk.players, 1):
        ledger.place_stake(desk.rid(), "bench", round_id, player, box, 100)
    result = ledger.deal(desk.rid(), "bench", round_id)
    state = ledger.round_state(round_id)

    class Instant:
        def hit(self, *_: Any, **__: Any) -> dict[str, Any]:
            return result

        def round_state(self, *_: Any) -> dict[str, Any]:
            return state

        def repeated(self) -> bool:  # asked after each change (Idempotent-Replayed)
            return False

    key = new_key()
    app = create_app({"DATABASE": parse_database_url("postgresql://nobody@127.0.0.1:1/none"),
                      "API_KEYS": [ApiKey(name="bench", role="dealer", key_hash=hash_key(key))],
                      "SHOE_KEY": b"k" * 32, "LEDGER": Instant()})
    client = app.test_client()
    body = {"player": desk.players[0], "box": 1, "hand": 0}
    timings = []
    for i in range(n):
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": f"layer-{i}"}
        t0 = time.perf_counter()
        answer = client.post(f"/rounds/{round_id}/hit", json=body, headers=headers)
        answer.get_json()
        timings.append(time.perf_counter() - t0)
        if answer.status_code != 200:
            raise RuntimeError(answer.get_data(as_text=True))
    timings = timings[n // 10:]
    out(f"(c) the HTTP layer alone, in process (test client, a ledger that answers at once): "
        f"p50 {quantile(timings, 0.5) * 1e3:.2f} ms, mean {sum(timings) / len(timings) * 1e3:.2f}"
        f" ms per decision request (the last {len(timings)} of {n} requests: key check, "
        "Idempotency-Key, body schema, "
        "response schema, JSON both ways)")


_CANNED = json.dumps({"result": {}, "round": {"padding": "x" * 1800}}).encode()


def canned_answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """A WSGI app that answers every request at once with a decision answer's size."""
    environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(_CANNED)))])
    return [_CANNED]


def transport_floor(out: Callable[..., None], *, pause_s: float, threads: int,
                    n: int = 1000) -> None:
    """(d) A decision request through the pitboss client to servers that answer at once."""
    out(f"(d) the floor: a canned {len(_CANNED):,}-byte answer, {n} requests each through the "
        f"pitboss client, back to back and {pause_s * 1e3:.1f} ms apart (p50)")
    for label, serving in (("plain socket server, a new connection per request",
                            _socket_server(keep_alive=False)),
                           ("plain socket server, one connection kept alive",
                            _socket_server(keep_alive=True)),
                           ("gunicorn as pitboss serve runs it, on a WSGI app that answers at "
                            "once, kept alive", _gunicorn_server(threads))):
        with serving as url:
            client = Client(url, "bench")
            try:
                p50s = [_request_p50(client, pause, n) for pause in (0.0, pause_s)]
            finally:
                client.close()
        out(f"    {label}: {p50s[0]:.2f} ms and {p50s[1]:.2f} ms")


def _request_p50(client: Client, pause_s: float, n: int) -> float:
    timings = []
    for _ in range(n):
        if pause_s:
            time.sleep(pause_s)
        t0 = time.perf_counter()
        client.post("/rounds/r/hit", {"player": "P1", "box": 1, "hand": 0}, if_match=3)
        timings.append(time.perf_counter() - t0)
    return quantile(timings, 0.5) * 1e3


@contextlib.contextmanager
def _socket_server(*, keep_alive: bool) -> Iterator[str]:
    port = _free_port()
    code = f"from bench.api import answer_at_once; answer_at_once({port}, {keep_alive})"
    with _serving([sys.executable, "-c", code], port, os.environ) as url:
        yield url


@contextlib.contextmanager
def _gunicorn_server(threads: int) -> Iterator[str]:
    port = _free_port()
    config = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "deploy", "gunicorn.conf.py")
    argv = [sys.executable, "-m", "gunicorn", "--config", config, "--bind", f"127.0.0.1:{port}",
            "--workers", "1", "--threads", str(threads), "--access-logfile", "/dev/null",
            "bench.api:canned_answer"]
    env = {**os.environ, "PITBOSS_CREATE_TABLES": "no", "PITBOSS_LOG_LEVEL": "WARNING"}
    with _serving(argv, port, env) as url:
        yield url


@contextlib.contextmanager
def _serving(argv: list[str], port: int, env: Mapping[str, str]) -> Iterator[str]:
    """A server process on ``port``, once it accepts connections; stopped afterwards."""
    process = subprocess.Popen(argv, env=dict(env), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[1:3]} did not start on port {port}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def answer_at_once(port: int, keep_alive: bool) -> None:
    """A plain socket server on ``port`` that answers every request with the canned bytes."""
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              + (b"" if keep_alive else b"Connection: close\r\n")
              + f"Content-Length: {len(_CANNED)}\r\n\r\n".encode() + _CANNED)
    listener = socket.create_server(("127.0.0.1", port))
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn, conn.makefile("rb") as reader:
            while True:
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if not line:
                    break
                reader.read(length)
                conn.sendall(answer)
                if not keep_alive:
                    break


def replay(srv: Server, ledger: GameLedger, rounds: list[str], out: Callable[..., None]) -> None:
    client = Client(srv.url, srv.keys["auditor"])
    http_lat, direct_lat, frames = [], [], 0
    try:
        for round_id in rounds:  # taken in turn, so drift hits both sides alike
            t0 = time.perf_counter()
            got = client.get(f"/audit/rounds/{round_id}/replay")
            http_lat.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ledger.replay(UUID(round_id))
            direct_lat.append(time.perf_counter() - t0)
            frames += len(got)
    finally:
        client.close()
    h50, h99 = quantile(http_lat, 0.5) * 1e3, quantile(http_lat, 0.99) * 1e3
    d50, d99 = quantile(direct_lat, 0.5) * 1e3, quantile(direct_lat, 0.99) * 1e3
    out(f"(b) replay of {len(rounds)} settled rounds ({frames / len(rounds):.1f} frames each)")
    out(f"    http   p50 {h50:6.2f} ms  p99 {h99:6.2f} ms   http/direct p50 {h50 / d50:.2f}x")
    out(f"    direct p50 {d50:6.2f} ms  p99 {d99:6.2f} ms   (GameLedger.replay, no JSON)")


if __name__ == "__main__":
    main()

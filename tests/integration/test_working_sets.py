"""The working set: processes of the service, each keeping its own copies, on one store.

A process keeps the aggregates it used last; another process may have recorded newer
events since. Whatever a copy held behind the store, the ledger must neither record a
wrong thing nor refuse on stale state; and when the copies are current, a decision reads
nothing. One process also serves many terminals at once, and makes do with a pool of one
connection.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from itertools import count
from typing import Any, cast
from uuid import UUID, uuid4

import psycopg
import pytest
from eventsourcing.persistence import StoredEvent
from psycopg_pool import PoolTimeout

from ledger.aggregates.account import Account
from ledger.aggregates.round import Round
from ledger.application import GameLedger
from ledger.errors import Conflict, InsufficientChips, StaleVersion
from ledger.rules import CASINO, TableLimits
from ledger.sealing import ShoeSealer
from ledger.shoe import deal_size
from ledger.storage import LedgerRecorder, chain_head, verify_chain
from tests.scripted import SteeredShuffle

NewEnv = Callable[[], dict[str, str]]
Ledgers = Callable[..., GameLedger]
_ids = count(1)


def rid() -> str:
    return f"w-{next(_ids)}"


@pytest.fixture
def ledgers(postgres_env: NewEnv) -> Iterator[Ledgers]:
    """GameLedgers on one schema with one shoe key: the worker processes of one service."""
    env, key = postgres_env(), ShoeSealer.new_key()
    made: list[GameLedger] = []

    def make(env_overrides: dict[str, str] | None = None, cls: type[GameLedger] = GameLedger,
             **kwargs: Any) -> GameLedger:
        made.append(cls(env={**env, **(env_overrides or {})}, shoe_key=key, **kwargs))
        return made[-1]

    yield make
    for ledger in made:
        ledger.close()


class Interleaved(GameLedger):
    """A ledger on which something else happens just before a command reads an aggregate
    of a given class: another process's request, another terminal's query on this one."""

    name = GameLedger.name  # the same event tables as every other ledger

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.before_reading: dict[type, Callable[[], object]] = {}
        self.after_looking_for_a_receipt: Callable[[], object] = lambda: None

    def _get(self, cls: Any, aggregate_id: UUID, what: str, **kwargs: Any) -> Any:
        hook = self.before_reading.get(cls)
        if hook is not None:
            hook()
        return super()._get(cls, aggregate_id, what, **kwargs)

    def _answer(self, *args: Any, **kwargs: Any) -> Any:
        answered = super()._answer(*args, **kwargs)
        self.after_looking_for_a_receipt()
        return answered


def once(action: Callable[[], object]) -> Callable[[], None]:
    done: list[object] = []

    def run() -> None:
        if not done:
            done.append(action())

    return run


def dealt_round(app: GameLedger, rules: Any = CASINO) -> tuple[UUID, UUID]:
    table = app.open_table(rid(), "boss", "T1", rules)
    for n in (1, 2):
        app.open_account(rid(), "cashier", f"P{n}")
        app.buy_in(rid(), "cashier", f"P{n}", 1000)
    r = app.start_round(rid(), "dealer", table)
    for n in (1, 2):
        app.place_stake(rid(), "dealer", r, f"P{n}", n, 10)
    app.deal(rid(), "dealer", r)
    return table, r


def stand_and_settle(app: GameLedger, r: UUID) -> None:
    """Every hand stands; the dealer plays; the round settles."""
    while (turn := app.round_state(r)["turn"]) is not None:
        app.stand(rid(), "dealer", r, f"P{turn['box']}", turn["box"], turn["hand"])
    if app.round_state(r)["phase"] == "playing":
        app.play_dealer(rid(), "dealer", r)
    if app.round_state(r)["phase"] != "settled":
        app.settle(rid(), "dealer", r)


def test_a_process_behind_on_a_round_decides_on_the_round_as_stored(ledgers: Ledgers) -> None:
    # Box 1 holds 5,6 and hits a 4; box 2 stands on 19; the dealer shows a 7.
    a = ledgers(randbelow=SteeredShuffle("5S TH 7D 6S 9C 4H 8C TS"))
    b = ledgers()
    table, r = dealt_round(a)
    b.round_state(r)  # b's working set now holds the round
    a.hit(rid(), "dealer", r, "P1", 1, 0)
    a.stand(rid(), "dealer", r, "P1", 1, 0)
    b.stand(rid(), "dealer", r, "P2", 2, 0)  # b's copy is behind: it must not matter
    b.play_dealer(rid(), "dealer", r)
    b.settle(rid(), "dealer", r)
    state = a.round_state(r)
    assert state["phase"] == "settled"
    assert state["boxes"][0]["hands"][0]["cards"] == ["5S", "6S", "4H"]
    assert a.check_round(r) == []
    # Named versions: the one b was shown is refused, the current one is acted on.
    r2 = a.start_round(rid(), "dealer", table)
    b.round_state(r2)
    a.place_stake(rid(), "dealer", r2, "P1", 1, 10)
    with pytest.raises(StaleVersion):
        b.place_stake(rid(), "dealer", r2, "P2", 2, 10, expected=1)
    current = a.round_state(r2)["version"]
    b.place_stake(rid(), "dealer", r2, "P2", 2, 10, expected=current)
    assert a.balance("P2")["held"] == 10


def test_a_refusal_decided_on_a_stale_account_is_checked_on_the_stored_one(
        ledgers: Ledgers) -> None:
    a, b = ledgers(), ledgers()
    table, r = dealt_round(a)
    stand_and_settle(b, r)
    r2 = b.start_round(rid(), "dealer", table)
    b.cash_out(rid(), "cashier", "P1", b.balance("P1")["available"] - 100)
    a.buy_in(rid(), "cashier", "P1", 900)  # b's copy of the account shows 100 still
    # More than b's copy shows, no more than the account holds: a stake, not a refusal.
    b.place_stake(rid(), "dealer", r2, "P1", 1, 1000)
    assert a.balance("P1") == b.balance("P1") == {**a.balance("P1"), "available": 0,
                                                  "held": 1000}


@pytest.mark.parametrize("named", [False, True])
def test_a_request_whose_twin_was_recorded_meanwhile_answers_as_its_twin(
        ledgers: Ledgers, named: bool) -> None:
    # A terminal's retry reaches another process while the first try is still at work. The
    # first try loses its save (its copy of P1's account is behind), finds no receipt, and
    # then the twin commits: the round has moved, by this very request.
    a, b = ledgers(), ledgers(cls=Interleaved)
    assert isinstance(b, Interleaved)
    table, r = dealt_round(a)
    stand_and_settle(a, r)
    r2 = a.start_round(rid(), "dealer", table)
    b.round_state(r2)
    b.balance("P1")
    a.buy_in(rid(), "cashier", "P1", 5)  # b's copy of the account is behind
    expected = 1 if named else None
    b.after_looking_for_a_receipt = once(
        lambda: a.place_stake("stake-1", "dealer", r2, "P1", 1, 100, expected=expected))
    answer = b.place_stake("stake-1", "dealer", r2, "P1", 1, 100, expected=expected)
    assert answer == a.place_stake("stake-1", "dealer", r2, "P1", 1, 100, expected=expected)
    assert a.balance("P1")["held"] == 100
    assert a.round_state(r2)["version"] == 2


def test_a_shuffle_whose_save_lost_the_race_never_deals(ledgers: Ledgers) -> None:
    a, b = ledgers(), ledgers()
    table = a.open_table(rid(), "boss", "T1", CASINO)
    for n in (1, 2):
        a.open_account(rid(), "cashier", f"P{n}")
        a.buy_in(rid(), "cashier", f"P{n}", 1000)
    b.table(table)  # b's copy of the table has no shoe yet
    first = a.start_round(rid(), "dealer", table)  # a shuffles shoe 1 and records it
    a.void(rid(), "manager", first, "to the next round")
    # b shuffles a shoe 1 of its own on its copy; the save fails, and round 2 is started
    # again on the table as stored: on a's shoe 1, which b must deal from as recorded.
    second = b.start_round(rid(), "dealer", table)
    shoe = UUID(a.round_state(first)["shoe_id"])
    assert UUID(b.round_state(second)["shoe_id"]) == shoe
    for n in (1, 2):
        b.place_stake(rid(), "dealer", second, f"P{n}", n, 10)
    b.deal(rid(), "dealer", second)
    stand_and_settle(b, second)
    a.close_table(rid(), "manager", table, "verify the shoe")
    assert a.verify_shoe(shoe) == []


def test_a_refusal_on_a_named_version_is_reported_while_queries_hand_the_round_back(
        ledgers: Ledgers) -> None:
    a = ledgers()
    b = ledgers(cls=Interleaved)
    assert isinstance(b, Interleaved)
    table = a.open_table(rid(), "boss", "T1", CASINO)
    a.open_account(rid(), "cashier", "P3")
    a.buy_in(rid(), "cashier", "P3", 5)
    r = a.start_round(rid(), "dealer", table)
    shown = b.round_state(r)["version"]
    # Before every read of the round, another terminal's query gives b's copy back.
    b.before_reading[Round] = lambda: b.round_state(r)
    with pytest.raises(InsufficientChips):
        b.place_stake(rid(), "dealer", r, "P3", 3, 10, expected=shown)


def waiting_to_settle(ledgers: Ledgers) -> tuple[GameLedger, Interleaved, UUID, UUID]:
    """A round played by ``a`` up to its settlement (7, 10: the dealer stands on 17), which
    ``b`` has read: the two ledgers, the table and the round."""
    a = ledgers(randbelow=SteeredShuffle("TS TH 7D 9S 8C TD"))
    b = ledgers(cls=Interleaved)
    assert isinstance(b, Interleaved)
    table, r = dealt_round(a)
    for box in (1, 2):
        a.stand(rid(), "dealer", r, f"P{box}", box, 0)
    a.play_dealer(rid(), "dealer", r)
    b.round_state(r)
    return a, b, table, r


def test_a_settlement_overtaken_between_its_reads_is_a_conflict(ledgers: Ledgers) -> None:
    a, b, _, r = waiting_to_settle(ledgers)
    # a settles after b has read the round and before b reads the first account.
    b.before_reading[Account] = once(lambda: a.settle(rid(), "dealer", r))
    with pytest.raises(Conflict):
        b.settle(rid(), "dealer", r)
    assert a.round_state(r)["phase"] == "settled"
    assert a.check_round(r) == []
    assert sum(a.balance(p)["total"] for p in ("P1", "P2")) + a.house(
        UUID(a.round_state(r)["table_id"]))["available"] == 2000


def test_a_settlement_whose_accounts_keep_moving_is_decided_again_while_its_round_stays(
        ledgers: Ledgers) -> None:
    # Chips move on a player's account (a buy-in here; at a casino, often another table's
    # settlement) between this settlement's reads, twice: its round has not moved, so it is
    # decided again rather than refused.
    a, b, table, r = waiting_to_settle(ledgers)
    # Before each account is read (P1, the house, P2): P1 is stale by the save, twice.
    moves = iter(range(6))
    b.before_reading[Account] = lambda: next(moves, None) is not None and a.buy_in(
        rid(), "cashier", "P1", 5)
    b.settle(rid(), "dealer", r)
    assert next(moves, None) is None  # all six happened
    assert a.round_state(r)["phase"] == "settled"
    assert a.check_round(r) == []
    assert sum(a.balance(p)["total"] for p in ("P1", "P2")) + a.house(table)["available"] \
        == 2030


def test_a_settlement_is_decided_again_as_long_as_its_round_stays(ledgers: Ledgers) -> None:
    # Five times over, another table's chips land on P1's account between this settlement's
    # reads: more tries than a busy casino's shared players are likely to need.
    a, b, table, r = waiting_to_settle(ledgers)
    moves = iter(range(15))  # before each of the three reads of five tries
    b.before_reading[Account] = lambda: next(moves, None) is not None and a.buy_in(
        rid(), "cashier", "P1", 5)
    b.settle(rid(), "dealer", r)
    assert next(moves, None) is None
    assert a.check_round(r) == []
    assert sum(a.balance(p)["total"] for p in ("P1", "P2")) + a.house(table)["available"] \
        == 2075


def test_a_try_that_lost_its_save_leaves_its_accounts_to_be_caught_up_not_loaded(
        ledgers: Ledgers, monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading an account again (its snapshot and up to 199 events) made each try of a
    # settlement slower than the one before, and so likelier to lose again.
    a, b, table, r = waiting_to_settle(ledgers)
    for player in ("P1", "P2"):
        b.balance(player)
    b.house(table)
    a.buy_in(rid(), "cashier", "P1", 5)  # b's copy of P1 is behind: its first try loses
    loaded: list[UUID] = []
    load = b._load

    def counted(aggregate_id: UUID, what: str) -> Any:
        loaded.append(aggregate_id)
        return load(aggregate_id, what)

    monkeypatch.setattr(b, "_load", counted)
    b.settle(rid(), "dealer", r)
    assert loaded == [r]  # the round, changed by the try that lost, and nothing else
    assert a.check_round(r) == []
    assert b.balance("P1") == a.balance("P1")


def test_a_process_behind_on_the_shoe_replaces_it_once_it_cannot_deal_a_round(
        ledgers: Ledgers, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = CASINO.evolve(name="short shoe", decks=1, penetration_percent=50)
    a, b = ledgers(), ledgers()
    table, r = dealt_round(a, rules)
    first_shoe = b.round_state(r)["shoe_id"]
    b.shoe(UUID(first_shoe))  # b's working set holds the shoe, early in it
    deal = deal_size(TableLimits().boxes, rules.dealer_hole_card)
    while True:  # a plays on until too few cards are left before the cut card (R-H4)
        stand_and_settle(a, r)
        shoe = a.shoe(UUID(first_shoe))
        if shoe["cut"] - shoe["position"] < deal:
            break
        r = a.start_round(rid(), "dealer", table)
        for n in (1, 2):
            a.place_stake(rid(), "dealer", r, f"P{n}", n, 10)
        a.deal(rid(), "dealer", r)
    b.table(table)  # b's table is up to date; its copy of the shoe is not
    reads = store_reads(b, monkeypatch)
    next_round = b.start_round(rid(), "dealer", table)
    assert reads.count(UUID(first_shoe)) == 1  # caught up once, then retired: one copy
    assert b.round_state(next_round)["shoe_id"] != first_shoe
    assert a.shoe(UUID(first_shoe))["retired"]
    assert a.verify_shoe(UUID(first_shoe)) == []


def store_reads(app: GameLedger, monkeypatch: pytest.MonkeyPatch) -> list[UUID]:
    """The aggregates ``app`` reads events of from now on, one entry per read."""
    reads: list[UUID] = []
    select_events = app.recorder.select_events

    def counted(originator_id: UUID, **kwargs: Any) -> Any:
        reads.append(originator_id)
        return select_events(originator_id, **kwargs)

    monkeypatch.setattr(app.recorder, "select_events", counted)
    return reads


def test_a_decision_on_the_version_shown_reads_nothing_from_the_store(
        ledgers: Ledgers, monkeypatch: pytest.MonkeyPatch) -> None:
    # Box 1 holds 5,6 and doubles onto a 4; the dealer shows a 7.
    a = ledgers(randbelow=SteeredShuffle("5S TH 7D 6S 9C 4H 8C TS"))
    _, r = dealt_round(a)
    shown = a.round_state(r)["version"]
    reads = store_reads(a, monkeypatch)
    after = a.double(rid(), "dealer", r, "P1", 1, 0, expected=shown)  # a card, a hold
    assert reads == []
    assert a.round_state(r, after["version"])["boxes"][0]["hands"][0]["cards"] == [
        "5S", "6S", "4H"]
    assert reads == []
    assert a.balance("P1")["held"] == 20


def test_a_round_just_started_is_at_hand_for_its_first_stake(
        ledgers: Ledgers, monkeypatch: pytest.MonkeyPatch) -> None:
    a = ledgers()
    table = a.open_table(rid(), "boss", "T1", CASINO)
    a.open_account(rid(), "cashier", "P1")
    a.buy_in(rid(), "cashier", "P1", 1000)
    reads = store_reads(a, monkeypatch)
    r = a.start_round(rid(), "dealer", table)
    shown = a.round_state(r, 1)  # what the dealer's terminal is answered
    placed = a.place_stake(rid(), "dealer", r, "P1", 1, 10, expected=shown["version"])
    assert reads == []
    assert a.round_state(r, placed["version"])["staked"] == 10
    assert a.balance("P1")["held"] == 10


def test_one_process_serving_many_terminals_at_once_records_every_round_whole(
        ledgers: Ledgers) -> None:
    # More threads than connections kept for appending: some appends go through the pool.
    app = ledgers()
    terminals, rounds = 6, 3
    errors: list[BaseException] = []
    tables: list[UUID] = []

    def terminal(n: int) -> None:
        try:
            table = app.open_table(rid(), "boss", f"T{n}", CASINO)
            tables.append(table)
            players = [f"T{n}-P{box}" for box in (1, 2)]
            for player in players:
                app.open_account(rid(), "cashier", player)
                app.buy_in(rid(), "cashier", player, 1000)
            for _ in range(rounds):
                r = app.start_round(rid(), "dealer", table)
                for box, player in enumerate(players, 1):
                    app.place_stake(rid(), "dealer", r, player, box, 10)
                app.deal(rid(), "dealer", r)
                while (turn := app.round_state(r)["turn"]) is not None:
                    box = turn["box"]
                    app.stand(rid(), "dealer", r, players[box - 1], box, turn["hand"])
                if app.round_state(r)["phase"] == "playing":
                    app.play_dealer(rid(), "dealer", r)
                if app.round_state(r)["phase"] != "settled":
                    app.settle(rid(), "dealer", r)
                assert app.check_round(r) == []
        except BaseException as error:  # the test reports what any terminal met
            errors.append(error)

    threads = [threading.Thread(target=terminal, args=(n,)) for n in range(terminals)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, "".join(traceback.format_exception(errors[0]))
    players = [f"T{n}-P{box}" for n in range(terminals) for box in (1, 2)]
    total = (sum(app.balance(p)["total"] for p in players)
             + sum(app.house(t)["total"] for t in tables))
    assert total == 1000 * len(players)
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    assert verify_chain(recorder).intact


def test_a_pool_of_one_connection_is_never_kept_for_appending(ledgers: Ledgers) -> None:
    app = ledgers(env_overrides={"POSTGRES_POOL_SIZE": "1", "POSTGRES_MAX_OVERFLOW": "0"})
    assert app.recorder._appenders.limit == 0  # type: ignore[attr-defined]
    table, r = dealt_round(app)
    stand_and_settle(app, r)
    assert app.round_state(r)["phase"] == "settled"
    assert app.table(table)["rounds"] == 1


def test_an_appending_connection_the_server_dropped_is_replaced_and_the_append_retried(
        ledgers: Ledgers) -> None:
    app = ledgers()
    table, r = dealt_round(app)
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    appenders = recorder._appenders
    kept = list(appenders._idle)
    assert kept
    # A request repeated fails on its receipt's primary key: the connection is sound, kept.
    request = rid()
    turn = app.round_state(r)["turn"]
    app.stand(request, "dealer", r, f"P{turn['box']}", turn["box"], turn["hand"])
    app.stand(request, "dealer", r, f"P{turn['box']}", turn["box"], turn["hand"])
    assert appenders._idle == kept
    with recorder.datastore.transaction(commit=True) as curs:
        for dropped in kept:
            curs.execute("SELECT pg_terminate_backend(%s)",
                         (dropped.info.backend_pid,))
    stand_and_settle(app, r)
    assert app.round_state(r)["phase"] == "settled"
    assert appenders._lent == 0
    assert appenders._idle
    assert not any(conn in appenders._idle for conn in kept)
    assert all(conn.closed for conn in kept)
    assert app.table(table)["rounds"] == 1
    assert verify_chain(recorder).intact


def test_the_chains_and_the_round_checks_reads_go_on_past_connections_the_server_dropped(
        ledgers: Ledgers) -> None:
    # As after a restart of the database: the chain's reads, made apart from the library's,
    # were not tried again, and answered 503 for several requests once it was back.
    app = ledgers(env_overrides={"POSTGRES_POOL_SIZE": "3", "POSTGRES_MAX_OVERFLOW": "0",
                                 "POSTGRES_PRE_PING": "n"})
    _, r = dealt_round(app)
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    head = chain_head(recorder)
    pool = recorder.datastore.pool
    pids = []
    with contextlib.ExitStack() as taking, contextlib.suppress(PoolTimeout):
        while True:  # every connection the pool can lend, at once
            pids.append(taking.enter_context(pool.connection(timeout=0.5)).info.backend_pid)
    assert pids
    conninfo, kwargs = cast(str, pool.conninfo), cast(dict[str, Any], pool.kwargs)
    with psycopg.connect(conninfo, **{**kwargs, "autocommit": True}) as operator:
        for pid in pids:
            operator.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert chain_head(recorder) == head
    assert verify_chain(recorder, expected_head=head[1]).intact
    assert app.check_round(r) == []


@pytest.mark.parametrize("lost", ["by the server", "by the recorder"])
def test_an_append_prepares_its_statement_again_whichever_side_lost_it(ledgers: Ledgers,
                                                                       lost: str) -> None:
    # The server loses it to a pooler's reset (DISCARD ALL) or an operator's DEALLOCATE; the
    # recorder loses its note of it to an interruption between the PREPARE's answer and it.
    app = ledgers()
    table, r = dealt_round(app)
    recorder = app.recorder
    assert isinstance(recorder, LedgerRecorder)
    (kept,) = recorder._appenders._idle
    assert kept in recorder._append._prepared  # appends go through libpq, prepared once
    if lost == "by the server":
        kept.execute("DEALLOCATE ALL")
    else:
        recorder._append._prepared.discard(kept)
    stand_and_settle(app, r)
    assert app.round_state(r)["phase"] == "settled"
    assert recorder._appenders._idle == [kept]  # the same connection, prepared again
    assert kept in recorder._append._prepared
    assert app.table(table)["rounds"] == 1
    assert verify_chain(recorder).intact


@pytest.mark.parametrize("events", [1, 3000])
def test_an_append_larger_than_the_sockets_buffers_is_sent_whole(ledgers: Ledgers,
                                                                 events: int) -> None:
    # One event of 2 MB, or a bulk save of 3,000: the parameters outgrow what one write sends.
    recorder = ledgers().recorder
    assert isinstance(recorder, LedgerRecorder)
    state = b"x" * (2_000_000 // events)
    originator = uuid4()
    stored = [StoredEvent(originator_id=originator, originator_version=v, topic="test:Big",
                          state=state) for v in range(1, events + 1)]
    appended: list[Sequence[int] | None] = []
    thread = threading.Thread(target=lambda: appended.append(recorder.insert_events(stored)),
                              daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the append never finished"
    (ids,) = appended
    assert ids is not None
    assert len(ids) == events
    assert [e.state for e in recorder.select_events(originator)] == [state] * events
    assert verify_chain(recorder).intact

"""The GameLedger application: every use case of a casino's blackjack tables.

Each use case loads what it needs, lets the rules engine decide, and saves every
aggregate it touched, with the request's receipt, in one ``save()`` (one
transaction): a stake and its hold, a card and the shoe's position, a
settlement and its postings commit together or not at all.

Idempotency: every mutating use case takes the client's request id. The receipt
saved with the effects makes a repeat fail on its primary key; the ledger then
answers with the first result, or refuses when the content differs. A repeat of a
request this process carried out lately is answered so from the receipt it kept.

Concurrency: the event table's primary key is the optimistic lock. A command
that lost a race on its round gets :class:`~ledger.errors.Conflict` and changed
nothing; a race lost only on an account (another table settling for the same
player) is retried a bounded number of times, since the round decision stands.
A round command may name the round version its terminal saw (``expected``):
it then acts on exactly that version or is refused with
:class:`~ledger.errors.StaleVersion`.

Reads: a command works on aggregates lent by the process's working set
(:mod:`ledger.working_set`) without reading the store first, wherever a stale
copy cannot lead to a wrong record: everything it writes is checked by the
primary key at commit (a stale copy fails the save, and the command is decided
again on fresh state); a refusal decided on a copy is checked again on fresh
state before it is reported. Brought up to date from the store first: what a
command reads to decide but does not write (the shoe when a round starts), the
round a command guards unless it is at the version the terminal named, the shoe
at a round's deal or when it is not where the round's last card left it, and,
once one copy was found behind (another process is at work at this table),
everything else the command uses.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, project_aggregate
from eventsourcing.domain import Aggregate, OriginatorVersionError
from eventsourcing.persistence import (
    InfrastructureFactory,
    IntegrityError,
    JSONTranscoder,
    Mapper,
    PersistenceError,
    StoredEvent,
    Transcoder,
)
from eventsourcing.utils import Environment

from ledger.aggregates import ids
from ledger.aggregates.account import HOUSE, PLAYER, Account
from ledger.aggregates.receipt import Receipt
from ledger.aggregates.round import CARD_FACTS, Round
from ledger.aggregates.rule_set import RuleSetRecord
from ledger.aggregates.shoe import ShoeRecord
from ledger.aggregates.table import Table
from ledger.cards import HIDDEN, Card
from ledger.engine import facts as f
from ledger.engine.machine import REASON_MAX_CHARS, SETTLED, VOIDED, RoundMachine
from ledger.engine.readjudicate import readjudicate
from ledger.errors import (
    AccountExists,
    BetRefused,
    Conflict,
    CurrencyRefused,
    DealRefused,
    DecisionRefused,
    InsufficientChips,
    InvariantBroken,
    LedgerError,
    NotFound,
    RequestIdReused,
    RoundInPlay,
    RuleSetInvalid,
    ShoeKept,
    ShoeLive,
    StaleVersion,
    TableClosed,
    TableExists,
    TableOpen,
)
from ledger.money import CURRENCIES, HOUSE_KEY, Movement, movements, net_movements
from ledger.names import (
    NAME_MAX_CHARS,
    check_name,
    check_new_name,
    check_new_player_id,
    is_name,
    unwritten,
)
from ledger.plays import Play
from ledger.recent import Recent
from ledger.rules import RuleSet, TableLimits, preset_clash, rules_hash, undealable
from ledger.sealing import SCHEME, ShoeSealer, SnapshotSigner
from ledger.shoe import (
    Shoe,
    commitment,
    composition_findings,
    cut_position,
    deal_size,
    fresh_order,
    new_salt,
)
from ledger.storage import (
    ROUND_ID_KEY,
    LedgerRecorder,
    MayHaveBeenAppended,
    SnapshotRecorder,
    first_events,
    postings_that_may_name,
    without_ending,
)
from ledger.transcoding import CheckedMapper, LedgerTranscoder, ReusedEncoder
from ledger.working_set import WorkingSet

A = TypeVar("A", bound=Aggregate)
Clock = Callable[[], datetime]
Result = dict[str, Any]

# A request losing its save to others' on aggregates it shares (a settlement's accounts,
# posted to by other tables) is decided again while what it was decided on has not moved, up
# to RETRIES_MAX times, pausing a random while before each try after the second (at most
# RETRY_PAUSE_S, doubled each try up to RETRY_PAUSE_MAX_S) so that racing requests fall apart.
RETRIES_MAX = 8
RETRY_PAUSE_S = 0.002
RETRY_PAUSE_MAX_S = 0.05
REQUEST_ID_MAX_CHARS = 128
PAGE_SIZE_MAX = 500
VERSION_MAX = 10**9  # the highest event version a request may name
ORDER_CACHE_SIZE = 64
# Receipts kept for repeats (about 0.7 KB each): a minute of a process's requests at full load.
RECEIPTS_KEPT = 10_000
WORKING_SET_SIZE = 2000
SHOES_CHECKED = 20  # the newest shoes a start looks among for a live one to open
SHOE_ENDINGS = (ShoeRecord.Retired.TOPIC, ShoeRecord.Abandoned.TOPIC)  # a shoe no longer live
CHECK_TRIES = 3  # reads of a round the check makes while the round moves on under it

_log = logging.getLogger("pitboss.ledger")


def utc_now() -> datetime:
    return datetime.now(UTC)


class GameLedger(Application[UUID]):
    """Runs tables and records everything that happens at them."""

    name = "Ledger"
    # The aggregates whose events have no end: an account's entries, a table's rounds. (A
    # round, a shoe, a receipt and a rule set's name have a bounded number of events.)
    snapshotting_intervals = {Account: 200, Table: 200}  # noqa: RUF012 (the library reads a dict)

    def construct_factory(self, env: Environment) -> InfrastructureFactory[Any]:
        """On PostgreSQL, the ledger's recorders (ledger.storage) take the library's place."""
        if env.get("PERSISTENCE_MODULE") == "eventsourcing.postgres":
            env["PERSISTENCE_MODULE"] = "ledger.storage:LedgerFactory"
        return super().construct_factory(env)

    def construct_transcoder(self) -> Transcoder:
        """The persistence factory's transcoder, as the library takes it; its plain JSON one
        is written with less work per event (ledger.transcoding), to the same bytes."""
        transcoder = self.factory.transcoder()
        if type(transcoder) is JSONTranscoder:
            transcoder = LedgerTranscoder()
        if isinstance(transcoder, JSONTranscoder):
            self.register_transcodings(transcoder)
        return transcoder

    def construct_mapper(self) -> Mapper[UUID]:
        """The library's mapper, checking each event it reads is whole (ledger.transcoding),
        unless the environment names another (``MAPPER_TOPIC``)."""
        named = self.factory.env.get(self.factory.MAPPER_TOPIC)
        return self.factory.mapper(transcoder=self.construct_transcoder(),
                                   mapper_class=None if named else CheckedMapper)

    def __init__(self, env: dict[str, str] | None = None, *, shoe_key: bytes | None = None,
                 clock: Clock = utc_now,
                 randbelow: Callable[[int], int] = secrets.randbelow) -> None:
        """``shoe_key`` seals and opens shoe orders and signs the snapshots; a ledger
        built without one (a projection reading the event log) can read everything but cannot
        shuffle or deal, and reads accounts from their events only."""
        try:
            super().__init__(env=env)
        except BaseException:
            # An unreachable database fails the recorder after the pool was made: closed
            # here, not by the garbage collector, which may run on one of the pool's own
            # threads (that cannot join itself).
            factory = getattr(self, "factory", None)
            if factory is not None:
                factory.close()
            raise
        self._shoe_key = shoe_key
        if shoe_key is not None and self.snapshots is not None \
                and isinstance(self.snapshots.recorder, SnapshotRecorder):
            self.snapshots.recorder.signer = SnapshotSigner(shoe_key)
        self._clock = clock
        self._randbelow = randbelow
        # Opened shoes by id and commitment (LRU): a shuffle whose save failed may share its
        # id with the shoe another process committed, never its commitment.
        self._orders: Recent[tuple[UUID, str], list[Card]] = Recent(ORDER_CACHE_SIZE)
        self._working = WorkingSet(WORKING_SET_SIZE)
        # The receipts of the requests this process carried out lately, as stored: a repeat of
        # one (a terminal's retry) is answered without the store, and without the database's
        # error for a receipt stored twice, which PostgreSQL logs.
        self._receipts: Recent[UUID, StoredEvent] = Recent(RECEIPTS_KEPT)
        self._local = threading.local()  # the command attempt running on this thread
        self._clock_warned_at = -CLOCK_WARNING_INTERVAL_S  # when the clock was last warned of

    # ------------------------------------------------------------------ tables

    def open_table(self, request_id: str, actor: str, name: str, rules: RuleSet,
                   limits: TableLimits | None = None, currency: str = "EUR") -> UUID:
        """Open a table under a rule set and its limits (R-S1, R-X15)."""
        check_name("table name", name, "name")
        _check_currency(currency)
        limits = limits or TableLimits()
        table_id = ids.table_id(name)
        payload = {"name": name, "rules": rules.to_dict(), "limits": limits.to_dict(),
                   "currency": currency}

        def body() -> tuple[Result, list[Aggregate]]:
            if self._exists(table_id):
                raise TableExists(f"A table named '{name}' already exists.", field="name")
            # Checked once the request is found new: a repeat of one made before a check
            # came in is answered, not refused.
            check_new_name("table name", name, "name")
            _check_known_currency(currency)
            self._check_rules_in_force(rules)
            _check_dealable(rules, limits)
            table = Table._create(Table.Created, id=table_id, timestamp=self._clock(),
                                  name=name, currency=currency, rules=rules.to_dict(),
                                  rules_hash=rules.content_hash, limits=limits.to_dict(),
                                  actor=actor, request_id=request_id)
            house = Account._create(Account.Created, id=ids.house_id(table_id),
                                    timestamp=self._clock(), owner=f"house:{name}", kind=HOUSE,
                                    currency=currency, actor=actor, request_id=request_id)
            return {"table_id": str(table_id)}, [
                table, house, *self._name_and_version(rules, table, actor, request_id)]

        return UUID(self._run(request_id, actor, "open_table", payload, body)["table_id"])

    def change_rules(self, request_id: str, actor: str, table_id: UUID, rules: RuleSet,
                     limits: TableLimits | Mapping[str, int], reason: str) -> None:
        """New rules for future rounds only (R-S1). ``limits`` replaces the table's limits,
        or, given as a mapping, changes the named ones over the limits the table has when
        the command runs (so two managers changing different limits keep both)."""
        table_id = _uuid(table_id, "table")
        _check_reason(reason, "")
        changes = limits.to_dict() if isinstance(limits, TableLimits) else dict(limits)
        payload = {"table_id": str(table_id), "rules": rules.to_dict(), "limits": changes,
                   "reason": reason}

        def body() -> tuple[Result, list[Aggregate]]:
            table = self._get(Table, table_id, "table")
            # A table keeping its rules (new limits only) keeps them as they were put in force,
            # checked then (or by an earlier version of the ledger).
            kept = table.rules_hash == rules.content_hash
            if not kept:
                self._check_rules_in_force(rules)
            merged = TableLimits.from_dict({**table.limits, **changes})
            _check_dealable(rules, merged)
            table.trigger_event(Table.RulesChanged, rules=rules.to_dict(),
                                rules_hash=rules.content_hash, limits=merged.to_dict(),
                                reason=reason, actor=actor, request_id=request_id,
                                timestamp=self._now(table))
            recorded = [] if kept else self._name_and_version(rules, table, actor, request_id)
            return {"table_id": str(table_id), "rules_hash": rules.content_hash}, [
                table, *recorded]

        self._run(request_id, actor, "change_rules", payload, body)

    def close_table(self, request_id: str, actor: str, table_id: UUID, reason: str) -> None:
        """Close a table between rounds; its shoe retires and is revealed (R-H2)."""
        table_id = _uuid(table_id, "table")
        _check_reason(reason, "")

        def body() -> tuple[Result, list[Aggregate]]:
            table = self._get(Table, table_id, "table")
            if not table.open:
                raise TableClosed(f"Table {table.name} is already closed.")
            last = self._last_round_ended(table)
            touched: list[Aggregate] = [table]
            if table.shoe_id is not None:
                touched += self._retire_shoe(table.shoe_id, "table closed", actor, request_id,
                                             after=last)
            table.trigger_event(Table.Closed, reason=reason, actor=actor,
                                request_id=request_id, timestamp=self._now(table, *last))
            return {"table_id": str(table_id)}, touched

        self._run(request_id, actor, "close_table",
                  {"table_id": str(table_id), "reason": reason}, body)

    def reopen_table(self, request_id: str, actor: str, table_id: UUID,
                     reason: str = "") -> None:
        """Reopen a closed table, with the reason if one is given."""
        table_id = _uuid(table_id, "table")
        if reason:
            _check_reason(reason, "")

        def body() -> tuple[Result, list[Aggregate]]:
            table = self._get(Table, table_id, "table")
            if table.open:
                raise TableOpen(f"Table {table.name} is open already.")
            table.trigger_event(Table.Reopened, actor=actor, request_id=request_id,
                                reason=reason, timestamp=self._now(table))
            return {"table_id": str(table_id)}, [table]

        # Without a reason, the request is what it was before one could be given.
        payload = {"table_id": str(table_id), **({"reason": reason} if reason else {})}
        self._run(request_id, actor, "reopen_table", payload, body)

    def start_round(self, request_id: str, actor: str, table_id: UUID) -> UUID:
        """A new round under the table's rules in force; a new shoe first if the cut card
        is out or the rules ask for another shoe (R-H4, R-S1)."""
        table_id = _uuid(table_id, "table")

        def body() -> tuple[Result, list[Aggregate]]:
            table = self._get(Table, table_id, "table")
            if not table.open:
                raise TableClosed(f"Table {table.name} is closed.")
            last = self._last_round_ended(table)
            rules = table.rule_set()
            # A table that took its rules before names and versions were recorded claims them
            # at its first round since, before another table can; if one did, the round
            # check reports it, and the table plays on under the rules it has (R-S1).
            touched: list[Aggregate] = [table, *self._name_and_version(
                rules, table, actor, request_id, refuse_other=False)]
            shoe_id = table.shoe_id
            why = "no shoe yet" if shoe_id is None else self._why_replace_shoe(
                shoe_id, rules, TableLimits.from_dict(table.limits))
            if why is not None:
                if shoe_id is not None:
                    touched += self._retire_shoe(shoe_id, why, actor, request_id, after=last)
                new_shoe = self._new_shoe(table, rules, actor, request_id)
                touched.append(new_shoe)
                shoe_id = new_shoe.id
            round_no = table.round_count + 1
            round_id = ids.round_id(table_id, round_no)
            now = self._now(table, *last)
            round_ = Round._create(Round.Created, id=round_id, timestamp=now, table_id=table_id,
                                   round_no=round_no, shoe_id=shoe_id, rules=table.rules,
                                   rules_hash=table.rules_hash, limits=table.limits,
                                   currency=table.currency, actor=actor, request_id=request_id)
            table.trigger_event(Table.RoundStarted, round_id=round_id, round_no=round_no,
                                shoe_id=shoe_id, actor=actor, request_id=request_id,
                                timestamp=now)
            return {"round_id": str(round_id), "round_no": round_no}, [*touched, round_]

        result = self._run(request_id, actor, "start_round", {"table_id": str(table_id)}, body)
        return UUID(result["round_id"])

    # ---------------------------------------------------------------- accounts

    def open_account(self, request_id: str, actor: str, player: str,
                     currency: str = "EUR") -> UUID:
        check_name("player id", player, "player")
        _check_currency(currency)
        account_id = ids.account_id(player)

        def body() -> tuple[Result, list[Aggregate]]:
            if self._exists(account_id):
                raise AccountExists(f"Player {player} already has an account.",
                                    field="player")  # a name taken: no rule, as a table's
            check_new_name("player id", player, "player")  # as for a table, above
            check_new_player_id(player)
            _check_known_currency(currency)
            account = Account._create(Account.Created, id=account_id, timestamp=self._clock(),
                                      owner=player, kind=PLAYER, currency=currency,
                                      actor=actor, request_id=request_id)
            return {"account_id": str(account_id)}, [account]

        result = self._run(request_id, actor, "open_account",
                           {"player": player, "currency": currency}, body)
        return UUID(result["account_id"])

    def buy_in(self, request_id: str, actor: str, player: str, amount: int) -> Result:
        return self._cashier(request_id, actor, player, amount, Account.buy_in, "buy_in")

    def cash_out(self, request_id: str, actor: str, player: str, amount: int) -> Result:
        return self._cashier(request_id, actor, player, amount, Account.cash_out, "cash_out")

    def _cashier(self, request_id: str, actor: str, player: str, amount: int,
                 move: Callable[[Account, int, str, str, datetime], None],
                 command: str) -> Result:
        def body() -> tuple[Result, list[Aggregate]]:
            account = self._account(player)
            move(account, amount, actor, request_id, self._clock())
            return {"player": player, **account.summary()}, [account]

        return self._run(request_id, actor, command, {"player": player, "amount": amount}, body,
                         retries=RETRIES_MAX)

    # ------------------------------------------------------------------ rounds

    # Every round command takes ``expected``: the round version the terminal saw. Given, the
    # command acts on exactly that version or is refused (StaleVersion); left out, it acts
    # on the round as stored when it runs.

    def place_stake(self, request_id: str, actor: str, round_id: UUID, bettor: str, box: int,
                    amount: int, *, expected: int | None = None) -> Result:
        return self._play(request_id, actor, round_id, "place_stake",
                          {"bettor": bettor, "box": box, "amount": amount},
                          lambda m, d: m.place_stake(bettor, box, amount), expected)

    def withdraw_stake(self, request_id: str, actor: str, round_id: UUID, bettor: str,
                       box: int, *, expected: int | None = None) -> Result:
        return self._play(request_id, actor, round_id, "withdraw_stake",
                          {"bettor": bettor, "box": box},
                          lambda m, d: m.withdraw_stake(bettor, box), expected)

    def deal(self, request_id: str, actor: str, round_id: UUID, *,
             expected: int | None = None) -> Result:
        """Close betting and make the initial deal (R-C8, R-G2)."""
        return self._play(request_id, actor, round_id, "deal", {},
                          lambda m, d: m.close_betting(d), expected)

    def hit(self, request_id: str, actor: str, round_id: UUID, player: str, box: int,
            hand: int = 0, *, expected: int | None = None) -> Result:
        return self._hand_play(Play.HIT, request_id, actor, round_id, player, box, hand,
                               expected)

    def stand(self, request_id: str, actor: str, round_id: UUID, player: str, box: int,
              hand: int = 0, *, expected: int | None = None) -> Result:
        return self._hand_play(Play.STAND, request_id, actor, round_id, player, box, hand,
                               expected)

    def double(self, request_id: str, actor: str, round_id: UUID, player: str, box: int,
               hand: int = 0, *, expected: int | None = None) -> Result:
        return self._hand_play(Play.DOUBLE, request_id, actor, round_id, player, box, hand,
                               expected)

    def split(self, request_id: str, actor: str, round_id: UUID, player: str, box: int,
              hand: int = 0, *, expected: int | None = None) -> Result:
        return self._hand_play(Play.SPLIT, request_id, actor, round_id, player, box, hand,
                               expected)

    def _hand_play(self, play: Play, request_id: str, actor: str, round_id: UUID, player: str,
                   box: int, hand: int, expected: int | None) -> Result:
        """The owner's hit, stand, double or split: the machine command of the same name."""
        return self._play(request_id, actor, round_id, play.value,
                          {"player": player, "box": box, "hand": hand},
                          lambda m, d: getattr(m, play.value)(player, box, hand, d), expected)

    def answer(self, request_id: str, actor: str, round_id: UUID, bettor: str, box: int,
               hand: int, match: bool, *, expected: int | None = None) -> Result:
        """A co-bettor matches or declines the owner's double or split (R-C4)."""
        return self._play(request_id, actor, round_id, "answer",
                          {"bettor": bettor, "box": box, "hand": hand, "match": match},
                          lambda m, d: m.answer(bettor, box, hand, match, d), expected)

    def surrender(self, request_id: str, actor: str, round_id: UUID, player: str,
                  box: int, *, expected: int | None = None) -> Result:
        return self._play(request_id, actor, round_id, "surrender",
                          {"player": player, "box": box},
                          lambda m, d: m.surrender(player, box), expected)

    def insure(self, request_id: str, actor: str, round_id: UUID, bettor: str,
               amount: int, *, expected: int | None = None) -> Result:
        return self._play(request_id, actor, round_id, "insure",
                          {"bettor": bettor, "amount": amount},
                          lambda m, d: m.insure(bettor, amount), expected)

    def even_money(self, request_id: str, actor: str, round_id: UUID, bettor: str,
                   box: int, *, expected: int | None = None) -> Result:
        return self._play(request_id, actor, round_id, "even_money",
                          {"bettor": bettor, "box": box},
                          lambda m, d: m.take_even_money(bettor, box), expected)

    def play_dealer(self, request_id: str, actor: str, round_id: UUID, *,
                    expected: int | None = None) -> Result:
        return self._play(request_id, actor, round_id, "play_dealer", {},
                          lambda m, d: m.play_dealer(d, d.peek), expected)

    def settle(self, request_id: str, actor: str, round_id: UUID, *,
               expected: int | None = None) -> Result:
        return self._play(request_id, actor, round_id, "settle", {}, lambda m, d: m.settle(),
                          expected)

    def void(self, request_id: str, actor: str, round_id: UUID, reason: str, *,
             expected: int | None = None) -> Result:
        """R-V1, R-X13: a manager voids an unfinished round; every stake is returned."""
        _check_reason(reason, "R-V1")
        return self._play(request_id, actor, round_id, "void", {"reason": reason},
                          lambda m, d: m.void(reason), expected)

    def record_ruling(self, request_id: str, actor: str, round_id: UUID, reason: str,
                      corrects: list[int], adjustments: dict[str, int], *,
                      expected: int | None = None) -> Result:
        """R-V2: a ruling on a settled round, moving money by compensating entries."""
        _check_reason(reason, "R-V2")
        return self._play(request_id, actor, round_id, "record_ruling",
                          {"reason": reason, "corrects": corrects, "adjustments": adjustments},
                          lambda m, d: m.record_ruling(reason, corrects, adjustments),
                          expected)

    def _play(self, request_id: str, actor: str, round_id: UUID, command: str,
              payload: dict[str, Any],
              decide: Callable[[RoundMachine, _ShoeDraw], list[f.Fact]],
              expected: int | None) -> Result:
        round_id = _uuid(round_id, "round")
        # The version seen is a precondition, not content: a repeat answers the same.
        round_key = str(round_id)
        payload = {"round_id": round_key, **payload}
        if expected is not None and (type(expected) is not int or expected < 1):
            raise DecisionRefused("A round version is a whole number from 1.")

        def body() -> tuple[Result, list[Aggregate]]:
            round_ = self._get(Round, round_id, "round", fresh=True,
                               exact=None if expected is None else
                               lambda held: held.version == expected)
            if expected is not None and round_.version != expected:
                raise StaleVersion(expected, round_.version)
            shoe = _ShoeDraw(self, round_)
            now = self._now(round_)
            produced = round_.act(actor, request_id, now, lambda m: decide(m, shoe))
            touched: list[Aggregate] = [round_]
            if shoe.record is not None:  # the command drew, or tried to
                if shoe.drawn:
                    shoe.record.trigger_event(ShoeRecord.CardsDrawn, round_id=round_id,
                                              first=shoe.record.position, count=shoe.drawn,
                                              request_id=request_id, timestamp=now)
                if shoe.record.position >= shoe.record.size and \
                        round_.machine.phase in (SETTLED, VOIDED):
                    # Spent, and its last round over (run out, R-H4): revealed now, not when
                    # the table next starts a round or closes; never while a round is in play,
                    # whose hole card it holds.
                    self._retire(shoe.record, EVERY_CARD_DEALT, actor, request_id, (round_,))
                if shoe.drawn or shoe.record.retired:
                    touched.append(shoe.record)
            moves = net_movements(produced)
            memo = _memo(produced) if moves else ""
            for key, moved in moves.items():
                account = (self._get(Account, ids.house_id(round_.table_id), "house account")
                           if key == HOUSE_KEY else self._account(key))
                # Checked where chips go in: paying out or releasing what a round holds must
                # never be refused, or the round could neither settle nor be voided.
                if moved.held > 0 and account.currency != round_.currency:
                    raise BetRefused(f"{account.owner}'s chips are in {account.currency}; this "
                                     f"table plays in {round_.currency}.", "R-M1")
                try:
                    account.post(round_id, moved.held, moved.available, memo, actor,
                                 request_id, now)
                except InsufficientChips:
                    voided = next((x for x in produced if isinstance(x, f.RoundVoided)), None)
                    if voided is None:
                        raise
                    # R-X13 takes back what the round already paid (even money), which
                    # R-M3 cannot let go below zero: the chips must come back first.
                    paid, released = -voided.reversals.get(key, 0), voided.released.get(key, 0)
                    less = (f", less the {released} it releases from stakes still held"
                            if released else "")
                    # Said to a dealer too (a shoe running out voids the round): no balance,
                    # nor what is missing from it, which would tell it.
                    raise InsufficientChips(
                        f"Voiding takes back the {paid} the round already paid "
                        f"{account.owner}{less}, and {account.owner} has fewer chips "
                        "available: the cashier can show how many must come back (a buy-in) "
                        "before the round can be voided.", "R-X13") from None
                touched.append(account)
            m = round_.machine
            result = {"round_id": round_key, "version": round_.version, "phase": m.phase,
                      "facts": len(produced)}
            return result, touched

        # A save lost to another request's posting on an account the round shares (another
        # table's settlement) is decided again while the round itself has not moved.
        return self._run(request_id, actor, command, payload, body, guard=round_id,
                         seen=expected, retries=RETRIES_MAX)

    # ----------------------------------------------------------------- queries

    def table(self, table_id: UUID) -> dict[str, Any]:
        table_id = _uuid(table_id, "table")
        with self._reading(Table, table_id, "table") as table:
            return table.summary()

    def table_rounds(self, table_id: UUID, *, before: int | None = None,
                     limit: int = 50) -> dict[str, Any]:
        """A page of the table's round ids, newest first, ``limit`` at most, paged by round
        number: ``items``, and ``next_before`` to pass for the next page (None on the last)."""
        table_id = _uuid(table_id, "table")
        limit = _page(limit)
        with self._reading(Table, table_id, "table") as table:
            count = table.round_count
        top = count if before is None else min(before - 1, count)
        lowest = max(top - limit, 0) + 1
        return {"items": [ids.round_id(table_id, n) for n in range(top, lowest - 1, -1)],
                "next_before": lowest if top >= lowest > 1 else None}

    def round_state(self, round_id: UUID, version: int | None = None) -> dict[str, Any]:
        """The round as it stood after ``version`` (the latest when None)."""
        round_id = _uuid(round_id, "round")
        if version is not None and (type(version) is not int or not 1 <= version <= VERSION_MAX):
            raise NotFound(f"A round's versions count from 1 (at most {VERSION_MAX}); there is "
                           f"no version {version}.", field="version")
        if version is None:
            with self._reading(Round, round_id, "round") as latest:
                return _round_view(latest)
        held = self._working.take(round_id)
        if held is not None:
            try:
                if held.version == version and isinstance(held, Round):
                    return _round_view(held)  # the state of a version never changes
            finally:
                self._working.give(held)
        try:
            with reading_record(round_id, "round"):
                round_: Aggregate = self.repository.get(round_id, version=version)
        except AggregateNotFoundError:
            raise NotFound(f"There is no round {round_id}.") from None
        if not isinstance(round_, Round):  # whatever it is: a request id's use stays unsaid
            raise NotFound(f"There is no round {round_id}.")
        if round_.version != version:  # the store gives the latest when asked past it
            raise NotFound(f"Round {round_id} has no version {version}: it is at version "
                           f"{round_.version}.", field="version")
        return _round_view(round_)

    def round_events(self, round_id: UUID) -> list[dict[str, Any]]:
        """Every event of a round, with version, time and actor. A face-down card stays
        hidden until it is turned over or its shoe is retired (R-G2, R-H2)."""
        round_id = _uuid(round_id, "round")
        events = self._round_events(round_id)
        secret = self._face_down_secrets(events)
        return [_describe(e, hide=e.originator_version in secret) for e in events]

    def replay(self, round_id: UUID) -> list[dict[str, Any]]:
        """Frame by frame: each event with the round's state right after it, in one pass."""
        round_id = _uuid(round_id, "round")
        events = self._round_events(round_id)
        secret = self._face_down_secrets(events)
        frames = []
        round_: Round | None = None
        with reading_record(round_id, "round"):  # a value the views cannot show included
            for event in events:
                round_ = event.mutate(round_)
                assert isinstance(round_, Round)
                frames.append({"event": _describe(event,
                                                  hide=event.originator_version in secret),
                               "state": _round_view(round_)})
        return frames

    def _face_down_secrets(self, events: Sequence[Any]) -> set[int]:
        """The versions of the round's face-down cards recorded with their face and not
        turned over, unless its shoe is retired (its whole order is public then). A deal
        records a face-down card without its face; rounds recorded before it did hold it,
        and a voided one never turns its hole card over while the shoe deals on."""
        facts = [(e.originator_version, e.fact()) for e in events
                 if isinstance(e, Round.Recorded)
                 and issubclass(e.fact_class, f.CardDealt | f.HoleCardRevealed)]
        revealed = {x.position for _, x in facts if isinstance(x, f.HoleCardRevealed)}
        secret = {version for version, x in facts if isinstance(x, f.CardDealt)
                  and not x.face_up and x.card != HIDDEN and x.position not in revealed}
        if secret:
            with self._reading(ShoeRecord, events[0].shoe_id, "shoe") as shoe:
                if shoe.retired:
                    return set()
        return secret

    def _round_events(self, round_id: UUID) -> list[Any]:
        events = list(self.events.get(round_id))
        if not events:
            raise NotFound(f"There is no round {round_id}.")
        for version, event in enumerate(events, 1):
            if event.originator_version != version:
                before = (f"version {events[version - 2].originator_version}" if version > 1
                          else "its start")
                raise InvariantBroken(f"{_NOT_FOLLOWING.format(round_id)}: {before} is "
                                      f"followed by version {event.originator_version}")
        if not isinstance(events[0], Round.Created):  # another aggregate's id
            raise NotFound(f"There is no round {round_id}.")
        return events

    def check_round(self, round_id: UUID) -> list[str]:
        """Re-run the rules over the recorded cards and decisions (R-S1): findings, if any.
        Everything comes from the stored events, read once: the rules and limits the round
        was started under, then its facts. A record that does not replay is a finding."""
        round_id = _uuid(round_id, "round")
        with _replayed(f"round {round_id}") as findings:  # NotFound goes through
            for _ in range(CHECK_TRIES):
                events = self._round_events(round_id)
                found = self._round_findings(*events)
                # A request saves its round events, postings and receipt in one statement:
                # postings read after the round's events are the same requests' unless the
                # round moved on in between (its next request's postings), or were written
                # around the ledger. Moved on: read it all again.
                if not found or self._version(round_id) == events[-1].originator_version:
                    break
            else:
                found.insert(0, f"round {round_id} moved on each of the {CHECK_TRIES} times it "
                                "was read for this check: what follows may be its newest "
                                "requests rather than a fault; check it again once it is still")
            findings += found
        return findings

    def _round_findings(self, created: Any, *rest: Any) -> list[str]:
        named = f"{created.rules.get('name')} v{created.rules.get('version')}"
        if rules_hash(created.rules) != created.rules_hash:
            # Re-run, altered rules would blame the settlement for what was done to them.
            return [f"v1: the rules recorded ({named}) do not match the content hash recorded "
                    f"with them, {created.rules_hash}: the record of the rules was altered, so "
                    "the round cannot be checked against them (R-S1)"]
        findings = []
        record = self._first_event(ids.rule_set_id(str(created.rules.get("name")),
                                                   created.rules.get("version")))
        if isinstance(record, RuleSetRecord.Created) and record.rules_hash != created.rules_hash:
            findings.append(f"v1: {named} stands for other rules (content hash "
                            f"{record.rules_hash}, recorded when first used) than this round "
                            f"played ({created.rules_hash}): its table took these rules before "
                            "names and versions were recorded, or they were written around the "
                            "ledger (R-S1)")
        facts = [e for e in rest if isinstance(e, Round.Recorded)]
        recorded = [e.fact() for e in facts]
        return findings + _undeclared_findings(created, *rest) + _time_findings(
            created, facts) + readjudicate(
            RuleSet.from_dict(created.rules), TableLimits.from_dict(created.limits),
            recorded, [e.originator_version for e in facts]) + self._posting_findings(
            created, recorded) + self._draw_findings(created, facts) + self._receipt_findings(
            created, facts)

    def _draw_findings(self, created: Any, facts: list[Any]) -> list[str]:
        """R-H3: every card the round records came from the shoe it was started with, which
        records as many cards drawn for it (saved together, in one statement). The shoe
        verification checks each card against the revealed order; this, that the round and
        the shoe tell of the same cards, while the shoe is live too."""
        shoe_id = created.shoe_id
        cards = [e for e in facts if issubclass(e.fact_class, CARD_FACTS)]
        findings = [f"v{e.originator_version}: a card dealt from shoe {e.shoe_id}, but the "
                    f"round was started with shoe {shoe_id} (R-H3)"
                    for e in cards if e.shoe_id != shoe_id]
        shoe_events = list(self.events.get(shoe_id))
        drawn = sum(e.count for e in shoe_events
                    if isinstance(e, ShoeRecord.CardsDrawn) and e.round_id == created.originator_id)
        if drawn != len(cards):
            findings.append(f"the round records {len(cards)} cards dealt; its shoe {shoe_id} "
                            f"records {drawn} drawn for it (R-H3)")
        made = shoe_events[0] if shoe_events else None
        if isinstance(made, ShoeRecord.Created):
            # The shoe's verification holds its cards to its own record: this, its record to
            # the rules (a shoe of eight wild cards verified whole at a table of one).
            rules = RuleSet.from_dict(created.rules)
            wanted = (rules.decks, rules.wild_cards,
                      cut_position(made.size, rules.penetration_percent))
            if (made.decks, made.wild_cards, made.cut) != wanted:
                findings.append(
                    f"its shoe {shoe_id} holds {made.decks} decks and {made.wild_cards} wild "
                    f"cards, cut at card {made.cut}; the rules the round was played under make "
                    f"a shoe of {wanted[0]} decks and {wanted[1]} wild cards, cut at card "
                    f"{wanted[2]} (R-S1)")
        return findings

    def _receipt_findings(self, created: Any, facts: list[Any]) -> list[str]:
        """Every request that recorded something in the round left a receipt as it was saved
        (one statement): made by the same actor, naming this round, its last version and how
        many events it recorded. An event appended around the ledger under a request id of
        its own has none; under another request's id, it breaks that receipt's count. Such
        an event can be a legal play (a stand nobody asked for), which no other check sees."""
        round_key = str(created.originator_id)
        by_request: dict[str, list[Any]] = {}
        for event in (created, *facts):
            by_request.setdefault(event.request_id, []).append(event)
        receipts = {r.request_id: r for r in self._first_events(
            [ids.receipt_id(r) for r in by_request]) if isinstance(r, Receipt.Created)}
        findings = []
        for request_id, events in by_request.items():
            versions = ", ".join(f"v{e.originator_version}" for e in events)
            receipt = receipts.get(request_id)
            if receipt is None:
                findings.append(f"{versions}: recorded under request {request_id!r}, of which "
                                "the ledger kept no receipt: written around the ledger (R-V2)")
                continue
            if events[0] is created:
                accounted = (receipt.command == "start_round" and len(events) == 1
                             and receipt.result.get("round_id") == round_key)
            else:
                accounted = (receipt.result.get("round_id") == round_key
                             and receipt.result.get("version") == events[-1].originator_version
                             and receipt.result.get("facts") == len(events))
            actors = {e.actor for e in events} - {receipt.actor}
            if not accounted or actors:
                findings.append(
                    f"{versions}: recorded under request {request_id!r}, whose receipt "
                    f"({receipt.command} by {receipt.actor}) does not account for them"
                    + (f" (recorded as made by {', '.join(sorted(actors))})" if actors else "")
                    + ": written around the ledger (R-V2)")
        return findings

    def round_postings(self, round_id: UUID) -> list[dict[str, Any]]:
        """The postings naming the round on every account, as the round check finds them:
        its bettors', its table's house's, and any other's (which the check reports). Each
        with the account it is on (``owner`` and ``kind`` as opened, None for an id no account
        was opened as), by account, and each account's in order."""
        created, *rest = self._round_events(_uuid(round_id, "round"))
        own = list(_round_accounts(created, [e.fact() for e in rest
                                             if isinstance(e, Round.Recorded)]))
        postings = self._postings_naming(created.originator_id, own)
        opened = {e.originator_id: e for e in self._first_events(
            list({p.originator_id for p in postings}), own=own)
            if isinstance(e, Account.Created)}
        items = []
        for posting in postings:
            account = opened.get(posting.originator_id)
            items.append({**_describe(posting), "account_id": str(posting.originator_id),
                          "owner": account.owner if account is not None else None,
                          "kind": account.kind if account is not None else None})
        return items

    def _posting_findings(self, created: Any, recorded: list[f.Fact]) -> list[str]:
        """R-M4: the chips the postings naming this round moved on each account are those its
        facts move: on its bettors' accounts and its table's house account, and none on any
        other. A posting appended around the ledger shows here, as do a round's events taken
        away with their postings left."""
        expected = net_movements(recorded)
        keys = _round_accounts(created, recorded)
        moved = dict.fromkeys(keys, Movement(0, 0))  # chips back to nothing included
        for event in self._postings_naming(created.originator_id, list(keys)):
            held, available = moved.get(event.originator_id, Movement(0, 0))
            moved[event.originator_id] = Movement(held + event.held_delta,
                                                  available + event.available_delta)
        strangers = self._owners([a for a in moved if a not in keys])
        findings = []
        for account_id, (held, available) in moved.items():
            key = keys.get(account_id)
            want = expected.get(key, Movement(0, 0)) if key is not None else Movement(0, 0)
            if (held, available) == (want.held, want.available):
                continue
            whose = (f"{key}'s account" if key not in (None, HOUSE_KEY) else
                     "the table's house account" if key == HOUSE_KEY else
                     f"{strangers[account_id]}, which has no part in it,")
            findings.append(
                f"the postings naming this round on {whose} move {available} available and "
                f"{held} held; the round's events move {want.available} and {want.held}: chips "
                "were posted around the round (R-M4)")
        return findings

    def _owners(self, account_ids: list[UUID]) -> dict[UUID, str]:
        """Each account as a finding names it: whose it is, as it was opened, or its id where
        nothing was opened as an account under it."""
        if not account_ids:  # the common case: no query
            return {}
        # None for a first event that does not decode (a stranger's: passed over).
        firsts = {s.originator_id: self._decoded(s, []) for s in self._first_stored(account_ids)}

        def named(account_id: UUID) -> str:
            first = firsts.get(account_id)
            if isinstance(first, Account.Created):
                return f"{first.owner}'s account"
            if account_id in firsts and first is None:
                return f"{account_id}, whose opening does not decode"
            return f"{account_id}, which no account was opened as"

        return {a: named(a) for a in account_ids}

    def _first_event(self, originator_id: UUID) -> Any:
        """The first stored event of ``originator_id``, as its kind (None if it has none)."""
        return next(iter(self.events.get(originator_id, limit=1)), None)

    def _first_events(self, originator_ids: list[UUID],
                      own: list[UUID] | None = None) -> list[Any]:
        """The first event of each of ``originator_ids`` that has one (on PostgreSQL, in one
        query); given ``own``, one that does not decode, of an id not in it, is passed over
        (:meth:`_decoded`)."""
        stored = self._first_stored(originator_ids)
        if own is None:
            return [self.mapper.to_domain_event(s) for s in stored]
        return [e for e in (self._decoded(s, own) for s in stored) if e is not None]

    def _first_stored(self, originator_ids: list[UUID]) -> list[StoredEvent]:
        """The first stored event of each of ``originator_ids`` that has one (on PostgreSQL,
        in one query)."""
        recorder = self.recorder
        if isinstance(recorder, LedgerRecorder):
            return first_events(recorder, originator_ids)
        return [s for i in originator_ids for s in recorder.select_events(i, limit=1)]

    def _postings_naming(self, round_id: UUID, account_ids: list[UUID]) -> list[Any]:
        """The postings that name round ``round_id`` on ``account_ids``, and on PostgreSQL on
        every other account. There the server finds them by index, with every posting spelt
        otherwise than as the ledger writes them, to be decoded and decided on here: reading
        the players' whole histories, a check took a second with 200,000 entries among them.
        One of those that does not decode, on an account not the round's, is passed over: no
        reader takes it for a posting, and it would stop every round's check."""
        recorder = self.recorder
        postings: Iterable[Any]
        written = self.mapper.transcoder.encode({"round_id": round_id})  # as the ledger does
        value = round_id.hex.encode()
        at = written.find(value)
        if isinstance(recorder, LedgerRecorder) and self.mapper.cipher is None \
                and self.mapper.compressor is None and written[1:at] == ROUND_ID_KEY \
                and written[at + 32:at + 34] == b'"}':
            stored = postings_that_may_name(recorder, account_ids, value)
            postings = filter(None, (self._decoded(e, account_ids) for e in stored))
        else:
            postings = (e for a in account_ids for e in self.events.get(a))
        return [e for e in postings
                if isinstance(e, Account.Posted) and e.round_id == round_id]

    def _decoded(self, stored: StoredEvent, own: list[UUID]) -> Any:
        """The event, or None for one that does not decode on an account not in ``own``."""
        try:
            return self.mapper.to_domain_event(stored)
        except InvariantBroken:
            if stored.originator_id in own:
                raise
            _log.warning("an event that does not decode, %s v%d (%s), off the round's "
                         "accounts, is passed over where the postings naming a round are read",
                         stored.originator_id, stored.originator_version, stored.topic)
            return None

    def balance(self, player: str) -> dict[str, Any]:
        try:
            with self._reading(Account, _account_id(player), "account") as account:
                return account.summary()
        except NotFound:
            raise _no_account(player) from None

    def house(self, table_id: UUID) -> dict[str, Any]:
        table_id = _uuid(table_id, "table")
        try:
            with self._reading(Account, ids.house_id(table_id), "house account") as account:
                return account.summary()
        except NotFound:
            raise NotFound(f"There is no house account for table {table_id}.") from None

    def account_entries(self, player: str, *, after: int = 0,
                        limit: int = 100) -> dict[str, Any]:
        """A page of the account's entries in order, the first after version ``after``,
        ``limit`` at most: ``items``, and ``next_after`` to pass for the next page (None on
        the last)."""
        account_id = _account_id(player)
        page = self._events_page(account_id, after, limit, balances=True)
        if not page["items"] and not self._exists(account_id):
            raise _no_account(player)
        return page

    def house_entries(self, table_id: UUID, *, after: int = 0,
                      limit: int = 100) -> dict[str, Any]:
        """A page of the table's house account entries (its statement), as for a player's."""
        table_id = _uuid(table_id, "table")
        house_id = ids.house_id(table_id)
        page = self._events_page(house_id, after, limit, balances=True)
        if not page["items"] and not self._exists(house_id):
            raise NotFound(f"There is no house account for table {table_id}.")
        return page

    def table_events(self, table_id: UUID, *, after: int = 0,
                     limit: int = 100) -> dict[str, Any]:
        """A page of the table's events in order, the first after version ``after``: who
        opened it, changed its rules (and why), started its shoes and rounds, closed and
        reopened it, and when; ``next_after`` as for :meth:`account_entries`."""
        table_id = _uuid(table_id, "table")
        first = self._first_event(table_id)
        if not isinstance(first, Table.Created):
            raise NotFound(f"There is no table {table_id}.")
        return self._events_page(table_id, after, limit)

    def _events_page(self, aggregate_id: UUID, after: int, limit: int, *,
                     balances: bool = False) -> dict[str, Any]:
        """A page of the aggregate's events; ``balances``: of an account, each entry with the
        account's available and held chips after it, the account as its events make it."""
        limit = _page(limit)
        if type(after) is not int or not 0 <= after <= VERSION_MAX:
            raise DecisionRefused(f"A page starts after a version from 0 to {VERSION_MAX}.",
                                  field="after")
        events = list(self.events.get(aggregate_id, gt=after, limit=limit + 1))
        more = len(events) > limit
        items = [_describe(e) for e in events[:limit]]
        if balances and items:
            self._with_balances(aggregate_id, after, items, events)
        return {"items": items, "next_after": items[-1]["version"] if more else None}

    def _with_balances(self, account_id: UUID, after: int, items: list[dict[str, Any]],
                       events: list[Any]) -> None:
        """Each entry of a statement page with the account's balance after it: from the
        account at the page's start (its snapshot before it, and the events since), each entry
        applied in turn, each event's apply checking R-M3. From an entry that does not apply
        (a record altered around the ledger) on, the entries are listed without a balance:
        the statement is where an auditor sees such an entry, so it must still read."""
        try:
            with reading_record(account_id, "account"):
                account = self.repository.get(account_id, version=after) if after else None
                for item, event in zip(items, events, strict=False):
                    account = event.mutate(account)
                    item["balance"] = {"available": account.available, "held": account.held}
        except InvariantBroken as broken:
            _log.warning("statement of %s after version %d: balances stop where an entry "
                         "does not apply (%s)", account_id, after, broken)

    def shoe(self, shoe_id: UUID) -> dict[str, Any]:
        """Commitment and position; the order and salt only once retired (R-H2). As
        recorded: read from the store, not from the copy a process keeps for play."""
        return self._recorded_shoe(_uuid(shoe_id, "shoe")).public()

    def verify_shoe(self, shoe_id: UUID) -> list[str]:
        """For a retired shoe: the reveal matches the commitment, and every card dealt from
        the shoe was the next card of the revealed order (R-H2, R-H3). Findings, if any; a
        live shoe is refused (:class:`ShoeLive`)."""
        shoe_id = _uuid(shoe_id, "shoe")
        with _replayed(f"shoe {shoe_id}") as findings:  # NotFound goes through
            findings += self._shoe_findings(shoe_id)
        return findings

    def _recorded_shoe(self, shoe_id: UUID) -> ShoeRecord:
        """The shoe as its stored events make it: an audit of a copy kept for play would
        answer as it was read, whatever the record says now (and each process its own)."""
        first = self._first_event(shoe_id)
        if isinstance(first, ShoeRecord.CardsDrawn | ShoeRecord.Retired
                      | ShoeRecord.Abandoned):  # its start removed
            raise InvariantBroken(f"{_NOT_FOLLOWING.format(shoe_id)}: its first stored event "
                                  f"is version {first.originator_version}")
        if not isinstance(first, ShoeRecord.Created):  # not a broken round's 500, say
            raise NotFound(f"There is no shoe {shoe_id}.")
        return cast(ShoeRecord, self._load(shoe_id, "shoe"))

    def _shoe_findings(self, shoe_id: UUID) -> list[str]:
        record = self._recorded_shoe(shoe_id)
        public, decks, wild_cards = record.public(), record.decks, record.wild_cards
        if not public["retired"]:  # not a finding: nothing was checked
            raise ShoeLive(f"Shoe {shoe_id} is still live: its order is revealed, and the shoe "
                           "can be verified, once it retires (its table closes, or a new shoe "
                           "replaces it).", "R-H2")
        if record.abandoned:  # nothing to check its cards against
            return [f"the shoe was abandoned unrevealed ({record.retired_reason}), the key that "
                    "sealed it lost: its cards cannot be checked against its commitment"]
        findings = [] if public["verified"] else ["the reveal does not match the commitment"]
        order = public["order"]
        findings += composition_findings(order, decks, wild_cards, public["size"])
        # The shoe records which positions went to which round, in order (its draws follow
        # each other: the shoe refuses to load otherwise); each round, the cards it dealt.
        draws = [e for e in self.events.get(shoe_id) if isinstance(e, ShoeRecord.CardsDrawn)]
        dealt: dict[UUID, list[tuple[int, str, f.CardDealt]]] = {}
        for round_id in dict.fromkeys(draw.round_id for draw in draws):  # each read once
            round_cards: list[tuple[int, f.CardDealt]] = []
            turned: dict[int, str] = {}
            for event in self.events.get(round_id):
                if not isinstance(event, Round.Recorded) or not issubclass(
                        event.fact_class, f.CardDealt | f.HoleCardRevealed):
                    continue  # (decoded only where a card is)
                fact = event.fact()
                if isinstance(fact, f.CardDealt) and getattr(event, "shoe_id", None) == shoe_id:
                    round_cards.append((event.originator_version, fact))
                elif isinstance(fact, f.HoleCardRevealed):
                    turned[fact.position] = fact.card
            # A card dealt face down is recorded without its face: the face it was turned
            # over with is the one to check (none if the round ended before: voided).
            dealt[round_id] = [(version, turned.get(x.position, x.card)
                                if x.card == HIDDEN else x.card, x)
                               for version, x in round_cards]
        taken = dict.fromkeys(dealt, 0)
        for draw in draws:
            cards = dealt[draw.round_id][taken[draw.round_id]:][:draw.count]
            taken[draw.round_id] += draw.count
            for position in range(draw.first + len(cards), draw.first + draw.count):
                findings.append(f"round {draw.round_id}: the shoe gave it position {position}, "
                                "and the round records no card dealt from it")
            for position, (version, card, fact) in enumerate(cards, start=draw.first):
                if fact.position != position:
                    findings.append(f"round {draw.round_id} v{version}: dealt {card} as "
                                    f"position {fact.position}, but the shoe gave it position "
                                    f"{position} there")
                if not 0 <= fact.position < len(order):
                    findings.append(f"round {draw.round_id} v{version}: dealt {card} as "
                                    f"position {fact.position}, which the revealed order of "
                                    f"{len(order)} cards does not have")
                elif order[fact.position] != card and card != HIDDEN:
                    findings.append(f"round {draw.round_id} v{version}: position "
                                    f"{fact.position} dealt {card}, the revealed order "
                                    f"has {order[fact.position]}")
        for round_id, cards in dealt.items():
            for version, card, fact in cards[taken[round_id]:]:
                findings.append(f"round {round_id} v{version}: dealt {card} as position "
                                f"{fact.position}, a card the shoe never gave it")
        return findings

    def check_shoe_key(self) -> str | None:
        """Why this ledger's shoe key cannot open the newest live shoe (of the last
        ``SHOES_CHECKED`` shoes), if it cannot; None when it can or none is live. A wrong key
        would otherwise show only at the next card dealt from a shoe sealed with the right
        one."""
        recorder = self.recorder
        if not isinstance(recorder, LedgerRecorder):
            return None  # in memory: every shoe was sealed by this very ledger
        live = without_ending(recorder, ShoeRecord.Created.TOPIC, SHOE_ENDINGS, SHOES_CHECKED)
        return self._unopened(live[0]) if live else None

    def unopened_shoes(self) -> list[dict[str, Any]]:
        """Every live shoe the shoe key does not open, newest first, as :meth:`shoe` shows it
        with ``why`` and its table's round in play (``round_id``, None if none): what a lost
        key leaves (:meth:`abandon_shoe`). Reads the whole log once."""
        recorder = self.recorder
        if not isinstance(recorder, LedgerRecorder):
            return []  # in memory: every shoe was sealed by this very ledger
        found = []
        for shoe_id in without_ending(recorder, ShoeRecord.Created.TOPIC, SHOE_ENDINGS):
            record = self._recorded_shoe(shoe_id)  # read once, as the audit reads it
            why = None if record.retired else self._unsealing(shoe_id, record.sealed_order)
            if why is not None:
                shoe = record.public()
                table = self.table(record.table_id)
                in_play = table["current_round_id"] if table["shoe_id"] == str(shoe_id) else None
                if in_play is not None and self.round_state(UUID(in_play))["phase"] in (
                        SETTLED, VOIDED):
                    in_play = None
                found.append({**shoe, "why": why, "table": table["name"], "round_id": in_play})
        return found

    def abandon_shoe(self, request_id: str, actor: str, shoe_id: UUID, reason: str) -> None:
        """Retire a live shoe the shoe key does not open, unrevealed (its key lost): no card
        is dealt from it again; its table's round in play records it and takes no more stakes
        or decisions, for a manager to void (R-V1), or, the dealer finished, to be settled;
        the table's next round starts a new shoe. A shoe the key opens is refused
        (:class:`ShoeKept`): it retires as the rules say, revealed (R-H2)."""
        shoe_id = _uuid(shoe_id, "shoe")
        _check_reason(reason, "")

        def body() -> tuple[Result, list[Aggregate]]:
            record = self._get(ShoeRecord, shoe_id, "shoe", fresh=True)
            if record.retired:
                raise ShoeKept(f"Shoe {shoe_id} is retired already ({record.retired_reason}).",
                               "R-H2")
            if self._unsealing(shoe_id, record.sealed_order) is None:
                raise ShoeKept(f"The shoe key opens shoe {shoe_id}: it is not abandoned but "
                               "retires revealed, when its table closes or the next round "
                               "needs a new shoe.", "R-H2")
            result: Result = {"shoe_id": str(shoe_id)}
            touched: list[Aggregate] = [record]
            table = self._get(Table, record.table_id, "table")
            round_id = table.round_id if table.shoe_id == shoe_id else None
            if round_id is not None:  # its round in play, if any, learns it takes no card
                round_ = self._get(Round, round_id, "round", fresh=True)
                if round_.machine.phase not in (SETTLED, VOIDED):
                    produced = round_.act(actor, request_id, self._now(round_),
                                          lambda m: m.abandon_shoe(reason))
                    # As a play's receipt names them, for the round check to account for.
                    result.update(round_id=str(round_id), version=round_.version,
                                  facts=len(produced))
                    touched.append(round_)
            record.trigger_event(ShoeRecord.Abandoned, reason=reason, actor=actor,
                                 request_id=request_id, timestamp=self._now(record, *touched[1:]))
            return result, touched

        self._run(request_id, actor, "abandon_shoe",
                  {"shoe_id": str(shoe_id), "reason": reason}, body)

    def _unopened(self, shoe_id: UUID) -> str | None:
        """Why the shoe key does not open the live shoe, if it does not."""
        with self._reading(ShoeRecord, shoe_id, "shoe") as record:
            if record.retired:  # retired since the query
                return None
            sealed = record.sealed_order
        return self._unsealing(shoe_id, sealed)

    def _unsealing(self, shoe_id: UUID, sealed: str) -> str | None:
        """Why the shoe key does not open the sealed order, if it does not."""
        try:
            self._sealer().open(shoe_id, sealed)
        except InvariantBroken as broken:
            return str(broken)
        return None

    # --------------------------------------------------------------- internals

    def repeated(self) -> bool:
        """Whether the last request this thread carried out was a repeat, answered from the
        receipt its first time left: it changed nothing."""
        return bool(getattr(self._local, "repeated", False))

    def _run(self, request_id: str, actor: str, command: str, payload: dict[str, Any],
             body: Callable[[], tuple[Result, list[Aggregate]]], *, guard: UUID | None = None,
             seen: int | None = None, retries: int = 0) -> Result:
        """Carry out a request once: answer a repeat from its receipt, refuse a reused id,
        retry a lost race only where the guarded aggregate did not move (``seen``: the
        version of it the request was made on, if it named one). A save lost on the first
        try is always decided once more, on fresh copies (that try trusted the working set,
        which may be behind another process); ``retries`` allows more tries than that."""
        _check_request_id(request_id)
        check_name("actor", actor)
        fingerprint = _fingerprint(command, actor, payload)
        receipt_id = ids.receipt_id(request_id)
        self._local.repeated = False
        kept = self._receipts.get(receipt_id)
        if kept is not None:  # carried out by this process: answered as the store would
            first = self.mapper.to_domain_event(kept)
            if isinstance(first, Receipt.Created):
                repeated = self._reply(first, request_id, fingerprint, actor)
                self._local.repeated = True
                return repeated
        # In the store, the receipt is looked for only when something fails: a repeat that
        # would succeed again fails on the receipt's primary key, one that would now be
        # refused is recognised before its refusal is reported.
        for attempt in range(RETRIES_MAX + 1):
            # The first try trusts the working set; the others read everything fresh.
            tried = self._local.attempt = _Attempt(trusting=attempt == 0)
            try:
                try:
                    result, touched = body()
                except (LedgerError, InvariantBroken):
                    if tried.unverified:
                        continue  # decided on copies that may be behind: decide again
                    # Decided on the guarded aggregate as read, and on others read after it
                    # that another request may have changed meanwhile (its settlement
                    # posted): the refusal, or the mismatch, may be that request's doing.
                    overtaken = None
                    if any(aggregate.id != guard for aggregate in tried.taken):
                        overtaken = self._overtaken(
                            guard, _loaded_version(tried.taken, guard), seen)
                    # The receipt after the guard: a twin of this request (a terminal's
                    # retry, sent to another process) that moved it has left its receipt.
                    answered = self._answer(receipt_id, request_id, fingerprint, actor)
                    if answered is not None:
                        self._local.repeated = True
                        return answered
                    if overtaken is not None:
                        raise overtaken from None
                    raise
                loaded = _loaded_version(touched, guard)
                receipt = Receipt.record(receipt_id, self._clock(), request_id, command,
                                         fingerprint, result, actor)
                try:
                    stored = self._save(touched, receipt)
                except IntegrityError:
                    overtaken = self._overtaken(guard, loaded, seen)
                    answered = self._answer(receipt_id, request_id, fingerprint, actor)
                    if answered is not None:  # looked for after the guard, as above
                        self._local.repeated = True
                        return answered
                    if overtaken is not None:
                        raise overtaken from None
                    if attempt >= max(retries, 1):
                        raise _conflict() from None
                    # The accounts as read, for the next try and, while this one pauses, for
                    # the process's other requests.
                    self._working.give_all(tried.kept)
                    tried.kept = []
                    if attempt:
                        time.sleep(random.uniform(
                            0, min(RETRY_PAUSE_S * 2 ** (attempt - 1), RETRY_PAUSE_MAX_S)))
                    continue
                # What it read, and what it made (a round, a shoe, an account): the commands
                # that follow find them as committed, without loading them.
                self._working.give_all((*tried.taken, *touched))
                self._receipts.put(receipt_id, stored)
                tried.saved = True
                return result
            finally:
                self._local.attempt = None
                if not tried.saved and tried.kept:
                    self._working.give_all(tried.kept)
        raise AssertionError("unreachable")  # pragma: no cover

    def _save(self, aggregates: Sequence[Aggregate], receipt: Receipt.Created) -> StoredEvent:
        """What ``save()`` does for the ledger's aggregates and a request's receipt, in one
        insert statement, without the library's general-purpose steps (type protocol
        checks, recordings for processing, notifications) that cost a tenth of a decision
        and serve nothing here. The receipt as stored."""
        events = [event for aggregate in aggregates for event in aggregate.collect_events()]
        events.append(receipt)
        stored = [self.mapper.to_stored_event(e) for e in events]
        try:
            self.recorder.insert_events(stored)
        except MayHaveBeenAppended:
            # A try that committed lost its answer with its connection, and the next found
            # the events it had stored: this request's own work, not a twin's to repeat.
            if not self._stored_as_made(receipt):
                raise
        self._snapshot(aggregates, events)
        return stored[-1]

    def _snapshot(self, aggregates: Sequence[Aggregate], events: Sequence[Any]) -> None:
        """Snapshot those of ``aggregates`` whose ``events`` just saved reached an interval."""
        if self.snapshots is None:  # snapshotting turned off (IS_SNAPSHOTTING_ENABLED)
            return
        due = []
        for aggregate in aggregates:
            interval = self.snapshotting_intervals.get(type(aggregate))
            if interval is not None and any(e.originator_version % interval == 0
                                            for e in events if e.originator_id == aggregate.id):
                due.append(aggregate)
        if not due:
            return
        # Of the aggregate in hand, as committed: the library's take_snapshot would load it
        # from the store again. The request is done: a snapshot not written (its version taken,
        # the database gone meanwhile) is a copy missed, not the request's failure, which a
        # key already taken would have made look like a repeat.
        try:
            self.snapshots.put([type(a).Snapshot.take(a) for a in due])
        except MayHaveBeenAppended:
            # Written by a try whose answer was lost with its connection (or by another
            # process, of the same version of the same events): nothing was missed.
            pass
        except PersistenceError:
            _log.warning("the snapshot of %s was not written; its events are read instead",
                         ", ".join(f"{a.id} at version {a.version}" for a in due),
                         exc_info=True)

    def _stored_as_made(self, receipt: Receipt.Created) -> bool:
        """Whether the receipt stored under ``receipt``'s id is this one (a twin request's,
        made at another moment, has its own timestamp)."""
        stored = self._first_event(receipt.originator_id)
        return (isinstance(stored, Receipt.Created) and stored.timestamp == receipt.timestamp
                and stored.fingerprint == receipt.fingerprint)

    def _answer(self, receipt_id: UUID, request_id: str, fingerprint: str,
                actor: str) -> Result | None:
        created = self._first_event(receipt_id)
        if not isinstance(created, Receipt.Created):
            return None
        return self._reply(created, request_id, fingerprint, actor)

    @staticmethod
    def _reply(created: Receipt.Created, request_id: str, fingerprint: str,
               actor: str) -> Result:
        """The first result of the request ``created`` is the receipt of, for a repeat of it;
        other content under its id is refused."""
        if created.fingerprint != fingerprint:
            # Another key holder's request is not theirs to learn about.
            raise RequestIdReused(request_id,
                                  created.command if created.actor == actor else None)
        return dict(created.result)

    def _overtaken(self, guard: UUID | None, loaded: int | None,
                   seen: int | None) -> Conflict | None:
        """The refusal for a request another one overtook: the guarded aggregate is no longer
        at the version the request loaded (``seen``: the version the request named)."""
        if guard is None or loaded is None:
            return None
        now = self._version(guard)
        if now == loaded:
            return None
        return StaleVersion(seen, now) if seen is not None else _conflict()

    def _now(self, *after: Aggregate) -> datetime:
        """The clock's time, or just after the last recorded time of ``after`` if that is
        not earlier: a table's or a round's commands are stamped in the order they were
        recorded, each later than the one before, even when the clocks of two servers
        disagree a little (the table/day report keys a table's openings by time). Ahead of
        the clock by more than ``CLOCK_AHEAD_WARNING``, the record was stamped by a server
        whose clock ran fast, and every event after it is dated by that clock: a warning says
        so, once a minute at most, as the events it dates may count on a later gaming day."""
        now = self._clock()
        latest = max((aggregate.modified_on for aggregate in after), default=now)
        if latest - now > CLOCK_AHEAD_WARNING:
            self._warn_clock_behind(now, latest)
        return max(now, latest + _TICK)

    def _warn_clock_behind(self, now: datetime, latest: datetime) -> None:
        seen = time.monotonic()
        if seen - self._clock_warned_at < CLOCK_WARNING_INTERVAL_S:
            return
        self._clock_warned_at = seen
        _log.warning("This server's clock reads %s, but the record already holds %s, %.0f s "
                     "later: events are stamped after the record's last time, which never "
                     "goes back, so they may count on a later gaming day than the one they "
                     "were played on. A server's clock is wrong: check that every server "
                     "keeps time (NTP).", now.isoformat(), latest.isoformat(),
                     (latest - now).total_seconds())

    def _version(self, aggregate_id: UUID) -> int:
        events = list(self.recorder.select_events(aggregate_id, desc=True, limit=1))
        return events[0].originator_version if events else 0

    def _exists(self, aggregate_id: UUID) -> bool:
        return self._version(aggregate_id) > 0

    def _get(self, cls: type[A], aggregate_id: UUID, what: str, *, fresh: bool = False,
             exact: Callable[[A], bool] | None = None) -> A:
        """For a command: the aggregate, lent by the working set until the command's save
        commits. On the first attempt, which trusts the working set, used as held when
        ``exact`` accepts the copy (the version a request named) or when neither ``exact`` nor
        ``fresh`` is asked; otherwise (``fresh``, an ``exact`` that says no, a retry) brought
        up to date from the store first. A copy found behind means other processes are at
        work here: the rest of the attempt reads fresh."""
        tried: _Attempt = self._local.attempt
        earlier = next((i for i, a in enumerate(tried.taken) if a.id == aggregate_id), None)
        if earlier is not None:  # lent to this attempt already: one copy per attempt
            aggregate = tried.taken[earlier]
            if fresh:
                aggregate = tried.taken[earlier] = self._catch_up(aggregate)
        else:
            held = self._working.take(aggregate_id)
            if held is None:
                aggregate = self._load(aggregate_id, what)
            elif tried.trusting and exact is not None and isinstance(held, cls) \
                    and exact(held):
                # At the version named, which the store may have passed: a save fails on the
                # primary key then, and a refusal is checked again on fresh state.
                aggregate = held
                tried.unverified = True
            elif fresh or exact is not None or not tried.trusting:
                version = held.version
                aggregate = self._catch_up(held)
                if aggregate.version != version:
                    tried.trusting = False
            else:
                aggregate = held
                tried.unverified = True
            tried.take(aggregate)
        if not isinstance(aggregate, cls):
            raise NotFound(f"There is no {what} {aggregate_id}.")
        return aggregate

    @contextlib.contextmanager
    def _reading(self, cls: type[A], aggregate_id: UUID, what: str) -> Iterator[A]:
        """For a query: the aggregate up to date, kept from other threads while read."""
        held = self._working.take(aggregate_id)
        aggregate = self._load(aggregate_id, what) if held is None else self._catch_up(held)
        if not isinstance(aggregate, cls):
            raise NotFound(f"There is no {what} {aggregate_id}.")
        yield aggregate
        self._working.give(aggregate)

    def _load(self, aggregate_id: UUID, what: str) -> Aggregate:
        try:
            with reading_record(aggregate_id, what):
                aggregate: Aggregate = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            raise NotFound(f"There is no {what} {aggregate_id}.") from None
        return aggregate

    def _catch_up(self, aggregate: Aggregate) -> Aggregate:
        """The aggregate with the events recorded after its version applied."""
        with reading_record(aggregate.id):
            caught_up = project_aggregate(aggregate, self.events.get(aggregate.id,
                                                                     gt=aggregate.version))
        if caught_up is None:  # pragma: no cover (only a Created event starts afresh)
            raise InvariantBroken(f"the events after version {aggregate.version} of "
                                  f"{aggregate.id} did not apply to it")
        return caught_up

    def _account(self, player: str) -> Account:
        try:
            return self._get(Account, _account_id(player), "account")
        except NotFound:
            raise _no_account(player) from None

    def _check_rules_in_force(self, rules: RuleSet) -> None:
        """``_check_rule_set``, for rules whose name and version are not recorded yet: those
        recorded are put in force as recorded (checked when first recorded, or by an earlier
        version of the ledger: a name recorded before stays usable), or refused as standing
        for other rules (R-S1, ``_name_and_version``)."""
        try:  # lent for the attempt: _name_and_version reads the same copy
            self._get(RuleSetRecord, ids.rule_set_id(rules.name, rules.version), "rule set")
        except NotFound:
            _check_rule_set(rules)

    def _name_and_version(self, rules: RuleSet, table: Table, actor: str, request_id: str, *,
                          refuse_other: bool = True) -> list[Aggregate]:
        """R-S1: a rule set's name and version stand for the content first recorded under
        them (what the first use records, when ``table`` took the rules); other content
        under them is refused (``refuse_other``), or left to the round check to report."""
        record_id = ids.rule_set_id(rules.name, rules.version)
        try:
            record = self._get(RuleSetRecord, record_id, "rule set")
        except NotFound:
            return [RuleSetRecord._create(
                RuleSetRecord.Created, id=record_id, timestamp=table.modified_on,
                name=rules.name, version=rules.version, rules=rules.to_dict(),
                rules_hash=rules.content_hash, actor=actor, request_id=request_id)]
        if record.rules_hash != rules.content_hash and refuse_other:
            raise RuleSetInvalid("version", f"{rules.name} v{rules.version} stands for other "
                                 f"rules already (content hash {record.rules_hash}); give "
                                 "these rules a version of their own")
        return []

    def _last_round_ended(self, table: Table) -> tuple[Round, ...]:
        """The table's last round, if it has one, refused if it is still in play: what comes
        next at the table is stamped after it ended."""
        if table.round_id is None:
            return ()
        current = self._get(Round, table.round_id, "round")
        if current.machine.phase not in (SETTLED, VOIDED):
            raise RoundInPlay(f"Round {current.round_no} at table {table.name} is still in "
                              f"play ({current.machine.phase}): {current.machine.to_finish()}.",
                              "R-V1")
        return (current,)

    def _why_replace_shoe(self, shoe_id: UUID, rules: RuleSet,
                          limits: TableLimits) -> str | None:
        """Why a new round needs a new shoe (the reason its retirement records), if it does:
        the cards left before the cut card do not suffice for the deal at every box of the
        table, or the rules now ask for another shoe (R-H4, R-S1)."""
        record = self._get(ShoeRecord, shoe_id, "shoe", fresh=True)  # read, not written
        if record.retired:
            return "already retired"
        if record.position >= record.size:  # past the cut card, to the last (R-H4)
            return EVERY_CARD_DEALT
        if record.cut_card_out:
            return "cut card reached"
        left = record.cut - record.position
        deal = deal_size(limits.boxes, rules.dealer_hole_card)
        if left < deal:
            return (f"{left} cards left before the cut card, fewer than the {deal} a deal at "
                    f"{limits.boxes} boxes takes")
        if (record.decks, record.wild_cards, record.cut) != (
                rules.decks, rules.wild_cards, cut_position(record.size,
                                                            rules.penetration_percent)):
            return "the rules changed: decks, wild cards or penetration"
        return None

    def _new_shoe(self, table: Table, rules: RuleSet, actor: str,
                  request_id: str) -> ShoeRecord:
        shoe_no = table.shoe_count + 1
        shoe_id = ids.shoe_id(table.id, shoe_no)
        order = fresh_order(rules.decks, rules.wild_cards, self._randbelow)
        salt = new_salt()
        shoe = Shoe(order, cut=cut_position(len(order), rules.penetration_percent))
        record = ShoeRecord._create(
            ShoeRecord.Created, id=shoe_id, timestamp=self._clock(), table_id=table.id,
            shoe_no=shoe_no, decks=rules.decks, wild_cards=rules.wild_cards, size=shoe.size,
            cut=shoe.cut, commitment=commitment(order, salt), sealing=SCHEME,
            sealed_order=self._sealer().seal(shoe_id, order, salt), actor=actor,
            request_id=request_id)
        table.trigger_event(Table.ShoeStarted, shoe_id=shoe_id, shoe_no=shoe_no, actor=actor,
                            request_id=request_id, timestamp=self._now(table))
        self._remember(record, order)
        return record

    def _retire_shoe(self, shoe_id: UUID, reason: str, actor: str, request_id: str, *,
                     after: tuple[Round, ...]) -> list[Aggregate]:
        """Retire the shoe and reveal its order (R-H2), after the round ``after`` ended."""
        record = self._get(ShoeRecord, shoe_id, "shoe")
        if record.retired:
            return []
        self._retire(record, reason, actor, request_id, after)
        return [record]

    def _retire(self, record: ShoeRecord, reason: str, actor: str, request_id: str,
                after: tuple[Round, ...]) -> None:
        if record.position >= record.size:  # whatever retires it: a table closed, say
            reason = EVERY_CARD_DEALT
        order, salt = self._sealer().open(record.id, record.sealed_order)
        record.trigger_event(ShoeRecord.Retired, order=list(order), salt=salt.hex(),
                             reason=reason, actor=actor, request_id=request_id,
                             timestamp=self._now(record, *after))
        self._orders.pop((record.id, record.commitment))

    def _order(self, record: ShoeRecord) -> list[Card]:
        order = self._orders.get((record.id, record.commitment))
        if order is None:
            order, _ = self._sealer().open(record.id, record.sealed_order)
            self._remember(record, order)
        return order

    def _sealer(self) -> ShoeSealer:
        if self._shoe_key is None:
            raise InvariantBroken("this ledger was built without the shoe key and cannot "
                                  "shuffle, deal or reveal a shoe")
        return ShoeSealer(self._shoe_key)

    def _remember(self, record: ShoeRecord, order: list[Card]) -> None:
        self._orders.put((record.id, record.commitment), order)


class _ShoeDraw:
    """Loads the round's shoe on the first card a command needs, and counts the cards."""

    def __init__(self, ledger: GameLedger, round_: Round) -> None:
        self._ledger = ledger
        self._round = round_
        self.record: ShoeRecord | None = None
        self._shoe: Shoe | None = None
        self.drawn = 0

    def __call__(self) -> tuple[Card, int]:
        """The next card of the shoe, and its position."""
        card = self._loaded().draw()
        self.drawn += 1
        return card

    def peek(self, position: int) -> Card:
        """The face of a card this round was dealt face down, to turn it over."""
        return self._loaded().dealt(position)

    def _loaded(self) -> Shoe:
        if self._shoe is None:
            # While its round is in play only that round draws from the shoe (R-H4): once the
            # round has dealt, a copy at the position after its last card is the shoe as it is.
            at = self._round.next_position
            record = self._ledger._get(ShoeRecord, self._round.shoe_id, "shoe", fresh=True,
                                       exact=None if at is None else
                                       lambda held: held.position == at)
            if record.abandoned:
                raise DealRefused("The round's shoe was abandoned, the key that sealed it "
                                  "lost: no card can be dealt from it, and a manager voids the "
                                  "round.", "R-V1")
            if record.retired:
                raise DealRefused("The round's shoe has been retired.", "R-H4")
            self.record = record
            self._shoe = Shoe(self._ledger._order(record), record.cut, record.position)
        return self._shoe


_TICK = timedelta(microseconds=1)  # the finest step of a recorded time
# Two servers' clocks kept by NTP differ by milliseconds: a record this far ahead of the
# clock was stamped by one that is wrong. Said at most once a CLOCK_WARNING_INTERVAL_S.
CLOCK_AHEAD_WARNING: Final = timedelta(seconds=2)
CLOCK_WARNING_INTERVAL_S: Final = 60.0
EVERY_CARD_DEALT = "every card dealt"  # a shoe's retirement: its last card drawn (R-H4)


def _conflict() -> Conflict:
    return Conflict("Another request changed this first; nothing was changed. Look at the "
                    "current state and decide again.")


_NOT_FOLLOWING = "the stored events of {} skip or repeat a version"


def unreplayable(error: Exception, what: str = "") -> str:
    """A check's finding for a record that does not replay: an ``InvariantBroken`` names the
    event; any other error, met replaying ``what``, is a value the record should not hold."""
    said = str(error) if isinstance(error, InvariantBroken) else _cannot_hold(what, error)
    return (f"{said}: the record does not replay, so it cannot be checked; the hash chain "
            "(GET /audit/chain) shows whether it was altered once stored (not whether it was "
            "appended with the service's credentials)")


def _cannot_hold(what: str, error: Exception) -> str:
    value = (f"an unknown value, {error}" if isinstance(error, KeyError)
             else f"{type(error).__name__}: {error}")
    return f"the stored events of {what} hold a value they cannot ({value})"


# What replaying an altered record may raise: besides a broken invariant, a value of the
# wrong type or out of range where the events written by the ledger never hold one.
_UNREPLAYABLE = (InvariantBroken, RuleSetInvalid, TypeError, AttributeError, ValueError,
                 KeyError, IndexError)


@contextlib.contextmanager
def _replayed(what: str) -> Iterator[list[str]]:
    """A check replaying ``what`` from the record: what it finds, or, when the record does not
    replay, that finding alone (logged with its trace for the operators)."""
    findings: list[str] = []
    try:
        yield findings
    except _UNREPLAYABLE as error:
        _log.warning("%s does not replay", what, exc_info=error)
        findings[:] = [unreplayable(error, what)]


@contextlib.contextmanager
def reading_record(aggregate_id: UUID, what: str = "") -> Iterator[None]:
    """Loading or replaying an aggregate (``what``: its kind, for the sentence): a gap in its
    stored versions, or a stored value its events cannot apply (a card that is no card, of
    the right type), is a broken record, said so."""
    try:
        yield
    except OriginatorVersionError as error:
        raise InvariantBroken(_NOT_FOLLOWING.format(aggregate_id)) from error
    except InvariantBroken:
        raise
    except _UNREPLAYABLE as error:
        raise InvariantBroken(_cannot_hold(f"{what} {aggregate_id}".lstrip(), error)
                              ) from error


def _account_id(player: str) -> UUID:
    """The account of a player id that could name one: what could not (a control character,
    65 characters) is refused as such, naming the player, not looked for."""
    check_name("player id", player, "player")
    return ids.account_id(player)


def _no_account(player: str) -> NotFound:
    return NotFound(f"Player {player} has no account; the cashier opens one.", "R-M3")


class _Attempt:
    """One try of a command: what it took from the working set, and whether it used a
    copy as held, without reading the store (``unverified``). ``kept``: copies of the
    accounts it took, as taken, for the working set if the try fails (what it took may be
    half-changed): the next try, or the next command, then reads only the events recorded
    since instead of loading the accounts again (a settlement losing its save to another
    table's postings on shared accounts reloaded each one)."""

    __slots__ = ("kept", "saved", "taken", "trusting", "unverified")

    def __init__(self, *, trusting: bool) -> None:
        self.trusting = trusting
        self.taken: list[Aggregate] = []
        self.kept: list[Aggregate] = []
        self.unverified = False
        self.saved = False

    def take(self, aggregate: Aggregate) -> None:
        self.taken.append(aggregate)
        if type(aggregate) is Account:  # numbers only: a shallow copy is a whole one
            kept = copy.copy(aggregate)
            kept._pending_events = []  # its own, empty
            self.kept.append(kept)


def _time_findings(created: Any, facts: list[Any]) -> list[str]:
    """A round's events never go back in time: each request is stamped after the one before
    (``GameLedger._now``), and a request's events share its time."""
    return [f"v{e.originator_version}: recorded at {e.timestamp.isoformat()}, before "
            f"v{before.originator_version} ({before.timestamp.isoformat()}): a round's events "
            "never go back in time; written around the ledger (R-V2), or recorded on servers "
            "whose clocks disagreed by a version of pitboss that did not yet stamp each request "
            "after the one before"
            for before, e in itertools.pairwise((created, *facts))
            if e.timestamp < before.timestamp]


def _loaded_version(touched: Sequence[Aggregate], guard: UUID | None) -> int | None:
    """The version the guarded aggregate had when the command loaded it."""
    for aggregate in touched:
        if aggregate.id == guard:
            return aggregate.version - len(aggregate.pending_events)
    return None


def _undeclared_findings(*events: Any) -> list[str]:
    """Events stored with fields their class does not declare: read as if they were not
    there (the round's replay and settlement ignore them), but shown with the event's data."""
    findings = []
    for event in events:
        kind: type = type(event)
        undeclared = sorted(set(vars(event)).difference(_field_names(kind)))
        if undeclared:
            findings.append(f"v{event.originator_version}: recorded with "
                            f"{', '.join(undeclared)}, which this version of pitboss does not "
                            "read: written by a later version, or around the ledger (R-V2)")
    return findings


def _round_view(round_: Round) -> dict[str, Any]:
    return {"round_id": str(round_.id), "table_id": str(round_.table_id),
            "round_no": round_.round_no, "shoe_id": str(round_.shoe_id),
            "rules_hash": round_.rules_hash, "version": round_.version,
            "legal": [d._asdict() for d in round_.machine.legal()],
            **round_.machine.view()}


_NOT_SHOWN = frozenset({"originator_id", "originator_version", "timestamp", "originator_topic",
                        "sealed_order"})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """The fields event class ``cls`` declares, in order."""
    return tuple(f.name for f in dataclasses.fields(cls))


def _memo(facts: Sequence[f.Fact]) -> str:
    """What a command's postings say on each account's statement: the kinds of fact that moved
    the chips, and a void's or a ruling's reason, so that a cashier, who may not read rounds,
    can tell a player why (R-V1, R-V2). (Not the cards and decisions recorded with them.)"""
    kinds = ", ".join(dict.fromkeys(type(x).__name__ for x in facts if movements(x)))
    return kinds + "".join(f"; reason: {x.reason}" for x in facts
                           if isinstance(x, f.RoundVoided | f.RulingRecorded))


def _round_accounts(created: Any, recorded: list[f.Fact]) -> dict[UUID, str]:
    """The accounts a round's facts move chips on, by id: each bettor's (its key, the player)
    and its table's house account (``HOUSE_KEY``)."""
    keys = {ids.account_id(k): k for fact in recorded for k in movements(fact)
            if k != HOUSE_KEY}
    keys[ids.house_id(created.table_id)] = HOUSE_KEY
    return keys


def _describe(event: Any, hide: bool = False) -> dict[str, Any]:
    """An event as the queries show it; ``hide``: a face-down card, shown as a card dealt
    (a wild card's own event type would tell what it is)."""
    # Its fields as its class declares them, a default included where the event was stored
    # before the field was added; then any it holds that its class does not declare.
    kind: type = type(event)
    stored = vars(event)
    data = {name: stored[name] if name in stored else getattr(event, name)
            for name in _field_names(kind) if name not in _NOT_SHOWN}
    data.update((name, value) for name, value in stored.items()
                if name not in data and name not in _NOT_SHOWN)
    name = kind.__name__
    if hide:
        data["card"], name = HIDDEN, "CardDealt"
    return {"version": event.originator_version, "type": name,
            "timestamp": event.timestamp.isoformat(), "actor": data.pop("actor", None),
            "request_id": data.pop("request_id", None), "data": _jsonable(data)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, UUID | datetime):
        return str(value)
    return value


# What json.dumps(sort_keys=True, separators=(",", ":"), default=str) does, built once.
_CANONICAL_JSON = ReusedEncoder(json.JSONEncoder(sort_keys=True, separators=(",", ":"),
                                                 default=str))


def _fingerprint(command: str, actor: str, payload: dict[str, Any]) -> str:
    canonical = _CANONICAL_JSON.encode({"command": command, "actor": actor, "payload": payload})
    return hashlib.sha256(canonical.encode()).hexdigest()


def _uuid(value: UUID | str, what: str) -> UUID:
    """An id as the ledger records it. Text in any form ``UUID()`` reads is taken (recorded
    as text, a round id would not match the round's own, and the checks would report
    chips posted around it); anything else names nothing."""
    if type(value) is UUID:
        return value
    if isinstance(value, UUID):  # a driver's own kind: recorded, it would not transcode
        return UUID(int=value.int)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return UUID(value)
    raise NotFound(f"There is no {what} {value!r}.")


def _check_request_id(request_id: str) -> None:
    if (not isinstance(request_id, str) or not 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS
            or not request_id.isprintable()):
        raise DecisionRefused(f"A request id is 1 to {REQUEST_ID_MAX_CHARS} printable "
                              "characters.", "R-M4")


def _check_rule_set(rules: RuleSet) -> None:
    """What a rule set put in force must be besides valid: its name written one way only,
    as table names are (it is looked up with its version, R-S1), and not a preset's own name
    and version for other rules."""
    if not is_name(rules.name):
        raise RuleSetInvalid("name", f"it must be 1 to {NAME_MAX_CHARS} printable characters, "
                             "without surrounding spaces")
    why = unwritten("rule set name", rules.name)
    if why is not None:
        raise RuleSetInvalid("name", why)
    clash = preset_clash(rules)
    if clash is not None:
        raise RuleSetInvalid("name", clash)


def _check_dealable(rules: RuleSet, limits: TableLimits) -> None:
    """A round can be dealt at the table (``undealable``, R-C8)."""
    need = rules.min_boxes_lone_player
    fault = undealable(rules, limits)
    if fault == "boxes":
        raise RuleSetInvalid("boxes", f"one box of one bettor is one player, who must play at "
                             f"least {need} boxes (R-C8): no round could be dealt; give the "
                             "table more boxes, or rules that let bettors share a box or a "
                             "player alone play one (bettors_per_box, min_boxes_lone_player)",
                             "R-C8")
    if fault == "table_max":
        raise RuleSetInvalid("table_max", f"one box whose stakes together are at most "
                             f"{limits.table_max} holds one stake of the minimum "
                             f"{limits.table_min}, so one player, who must play at least "
                             f"{need} boxes (R-C8): no round could be dealt; give the table "
                             "more boxes, or a maximum of at least twice its minimum", "R-C8")


def _check_reason(reason: str, rule: str) -> None:
    """A reason recorded with an event (a void's, a ruling's, a table's closing, reopening or
    change of rules): 1 to REASON_MAX_CHARS printable characters, not only spaces."""
    if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX_CHARS \
            or not reason.isprintable():
        raise DecisionRefused(f"A reason is 1 to {REASON_MAX_CHARS} printable characters, not "
                              "only spaces.", rule)


def _check_currency(currency: str) -> None:
    if not (isinstance(currency, str) and len(currency) == 3 and currency.isascii()
            and currency.isalpha() and currency.isupper()):
        raise CurrencyRefused("A currency is a three-letter ISO code such as EUR.")


def _check_known_currency(currency: str) -> None:
    """Checked when a table or an account is opened in ``currency``: a typo would open one
    whose currency cannot be changed (tables and accounts stored before keep theirs)."""
    if currency not in CURRENCIES:
        raise CurrencyRefused(f"{currency} is no ISO 4217 currency with a minor unit that a "
                              "table plays in (not a fund code or a unit of account; a typo "
                              "for one?); a table's or account's currency cannot be changed "
                              "once opened.")


def _page(limit: int) -> int:
    if type(limit) is not int or not 1 <= limit <= PAGE_SIZE_MAX:
        raise DecisionRefused(f"A page holds 1 to {PAGE_SIZE_MAX} items.", field="limit")
    return limit


__all__ = ["GameLedger", "LedgerError", "utc_now"]

"""The batch engine: reads the ledger's log a page at a time and feeds every projection.

One page of notifications (``select_notifications(start, limit, inclusive_of_start=False)``,
``start`` being the lowest position of the projections) is read once and each notification
decoded at most once, only if some projection reads its content. Each projection then
applies the part of the page past its own position in one transaction with its tracking
row (:meth:`projections.base.BatchProjection.process_batch`): exactly once, resumable.

**Why reading by ``id > position`` never skips an event.** Every writer of the ledger's
table appends through the SQL function its recorder's ``insert_events`` calls
(``ledger/storage.py``; the service role may not ``INSERT`` otherwise), which takes the table's
append lock (a transaction-level advisory lock) before it draws notification ids and holds it
through its commit; a bulk load must take the same lock (``append_lock_key``). Ids are drawn
from the sequence during the ``INSERT``, so a writer draws its ids only after the previous
writer has committed (or rolled back) and become visible; PostgreSQL makes a commit visible
before it releases the transaction's locks. Hence ids become visible in increasing order,
and once id N is visible no lower id can appear later. Gaps are ids burnt by rolled-back
inserts and are never filled, so the reader steps over them at once and never waits on them.
The library's database functions (``POSTGRES_ENABLE_DB_FUNCTIONS``) insert *without* a lock,
so the engine refuses to run when they are enabled. Should an event be skipped anyway, the
per-aggregate version checks of every projection stop it loudly rather than let it count
wrongly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast
from uuid import UUID

import psycopg
from eventsourcing.persistence import Notification, ProgrammingError
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore, PostgresFactory
from eventsourcing.utils import Environment, strtobool
from psycopg.errors import UndefinedTable
from psycopg.sql import SQL, Composable, Identifier, Literal
from psycopg_pool import ConnectionPool

from ledger.aggregates.receipt import Receipt
from ledger.application import GameLedger
from ledger.storage import STATEMENT_TIMEOUT, reconnecting_promptly
from projections.balances import BalancesProjection
from projections.base import LEDGER_APP, NEXT, BatchProjection, Curs, Item, View, table_exists
from projections.rounds import RoundIndexProjection
from projections.settings import (
    LAG_COUNT_MAX,
    POOL_DEFAULTS,
    GamingDay,
    ProjectionSetupError,
    check_batch_size,
)
from projections.table_days import TableDaysProjection, TableDaysView

PROJECTION_CLASSES: tuple[type[BatchProjection[Any]], ...] = (
    BalancesProjection, RoundIndexProjection, TableDaysProjection)
NAMES = tuple(cls.name for cls in PROJECTION_CLASSES)
OWN_CONNECT_TIMEOUT_S = 5
READER_DEFAULTS = {"LEDGER_POSTGRES_POOL_SIZE": "1", "LEDGER_POSTGRES_MAX_OVERFLOW": "2"}
T = TypeVar("T")
SAVE_EVENTS_MAX = 1000  # far more than one request saves (a round's settlement: about 20)
# Creating tables concurrently (two workers starting, a worker and the API) can deadlock in the
# catalog; the read side serializes its DDL on this advisory lock.
DDL_LOCK_KEY = 0x70697462_6F737331  # "pitboss1"


def merged_env(env: Mapping[str, str], defaults: Mapping[str, str] = POOL_DEFAULTS
               ) -> dict[str, str]:
    """``os.environ`` overlaid with ``env``; pool defaults only where neither says."""
    merged = {**os.environ, **env}
    for key, value in defaults.items():
        merged.setdefault(key, value)
    ledger_env = Environment(LEDGER_APP, merged)
    if ledger_env.get("PERSISTENCE_MODULE") != "eventsourcing.postgres":
        raise ProjectionSetupError("the projections need PostgreSQL: set PERSISTENCE_MODULE to "
                                   "eventsourcing.postgres and the POSTGRES_* settings")
    if strtobool(ledger_env.get("POSTGRES_ENABLE_DB_FUNCTIONS") or "no"):
        raise ProjectionSetupError(
            "POSTGRES_ENABLE_DB_FUNCTIONS is on: its insert function takes no lock, so "
            "notification ids could commit out of order and a projection could skip an event; "
            "turn it off")
    return merged


def projections_datastore(env: Mapping[str, str]) -> tuple[PostgresDatastore, bool]:
    """The projections' own pool (``PROJECTIONS_POSTGRES_*`` first), and whether to create
    tables (``CREATE_TABLE``)."""
    factory = PostgresFactory(Environment("projections", merged_env(env)))
    pool = factory.datastore.pool
    # The library builds the pool, and a pool takes its check only when built: set here on the
    # pool's own attribute (psycopg-pool is pinned in pyproject.toml; a test restarts the
    # database under it).
    if pool._check is not None:  # PROJECTIONS_POSTGRES_PRE_PING
        pool._check = _purging_check(pool)
    reconnecting_promptly(pool)
    return factory.datastore, factory.env_create_table()


def _purging_check(pool: ConnectionPool[Any]) -> Callable[[Any], None]:
    """The pool's ping before use, which on finding a connection dropped pings every idle one
    at once (a database restart drops them all). The pool waits a second before its next try,
    then two, four...: alone, it met each stale connection in turn, and the first read after
    a restart took 3 seconds, or ran past its 5-second timeout."""
    def check(conn: Any) -> None:
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            pool.check()  # those dropped are let go, and replaced
            raise
    return check


def ledger_events_table(env: Mapping[str, str]) -> Identifier:
    schema = Environment(LEDGER_APP, merged_env(env)).get("POSTGRES_SCHEMA") or "public"
    return Identifier(schema.strip() or "public", f"{LEDGER_APP.lower()}_events")


def projection_class(name: str) -> type[BatchProjection[Any]]:
    for cls in PROJECTION_CLASSES:
        if cls.name == name:
            return cls
    raise ProjectionSetupError(f"there is no projection {name!r}; there are {', '.join(NAMES)}")


def build_projection(cls: type[BatchProjection[Any]], datastore: PostgresDatastore, *,
                     generation: str = "", gaming_day: GamingDay | None = None,
                     create: bool = True, fresh: bool = False) -> BatchProjection[Any]:
    """A projection over its view in the given generation; ``fresh`` drops old tables first."""
    view: View
    if issubclass(cls.view_class, TableDaysView):
        view = cls.view_class(datastore, generation=generation, gaming_day=gaming_day)
    else:
        view = cls.view_class(datastore, generation=generation)
    if create or fresh:
        with ddl_lock(datastore):
            if fresh:
                view.drop()
            view.create_table()
    return cls(view)


@contextmanager
def ddl_lock(datastore: PostgresDatastore) -> Iterator[None]:
    """Hold the read side's DDL lock (on a pooled connection of its own) meanwhile."""
    with datastore.get_connection() as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (DDL_LOCK_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (DDL_LOCK_KEY,))


class Reader:
    """The ledger's event log, a page at a time. Read only: built without the shoe key, and
    it never creates the ledger's tables (the ledger does); until they exist it reads nothing.
    Its reads have no statement timeout: a page that waits on an operator's lock waits it out,
    where a rebuild stopped by the timeout would start again from event zero.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.ledger = GameLedger(env={**merged_env(env, READER_DEFAULTS),
                                      "LEDGER_CREATE_TABLE": "no",
                                      f"LEDGER_{STATEMENT_TIMEOUT}": "0"})
        recorder = self.ledger.recorder
        if not isinstance(recorder, PostgresApplicationRecorder):
            self.ledger.close()
            raise ProjectionSetupError("the ledger is not stored in PostgreSQL")
        self.recorder = recorder
        self.events_table = Identifier(recorder.datastore.schema, recorder.events_table_name)
        self.channel = recorder.channel_name

    def page(self, after: int, limit: int) -> Sequence[Notification]:
        return self._read(lambda: self.recorder.select_notifications(
            after, limit, inclusive_of_start=False), [])

    def own_connection(self) -> psycopg.Connection[Any]:
        """A connection of the reader's database outside its pool: for a LISTEN, or a lock
        held for a long time while the pool's connections (however few) do the reading."""
        pool_kwargs = self.recorder.datastore.pool.kwargs
        kwargs: dict[str, Any] = pool_kwargs if isinstance(pool_kwargs, dict) else {}
        return psycopg.connect(**{k: v for k, v in kwargs.items()
                                  if k in ("dbname", "host", "port", "user", "password")},
                               autocommit=True, connect_timeout=OWN_CONNECT_TIMEOUT_S)

    def decode(self, notification: Notification) -> Any:
        return self.ledger.mapper.to_domain_event(notification)

    def head(self) -> int:
        return self._read(lambda: self.recorder.max_notification_id() or 0, 0)

    @staticmethod
    def _read(query: Callable[[], T], empty: T) -> T:
        """What ``query`` reads from the event table, or ``empty`` until the table exists."""
        try:
            return query()
        except ProgrammingError as error:
            if isinstance(error.__cause__, UndefinedTable):
                return empty
            raise

    def close(self) -> None:
        self.ledger.close()


class Engine:
    """Keeps a set of projections (one generation of their views) up to the ledger's log."""

    def __init__(self, env: Mapping[str, str], *, names: Sequence[str] = NAMES,
                 generation: str = "", fresh: bool = False, reader: Reader | None = None
                 ) -> None:
        if generation not in ("", NEXT):
            raise ValueError(f"unknown generation {generation!r}")
        self.datastore, create = projections_datastore(env)
        self._own_reader = False
        self._positions: dict[str, int] = {}
        try:
            self.reader = reader or Reader(env)
            self._own_reader = reader is None
            gaming_day = GamingDay.from_env(env)
            self.projections = [build_projection(projection_class(name), self.datastore,
                                                 generation=generation, gaming_day=gaming_day,
                                                 create=create, fresh=fresh) for name in names]
            self.reload()
        except BaseException:  # a pool left open is closed by the garbage collector, badly
            self.close()
            raise

    def reload(self) -> None:
        """Read every position again (after another writer moved one)."""
        self._positions = {p.name: p.view.position() for p in self.projections}

    def position(self, name: str) -> int:
        return self._positions[name]

    def step(self, batch_size: int) -> tuple[int, bool]:
        """Read a page after the lowest position and apply it; the events applied, and whether
        the log went on past them (false: the head was reached).

        A page ends with the last whole save in it. A save's events have consecutive ids and
        end with the request's receipt, so every view commits whole saves only: the chips a
        settlement moves between a player and the house are never counted half (R-M4 holds at
        every position). A save longer than the batch is read on to its end (events without
        receipts, not the ledger's, are taken as they come, ``SAVE_EVENTS_MAX`` past the
        batch at most)."""
        check_batch_size(batch_size)
        page = list(self.reader.page(min(self._positions.values()), batch_size))
        more = len(page) == batch_size  # a short page ends at the head, after a whole save
        if more:
            end = _last_receipt(page)
            while end is None and more and len(page) < batch_size + SAVE_EVENTS_MAX:
                extra = self.reader.page(page[-1].id, batch_size)
                more = len(extra) == batch_size
                page += extra
                end = _last_receipt(page)
            if end is not None:
                more = more or end < len(page) - 1
                page = page[:end + 1]
        if not page:
            return 0, False
        last = page[-1].id
        decoded: dict[int, Any] = {}
        for projection in self.projections:
            at = self._positions[projection.name]
            if at >= last:
                continue
            items = self._items(projection, page, at, decoded)
            projection.process_batch(items, at, last)
            self._positions[projection.name] = last
        return len(page), more

    def _items(self, projection: BatchProjection[Any], page: Sequence[Notification], at: int,
               decoded: dict[int, Any]) -> list[Item]:
        items = []
        for n in page:
            if n.id <= at:
                continue
            deliver, decode = projection.wants(n.topic)
            if not deliver:
                continue
            event = None
            if decode:
                event = decoded.get(n.id)
                if event is None:
                    event = decoded[n.id] = self.reader.decode(n)
            items.append(Item(n.id, cast(UUID, n.originator_id), n.originator_version, n.topic,
                              event))
        return items

    def catch_up(self, batch_size: int, *, is_stopping: Callable[[], bool] = lambda: False,
                 on_page: Callable[[int], None] | None = None) -> int:
        """Apply pages until one comes back short (the head, as of that read); ``on_page``
        is told the events read so far after each page."""
        read = 0
        while not is_stopping():
            n, more = self.step(batch_size)
            read += n
            if on_page is not None:
                on_page(read)
            if not more:
                break
        return read

    def catch_up_to(self, target: int, batch_size: int) -> int:
        """Apply pages until every projection is at notification ``target`` or past it (at
        the end of a save); the events read."""
        read = 0
        while min(self._positions.values()) < target:
            n, _ = self.step(batch_size)
            if not n:  # the log ends before target: nothing more to read
                break
            read += n
        return read

    def positions(self) -> list[dict[str, Any]]:
        with self.datastore.transaction(commit=False) as curs:
            return lag_report(curs, self.reader.events_table,
                              [(p.name, p.view) for p in self.projections])

    def close(self) -> None:
        if self._own_reader:
            self.reader.close()
        self.datastore.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _last_receipt(page: Sequence[Notification]) -> int | None:
    return next((i for i in range(len(page) - 1, -1, -1)
                 if page[i].topic == Receipt.Created.TOPIC), None)


def lag_report(curs: Curs, events_table: Identifier, views: Sequence[tuple[str, View]]
               ) -> list[dict[str, Any]]:
    """Each projection's position, the ledger's head and the events between them, in one
    statement (one snapshot) once the ledger's table exists.

    The lag is an exact count of stored events past the position up to ``LAG_COUNT_MAX``;
    beyond that, head minus position (an upper bound: ids have gaps).
    """
    if not views:
        return []
    positions = SQL(" UNION ALL ").join(
        SQL("SELECT {} AS ord, coalesce((SELECT notification_id FROM {} "
            "WHERE application_name = %(app)s), 0) AS position").format(
            Literal(i), view.qualified("tracking"))
        for i, (_, view) in enumerate(views))
    return [{"projection": name, **lag} for (name, _), lag in
            zip(views, _lags(curs, events_table, positions), strict=True)]


def ahead_of_the_log(lag: Mapping[str, Any]) -> str | None:
    """What to say of a projection whose position (in a :func:`lag_report` row) is past the
    ledger's last event: it holds events the ledger no longer has, and the worker, reading on
    from there, would wait for ids that name other events."""
    if lag["position"] <= lag["ledger_head"]:
        return None
    return (f"{lag['projection']} is at {lag['position']}, past the ledger's last event "
            f"{lag['ledger_head']}: it holds events the ledger no longer has (the ledger "
            f"restored from an older backup?); rebuild it: pitboss rebuild {lag['projection']}")


def log_after(curs: Curs, events_table: Identifier, position: int) -> dict[str, int]:
    """The ledger's head and the events stored after ``position``, as :func:`lag_report`
    counts them for a projection's."""
    (lag,) = _lags(curs, events_table, SQL("SELECT 0 AS ord, {} AS position").format(
        Literal(position)))
    return lag


def _lags(curs: Curs, events_table: Identifier, positions: Composable) -> list[dict[str, int]]:
    if table_exists(curs, events_table):
        statement = SQL(
            "SELECT p.position, h.head, (SELECT count(*) FROM (SELECT 1 FROM {events} "
            "WHERE notification_id > p.position LIMIT %(count_max)s) AS e) AS behind "
            "FROM ({positions}) AS p, "
            "(SELECT coalesce(max(notification_id), 0) AS head FROM {events}) AS h "
            "ORDER BY p.ord").format(events=events_table, positions=positions)
    else:
        statement = SQL("SELECT p.position, 0 AS head, 0 AS behind FROM ({}) AS p "
                        "ORDER BY p.ord").format(positions)
    curs.execute(statement, {"app": LEDGER_APP, "count_max": LAG_COUNT_MAX})
    out = []
    for row in curs.fetchall():
        position, head, behind = int(row["position"]), int(row["head"]), int(row["behind"])
        out.append({"position": position, "ledger_head": head,
                    "lag_events": head - position if behind >= LAG_COUNT_MAX else behind})
    return out

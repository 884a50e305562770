"""How the ledger's events are kept in PostgreSQL: append-only and hash-chained.

:class:`LedgerRecorder` is the library's Postgres application recorder with two
guarantees added when it creates its table:

* **Append-only.** A trigger refuses every ``UPDATE``, ``DELETE`` and ``TRUNCATE`` on
  the event table, whoever sends it. Corrections are new events (R-V2). The
  operator should also run the service as a role that may only read the table and
  call the insert function (``deploy/postgres-roles.sql``), so it cannot drop the
  trigger.
* **One write path, one round trip per save.** :meth:`LedgerRecorder.insert_events`
  calls one SQL function that takes a transaction-level advisory lock, notifies
  listeners, chains and inserts every row of the save, in a single autocommitted
  statement. The lock keeps the library's guarantee (ids commit in the order they
  are issued, so a reader paging by id never passes over a late row) which the
  library's own database function drops by not locking (its
  ``POSTGRES_ENABLE_DB_FUNCTIONS``, never enabled here). The function runs with its owner's rights
  (``SECURITY DEFINER``): the service role needs ``EXECUTE`` on it and ``SELECT``
  on the table, and no ``INSERT`` at all (``deploy/postgres-roles.sql``), so no
  row can reach the table around the lock or the chain.
* **Tamper-evident.** Each row's ``chain_hash`` (``NOT NULL``) is the SHA-256 of
  the previous row's hash and this row's id, version, topic and state, computed
  by the insert function in notification-id order while it holds the lock.
  :func:`verify_chain` recomputes it; an auditor who keeps the head hash
  (:func:`chain_head`) outside the database can later prove that no stored event
  was altered, removed or inserted before it.

The statements are plain SQL text run through the library's datastore; appends
run on connections borrowed from its pool and kept (``_Appenders``), the one place
the ledger touches the driver.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import random
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, NamedTuple, ParamSpec, TypeVar, cast
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
)
from eventsourcing.utils import TopicError, resolve_topic
from psycopg import Connection, Cursor
from psycopg.adapt import Dumper
from psycopg.errors import LockNotAvailable, QueryCanceled, error_from_result
from psycopg.generators import execute
from psycopg.pq import DiagnosticField, ExecStatus, Format, TransactionStatus
from psycopg.pq.abc import PGresult
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Identifier
from psycopg_pool import ConnectionPool, PoolTimeout, TooManyRequests

from ledger.aggregates.account import Account
from ledger.errors import QueryRefused
from ledger.sealing import SnapshotSigner

_log = logging.getLogger("pitboss.ledger")

GENESIS = b"\x00" * 32
HEAD_PATTERN = r"[0-9a-f]{64}"  # a link as the audit reports and takes it: SHA-256 in hex
CHAIN_PAGE_ROWS = 5000  # read per query while walking the chain
# Rows one request of the audit API walks: by default, and at most.
CHAIN_WALK_ROWS_DEFAULT = 100_000
CHAIN_WALK_ROWS_MAX = 1_000_000
CHAIN_FINDINGS_MAX = 100  # findings one part of a walk lists; the next part goes on
APPENDERS_MAX = 4  # connections kept for appending, per recorder
FIXED_WIDTH_CACHED_MAX = 64  # events in a save whose array layouts are kept
# A statement on a connection that broke (the server restarted under the pool) is tried again
# on another, this many times in all, this long apart, as the library does.
STATEMENT_TRIES = 10
STATEMENT_RETRY_WAIT_S = 0.2
# How long the pool keeps trying, with its growing pauses, to replace a connection it lost,
# before it leaves the next one to be opened when a request needs it.
RECONNECT_GIVE_UP_S = 5.0
# The longest one statement of the ledger may run, in seconds (unset or 0: no limit).
STATEMENT_TIMEOUT = "POSTGRES_STATEMENT_TIMEOUT"


class _CreatesTablesOneAtATime:
    """The library's table creation, in one transaction under a database-wide advisory lock:
    processes starting together (gunicorn workers, the projection worker) would otherwise
    race on the same DDL. One connection does it all, so a pool of one is enough."""

    datastore: PostgresDatastore
    sql_create_statements: list[Any]
    CREATION_LOCK = 0x70697462  # an arbitrary application-wide advisory lock key

    def create_table(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            # No statement timeout (STATEMENT_TIMEOUT): another process's creation may be
            # waited for, and an upgrade's DDL may scan a large table.
            curs.execute("SET LOCAL statement_timeout = 0")
            curs.execute("SELECT pg_advisory_xact_lock(%s)", (self.CREATION_LOCK,))
            for statement in self.sql_create_statements:
                if "CREATE TYPE" in statement.as_string():
                    # No IF NOT EXISTS for types: one that exists is passed over inside the
                    # server (a savepoint's DuplicateObject wrote an ERROR to its log at
                    # every start).
                    curs.execute(SQL("DO $$ BEGIN {}; EXCEPTION WHEN duplicate_object THEN "
                                     "NULL; END $$").format(statement), prepare=False)
            self._create_table(curs)  # type: ignore[attr-defined]  # the rest, as the library
        self.datastore.register_type_adapters()


_P = ParamSpec("_P")
_R = TypeVar("_R")
_F = TypeVar("_F", bound=Callable[..., Any])


# What says the database is down or busy, not that a connection broke: trying again only
# makes the request wait as long again.
_WAITED_OUT = (PoolTimeout, TooManyRequests, LockNotAvailable, QueryCanceled)


class MayHaveBeenAppended(IntegrityError):
    """An append found its events already stored, after an earlier try of it broke off with
    its outcome unknown (the connection lost once the statement was sent): that try may have
    committed them, or another request the same events."""


def _retried(statement: Callable[_P, _R]) -> Callable[_P, _R]:
    """``statement`` tried again on a connection that broke, but not after a wait ran out (for
    a connection from the pool, too many requests waiting, for a lock, or the statement's own
    timeout): the database does not answer or is busy, and the library's ten tries made a
    request wait ten timeouts (22 to 52 s) before its 503. An append refused after a try
    broke off raises :class:`MayHaveBeenAppended`."""
    @functools.wraps(statement)
    def tried(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        for attempt in range(1, STATEMENT_TRIES + 1):
            try:
                return statement(*args, **kwargs)
            except IntegrityError as error:
                if attempt > 1:
                    raise MayHaveBeenAppended(*error.args) from error
                raise
            except (InterfaceError, OperationalError) as error:
                if attempt == STATEMENT_TRIES or isinstance(error.__cause__, _WAITED_OUT):
                    raise
            time.sleep(STATEMENT_RETRY_WAIT_S * random.uniform(0.95, 1.05))
        raise AssertionError("unreachable")  # pragma: no cover
    return tried


def _as_retried(library_method: _F) -> _F:
    """A recorder method of the library, with :func:`_retried` for the library's retries."""
    return cast(_F, _retried(library_method.__wrapped__))  # type: ignore[attr-defined]


def reconnecting_promptly(pool: ConnectionPool[Any]) -> None:
    """A pool that, having lost its connections (the server restarted), gives up replacing them
    in the background after :data:`RECONNECT_GIVE_UP_S` and opens one when a request waits.
    Its own default kept trying for 5 minutes with pauses doubling from 1 s: a request made
    once the server was back waited for the next try, 5 to 60 s (503s meanwhile)."""
    pool.reconnect_timeout = RECONNECT_GIVE_UP_S


class SnapshotRecorder(_CreatesTablesOneAtATime, PostgresAggregateRecorder):
    """The library's snapshot recorder, created one process at a time, whose snapshots are
    signed (:class:`~ledger.sealing.SnapshotSigner`). Snapshots are outside the hash chain, so
    one that does not verify (altered, forged, or from an unsigned earlier version), or whose
    topic names no class this version knows (a snapshot is a copy: its events still read), is
    passed over with a warning: its account or table is read from the newest snapshot before
    it that verifies, or from its events. Without a signer the recorder writes no snapshot and reads
    none."""

    signer: SnapshotSigner | None = None

    def insert_events(self, stored_events: Sequence[StoredEvent],
                      **kwargs: Any) -> Sequence[int] | None:
        if self.signer is None:
            return None
        self._insert([self.signer.sign(s) for s in stored_events], **kwargs)
        return None

    _insert = _as_retried(PostgresAggregateRecorder.insert_events)
    _select = _as_retried(PostgresAggregateRecorder.select_events)

    def select_events(self, originator_id: UUID | str, *, gt: int | None = None,
                      lte: int | None = None, desc: bool = False,
                      limit: int | None = None) -> Sequence[StoredEvent]:
        if self.signer is None:
            return []
        selected = self._select(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)
        verified = [self._readable(s) for s in selected]
        for stored, ok in zip(selected, verified, strict=True):
            if ok is None:
                _log.warning("the snapshot of %s at version %d does not verify (altered, not "
                             "signed with this shoe key, or of a kind this version does not "
                             "know); it is passed over",
                             stored.originator_id, stored.originator_version)
        kept = [s for s in verified if s is not None]
        if limit is not None and len(kept) < len(selected):
            # The newest did not verify: the ones before it may (the library asks for one).
            selected = self._select(originator_id, gt=gt, lte=lte, desc=desc)
            kept = [s for s in map(self._readable, selected) if s is not None][:limit]
        return kept

    def _readable(self, stored: StoredEvent) -> StoredEvent | None:
        """The snapshot without its tag, if it verifies and its topic names a class."""
        assert self.signer is not None
        verified = self.signer.verify(stored)
        if verified is None:
            return None
        try:
            resolve_topic(verified.topic)
        except TopicError:
            return None
        return verified

    @_retried
    def unverified(self, originator_ids: Sequence[UUID]) -> list[tuple[UUID, int]]:
        """The newest snapshots of ``originator_ids`` that do not verify, as (id, version):
        older ones are never read while a newer one verifies."""
        if self.signer is None:
            return []
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT DISTINCT ON (originator_id) originator_id, "
                             "originator_version, topic, state FROM {} WHERE originator_id = "
                             "ANY(%s) ORDER BY originator_id, originator_version DESC").format(
                                 Identifier(self.datastore.schema, self.events_table_name)),
                         (list(originator_ids),))
            rows = curs.fetchall()
        stored = [_stored(r) for r in rows]
        return [(UUID(str(s.originator_id)), s.originator_version) for s in stored
                if self._readable(s) is None]


class _Index(NamedTuple):
    definition: str  # formatted with the recorder's names
    otherwise: str  # what answers until it is made (said at a start that finds it missing)


# This version's indexes of the event table, by name. Each is marked with a digest of its
# definition (its comment), so that an index of the same name made by a version that defined
# it otherwise is made again.
_INDEX_DEFINITIONS = {
    # The round check's postings naming a round, found without reading its players' whole
    # histories (with 200,000 entries among them a check took a second, growing with them):
    # postings by the round they name (NULL: spelt otherwise).
    "postings_by_round": _Index(
        "(({posting_round})) WHERE topic = {posted_topic}",
        "the round check looks at the round's own accounts alone and reads their whole "
        "histories"),
    # The balance check's accounts opened, found without reading the whole log. (Its query
    # is the same either way: an unmarked index of the same definition serves it.)
    "accounts_opened": _Index(
        "(notification_id) WHERE topic = {opened_topic}",
        "the balance check reads every event in its range to find the accounts opened, "
        "unless an index an earlier version made serves it"),
}
_INDEXES = tuple(_INDEX_DEFINITIONS)
# Indexes earlier versions made that this one neither makes nor reads: dropped by the
# owner's start (each costs every append its upkeep).
_RETIRED_INDEXES = ("foreign_topics", "spelt_otherwise")


def _index_mark(definition: str) -> str:
    return "pitboss " + hashlib.sha256(definition.encode()).hexdigest()[:16]


class LedgerRecorder(_CreatesTablesOneAtATime, PostgresApplicationRecorder):
    """The application recorder with an append-only, hash-chained event table."""

    def __init__(self, datastore: PostgresDatastore, *,
                 events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        qualified = f"{quote(datastore.schema)}.{quote(events_table_name)}"

        def index(name: str) -> str:  # an index of the event table, as to_regclass takes it
            return f"{quote(datastore.schema)}.{quote(f'{events_table_name}_{name}')}"

        indexes = {name: index(name) for name in _INDEXES}
        names = {
            "schema": quote(datastore.schema),
            "table": quote(events_table_name),
            "refuse": quote(f"{events_table_name}_refuse_change"),
            "immutable": quote(f"{events_table_name}_immutable"),
            "no_truncate": quote(f"{events_table_name}_no_truncate"),
            "chained": quote(f"{events_table_name}_chained"),
            "insert": quote(f"{events_table_name}_insert"),
            "channel": quote(self.channel_name),
            "lock_timeout_s": str(int(datastore.lock_timeout)),
            "append_lock": str(append_lock_key(datastore.schema, events_table_name)),
            "genesis": GENESIS.hex(),
            "table_regclass": literal(qualified),
            "index": quote(self.notification_id_index_name),
            "index_regclass": literal(f"{quote(datastore.schema)}."
                                      f"{quote(self.notification_id_index_name)}"),
            **{f"{t}_name": literal(f"{events_table_name}_{t}")
               for t in ("immutable", "no_truncate", "chained")},
            **{name: quote(f"{events_table_name}_{name}") for name in _INDEXES},
            **{f"{name}_regclass": literal(text) for name, text in indexes.items()},
            "posting_round": POSTING_ROUND, "posted_topic": literal(Account.Posted.TOPIC),
            "opened_topic": literal(Account.Created.TOPIC),
            **{f"retired_{name}": literal(index(name)) for name in _RETIRED_INDEXES},
        }
        marks = {name: _index_mark(made.definition.format(**names))
                 for name, made in _INDEX_DEFINITIONS.items()}
        names.update({f"{name}_mark": literal(mark) for name, mark in marks.items()})
        self._append = _Append(f"{names['schema']}.{names['insert']}")
        # The library's CREATE UNIQUE INDEX IF NOT EXISTS locks the event table against
        # writers (SHARE) before it finds the index there: a process starting waited for any
        # save in flight, and every append behind it waited for the start. Guarded instead.
        library_index = [s for s in self.sql_create_statements
                         if s.as_string().startswith("CREATE UNIQUE INDEX IF NOT EXISTS")]
        if len(library_index) != 1:  # pragma: no cover (a library upgrade changed its DDL)
            raise RuntimeError("the event store library no longer creates its notification "
                               "index as this version expects: review LedgerRecorder")
        self.sql_create_statements.remove(library_index[0])
        for statement in _STATEMENTS:
            self.sql_create_statements.append(
                _Statement(statement.format(**names)))
        self._appenders = _Appenders(datastore)
        self._indexes = indexes
        self._index_marks = marks
        self._indexes_found: set[str] = set()

    select_events = _as_retried(PostgresAggregateRecorder.select_events)
    select_notifications = _as_retried(PostgresApplicationRecorder.select_notifications)
    max_notification_id = _as_retried(PostgresApplicationRecorder.max_notification_id)

    @_retried
    def insert_events(self, stored_events: Sequence[StoredEvent],
                      **kwargs: Any) -> Sequence[int] | None:
        """Insert a save's events in one statement; their notification ids, in order."""
        if not stored_events:
            return []
        params = _insert_parameters(stored_events)
        with self._appenders.connection() as conn:
            return self._append(conn, params)

    def has_index(self, name: str) -> bool:
        """Whether the event table has its index ``name`` (of ``_INDEXES``) as this version
        defines it: tables an older version made have it once the owner's start has made it
        (a service role's start makes none), which may come while this process runs."""
        if name not in self._indexes_found and _fetched(  # a missing index has no comment
                self, "SELECT obj_description(to_regclass(%s), 'pg_class') IS NOT DISTINCT "
                      "FROM %s AS found", (self._indexes[name], self._index_marks[name])
        )[0]["found"]:
            self._indexes_found.add(name)
        return name in self._indexes_found

    def missing_indexes(self) -> dict[str, str]:
        """This version's indexes the event table does not have yet: each one's qualified name
        and what answers otherwise until it is made."""
        return {self._indexes[name]: made.otherwise
                for name, made in _INDEX_DEFINITIONS.items() if not self.has_index(name)}

    def close(self) -> None:
        """Give the connections kept for appending back to the pool."""
        self._appenders.close()

    @property
    def qualified_table(self) -> str:
        return f"{quote(self.datastore.schema)}.{quote(self.events_table_name)}"

    @_retried
    def table_exists(self) -> bool:
        """Whether the event table has been created (a reader creates nothing)."""
        with self.datastore.transaction(commit=False) as curs:
            return relation_exists(curs, self.qualified_table)


def relation_exists(curs: Cursor[DictRow], qualified: str) -> bool:
    """Whether the table (or view) ``qualified`` exists: its quoted, schema-qualified name."""
    curs.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (qualified,))
    row = curs.fetchone()
    return bool(row and row["found"])


class _Appenders:
    """Connections kept out of the pool for appending, the most recently used first.

    Through the library's pool an append cost 0.2 ms more than on a connection of its own
    (bench/ledger.py): the pool hands out the connection idle longest, whose server
    process has gone cold, and adds its own bookkeeping. Appends take a connection from
    here instead (one per thread appending at the same moment, at most ``limit``; past
    that they fall back to the pool), and errors are translated as the pool's are.
    """

    def __init__(self, datastore: PostgresDatastore) -> None:
        self._datastore = datastore
        self._idle: list[Connection[Any]] = []
        self._lent = 0
        self._lock = threading.Lock()
        self._closed = False
        # Never the pool's last connection: reads must always find one.
        self.limit = max(0, min(datastore.pool.max_size - 1, APPENDERS_MAX))

    def connection(self) -> _Lent:
        """An appending connection, for a ``with`` block."""
        return _Lent(self)

    def _take(self) -> tuple[Connection[Any] | None, bool]:
        """An idle connection (None: open one), or that the append falls back to the pool."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
            fall_back = conn is None and (self._closed or self._lent >= self.limit)
            if not fall_back:
                self._lent += 1
        return conn, fall_back

    def _open(self) -> Connection[Any]:
        with translated_errors():
            # Opened as the library's datastore opens it before every checkout.
            timeout = self._datastore.pool_open_timeout
            self._datastore.pool.open(timeout is not None, timeout or 30.0)
            return self._datastore.pool.getconn()

    def _give_back(self, conn: Connection[Any] | None, healthy: bool) -> None:
        with self._lock:
            self._lent -= 1
            keep = conn is not None and healthy and not self._closed and not conn.closed
            if keep:
                self._idle.append(conn)  # type: ignore[arg-type]
        if conn is not None and not keep:
            self._return_to_pool(conn)

    def _return_to_pool(self, conn: Connection[Any]) -> None:
        with contextlib.suppress(Exception):  # a pool already closed closes it
            self._datastore.pool.putconn(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._return_to_pool(conn)


class _Lent:
    """One append's use of a connection from :class:`_Appenders`: kept if the append went
    well, given back to the pool if it broke (the pool tests it, and replaces it if it is
    gone), its driver errors translated. A class, not a generator: entering and leaving
    two generator-based contexts cost every append 5 us."""

    __slots__ = ("_appenders", "_conn", "_pooled")

    def __init__(self, appenders: _Appenders) -> None:
        self._appenders = appenders
        self._conn: Connection[Any] | None = None
        self._pooled: contextlib.AbstractContextManager[Connection[Any]] | None = None

    def __enter__(self) -> Connection[Any]:
        appenders = self._appenders
        conn, fall_back = appenders._take()
        if fall_back:
            self._pooled = appenders._datastore.get_connection()
            return self._pooled.__enter__()
        if conn is None:
            try:
                conn = appenders._open()
            except BaseException:
                appenders._give_back(None, healthy=False)
                raise
        self._conn = conn
        return conn

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool | None:
        if self._pooled is not None:
            return self._pooled.__exit__(kind, error, traceback)
        if error is None:
            self._appenders._give_back(self._conn, healthy=True)
            return None
        raised = _translated(error) if isinstance(error, psycopg.Error) else error
        self._appenders._give_back(
            self._conn, healthy=not isinstance(raised, InterfaceError | OperationalError))
        if raised is not error:
            raise raised from error
        return None


class _BinaryArray(bytes):
    """A one-dimensional array parameter without nulls, in PostgreSQL's binary format
    (``array_recv``: a header, then each element's length and bytes) as
    :func:`_insert_parameters` builds it, sent as it is. psycopg's own list dumper inspects
    every element of every list on each call, which cost an append 0.03 to 0.06 ms."""

    element_oid: ClassVar[int]
    array_oid: ClassVar[int]

    @classmethod
    def header(cls, count: int) -> tuple[int, ...]:
        """The header's fields: dimensions, has nulls, element oid, length, lower bound."""
        return 1, 0, cls.element_oid, count, 1


class _UuidArray(_BinaryArray):
    element_oid, array_oid = 2950, 2951


class _BigintArray(_BinaryArray):
    element_oid, array_oid = 20, 1016


class _TextArray(_BinaryArray):
    element_oid, array_oid = 25, 1009


class _ByteaArray(_BinaryArray):
    element_oid, array_oid = 17, 1001


def _send_as_is(cls: type[_BinaryArray]) -> None:
    class AsIs(Dumper):
        format = Format.BINARY
        oid = cls.array_oid

        def dump(self, obj: Any) -> bytes:
            return cast(bytes, obj)

    psycopg.adapters.register_dumper(cls, AsIs)


for _array in (_UuidArray, _BigintArray, _TextArray, _ByteaArray):
    _send_as_is(_array)


def _uuid(value: UUID | str) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


_HEAD = struct.Struct("!iiiii").pack  # an array's header
_LENGTH = struct.Struct("!i").pack  # an element's length


def _fixed_width(element: str, count: int) -> struct.Struct:
    """A whole array of ``count`` elements of one width (``element``, a struct format),
    header included, as one struct: packed in one call. The sizes a command saves are kept;
    a bulk save's is made for it alone (kept, it would hold megabytes)."""
    if count <= FIXED_WIDTH_CACHED_MAX:
        return _cached_fixed_width(element, count)
    return _layout(element, count)


def _layout(element: str, count: int) -> struct.Struct:
    return struct.Struct("!iiiii" + ("i" + element) * count)


_cached_fixed_width = functools.lru_cache(maxsize=2 * FIXED_WIDTH_CACHED_MAX)(_layout)


def _insert_parameters(events: Sequence[StoredEvent]) -> tuple[_BinaryArray, ...]:
    """The insert function's four arrays: ids, versions, topics and states, in one pass over
    the events (a pass per array and a struct call per element cost a decision 3 us)."""
    count = len(events)
    ids: list[int | bytes] = [*_UuidArray.header(count)]
    versions = [*_BigintArray.header(count)]
    topics = [_HEAD(*_TextArray.header(count))]
    states = [_HEAD(*_ByteaArray.header(count))]
    for e in events:
        ids += (16, _uuid(e.originator_id).bytes)
        versions += (8, e.originator_version)
        topic = e.topic.encode()
        topics += (_LENGTH(len(topic)), topic)
        state = bytes(e.state)
        states += (_LENGTH(len(state)), state)
    return (_UuidArray(_fixed_width("16s", count).pack(*ids)),
            _BigintArray(_fixed_width("q", count).pack(*versions)),
            _TextArray(b"".join(topics)),
            _ByteaArray(b"".join(states)))


class _Append:
    """The insert function's call as a statement prepared once on each connection, run
    through libpq directly: the driver's cursor, which prepares, converts and checks on
    every call, cost a decision a fifth of its Python time (bench/ledger.py). The
    connections are autocommitted (the library's pool makes them so); one that is not,
    or that is inside a transaction, is served by a cursor instead."""

    NAME = b"pitboss_append"
    _TYPES = (_UuidArray.array_oid, _BigintArray.array_oid, _TextArray.array_oid,
              _ByteaArray.array_oid)
    _BINARY = (Format.BINARY,) * 4

    def __init__(self, function: str) -> None:
        self._statement = f"SELECT * FROM {function}(%b, %b, %b, %b)"  # for a cursor
        self._numbered = f"SELECT * FROM {function}($1, $2, $3, $4)".encode()  # for libpq
        self._prepared: weakref.WeakSet[Connection[Any]] = weakref.WeakSet()

    def __call__(self, conn: Connection[Any], params: tuple[_BinaryArray, ...]) -> list[int]:
        pgconn = conn.pgconn
        if not conn.autocommit or pgconn.transaction_status != TransactionStatus.IDLE:
            with conn.cursor(row_factory=tuple_row) as curs:
                curs.execute(self._statement, params, prepare=True)
                return [notification_id for (notification_id,) in curs.fetchall()]
        for attempt in (1, 2):
            if conn not in self._prepared:
                pgconn.send_prepare(self.NAME, self._numbered, param_types=self._TYPES)
                # Already there: prepared by a call interrupted before it could note so.
                _checked(conn, conn.wait(execute(pgconn)), allowed=_ALREADY_PREPARED)
                self._prepared.add(conn)
            pgconn.send_query_prepared(self.NAME, params, param_formats=self._BINARY,
                                       result_format=Format.BINARY)
            # execute() flushes what the send left buffered (a large save's parameters)
            # before it reads the answer.
            result = conn.wait(execute(pgconn))[-1]
            if (attempt == 1 and result.status == ExecStatus.FATAL_ERROR
                    and result.error_field(DiagnosticField.SQLSTATE) == _NO_SUCH_STATEMENT):
                self._prepared.discard(conn)  # DISCARD or DEALLOCATE ran on it: prepare again
                continue
            value = _checked(conn, [result]).get_value
            return [_INT8(cast(bytes, value(row, 0)))[0] for row in range(result.ntuples)]
        raise AssertionError("unreachable")  # pragma: no cover


_INT8 = struct.Struct("!q").unpack
_NO_SUCH_STATEMENT = b"26000"  # invalid_sql_statement_name
_ALREADY_PREPARED = b"42P05"  # duplicate_prepared_statement


def _checked(conn: Connection[Any], results: list[PGresult],
             allowed: bytes | None = None) -> PGresult:
    """The last result, or its error raised as the driver raises it (but for the SQLSTATE
    ``allowed``)."""
    result = results[-1]
    if result.status == ExecStatus.FATAL_ERROR and (
            allowed is None or result.error_field(DiagnosticField.SQLSTATE) != allowed):
        raise error_from_result(result, encoding=conn.info.encoding)
    return result



@contextlib.contextmanager
def translated_errors() -> Iterator[None]:
    """psycopg's errors as the library's, in the order its datastore translates them."""
    try:
        yield
    except psycopg.Error as error:
        raise _translated(error) from error


def _translated(error: psycopg.Error) -> PersistenceError:
    for driver, library in _ERRORS:
        if isinstance(error, driver):
            return library(str(error))
    return PersistenceError(str(error))


_ERRORS: tuple[tuple[type[psycopg.Error], type[PersistenceError]], ...] = (
    (psycopg.InterfaceError, InterfaceError),
    (psycopg.OperationalError, OperationalError),
    (psycopg.DataError, DataError),
    (psycopg.IntegrityError, IntegrityError),
    (psycopg.InternalError, InternalError),
    (psycopg.ProgrammingError, ProgrammingError),
    (psycopg.NotSupportedError, NotSupportedError),
    (psycopg.DatabaseError, DatabaseError),
)


def statement_timeout_s(text: str | None) -> int | None:
    """The seconds of :data:`STATEMENT_TIMEOUT` (None: unset; 0, which only pitboss's own
    long readers set, no limit: operators' settings are checked from 1 by api.database)."""
    if text is None:
        return None
    if not (text.strip().isascii() and text.strip().isdigit()):
        raise ValueError(f"{STATEMENT_TIMEOUT} is a whole number of seconds, not {text!r}")
    return int(text)


class LedgerFactory(PostgresFactory):
    """The library's PostgreSQL persistence with the ledger's recorders."""

    aggregate_recorder_class = SnapshotRecorder
    application_recorder_class = LedgerRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        reconnecting_promptly(self.datastore.pool)
        # Under the ledger's prefixed name first, as the library reads its settings; a blank one
        # is not set (the library would take it and shadow the other).
        limit_s = statement_timeout_s(next(
            (text for name in self.env.create_keys(STATEMENT_TIMEOUT)
             if (text := dict.get(self.env, name) or "").strip()), None))
        if limit_s:
            # Every statement on the ledger's connections, reads and appends (an append's
            # wait for a lock is bounded sooner, by POSTGRES_LOCK_TIMEOUT): a read that
            # waits on an operator's lock, or runs away, ends as "the database is busy".
            kwargs = self.datastore.pool.kwargs
            if not isinstance(kwargs, dict):  # pragma: no cover (the library gives a dict)
                raise TypeError("the library's pool no longer takes its connection settings "
                                "as a dict: review LedgerFactory")
            kwargs["options"] = f"-c statement_timeout={limit_s * 1000}"

    def application_recorder(self) -> Any:
        recorder = super().application_recorder()
        self._made = [*getattr(self, "_made", []), recorder]
        return recorder

    def close(self) -> None:
        for recorder in getattr(self, "_made", []):
            if isinstance(recorder, LedgerRecorder):
                recorder.close()
        super().close()


class _Statement(str):
    """Plain SQL text in the form the library's table creation reads (``as_string``)."""

    __slots__ = ()

    def as_string(self, *_: Any) -> str:
        return str(self)


def quote(identifier: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + identifier.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _once(trigger: str, create: str) -> str:
    """Create a trigger only where it is missing: re-creating it would lock the event table
    against writers each time a process starts."""
    exists = ("SELECT 1 FROM pg_trigger WHERE tgname = {" + trigger + "_name} "
              "AND tgrelid = {table_regclass}::regclass")
    return f"DO $$ BEGIN IF NOT EXISTS ({exists}) THEN {create}; END IF; END $$"


def _index(name: str, definition: str) -> str:
    """Create an index of the event table only where it is missing, as the notification
    index is, or where one of its name lacks its definition's mark (an earlier version
    defined it otherwise): ``{name}`` is formatted with the recorder's names, its name the
    table's own."""
    regclass, mark = "{" + name + "_regclass}", "{" + name + "_mark}"
    return ("DO $$ BEGIN "
            f"IF to_regclass({regclass}) IS NOT NULL AND obj_description(to_regclass("
            f"{regclass}), 'pg_class') IS DISTINCT FROM {mark} THEN "
            "DROP INDEX {schema}.{" + name + "}; END IF; "
            f"IF to_regclass({regclass}) IS NULL THEN "
            "CREATE INDEX {" + name + "} ON {schema}.{table} " + definition + "; "
            "COMMENT ON INDEX {schema}.{" + name + "} IS " + mark + "; END IF; END $$")


# The refusing triggers' function body, as installed and as the chain walk expects to find it.
_REFUSE_BODY = """
       BEGIN
         RAISE EXCEPTION 'stored events are immutable: % on % refused', TG_OP, TG_TABLE_NAME
           USING ERRCODE = 'insufficient_privilege',
                 HINT = 'Correct a record with a new event (R-V2).';
       END """

# A posting's round id as the ledger's transcoder writes it, up to the id itself: 32
# lower-case hex digits follow, then '"}', which closes the id's object.
ROUND_ID_KEY = b'"round_id":{"_type_":"uuid_hex","_data_":"'
# A "\u" escape in a stored state, as encode(state, 'escape') shows it (every backslash
# doubled): one after an even run of backslashes is text, such as a reason's "C:\users".
_ESCAPE_U = r"(^|[^\\])(\\\\\\\\)*\\\\u"


def _posting_round() -> str:
    """SQL for the round a stored posting names, as its 32 hex digits (bytea), where it is
    written as the ledger writes it: the field's name once, no ``\\u`` escape anywhere, the id's
    object closed after its digits (no second ``_data_``); NULL for any other spelling, which
    only a decode reads. Only a ``\\u`` escape spells the key ``round_id`` but plainly, so the
    one plain spelling, found once, is the key the decoder reads (were it not, the key read
    would be a second one). The index of postings by round holds it; a query spells it the same
    to use that index. A posting the ledger writes holds a ``\\u`` escape only for a control
    character in a text it carries (its transcoder writes any other character as it is)."""
    name = ROUND_ID_KEY[:ROUND_ID_KEY.index(b'"', 1) + 1]
    key, name_sql = f"'\\x{ROUND_ID_KEY.hex()}'::bytea", f"'\\x{name.hex()}'::bytea"
    at, skip = f"position({key} IN state)", len(ROUND_ID_KEY)
    return (f"CASE WHEN {at} > 0 AND encode(state, 'escape') !~ '{_ESCAPE_U}' "
            f"AND position({name_sql} IN state) = {at} "
            f"AND position({name_sql} IN substring(state FROM {at} + 1)) = 0 "
            f"AND encode(substring(state FROM {at} + {skip} FOR 34), 'escape') "
            f"~ '^[0-9a-f]{{32}}\"}}$' THEN substring(state FROM {at} + {skip} FOR 32) END")


POSTING_ROUND = _posting_round()

_STATEMENTS = (
    # Guarded, not IF NOT EXISTS, like the ALTER TABLEs below.
    """DO $$ BEGIN
         IF to_regclass({index_regclass}) IS NULL THEN
           CREATE UNIQUE INDEX {index} ON {schema}.{table} (notification_id ASC);
         END IF;
       END $$""",
    # Guarded, not IF NOT EXISTS: ALTER TABLE locks the table against readers and writers
    # even when it has nothing to do, until every process start's DDL transaction commits.
    """DO $$ BEGIN
         IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = {table_regclass}::regclass
                        AND attname = 'chain_hash' AND NOT attisdropped) THEN
           ALTER TABLE {schema}.{table} ADD COLUMN chain_hash bytea;
         END IF;
       END $$""",
    """CREATE OR REPLACE FUNCTION {schema}.{refuse}() RETURNS trigger
       LANGUAGE plpgsql AS $$""" + _REFUSE_BODY + "$$",
    _once("immutable", """CREATE TRIGGER {immutable} BEFORE UPDATE OR DELETE ON {schema}.{table}
       FOR EACH ROW EXECUTE FUNCTION {schema}.{refuse}()"""),
    _once("no_truncate", """CREATE TRIGGER {no_truncate} BEFORE TRUNCATE ON {schema}.{table}
       FOR EACH STATEMENT EXECUTE FUNCTION {schema}.{refuse}()"""),
    # Tables made by an earlier version chained rows in a row trigger; the function does now.
    """DO $$ BEGIN
         IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = {chained_name}
                    AND tgrelid = {table_regclass}::regclass) THEN
           DROP TRIGGER {chained} ON {schema}.{table};
         END IF;
         IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = {table_regclass}::regclass
                    AND attname = 'chain_hash' AND NOT attnotnull) THEN
           ALTER TABLE {schema}.{table} ALTER COLUMN chain_hash SET NOT NULL;
         END IF;
       END $$""",
    """CREATE OR REPLACE FUNCTION {schema}.{insert}(
         ids uuid[], versions bigint[], topics text[], states bytea[])
       RETURNS TABLE (notification_id bigint) LANGUAGE plpgsql
       SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
       DECLARE
         chain bytea;
         hashes bytea[];
         topic_bytes bytea;
       BEGIN
         PERFORM set_config('lock_timeout', '{lock_timeout_s}s', true);
         -- Held until commit: ids are issued and committed in the same order.
         PERFORM pg_advisory_xact_lock({append_lock});
         NOTIFY {channel};
         SELECT t.chain_hash INTO chain FROM {schema}.{table} t
           ORDER BY t.notification_id DESC LIMIT 1;
         chain := coalesce(chain, '\\x{genesis}'::bytea);
         FOR i IN 1 .. coalesce(cardinality(ids), 0) LOOP
           topic_bytes := convert_to(coalesce(topics[i], ''), 'UTF8');
           chain := sha256(chain || uuid_send(ids[i]) || int8send(versions[i])
                           || int4send(length(topic_bytes)) || topic_bytes
                           || coalesce(states[i], ''::bytea));
           hashes[i] := chain;
         END LOOP;
         RETURN QUERY
           INSERT INTO {schema}.{table} AS t
             (originator_id, originator_version, topic, state, chain_hash)
           SELECT u.id, u.version, u.topic, u.state, u.hash
             FROM unnest(ids, versions, topics, states, hashes)
                  WITH ORDINALITY AS u(id, version, topic, state, hash, n)
            ORDER BY u.n
           RETURNING t.notification_id;
       END $$""",
    # It runs with its owner's rights: only roles granted EXECUTE may append.
    "REVOKE ALL ON FUNCTION {schema}.{insert}(uuid[], bigint[], text[], bytea[]) FROM PUBLIC",
    *(_index(name, made.definition) for name, made in _INDEX_DEFINITIONS.items()),
    *("DO $$ BEGIN IF to_regclass({retired_" + name + "}) IS NOT NULL THEN EXECUTE "
      "'DROP INDEX ' || to_regclass({retired_" + name + "}); END IF; END $$"
      for name in _RETIRED_INDEXES),
)


def append_lock_key(schema: str, table: str) -> int:
    """The transaction-level advisory lock that orders the appends to one event table (a
    signed 64-bit key). Anything else that appends (a bulk load) must hold it too."""
    qualified = f"{quote(schema)}.{quote(table)}"
    digest = hashlib.sha256(f"pitboss append {qualified}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def link(previous: bytes, originator_id: UUID, version: int, topic: str, state: bytes) -> bytes:
    """One link of the chain, exactly as the insert function computes it."""
    topic_bytes = topic.encode()
    return hashlib.sha256(
        previous + originator_id.bytes + version.to_bytes(8, "big", signed=True)
        + len(topic_bytes).to_bytes(4, "big", signed=True) + topic_bytes + state
    ).digest()


@dataclass(frozen=True)
class ChainReport:
    """The result of walking (part of) the chain: rows checked, the link reached, what did not
    match, and whether the walk reached the last row (``complete``; else it goes on after
    ``next_after``). A walk goes on past an event that does not match, and past a kept head
    that does not, from the link stored there, so that one walk lists every altered event (up
    to ``CHAIN_FINDINGS_MAX`` a part). A part that did not start at the first event
    (``from_start`` false) took the link stored where it starts on trust: it proves nothing of
    the events before, which only the parts before it check."""

    rows: int
    head: str
    head_notification_id: int
    findings: list[str]
    complete: bool = True
    from_start: bool = True
    kept_head_checked: bool = False  # an expected head was compared (or found missing)
    kept_head_at: int | None = None  # the notification id whose link is the expected head
    # What leaves the record open to change now, though the chain is intact (triggers off).
    warnings: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.findings

    @property
    def next_after(self) -> int | None:
        """Where the next part of the walk starts (``after=``); None once complete."""
        return None if self.complete else self.head_notification_id


# The lowest notification id a bigint holds. The ledger's sequence issues ids from 1, but a row
# written around it may carry any: a walk from the start reads from here, or a row stored at 0
# or below (which the ledger reads with its aggregate, a balance changed) went unchecked.
_LOWEST_ID = -(2**63)


def _rows(recorder: LedgerRecorder, after: int, most: int | None = None
          ) -> Iterator[dict[str, Any]]:
    """The rows after notification ``after``: every row, from the start (``after`` 0); ``most``
    rows at most (a walk in small parts read 5,000 rows for each)."""
    statement = (
        "SELECT notification_id, originator_id, originator_version, topic, state, chain_hash "
        "FROM {table} WHERE notification_id >= %s ORDER BY notification_id LIMIT %s")
    first = _LOWEST_ID if after == 0 else after + 1
    left = most
    while left is None or left > 0:
        page = _fetched(recorder, statement, (first, CHAIN_PAGE_ROWS if left is None
                                              else min(CHAIN_PAGE_ROWS, left)))
        if not page:
            return
        yield from page
        first = page[-1]["notification_id"] + 1
        if left is not None:
            left -= len(page)


def chain_start(recorder: LedgerRecorder, *, after: int = 0, expected_head: str | None = None,
                expected_at: int | None = None) -> bytes:
    """The link a walk after notification ``after`` starts from (QueryRefused if it cannot
    start there): asked before a walk begins to show its progress, and by each part."""
    previous = GENESIS if after == 0 else _carried_link(recorder, after)
    if previous is None:  # a walk's argument, not a finding about the record
        raise QueryRefused(f"There is no event at notification {after} to start after: start "
                           "after 0, or after an id a walk reported (if one did, that event "
                           "has been removed since: walk again from the start).", field="after")
    kept_at = expected_at if expected_head is not None else None
    if kept_at is not None and kept_at < after:
        raise QueryRefused(f"The head kept outside was taken at notification {kept_at}, before "
                           f"this part: start after {kept_at} or earlier.", field="expected_at")
    return previous


def verify_chain(recorder: LedgerRecorder, *, after: int = 0, limit: int | None = None,
                 expected_head: str | None = None, expected_at: int | None = None,
                 on_row: Callable[[int], None] | None = None) -> ChainReport:
    """Recompute every link after notification ``after`` (from the genesis, or from the link
    stored with that event), ``limit`` rows at most, and report each event that does not match,
    up to ``CHAIN_FINDINGS_MAX``: past one, the walk goes on from the link stored with it.

    ``expected_head`` is a link kept outside the database: the one of the event at
    notification ``expected_at``, which the link the walk carries there must then be, however
    many events came after it; without ``expected_at``, the link the walk carries at any event
    (the first that carries it is ``kept_head_at``), or a finding once a walk from the first
    event is complete; a part begun later that never carries it leaves it unchecked.
    (Past an event that does not match, the walk carries the stored link: the kept head then
    still shows links rewritten since.) ``on_row`` is told each notification id checked.
    Walking the parts in order, each from where the last one stopped, checks the whole chain:
    each part starts from the link the one before carried."""
    from_start = after == 0
    previous = chain_start(recorder, after=after, expected_head=expected_head,
                           expected_at=expected_at)
    kept_at = expected_at if expected_head is not None else None
    # At the part's start, the kept head is compared with the link the part before carried.
    checked = kept_at == after
    findings = (_kept_head_findings(after, after, previous.hex(), expected_head)
                if checked else [])
    pending = kept_at if kept_at is not None and kept_at > after else None
    # Without its notification id, the kept head is looked for at every link the walk
    # carries: the record up to the first event that carries it is as it was when kept (the
    # genesis link: the ledger was empty).
    sought = bytes.fromhex(expected_head) if expected_head is not None and kept_at is None \
        else None
    found_at = kept_at if checked and not findings else None
    if sought is not None and previous == sought:  # the link this part starts from
        sought, checked, found_at = None, True, after
    rows = 0
    last_id = after
    reached_end = True
    # One row past the limit, if there is one, tells the part did not reach the end.
    for row in _rows(recorder, after, None if limit is None else limit + 1):
        if (limit is not None and rows == limit) or len(findings) >= CHAIN_FINDINGS_MAX:
            reached_end = False
            break
        rows += 1
        last_id = row["notification_id"]
        expected = link(previous, row["originator_id"], row["originator_version"],
                        row["topic"] or "", bytes(row["state"] or b""))
        stored = bytes(row["chain_hash"]) if row["chain_hash"] is not None else None
        if stored != expected:
            findings.append(f"event {row['originator_id']} v{row['originator_version']} "
                            f"(notification {last_id}) does not match the chain: it, or the "
                            "event before it (its link recomputed), was altered, inserted or "
                            "moved, or an event between them removed")
        previous = expected if stored is None else stored  # past a break: the stored link
        if pending is not None and last_id >= pending:
            head_findings = _kept_head_findings(pending, last_id, previous.hex(), expected_head)
            findings += head_findings
            pending, checked = None, True
            found_at = None if head_findings else kept_at
        elif sought is not None and previous == sought:
            sought, checked, found_at = None, True, last_id
        if on_row is not None:
            on_row(last_id)
    head = previous.hex()
    if reached_end and expected_head is not None:
        if pending is not None:  # the walk ended before the kept head's notification id
            findings += _kept_head_findings(pending, last_id, head, expected_head)
        elif sought is not None and from_start:
            findings.append(kept_head_unfound(expected_head))
        # A part begun past the first event may have begun past the kept head: not finding
        # it there is not checking it (a walker that never found it from the first event on
        # has found an alteration).
        checked = checked or (kept_at is None and from_start) or pending is not None
    return ChainReport(rows=rows, head=head, head_notification_id=last_id, findings=findings,
                       complete=reached_end, from_start=from_start,
                       kept_head_checked=expected_head is not None and checked,
                       kept_head_at=found_at, warnings=unguarded(recorder))


def unguarded(recorder: LedgerRecorder) -> list[str]:
    """The event table's refusing triggers that do not refuse: missing, disabled, made to fire
    on other statements, or running another function, or the refusing function rewritten.
    While one does not, an UPDATE, DELETE or TRUNCATE on stored events goes through (only the
    chain would tell). And the roles besides its owner that may INSERT into it directly."""
    table, schema = recorder.events_table_name, recorder.datastore.schema
    triggers = {row["tgname"]: row for row in _fetched(
        recorder, "SELECT t.tgname, t.tgenabled, t.tgtype, n.nspname, p.proname, p.prosrc, "
                  "t.tgqual IS NULL AND cardinality(t.tgattr::int2[]) = 0 AS always "
                  "FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
                  "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE t.tgrelid = "
                  "(quote_ident(%s) || '.' || quote_ident(%s))::regclass", (schema, table))}
    refuse = (schema, f"{table}_refuse_change")
    out = []
    for trigger, refuses, fires_on in (("immutable", "UPDATE and DELETE", _ON_UPDATE_DELETE),
                                       ("no_truncate", "TRUNCATE", _ON_TRUNCATE)):
        name = f"{table}_{trigger}"
        row = triggers.get(name)
        not_refused = f"{refuses} on stored events is not refused"
        if row is None:
            out.append(f"the trigger {name} is missing: {not_refused}")
        # "O" fires in every ordinary session, "A" always; "D" never, "R" only in replicas.
        elif row["tgenabled"] not in ("O", "A"):
            out.append(f"the trigger {name} is disabled (or fires in replicas only): "
                       f"{not_refused}")
        elif row["tgtype"] & fires_on != fires_on or not row["always"]:
            out.append(f"the trigger {name} was made again to fire on other statements, or "
                       f"only on some rows or columns: {not_refused}")
        elif (row["nspname"], row["proname"]) != refuse:
            out.append(f"the trigger {name} runs {row['nspname']}.{row['proname']}(), not "
                       f"{'.'.join(refuse)}(): {not_refused} unless that refuses")
        elif row["prosrc"] != _REFUSE_BODY:
            out.append(f"the function {'.'.join(refuse)}() that the trigger {name} runs was "
                       f"rewritten: {refuses} on stored events may not be refused")
    return out + [
        f"{who} may act as the event table's owner (a member of the owner's role): it may "
        "disable the refusing triggers and write the table as it likes: take the membership "
        "back" if as_owner else
        f"{who} may INSERT into the event table directly, around the insert function and its "
        "append lock: revoke it (deploy/postgres-roles.sql does for the service and auditor "
        "roles)" for who, as_owner in _inserting(recorder)]


def _inserting(recorder: LedgerRecorder) -> list[tuple[str, bool]]:
    """Who may insert into the event table, and whether as a member of its owner's role (who
    may SET ROLE to it, and then do anything the owner may): PUBLIC (every role) if a grant on
    the table or a column says so; else each role that may, by a grant on the table or its
    columns, to a group it belongs to, as a member of pg_write_all_data, or of the owner's
    role. Not the owner, nor a superuser (who may do anything), nor the built-in roles
    themselves."""
    table = "(quote_ident(%s) || '.' || quote_ident(%s))::regclass"
    where = (recorder.datastore.schema, recorder.events_table_name)
    public = _fetched(  # grantee 0 is PUBLIC, on the table or on one of its columns
        recorder, "SELECT 1 FROM pg_class c, aclexplode(c.relacl) AS a WHERE c.oid = "
                  f"{table} AND a.grantee = 0 AND a.privilege_type = 'INSERT' UNION ALL "
                  "SELECT 1 FROM pg_attribute t, aclexplode(t.attacl) AS a WHERE t.attrelid = "
                  f"{table} AND a.grantee = 0 AND a.privilege_type = 'INSERT'", where + where)
    if public:
        return [("every role (PUBLIC)", False)]
    return [(f"the role {row['role']}", row["as_owner"]) for row in _fetched(
        recorder, "SELECT r.rolname AS role, pg_has_role(r.oid, c.relowner, 'MEMBER') AS "
                  f"as_owner FROM pg_roles r, pg_class c WHERE c.oid = {table} "
                  "AND r.oid <> c.relowner AND NOT r.rolsuper AND r.rolname !~ '^pg_' "
                  "AND (has_any_column_privilege(r.oid, c.oid, 'INSERT') "
                  "OR pg_has_role(r.oid, c.relowner, 'MEMBER')) ORDER BY 1", where)]


# pg_trigger.tgtype bits: the statements a trigger fires on.
_ON_UPDATE_DELETE = 8 | 16
_ON_TRUNCATE = 32


def kept_head_unfound(kept: str) -> str:
    """The finding of a walk from the first event to the last that never carried ``kept``."""
    return (f"no link the walk carried is the head {kept} kept outside: the record was altered "
            "since it was kept (or it was kept of another ledger)")


def _kept_head_findings(at: int, reached: int, carried: str, kept: str | None) -> list[str]:
    if reached != at:
        return [f"there is no event at notification {at}, where the head kept outside was "
                "taken: it was removed, or the id is not the one kept with it"]
    if carried != kept:
        return [f"the link at notification {at} is {carried}, not the {kept} kept outside: "
                "the record up to it was altered"]
    return []


def _carried_link(recorder: LedgerRecorder, notification_id: int) -> bytes | None:
    """The link a walk carries past the event at ``notification_id`` (see :func:`_carried`);
    None if there is no such event."""
    found = _carried(recorder, notification_id)
    return found[1] if found is not None and found[0] == notification_id else None


def _carried(recorder: LedgerRecorder, upto: int | None) -> tuple[int, bytes] | None:
    """The last event at or before notification ``upto`` (None: the last of all), and the link
    a walk carries past it: the link stored with it, or, where that was removed (its column
    made to take none), the one recomputed from the link stored before it."""
    where = "" if upto is None else "WHERE notification_id <= %s"
    rows = _fetched(recorder, "SELECT notification_id, originator_id, originator_version, topic, "
                              f"state, chain_hash FROM {{table}} {where} "
                              "ORDER BY notification_id DESC LIMIT 2",
                    () if upto is None else (upto,))
    if not rows:
        return None
    row = rows[0]
    if row["chain_hash"] is not None:
        return row["notification_id"], bytes(row["chain_hash"])
    before = rows[1]["chain_hash"] if len(rows) > 1 else None
    return row["notification_id"], link(
        bytes(before) if before is not None else GENESIS, row["originator_id"],
        row["originator_version"], row["topic"] or "", bytes(row["state"] or b""))


def without_ending(recorder: LedgerRecorder, topic: str, endings: Sequence[str],
                   candidates: int | None = None) -> list[UUID]:
    """The originators of the stored events of ``topic`` (of the last ``candidates`` of them,
    if given) that have no event of any topic in ``endings`` (the shoes still live, say),
    newest first. Without ``candidates``, a read of the whole log."""
    limit = "" if candidates is None else f"LIMIT {int(candidates)}"
    rows = _fetched(recorder, "SELECT c.originator_id FROM (SELECT originator_id, "
                              "notification_id FROM {table} WHERE topic = %s ORDER BY "
                              f"notification_id DESC {limit}) AS c WHERE NOT EXISTS (SELECT 1 "
                              "FROM {table} AS e WHERE e.originator_id = c.originator_id AND "
                              "e.topic = ANY(%s)) ORDER BY c.notification_id DESC",
                    (topic, list(endings)))
    return [UUID(str(row["originator_id"])) for row in rows]


def _postings_that_may_name(anywhere: bool) -> str:
    # The index's predicate and expression written out, not passed as parameters: a plan
    # made for any parameters could not use an index whose predicate it cannot prove.
    named = POSTING_ROUND.replace("{", "{{").replace("}", "}}")  # formatted with {table}
    return ("SELECT originator_id, originator_version, topic, state FROM {table} "
            f"WHERE topic = {literal(Account.Posted.TOPIC)} "
            f"AND ({named} = %(value)s OR {named} IS NULL) "
            + ("" if anywhere else "AND originator_id = ANY(%(ids)s) ")
            + "ORDER BY originator_id, originator_version")


# What postings_that_may_name reads (``{table}``: the event table), found by an index, and
# what it reads on tables an older version made, until they have the index.
POSTINGS_THAT_MAY_NAME = _postings_that_may_name(anywhere=True)
POSTINGS_ON_ACCOUNTS = _postings_that_may_name(anywhere=False)


def postings_that_may_name(recorder: LedgerRecorder, originator_ids: Sequence[UUID],
                           round_hex: bytes) -> list[StoredEvent]:
    """The postings that may name the round whose id is ``round_hex`` (32 lower-case hex
    digits), by originator and version, found by index on every account: those written as
    the ledger writes them that name it, and every one spelt otherwise, to be decoded and
    decided on. Until the index of postings by round exists, those on ``originator_ids``
    alone: a search of every account would read the whole log. An event under any other
    topic is no posting: the decoder takes each class's own topic alone
    (:class:`~ledger.transcoding.CheckedMapper`)."""
    statement = (POSTINGS_THAT_MAY_NAME if recorder.has_index("postings_by_round")
                 else POSTINGS_ON_ACCOUNTS)
    return [_stored(r) for r in _fetched(recorder, statement,
                                         {"ids": list(originator_ids), "value": round_hex})]


def first_events(recorder: LedgerRecorder, originator_ids: Sequence[UUID]) -> list[StoredEvent]:
    """The first event of each of ``originator_ids`` that has one, in one query."""
    return [_stored(r) for r in _fetched(
        recorder, "SELECT originator_id, originator_version, topic, state FROM {table} WHERE "
                  "originator_id = ANY(%s) AND originator_version = 1", (list(originator_ids),))]


def _stored(row: dict[str, Any]) -> StoredEvent:
    """A stored event as a row of the event (or snapshot) table holds it."""
    return StoredEvent(originator_id=row["originator_id"],
                       originator_version=row["originator_version"], topic=row["topic"],
                       state=bytes(row["state"]))


def chain_head(recorder: LedgerRecorder) -> tuple[int, str]:
    """The last notification id and the link a walk carries there, to be kept outside the
    database (keep one only after an intact walk)."""
    last = _carried(recorder, None)
    return (0, GENESIS.hex()) if last is None else (last[0], last[1].hex())


@_retried
def _fetched(recorder: LedgerRecorder, statement: str,
             params: Sequence[Any] | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows ``statement`` finds, ``{table}`` being the event table, in a transaction of
    its own, tried again on a connection that broke (as the library's reads are): the chain's
    reads answered 503 for several requests after the database restarted."""
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(statement.format(table=recorder.qualified_table), params)
        rows: list[dict[str, Any]] = curs.fetchall()
    return rows

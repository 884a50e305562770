"""How the ledger's events are kept in PostgreSQL: append-only and hash-chained.

:class:`LedgerRecorder` is the library's Postgres application recorder with two
guarantees added when it creates its table:

* **Append-only.** A trigger refuses every ``UPDATE``, ``DELETE`` and ``TRUNCATE`` on
  the event table, whoever sends it. Corrections are new events (R-V2). The
  operator should also run the service as a role with ``INSERT`` and ``SELECT``
  only (``deploy/postgres-roles.sql``), so the trigger cannot be dropped by it.
* **One round trip per save.** :meth:`LedgerRecorder.insert_events` calls one SQL
  function that takes the table's ``EXCLUSIVE`` lock, notifies listeners and inserts
  every row of the save, in a single autocommitted statement. It keeps the library's
  guarantee (ids commit in the order they are issued, so a reader paging by id never
  passes over a late row) which the library's own database function drops by not
  locking (EVENTSOURCING.md, ``POSTGRES_ENABLE_DB_FUNCTIONS``), and it costs one round
  trip where the library's pipelined transaction costs several.
* **Tamper-evident.** A ``BEFORE INSERT`` trigger stores in ``chain_hash`` the
  SHA-256 of the previous row's hash and this row's id, version, topic and state.
  Inserts are serialized by the recorder's table lock, so the chain follows the
  notification order. :func:`verify_chain` recomputes it; an auditor who keeps
  the head hash (:func:`chain_head`) outside the database can later prove that no
  stored event was altered, removed or inserted before it.

The statements are plain SQL text run through the library's datastore; the
ledger does not import the driver.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
)
from eventsourcing.utils import retry

GENESIS = b"\x00" * 32
CHAIN_PAGE_ROWS = 5000


class _CreatesTablesOneAtATime:
    """Table creation under a database-wide advisory lock: processes starting together
    (gunicorn workers, the projection worker) would otherwise race on the same DDL."""

    datastore: PostgresDatastore
    CREATION_LOCK = 0x70697462  # an arbitrary application-wide advisory lock key

    def create_table(self) -> None:
        with self.datastore.get_connection() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (self.CREATION_LOCK,))
            try:
                super().create_table()  # type: ignore[misc]
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (self.CREATION_LOCK,))


class SnapshotRecorder(_CreatesTablesOneAtATime, PostgresAggregateRecorder):
    """The library's snapshot recorder, created one process at a time."""


class LedgerRecorder(_CreatesTablesOneAtATime, PostgresApplicationRecorder):
    """The application recorder with an append-only, hash-chained event table."""

    def __init__(self, datastore: PostgresDatastore, *,
                 events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        names = {
            "schema": quote(datastore.schema),
            "table": quote(events_table_name),
            "refuse": quote(f"{events_table_name}_refuse_change"),
            "chain": quote(f"{events_table_name}_chain"),
            "immutable": quote(f"{events_table_name}_immutable"),
            "no_truncate": quote(f"{events_table_name}_no_truncate"),
            "chained": quote(f"{events_table_name}_chained"),
            "insert": quote(f"{events_table_name}_insert"),
            "channel": quote(self.channel_name),
            "lock_timeout_s": str(int(datastore.lock_timeout)),
            "genesis": GENESIS.hex(),
            "table_regclass": literal(f"{quote(datastore.schema)}.{quote(events_table_name)}"),
            **{f"{t}_name": literal(f"{events_table_name}_{t}")
               for t in ("immutable", "no_truncate", "chained")},
        }
        # Binary parameters: psycopg dumps the four arrays in a third of the time.
        self._insert_statement = (f"SELECT * FROM {names['schema']}.{names['insert']}"
                                  "(%b, %b, %b, %b)")
        for statement in _STATEMENTS:
            self.sql_create_statements.append(
                _Statement(statement.format(**names)))  # type: ignore[arg-type]

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent],
                      **kwargs: Any) -> Sequence[int] | None:
        """Insert a save's events in one statement; their notification ids, in order."""
        if not stored_events:
            return []
        params = ([e.originator_id for e in stored_events],
                  [e.originator_version for e in stored_events],
                  [e.topic for e in stored_events],
                  [e.state for e in stored_events])
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._insert_statement, params, prepare=True)
            return [row["notification_id"] for row in curs.fetchall()]

    @property
    def qualified_table(self) -> str:
        return f"{quote(self.datastore.schema)}.{quote(self.events_table_name)}"


class LedgerFactory(PostgresFactory):
    """The library's PostgreSQL persistence with the ledger's recorders."""

    aggregate_recorder_class = SnapshotRecorder
    application_recorder_class = LedgerRecorder


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


_STATEMENTS = (
    "ALTER TABLE {schema}.{table} ADD COLUMN IF NOT EXISTS chain_hash bytea",
    """CREATE OR REPLACE FUNCTION {schema}.{refuse}() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'stored events are immutable: % on % refused', TG_OP, TG_TABLE_NAME
           USING ERRCODE = 'insufficient_privilege',
                 HINT = 'Correct a record with a new event (R-V2).';
       END $$""",
    """CREATE OR REPLACE FUNCTION {schema}.{chain}() RETURNS trigger
       LANGUAGE plpgsql AS $$
       DECLARE
         previous bytea;
         topic_bytes bytea := convert_to(coalesce(NEW.topic, ''), 'UTF8');
       BEGIN
         SELECT t.chain_hash INTO previous FROM {schema}.{table} t
           WHERE t.notification_id < NEW.notification_id
           ORDER BY t.notification_id DESC LIMIT 1;
         NEW.chain_hash := sha256(
           coalesce(previous, '\\x{genesis}'::bytea)
           || uuid_send(NEW.originator_id) || int8send(NEW.originator_version)
           || int4send(length(topic_bytes)) || topic_bytes || coalesce(NEW.state, ''::bytea));
         RETURN NEW;
       END $$""",
    _once("immutable", """CREATE TRIGGER {immutable} BEFORE UPDATE OR DELETE ON {schema}.{table}
       FOR EACH ROW EXECUTE FUNCTION {schema}.{refuse}()"""),
    _once("no_truncate", """CREATE TRIGGER {no_truncate} BEFORE TRUNCATE ON {schema}.{table}
       FOR EACH STATEMENT EXECUTE FUNCTION {schema}.{refuse}()"""),
    """CREATE OR REPLACE FUNCTION {schema}.{insert}(
         ids uuid[], versions bigint[], topics text[], states bytea[])
       RETURNS TABLE (notification_id bigint) LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM set_config('lock_timeout', '{lock_timeout_s}s', true);
         LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE;
         NOTIFY {channel};
         RETURN QUERY
           INSERT INTO {schema}.{table} AS t (originator_id, originator_version, topic, state)
           SELECT * FROM unnest(ids, versions, topics, states)
           RETURNING t.notification_id;
       END $$""",
    _once("chained", """CREATE TRIGGER {chained} BEFORE INSERT ON {schema}.{table}
       FOR EACH ROW EXECUTE FUNCTION {schema}.{chain}()"""),
)


def link(previous: bytes, originator_id: UUID, version: int, topic: str, state: bytes) -> bytes:
    """One link of the chain, exactly as the insert trigger computes it."""
    topic_bytes = topic.encode()
    return hashlib.sha256(
        previous + originator_id.bytes + version.to_bytes(8, "big", signed=True)
        + len(topic_bytes).to_bytes(4, "big", signed=True) + topic_bytes + state
    ).digest()


@dataclass(frozen=True)
class ChainReport:
    """The result of walking the chain: rows checked, the head, and what did not match."""

    rows: int
    head: str
    head_notification_id: int
    findings: list[str]

    @property
    def intact(self) -> bool:
        return not self.findings


def _rows(recorder: LedgerRecorder) -> Iterator[dict[str, Any]]:
    statement = (
        "SELECT notification_id, originator_id, originator_version, topic, state, chain_hash "
        f"FROM {recorder.qualified_table} WHERE notification_id > %s "
        "ORDER BY notification_id LIMIT %s")
    last = 0
    while True:
        with recorder.datastore.transaction(commit=False) as curs:
            curs.execute(statement, (last, CHAIN_PAGE_ROWS))
            page = curs.fetchall()
        if not page:
            return
        yield from page
        last = page[-1]["notification_id"]


def verify_chain(recorder: LedgerRecorder, *, expected_head: str | None = None) -> ChainReport:
    """Recompute every link; report the first break and whether the head is as expected."""
    previous = GENESIS
    rows = 0
    last_id = 0
    findings: list[str] = []
    for row in _rows(recorder):
        rows += 1
        last_id = row["notification_id"]
        expected = link(previous, row["originator_id"], row["originator_version"],
                        row["topic"] or "", bytes(row["state"] or b""))
        stored = bytes(row["chain_hash"]) if row["chain_hash"] is not None else None
        if stored != expected:
            findings.append(f"event {row['originator_id']} v{row['originator_version']} "
                            f"(notification {last_id}) does not match the chain: the record "
                            "or one before it was altered")
            break
        previous = expected
    head = previous.hex()
    if expected_head is not None and not findings and expected_head != head:
        findings.append(f"the chain head is {head}, not the {expected_head} kept outside")
    return ChainReport(rows=rows, head=head, head_notification_id=last_id, findings=findings)


def chain_head(recorder: LedgerRecorder) -> tuple[int, str]:
    """The last notification id and its chain hash, to be kept outside the database."""
    statement = (f"SELECT notification_id, chain_hash FROM {recorder.qualified_table} "
                 "ORDER BY notification_id DESC LIMIT 1")
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(statement)
        row = curs.fetchone()
    if row is None:
        return 0, GENESIS.hex()
    return row["notification_id"], bytes(row["chain_hash"]).hex()

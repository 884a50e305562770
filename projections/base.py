"""What every projection shares: its tables (a view), its tracking row, and batches.

A **view** is a :class:`~eventsourcing.postgres.PostgresTrackingRecorder` with tables of its
own next to the library's tracking table (``<name>_tracking``, one row per application). A
view has a *generation*: the live tables are ``<name>_<part>``; a rebuild fills
``<name>_next_<part>`` and then swaps them in (:mod:`projections.rebuild`).

A **projection** is an :class:`eventsourcing.projection.Projection` over a view. It applies a
batch of notifications, the page ``(start, end]`` of the ledger's log, in one transaction
that first moves its tracking row from ``start`` to ``end`` and then writes its rows: all or
nothing. Exactly once rests on that tracking write, which is a compare-and-set: it succeeds
only if the row still says ``start``. The library's own tracking insert only refuses to move
backwards, which is enough for one event per transaction but not for pages: a second worker
holding a stale position could otherwise apply ``(100, 250]`` over a view already at 200 and
count ``(100, 200]`` twice. The tracking row is written first, so a concurrent worker on the
same view waits on that row and then fails cleanly, before any work.

Every projection also checks, where it reads, that each aggregate's events arrive with
consecutive versions (:func:`versioned`): a skipped (or repeated) event stops the projection
with :class:`~ledger.errors.InvariantBroken` instead of silently producing a wrong figure.

``process_event`` keeps the library's one-event-per-transaction interface, so the stock
:class:`~eventsourcing.projection.ProjectionRunner` can drive any of these projections too
(tracked with the library's insert); the batch path is what the worker uses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.postgres import PostgresDatastore, PostgresTrackingRecorder
from eventsourcing.projection import Projection
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composable, Composed, Identifier, Literal

from ledger.aggregates.account import Account
from ledger.aggregates.round import Round
from ledger.aggregates.table import Table
from ledger.application import GameLedger
from ledger.errors import InvariantBroken
from ledger.storage import relation_exists
from projections.settings import ProjectionSetupError

LEDGER_APP = GameLedger.name
NEXT = "_next"
# The topic prefix of each aggregate's events ("pitboss:Round.Created", ...).
ACCOUNT_STREAM = f"{Account.TOPIC}."
ROUND_STREAM = f"{Round.TOPIC}."
TABLE_STREAM = f"{Table.TOPIC}."

Curs = Cursor[DictRow]


class TrackingConflict(Exception):
    """Another writer moved this view's tracking row first; nothing was written."""


@dataclass(frozen=True, slots=True)
class Item:
    """One notification as a projection sees it: its place in the log and, when the
    projection reads the event's content, the decoded event (else ``None``)."""

    notification_id: int
    originator_id: UUID
    originator_version: int
    topic: str
    event: Any


class View(PostgresTrackingRecorder):
    """A projection's tables, in one generation, with the tracking table beside them."""

    base: ClassVar[str] = ""
    parts: ClassVar[tuple[str, ...]] = ()

    def __init__(self, datastore: PostgresDatastore, *, tracking_table_name: str | None = None,
                 generation: str = "", **kwargs: Any) -> None:
        self.generation = generation
        super().__init__(datastore,
                         tracking_table_name=tracking_table_name or self.name_of("tracking"),
                         **kwargs)
        if not datastore.single_row_tracking:
            raise ProjectionSetupError("projections need single-row tracking; unset "
                                       "SINGLE_ROW_TRACKING or set it to yes")
        tracking = self.qualified("tracking")
        self._cas_update = SQL(
            "UPDATE {} SET notification_id = %s WHERE application_name = %s "
            "AND notification_id = %s").format(tracking)
        self._cas_insert = SQL(
            "INSERT INTO {} (application_name, notification_id) VALUES (%s, %s) "
            "ON CONFLICT (application_name) DO NOTHING").format(tracking)
        self.sql_create_statements.extend(self.create_statements())

    def create_table(self) -> None:
        """As the library makes them, but without its probe of a tracking table that is not
        there yet: a probe that fails is an ERROR in PostgreSQL's log at every first start."""
        with self.datastore.transaction(commit=False) as curs:
            tracking_made = table_exists(curs, self.qualified("tracking"))
        if tracking_made:
            super().create_table()  # reads the tracking table's migration version
        else:
            super(PostgresTrackingRecorder, self).create_table()

    def name_of(self, part: str) -> str:
        name = f"{self.base}{self.generation}_{part}"
        self.check_identifier_length(name)
        return name

    def qualified(self, part: str) -> Identifier:
        return Identifier(self.datastore.schema, self.name_of(part))

    @abstractmethod
    def create_statements(self) -> list[Composed]:
        """The statements that make the parts where they are missing (indexes by
        :meth:`added_index`)."""

    def added_column(self, part: str, column: str, definition: str) -> Composed:
        """A column that a part made by an earlier version lacks, added where it is missing.
        Guarded, not IF NOT EXISTS: ALTER TABLE would lock out readers at every start."""
        return SQL("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
                   "(quote_ident({}) || '.' || quote_ident({}))::regclass AND attname = {} "
                   "AND NOT attisdropped) THEN ALTER TABLE {} ADD COLUMN {} {}; END IF; "
                   "END $$").format(Literal(self.datastore.schema), Literal(self.name_of(part)),
                                    Literal(column), self.qualified(part), Identifier(column),
                                    SQL(definition))

    def added_index(self, name: str, part: str, columns: str, where: str = "") -> Composed:
        """An index ``name`` of ``part`` on ``columns``, made where it is missing. Guarded, not
        IF NOT EXISTS: CREATE INDEX locks the table against the worker's writes (SHARE) before
        it finds the index there, so a start waited for a batch in flight and held it up."""
        return SQL("DO $$ BEGIN IF to_regclass(quote_ident({}) || '.' || quote_ident({})) IS "
                   "NULL THEN CREATE INDEX {} ON {} ({}){}; END IF; END $$").format(
                       Literal(self.datastore.schema), Literal(name), Identifier(name),
                       self.qualified(part), SQL(columns),
                       SQL(f" WHERE {where}" if where else ""))

    def unwritable_parts(self) -> list[str]:
        """The names of this view's tables that do not exist (yet), or that this role may not
        read and write (the roles file not run again since they were made)."""
        unwritable = []
        with self.datastore.transaction(commit=False) as curs:
            for part in self.parts:
                table = self.qualified(part).as_string(curs)
                if relation_exists(curs, table):
                    curs.execute("SELECT " + " AND ".join(
                        f"has_table_privilege(%(table)s, '{right}')"
                        for right in ("SELECT", "INSERT", "UPDATE", "DELETE")) + " AS granted",
                        {"table": table})
                    row = curs.fetchone()
                    if row is not None and row["granted"]:
                        continue
                unwritable.append(self.name_of(part))
        return unwritable

    def drop(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            # The tracking table first: the order a batch locks them in (no deadlock with one).
            for part in ("tracking", *self.parts):
                curs.execute(SQL("DROP TABLE IF EXISTS {}").format(self.qualified(part)))

    def position(self) -> int:
        """The last notification counted, asked once: the library's ``max_tracking_id`` tries
        ten times, each waiting out the connect timeout while the database is down, and held a
        worker asked to stop for 50 s."""
        with self.datastore.transaction(commit=False) as curs:
            return self._max_tracking_id(LEDGER_APP, curs) or 0

    def move_tracking(self, curs: Curs, start: int, end: int) -> None:
        """Compare-and-set the tracking row from ``start`` to ``end``, or raise."""
        if end <= start:
            raise InvariantBroken(f"{self.base}: a batch must end after it starts "
                                  f"({start} → {end})")
        if start == 0:
            curs.execute(self._cas_insert, (LEDGER_APP, end), prepare=True)
        else:
            curs.execute(self._cas_update, (end, LEDGER_APP, start), prepare=True)
        if curs.rowcount != 1:
            raise TrackingConflict(f"{self.base}: the view is no longer at {start}")


V = TypeVar("V", bound=View)


class BatchProjection(Projection[V], ABC):
    """A projection applied a page at a time; see the module docstring."""

    view_class: ClassVar[type[View]]
    # Topic prefixes this projection is handed (all, for the version checks); those it reads
    # decoded; and exact topics under those it does not need decoded.
    streams: ClassVar[tuple[str, ...]] = ()
    decoded: ClassVar[tuple[str, ...]] = ()
    undecoded: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, view: V) -> None:
        super().__init__(view)
        self._wants: dict[str, tuple[bool, bool]] = {}

    def wants(self, topic: str) -> tuple[bool, bool]:
        """Whether to hand over notifications of ``topic`` at all, and decoded."""
        wanted = self._wants.get(topic)
        if wanted is None:
            wanted = (topic.startswith(self.streams),
                      topic.startswith(self.decoded) and topic not in self.undecoded)
            self._wants[topic] = wanted
        return wanted

    def process_batch(self, items: Sequence[Item], start: int, end: int) -> None:
        """Apply the page ``(start, end]`` (its relevant ``items``) in one transaction."""
        try:
            with self.view.datastore.transaction(commit=True) as curs:
                self.view.move_tracking(curs, start, end)
                if items:
                    self.apply(curs, items)
        except IntegrityError as error:
            raise InvariantBroken(f"{self.name}: a row broke a check of the view: "
                                  f"{error}") from error

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """The library's runner hands one event at a time: one event, one transaction."""
        item = Item(tracking.notification_id, domain_event.originator_id,
                    domain_event.originator_version, type(domain_event).TOPIC, domain_event)
        with self.view.datastore.transaction(commit=True) as curs:
            self.view._insert_tracking(curs, tracking)
            self.apply(curs, [item])

    @abstractmethod
    def apply(self, curs: Curs, items: Sequence[Item]) -> None:
        """Write the rows for ``items`` (in log order) inside the open transaction."""


def table_exists(curs: Curs, table: Identifier) -> bool:
    return relation_exists(curs, table.as_string(curs))


def select_rows(table: Composable, columns: Sequence[str], key: str) -> Composed:
    """``SELECT columns FROM table WHERE key = ANY(%s)``: the rows of a list of keys."""
    return SQL("SELECT {} FROM {} WHERE {} = ANY(%s)").format(
        SQL(", ").join(map(Identifier, columns)), table, Identifier(key))


def upsert_rows(table: Composable, columns: Sequence[str], key: str,
                changing: Sequence[str]) -> Composed:
    """Insert a row of ``columns`` (named parameters), or update its ``changing`` columns
    where a row with its ``key`` exists."""
    return SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}").format(
        table, SQL(", ").join(map(Identifier, columns)),
        SQL(", ").join(SQL("%({})s").format(SQL(c)) for c in columns), Identifier(key),
        SQL(", ").join(SQL("{0} = EXCLUDED.{0}").format(Identifier(c)) for c in changing))


def aggregate_ids(items: Sequence[Item], stream: str, created: str | None = None
                  ) -> Iterator[UUID]:
    """The aggregates of ``stream`` that ``items`` touch; with ``created`` (the stream's
    creation topic), only those the items do not create."""
    return (i.originator_id for i in items
            if i.topic.startswith(stream) and i.topic != created)


def load_rows(curs: Curs, select: Composed, key: str, ids: Iterable[UUID]
              ) -> dict[UUID, dict[str, Any]]:
    """The rows ``select`` (a :func:`select_rows` statement) finds for ``ids``, by ``key``."""
    wanted = list(set(ids))
    if not wanted:
        return {}
    curs.execute(select, (wanted,))
    return {row[key]: row for row in curs.fetchall()}


def versioned(kind: str, row: dict[str, Any] | None, item: Item,
              fresh: dict[str, Any] | None) -> dict[str, Any]:
    """The aggregate's row with the item's version checked and recorded: ``fresh`` when the
    item creates the aggregate, else ``row``, the one it already has. Raise when the aggregate
    is created twice, is not yet created, or an event was skipped or applied twice."""
    key = item.originator_id
    if fresh is not None:
        if row is not None:
            raise InvariantBroken(f"{kind} {key} was created twice")
        row, have = fresh, 0
    elif row is None:
        raise InvariantBroken(f"{kind} {key}: {item.topic} (notification "
                              f"{item.notification_id}) arrived before the {kind} was created")
    else:
        have = row["version"]
    if item.originator_version != have + 1:
        raise InvariantBroken(
            f"{kind} {key}: event version {item.originator_version} ({item.topic}, notification "
            f"{item.notification_id}) follows version {have}: an event was skipped or applied "
            "twice")
    row["version"] = item.originator_version
    return row


def known_topics(streams: tuple[str, ...], *classes: type) -> tuple[str, ...]:
    """Every event topic declared on the given aggregate classes that starts with one of
    ``streams`` (for the library runner)."""
    topics: list[str] = []
    for cls in classes:
        for value in vars(cls).values():
            topic = getattr(value, "TOPIC", None)
            if isinstance(value, type) and isinstance(topic, str) \
                    and topic.startswith(streams) and topic not in topics:
                topics.append(topic)
    return tuple(topics)

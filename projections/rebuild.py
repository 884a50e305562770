"""Rebuild a projection from event zero into fresh tables, then swap them in atomically.

1. Fresh tables of the ``_next`` generation (``<name>_next_<part>``, with their own tracking
   table) are created, after dropping any left by an interrupted rebuild.
2. They catch up from notification 0 to the head, in batches, while the live view keeps
   serving reads and a running worker keeps it current.
3. One transaction locks the live tables (tracking table first, the order in which a worker's
   batch takes them, so the two cannot deadlock), brings the new tables up to the position a
   worker had brought the live ones to meanwhile, drops the live tables, and renames the new
   tables and their indexes to the live names. Readers see the old view or the new one, never
   a mixture, and never a view behind one they saw (a read locks the tables it reads before
   its first query takes its snapshot, :meth:`projections.queries.ReadModels._read`: one
   waiting on the swap sees what the swap committed).
4. The new live view catches up with what was written meanwhile. A worker that was running
   finds the tracking row at a position it did not expect, so its next batch is refused
   (compare-and-set, :mod:`projections.base`); it reads the new position and goes on. Nothing
   is counted twice.

A changed gaming day (``PITBOSS_GAMING_DAY_*``) takes effect through a rebuild of
``table_days``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from psycopg import errors
from psycopg.sql import SQL, Identifier

from projections.base import NEXT, Curs, TrackingConflict, View, table_exists
from projections.engine import (
    Engine,
    Reader,
    build_projection,
    ddl_lock,
    merged_env,
    projection_class,
)
from projections.settings import BATCH_SIZE_DEFAULT, GamingDay, ProjectionSetupError
from projections.table_days import TableDaysView, built_gaming_day

SWAP_LOCK_TIMEOUT_S = 10
SWAP_CONNECTIONS_MIN = 3
POOL_SIZE, MAX_OVERFLOW = "PROJECTIONS_POSTGRES_POOL_SIZE", "PROJECTIONS_POSTGRES_MAX_OVERFLOW"
REBUILD_LOCK_CLASS = 0x70627262  # an advisory lock key's first half (rebuild_lock_key)
PROGRESS_INTERVAL_S = 5.0  # a long rebuild says how far it got this often

_log = logging.getLogger("pitboss.projections")


def rebuild(env: Mapping[str, str], name: str, *, batch_size: int = BATCH_SIZE_DEFAULT,
            log: logging.Logger = _log, stop: threading.Event | None = None,
            new_gaming_day: bool = False) -> dict[str, Any]:
    """Rebuild projection ``name`` and swap it in; a report of what was done.

    With ``stop`` set before the swap, the live view is left as it was (``swapped`` false).
    A rebuild of ``table_days`` counts gaming days as ``env`` says; one that would move them
    from the live view's is refused (``ProjectionSetupError``) unless ``new_gaming_day``.
    """
    projection_class(name)  # refuse an unknown name before any work
    started = time.monotonic()
    stopping = stop.is_set if stop is not None else (lambda: False)
    reader = Reader(env)
    gaming_day = GamingDay.from_env(env)
    try:
        with _alone(reader, name), Engine(_swap_connections(env), names=[name],
                                          generation=NEXT, fresh=True, reader=reader) as building:
            # Only the live names are needed: swap() drops whatever live tables exist.
            live_view = build_projection(projection_class(name), building.datastore,
                                         gaming_day=gaming_day, create=False).view
            if isinstance(live_view, TableDaysView):
                _check_gaming_day(live_view, gaming_day, new_gaming_day, log)
            target = reader.head()
            log.info("rebuilding %s from event 0 into fresh tables, up to notification %d "
                     "and what is written meanwhile", name, target)
            read = building.catch_up(batch_size, is_stopping=stopping,
                                     on_page=_progress(building, name, target, log))
            fresh_view = building.projections[0].view
            try:
                if stopping():
                    raise SwapStopped
                with ddl_lock(building.datastore):
                    read += swap(fresh_view, live_view,
                                 lambda live_at: building.catch_up_to(live_at, batch_size),
                                 is_stopping=stopping)
            except SwapStopped:
                log.warning("rebuild of %s stopped before the swap; the live view is unchanged",
                            name)
                return {"projection": name, "events_read": read, "swapped": False,
                        "position": building.position(name),
                        "seconds": round(time.monotonic() - started, 3)}
            log.info("%s rebuilt up to notification %d and swapped in", name,
                     building.position(name))
        applied = [0]  # the events of the pages committed after the swap, so far
        with Engine(_swap_connections(env), names=[name], reader=reader) as live:
            try:
                live.catch_up(batch_size, is_stopping=stopping, on_page=applied.append)
                position = live.position(name)
            except TrackingConflict:  # a running worker moved the new view on first: it goes on
                (now,) = live.positions()
                position = now["position"]
        read += applied[-1]
    finally:
        reader.close()
    return {"projection": name, "events_read": read, "swapped": True, "position": position,
            "seconds": round(time.monotonic() - started, 3)}


def _swap_connections(env: Mapping[str, str]) -> Mapping[str, str]:
    """``env``, with a pool that holds at least SWAP_CONNECTIONS_MIN connections: the swap
    holds one for the lock on DDL and one for its transaction, and its catch-up needs a third
    (with fewer, the rebuild waited out the pool's timeout at the swap, and failed); the
    catch-up after the swap holds two (with one, a rebuild swapped in said it failed)."""
    merged = merged_env(env)
    try:
        held = int(merged[POOL_SIZE]) + int(merged[MAX_OVERFLOW])
    except (KeyError, ValueError):  # the library says what is wrong with them
        return env
    if held >= SWAP_CONNECTIONS_MIN:
        return env
    return {**env, MAX_OVERFLOW: str(SWAP_CONNECTIONS_MIN - int(merged[POOL_SIZE]))}


def _check_gaming_day(live: TableDaysView, wanted: GamingDay, change: bool,
                      log: logging.Logger) -> None:
    """A rebuild of table_days under a gaming day other than the live view's moves every
    day's figures, closed days' included: only when asked (a shell without the service's
    ``PITBOSS_GAMING_DAY_*`` did so unsaid). Said either way."""
    built = built_gaming_day(live)
    if built is None or built.counts_as(wanted):
        log.info("table_days counts gaming days from %s", wanted.describe())
        return
    if not change:
        raise ProjectionSetupError(
            f"table_days counts gaming days from {built.describe()}; these settings say "
            f"{wanted.describe()} (PITBOSS_GAMING_DAY_TZ, PITBOSS_GAMING_DAY_START), and a "
            "rebuild under them would move every day's figures, closed days' included. Run "
            "it with the service's settings, or add --new-gaming-day to change the gaming "
            "day on purpose")
    log.warning("table_days counted gaming days from %s; rebuilt, it counts them from %s: "
                "every day's figures move to the new days", built.describe(), wanted.describe())


def rebuild_lock_key(schema: str, name: str) -> tuple[int, int]:
    """The session advisory lock a rebuild of read model ``name`` in ``schema`` holds (other
    schemas of the database hold other ledgers)."""
    digest = hashlib.sha256(f"pitboss rebuild {schema}.{name}".encode()).digest()
    return REBUILD_LOCK_CLASS, int.from_bytes(digest[:4], "big", signed=True)


@contextlib.contextmanager
def _alone(reader: Reader, name: str) -> Iterator[None]:
    """One rebuild of a read model at a time: a second would drop the fresh tables the first
    is filling. A session advisory lock, which PostgreSQL releases if the process dies."""
    key = rebuild_lock_key(reader.recorder.datastore.schema, name)
    # On a connection of its own: the reader's pool may hold a single one, which the
    # rebuild's reads need.
    with reader.own_connection() as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
        if not (row and row[0]):
            raise ProjectionSetupError(f"a rebuild of {name} is already running: let it finish "
                                       "(or stop it) first")
        yield  # the lock goes with the connection


def _progress(building: Engine, name: str, target: int, log: logging.Logger
              ) -> Callable[[int], None]:
    """Log the rebuild's position every PROGRESS_INTERVAL_S, against the head it started at."""
    started = last = time.monotonic()

    def report(read: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_INTERVAL_S:
            return
        last = now
        position = building.position(name)
        log.info("rebuilding %s: at notification %d of %d (%d%%), %d events read, %.0f/s",
                 name, position, target, 100 * min(position, target) // max(target, 1), read,
                 read / (now - started))

    return report


class SwapStopped(Exception):
    """A stop asked for before the swap committed: the live view is left as it was."""


def swap(fresh: View, live: View, catch_up_to: Callable[[int], int] | None = None, *,
         is_stopping: Callable[[], bool] = lambda: False) -> int:
    """In one transaction: drop the live tables and give the fresh ones their names; the
    events ``catch_up_to`` read.

    ``catch_up_to`` is given the live view's position once its tables are locked (a worker
    kept it moving until then), to bring the fresh tables that far first: swapped in behind
    it, the view went back a few events (a balance a version older, for a moment), and a
    balance check that read the position before the swap and the rows after it called events
    unapplied.

    A stop asked for while the swap waited for the live tables, or brought the fresh ones up
    to them, rolls it back (:class:`SwapStopped`); so does a wait for the live tables past
    SWAP_LOCK_TIMEOUT_S (:class:`ProjectionSetupError`, saying so).
    """
    caught_up = 0
    if fresh.generation == live.generation or type(fresh) is not type(live):
        raise ValueError("swap a fresh generation of a view for the live one")
    schema = fresh.datastore.schema
    parts = ("tracking", *fresh.parts)
    with fresh.datastore.transaction(commit=True) as curs:
        curs.execute(SQL("SET LOCAL lock_timeout = {}").format(
            SQL(str(SWAP_LOCK_TIMEOUT_S * 1000))))
        existing = [p for p in parts if table_exists(curs, live.qualified(p))]
        if existing:
            _lock_live(curs, live, existing, is_stopping)
            if catch_up_to is not None and "tracking" in existing:
                curs.execute(SQL("SELECT max(notification_id) AS at FROM {}").format(
                    live.qualified("tracking")))
                row = curs.fetchone()
                caught_up = catch_up_to((row["at"] or 0) if row else 0)
            if is_stopping():
                raise SwapStopped
            for part in existing:
                _copy_grants(curs, live.qualified(part), fresh.qualified(part))
            curs.execute(SQL("DROP TABLE {}").format(
                SQL(", ").join(live.qualified(p) for p in existing)))
        for part in parts:
            old_name, new_name = fresh.name_of(part), live.name_of(part)
            curs.execute(SQL("ALTER TABLE {} RENAME TO {}").format(
                fresh.qualified(part), Identifier(new_name)))
            _rename_indexes(curs, schema, new_name, old_name)
    return caught_up


def _lock_live(curs: Curs, live: View, parts: list[str], is_stopping: Callable[[], bool]
               ) -> None:
    """Lock the live tables against every other use, waiting SWAP_LOCK_TIMEOUT_S at most."""
    try:
        curs.execute(SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            SQL(", ").join(live.qualified(p) for p in parts)))
    except errors.LockNotAvailable as exc:
        if is_stopping():
            raise SwapStopped from exc
        raise ProjectionSetupError(
            f"the rebuilt {live.base} could not be swapped in: its live tables stayed in use "
            f"for {SWAP_LOCK_TIMEOUT_S} s (a long read, or a session holding a lock on them); "
            "the live view is unchanged: run the rebuild again once they are free") from exc


def _copy_grants(curs: Curs, source: Identifier, target: Identifier) -> None:
    """Grant on ``target`` what others hold on ``source`` (its owner's rights aside): the
    roles that read or maintain a live table keep doing so once it is replaced."""
    curs.execute("SELECT a.privilege_type, a.is_grantable, a.grantee = 0 AS public, "
                 "pg_get_userbyid(a.grantee) AS grantee "
                 "FROM pg_class c, aclexplode(c.relacl) a "
                 "WHERE c.oid = %s::regclass AND a.grantee <> c.relowner",
                 (source.as_string(curs),))
    for row in curs.fetchall():
        curs.execute(SQL("GRANT {} ON {} TO {}{}").format(
            SQL(row["privilege_type"]), target,
            SQL("PUBLIC") if row["public"] else Identifier(row["grantee"]),
            SQL(" WITH GRANT OPTION") if row["is_grantable"] else SQL("")))


def _rename_indexes(curs: Curs, schema: str, table: str, old_prefix: str) -> None:
    """Indexes (and the constraints they back) are named after their table: follow it."""
    curs.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
                 (schema, table))
    for row in curs.fetchall():
        index: str = row["indexname"]
        if index.startswith(old_prefix):
            curs.execute(SQL("ALTER INDEX {} RENAME TO {}").format(
                Identifier(schema, index), Identifier(table + index[len(old_prefix):])))

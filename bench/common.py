"""What the benchmarks share: a private database for one run, its server's settings, progress
lines, quantiles, the machine's load."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from api.database import DatabaseSettings, parse_database_url, start_embedded, stop_embedded
from ledger.plays import Play

# The player decisions (hit, stand, double, split, surrender), the calls the benchmarks time.
DECISIONS = tuple(play.value for play in Play)


def arguments(doc: str, quick_look: Sequence[str]) -> argparse.ArgumentParser:
    """A benchmark's command line: its first docstring line, each size with its default in
    ``--help``, and the sizes of a quick look (those ``make test`` runs it at)."""
    return argparse.ArgumentParser(
        description=doc.splitlines()[0], formatter_class=_SizesWithDefaults,
        epilog="A quick look (seconds), the sizes make test runs it at: " + " ".join(quick_look))


class _SizesWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default after its help; a flag, which takes no value, has none to give."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.nargs == 0 else super()._get_help_string(action)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        # An option is copied whole from the quick look: never broken at its hyphens.
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False)


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as the benchmarks print them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@dataclass
class Database:
    settings: DatabaseSettings
    schema: str  # "public" on the embedded server, a temporary schema otherwise
    where: str

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.settings.conninfo(), **kwargs)
        if self.schema != "public":
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            if not conn.autocommit:
                conn.commit()
        return conn

    def env(self, **extra: str) -> dict[str, str]:
        env = self.settings.eventsourcing_env()
        if self.schema != "public":
            env["POSTGRES_SCHEMA"] = self.schema
        return {**env, **extra}


SERVER_SETTINGS = ("server_version", "synchronous_commit", "fsync", "wal_sync_method",
                   "full_page_writes", "commit_delay")


def server_facts(db: Database, names: tuple[str, ...] = SERVER_SETTINGS) -> dict[str, str]:
    """The server's settings ``names`` as it reports them (``SHOW``), "?" when unknown."""
    facts = {}
    with db.connect(autocommit=True) as conn:
        for name in names:
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            facts[name] = str(row[0]) if row is not None else "?"
    return facts


@contextlib.contextmanager
def database(prefix: str) -> Iterator[Database]:
    """A fresh embedded PostgreSQL, or a temporary schema on ``DATABASE_URL``'s server."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        settings = parse_database_url(url)
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(settings.conninfo(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            yield Database(settings, schema, f"DATABASE_URL {settings.masked()}, schema {schema}")
        finally:
            with psycopg.connect(settings.conninfo(), autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        return
    folder = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    try:
        progress(f"starting an embedded PostgreSQL in {folder}")
        yield Database(start_embedded(folder), "public", f"embedded PostgreSQL in {folder} (fresh)")
    finally:
        try:
            stop_embedded(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

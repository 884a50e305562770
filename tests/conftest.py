"""Shared fixtures: one real PostgreSQL for the whole test session.

With ``DATABASE_URL`` (or ``POSTGRES_*``) set, the tests use that server; otherwise they start
a throwaway embedded one in a fresh folder under the temp directory (short, so the Unix socket
path stays within its length limit) and stop and delete it at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from api.database import (
    DatabaseSettings,
    external_database_configured,
    resolve_database,
    start_embedded,
    stop_embedded,
)


def _throwaway_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="pitboss-pg-"))


def _discard(folder: Path) -> None:
    stop_embedded(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def database() -> Iterator[DatabaseSettings]:
    """The session's database: the configured server, or a throwaway embedded one."""
    if external_database_configured(os.environ):
        yield resolve_database(os.environ)
        return
    folder = _throwaway_folder()
    try:
        yield start_embedded(folder)
    finally:
        _discard(folder)


@pytest.fixture
def embedded_folder() -> Iterator[Path]:
    """A fresh, empty data folder for a test's own embedded server (stopped afterwards)."""
    folder = _throwaway_folder()
    try:
        yield folder
    finally:
        _discard(folder)


@pytest.fixture
def unused_port() -> int:
    """A local TCP port that nothing listens on (free a moment ago)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def postgres_env(database: DatabaseSettings) -> Iterator[Callable[[], dict[str, str]]]:
    """Fresh schemas in the session's database, dropped afterwards."""
    schemas: list[str] = []

    def new_schema() -> dict[str, str]:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(database.conninfo(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        schemas.append(schema)
        return {**database.eventsourcing_env(), "POSTGRES_SCHEMA": schema}

    yield new_schema
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

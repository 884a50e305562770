"""Under gunicorn, what the app and its connection pool log reaches gunicorn's stream."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from api.app import log_through


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


@pytest.fixture
def server() -> Iterator[tuple[logging.Logger, Kept]]:
    """A server's logger with a handler, and the two loggers restored after."""
    kept = Kept()
    logger = logging.getLogger("a-server-under-test")
    logger.handlers, logger.level = [kept], logging.INFO
    saved = {name: (lg.handlers, lg.level, lg.propagate) for name in ("pitboss", "psycopg.pool")
             for lg in [logging.getLogger(name)]}
    for name in saved:
        logging.getLogger(name).handlers = []
    yield logger, kept
    for name, (handlers, level, propagate) in saved.items():
        lg = logging.getLogger(name)
        lg.handlers, lg.propagate = handlers, propagate
        lg.setLevel(level)


def test_the_pools_warnings_and_the_apps_lines_reach_the_servers_stream(server) -> None:
    # A 503 said the database "did not answer in time"; why (a login refused, a password
    # rotated) was in the pool's warning, which reached no stream under gunicorn.
    logger, kept = server
    log_through(logger)
    logging.getLogger("psycopg.pool").warning("error connecting in %r: %s", "pool-1",
                                              'role "svc" is not permitted to log in')
    logging.getLogger("psycopg.pool").info("connection added")  # below warning: left out
    logging.getLogger("pitboss.api").info("database: somewhere")
    assert kept.lines == [
        "WARNING psycopg.pool: error connecting in 'pool-1': role \"svc\" is not permitted "
        "to log in",
        "INFO pitboss.api: database: somewhere"]

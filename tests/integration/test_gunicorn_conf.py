"""deploy/gunicorn.conf.py, loaded as gunicorn loads it: its read timeout and its log line."""

from __future__ import annotations

import importlib.util
import logging
import socket
import struct
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def load(monkeypatch: pytest.MonkeyPatch, read_timeout: str | None = None) -> ModuleType:
    if read_timeout is not None:
        monkeypatch.setenv("PITBOSS_READ_TIMEOUT_S", read_timeout)
    spec = importlib.util.spec_from_file_location("gunicorn_conf_under_test", CONF)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("value", ["0", "3601", "99999999999999999999"])
def test_a_read_timeout_out_of_range_stops_a_bare_start_in_a_sentence(monkeypatch, value):
    # A huge one stopped gunicorn with "struct.error: argument out of range" once bound.
    with pytest.raises(ValueError, match="PITBOSS_READ_TIMEOUT_S is a whole number of seconds "
                                         "from 1 to 3600"):
        load(monkeypatch, value)


def test_each_connection_accepted_waits_the_read_timeout_at_most(monkeypatch):
    conf = load(monkeypatch, "7")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        conf.when_ready(SimpleNamespace(LISTENERS=[SimpleNamespace(sock=listener)]))
        try:
            with socket.create_connection(listener.getsockname()), listener.accept()[0] as got:
                waits = got.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                       struct.calcsize("ll"))
            assert struct.unpack("ll", waits) == (7, 0)
        finally:
            logging.getLogger("gunicorn.error").removeFilter(conf._stalled_read_in_a_line)


def _stalled(name: str) -> logging.LogRecord:
    try:
        raise BlockingIOError(11, "Resource temporarily unavailable")
    except BlockingIOError:
        return logging.LogRecord(name, logging.ERROR, __file__, 1,
                                 "Socket error processing request.", None, sys.exc_info())


def test_a_stalled_read_is_logged_as_one_warning_line_and_only_at_that_level(monkeypatch):
    conf = load(monkeypatch, "7")
    logger = logging.getLogger("gunicorn.error.under-test")
    logger.setLevel(logging.INFO)
    record = _stalled(logger.name)
    assert conf._stalled_read_in_a_line(record)
    assert (record.levelname, record.getMessage(), record.exc_info) == (
        "WARNING", "a client sent nothing for 7 s in the middle of a request's headers; its "
        "connection was closed", None)
    # Under PITBOSS_LOG_LEVEL=ERROR the warning it became is not logged at all.
    logger.setLevel(logging.ERROR)
    assert not conf._stalled_read_in_a_line(_stalled(logger.name))
    # Any other error is left as it is.
    other = logging.LogRecord(logger.name, logging.ERROR, __file__, 1, "boom", None, None)
    assert conf._stalled_read_in_a_line(other)
    assert other.levelname == "ERROR"

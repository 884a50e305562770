"""deploy/gunicorn.conf.py, loaded as gunicorn loads it: its read timeout and its log line;
and run by gunicorn: its worker class answers gunicorn's own refusals as problem details."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from api.problems import PROBLEM_JSON, ProblemSchema

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


@pytest.mark.parametrize(("name", "value", "said"), [
    # A huge read timeout stopped gunicorn with "struct.error: argument out of range" once
    # bound; the others stopped it with a traceback (int()'s words, or gunicorn's "Worker
    # failed to boot"), or started it with no worker (0), on a port not asked for (0), or at
    # a log level the README does not name.
    ("PITBOSS_READ_TIMEOUT_S", "0", "a whole number of seconds from 1 to 3,600, not '0'"),
    ("PITBOSS_READ_TIMEOUT_S", "3601", "a whole number of seconds from 1 to 3,600"),
    ("PITBOSS_READ_TIMEOUT_S", "99999999999999999999", "a whole number of seconds from 1"),
    ("PITBOSS_READ_TIMEOUT_S", "abc", "a whole number of seconds from 1 to 3,600, not 'abc'"),
    ("GUNICORN_TIMEOUT_S", "abc", "a whole number of seconds from 1 to 3,600, not 'abc'"),
    ("WEB_CONCURRENCY", "0", "a whole number of worker processes from 1 to 64, not '0'"),
    ("PITBOSS_THREADS", "0", "a whole number of threads per worker from 1 to 64, not '0'"),
    ("PORT", "0", "a whole number of a TCP port from 1 to 65,535, not '0'"),
    ("PORT", "99999", "a whole number of a TCP port from 1 to 65,535, not '99999'"),
    ("PITBOSS_LOG_LEVEL", "loud", "DEBUG, INFO, WARNING or ERROR, not 'LOUD'")])
def test_a_setting_out_of_its_range_stops_a_bare_start_in_a_sentence(monkeypatch, capsys, name,
                                                                     value, said):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stopped:
        load(monkeypatch)
    assert stopped.value.code == 1
    assert capsys.readouterr().err.startswith(f"Error: {name} is {said}")


def test_a_bare_start_refused_before_it_serves_says_why_in_a_sentence(tmp_path):
    # The keys (and the database, the shoe key, the read models' settings) are checked in
    # on_starting: a refusal there printed some 38 lines of traceback around its sentence.
    env = {**os.environ, "PITBOSS_KEYS": "notjson", "PITBOSS_KEYS_FILE": str(tmp_path / "k"),
           "PYTHONPATH": str(CONF.parents[1])}
    env.pop("PITBOSS_CREATE_TABLES", None)
    done = subprocess.run([sys.executable, "-m", "gunicorn", "-c", str(CONF), "--bind",
                           "127.0.0.1:0"], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 1, done.stderr
    assert "Error: PITBOSS_KEYS" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


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


# --- gunicorn's own refusals, answered by the worker class the config names ------------------

APP = '''
def app(environ, start_response):
    if environ["PATH_INFO"] == "/fails":
        raise RuntimeError("fails outside Flask, so gunicorn answers")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
    return [b"read"]
'''


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """gunicorn started as the config starts it (one worker; the database left alone), on a
    WSGI app of a few lines: the refusals come before any app is called."""
    folder = tmp_path_factory.mktemp("app")
    (folder / "tiny_app.py").write_text(APP)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PITBOSS_CREATE_TABLES": "no",
           "PYTHONPATH": os.pathsep.join([str(folder), str(CONF.parents[1])])}
    log = folder / "gunicorn.log"
    with log.open("w") as out:
        child = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", str(CONF), "--bind",
                                  f"127.0.0.1:{port}", "--workers", "1", "tiny_app:app"],
                                 env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while _answer(port, b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n") is None:
            if child.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gunicorn did not start: {log.read_text()}")
            time.sleep(0.1)
        yield port
    finally:
        child.terminate()
        child.wait(30)


def _answer(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes] | None:
    """The status, headers and body of the answer to ``raw``; None if nothing listens."""
    try:
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        return None
    with conn:
        conn.sendall(raw)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    if not data:  # accepted before the worker was up
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in
               (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


HEADERS_OVER = b"".join(b"X-Field-%d: 1\r\n" % i for i in range(101))
REFUSED = {
    "a request line over 4,094 bytes": (
        b"GET /" + b"a" * 4100 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414, "RequestURITooLarge",
        "request line", "longer than the 4,094 bytes"),
    "101 header fields": (
        b"GET / HTTP/1.1\r\nHost: t\r\n" + HEADERS_OVER + b"\r\n", 431,
        "RequestHeaderFieldsTooLarge", "headers", "more than 100 header fields"),
    "a header field over 8,188 bytes": (
        b"GET / HTTP/1.1\r\nHost: t\r\nX-Long: " + b"b" * 8181 + b"\r\n\r\n", 431,
        "RequestHeaderFieldsTooLarge", "headers", "one (its name and value) longer than 8,188"),
    "a header name with a space": (
        b"GET / HTTP/1.1\r\nHost: t\r\nBad Name: 1\r\n\r\n", 400, "BadRequest", "request",
        "not well-formed HTTP, so the server did not read it and nothing was done: Invalid "
        "HTTP header name: 'Bad Name'."),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_what_gunicorn_refuses_itself_is_answered_as_problem_details(served, case):
    raw, status, error, at_fault, words = REFUSED[case]
    answer = _answer(served, raw)
    assert answer is not None
    got, headers, body = answer
    assert (got, headers["content-type"], headers["connection"]) == (
        status, PROBLEM_JSON, "close")
    # As every answer of the app's (they had neither).
    assert (headers["cache-control"], headers["x-content-type-options"]) == ("no-store",
                                                                              "nosniff")
    problem = json.loads(body)
    assert ProblemSchema().validate(problem) == {}
    assert (problem["status"], problem["error"], problem["rule"]) == (status, error, None)
    assert problem["type"] == "urn:pitboss:problem:" + "-".join(
        re.findall(r"[A-Z]+(?![a-z])|[A-Z][a-z]+", error)).lower()
    assert words in problem["detail"]
    assert problem["errors"] == {at_fault: [problem["detail"]]}
    assert int(headers["content-length"]) == len(body)


def test_a_transfer_coding_gunicorn_does_not_take_is_answered_with_its_own_reason(served):
    # The status line said "501 Bad Request".
    with socket.create_connection(("127.0.0.1", served), timeout=10) as conn:
        conn.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n")
        first_line = conn.makefile("rb").readline()
    assert first_line == b"HTTP/1.1 501 Not Implemented\r\n"


def test_an_app_failing_outside_flask_is_a_problem_too_and_a_request_read_is_not(served):
    answer = _answer(served, b"GET /fails HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert answer is not None
    status, headers, body = answer
    problem = json.loads(body)
    assert (status, headers["content-type"], problem["error"]) == (
        500, PROBLEM_JSON, "InternalServerError")
    assert "errors" not in problem
    assert "logged for the operators" in problem["detail"]
    read = _answer(served, b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert read is not None
    assert (read[0], read[2]) == (200, b"read")

"""gunicorn settings for the pitboss API (``gunicorn -c deploy/gunicorn.conf.py``).

``pitboss serve`` passes ``--bind``, ``--workers`` and ``--threads`` on the command line, which
take precedence; the variables below serve a bare ``gunicorn`` start (e.g. in a container).
"""

import logging
import os
import socket
import struct
import sys


def _setting(name: str, default: str) -> str:
    """A variable, its default when unset or set empty (as an env file's ``NAME=`` sets it)."""
    return os.environ.get(name, "").strip() or default


def _refuse(sentence: str) -> None:
    """Stop the start with a sentence, as ``pitboss serve`` does (an exception here would
    print gunicorn's "Failed to read config file" and a traceback)."""
    print(f"Error: {sentence}", file=sys.stderr)
    raise SystemExit(1)


def _whole(name: str, default: int, low: int, high: int, what: str) -> int:
    """A whole-number variable, refused in a sentence out of ``low`` to ``high``, as ``pitboss
    serve`` refuses it."""
    text = _setting(name, str(default))
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        _refuse(f"{name} is a whole number of {what} from {low} to {high:,}, not {text!r}")
    return value


wsgi_app = "api.wsgi:app"
_host = _setting("PITBOSS_HOST", "127.0.0.1").strip("[]")  # an IPv6 address bracketed once
bind = f"[{_host}]" if ":" in _host else _host
bind += f":{_whole('PORT', 8000, 1, 65535, 'a TCP port')}"
workers = _whole("WEB_CONCURRENCY", 2, 1, 64, "worker processes")
# Threaded workers with keep-alive: a terminal's connection stays with the worker that
# accepted it, so that worker's copies of the table's round, shoe and accounts stay current
# and a decision reads nothing from the store. Sync workers close every connection, so
# consecutive requests of one table land on any worker, which must then load or catch up
# what another worker changed. Measured with bench/api.py on 2 CPUs: about 115 decisions/s
# at 4 and 16 terminals with 2 sync workers, 250 to 270 with 2 workers of 4 threads.
# gunicorn's gthread worker, answering the requests gunicorn refuses itself (a request line
# or headers over the limits below, malformed HTTP) as problem details, not HTML.
worker_class = "api.gunicorn_worker.ProblemThreadWorker"
threads = _whole("PITBOSS_THREADS", 4, 1, 64, "threads per worker")

# Limits: a request is a small JSON command; nothing should take long. For threaded workers,
# timeout is how long the worker process may stop answering the master (a hung process), not
# how long one request may take (gunicorn's documentation on timeout).
timeout = _whole("GUNICORN_TIMEOUT_S", 30, 1, 3600, "seconds")
graceful_timeout = 30
keepalive = 5
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190
# Recycle workers now and then so a slow leak cannot grow without bound.
max_requests = 10_000
max_requests_jitter = 1_000

# A client that goes quiet in the middle of a request (a terminal dropped off the network
# after sending half a body) would hold its worker thread for good: once a request has begun,
# gunicorn reads it with no time limit. Each read from a client's connection waits at most
# this long (the listening socket's SO_RCVTIMEO, which every accepted connection inherits);
# then the app answers 408 and the connection is closed. Set in when_ready below.
_read_timeout_s = _whole("PITBOSS_READ_TIMEOUT_S", 10, 1, 3600, "seconds")

accesslog = "-"
errorlog = "-"
loglevel = _setting("PITBOSS_LOG_LEVEL", "info").lower()
if loglevel not in ("debug", "info", "warning", "error"):
    _refuse(f"PITBOSS_LOG_LEVEL is DEBUG, INFO, WARNING or ERROR, not {loglevel.upper()!r}")

# No runtime control socket: its default path (~/.gunicorn/gunicorn.ctl) is shared by every
# instance of the user, and pitboss does not use gunicornc.
control_socket_disable = True


def on_starting(server):
    """Before the workers fork: what ``pitboss serve`` does first (``prepare_service``: the
    database, the shoe key, the tables created once, so workers never race to do it).

    ``pitboss serve`` has done this already and says so with PITBOSS_CREATE_TABLES=no; a bare
    ``gunicorn -c deploy/gunicorn.conf.py`` (a container) gets it done here.
    """
    from api.cli import operator_sentence, prepare_service
    from api.services import create_tables_wanted

    if not create_tables_wanted(os.environ):
        return

    try:
        settings, _ = prepare_service()
    except Exception as exc:
        said = operator_sentence(exc, "serve")
        if said is None:
            raise
        raise RuntimeError(said) from None  # gunicorn prints "Error: ..." and exits 1
    os.environ["DATABASE_URL"] = settings.url()


def when_ready(server):
    """Once the listening sockets are bound, before any worker forks: bound each read of a
    request (``_read_timeout_s`` above), and log a read that waited that long in a line."""
    timeval = struct.pack("ll", _read_timeout_s, 0)
    for listener in server.LISTENERS:
        listener.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    logging.getLogger("gunicorn.error").addFilter(_stalled_read_in_a_line)


def _stalled_read_in_a_line(record):
    """gunicorn logs a read that timed out while it reads a request's headers as a socket
    error, with its traceback (the timed-out read raises EAGAIN: the socket blocks)."""
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, BlockingIOError):
        if not logging.getLogger(record.name).isEnabledFor(logging.WARNING):
            return False  # logged as an error, now a warning the level leaves out
        record.msg = ("a client sent nothing for %d s in the middle of a request's headers; "
                      "its connection was closed")
        record.args = (_read_timeout_s,)
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True

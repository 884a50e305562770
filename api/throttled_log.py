"""Warnings a caller can cause at will (a refused key, a request or a probe while the database
is down), at most a few lines a minute from each source: the rest are counted, and their number
logged with the source's next line. A client sending unknown keys, or terminals retrying through
an outage, wrote a line (or a traceback) per request; the log now stays readable and still
says how many there were."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from flask import current_app

LINES_PER_WINDOW: Final = 10
WINDOW_S: Final = 60.0
# Sources remembered at once (a holder's name each, so a bound): the one heard from least
# recently is forgotten first, with the count of its lines not logged.
SOURCES_MAX: Final = 1024


@dataclass
class _Window:
    start: float
    logged: int = 0
    untold: int = 0  # lines not logged since the source's last one
    untold_since: float = 0.0


class ThrottledLog:
    """Warnings, ``lines_per_window`` at most each ``window_s`` from each source."""

    def __init__(self, *, lines_per_window: int = LINES_PER_WINDOW,
                 window_s: float = WINDOW_S, sources_max: int = SOURCES_MAX,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lines = lines_per_window
        self._window_s = window_s
        self._sources_max = sources_max
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: OrderedDict[str, _Window] = OrderedDict()

    def warning(self, logger: logging.Logger, source: str, message: str, *args: Any,
                exc_info: Any = None) -> None:
        """Log ``message % args`` to ``logger`` unless ``source`` has used its lines up in
        this window."""
        turn = self._turn(source)
        if turn == "counted":
            return
        if turn == "used up":
            logger.warning(self._used_up(source))
            return
        if turn[0]:
            logger.warning(self._untold(source, *turn))
        logger.warning(message, *args, exc_info=exc_info)

    def filter(self, record: logging.LogRecord) -> bool:
        """As a logger's filter: its warnings (and worse) throttled as :meth:`warning` does,
        one source for each message before its arguments (a library's own lines, such as
        a connection pool's, one for each attempt while the database is down)."""
        if record.levelno < logging.WARNING:
            return True
        source = f"{record.name}'s \"{record.msg}\""
        turn = self._turn(source)
        if turn == "counted":
            return False
        if turn == "used up":  # this record says so in its place
            record.msg, record.args = self._used_up(source), None
            record.exc_info = record.exc_text = None
        elif turn[0]:  # formatted where records are, with its arguments (not here)
            untold = self._untold(source, *turn).replace("%", "%%")
            record.msg = f"{untold}; this one: {record.msg}"
        return True

    def _turn(self, source: str) -> Literal["used up", "counted"] | tuple[int, float]:
        """What to do with the next line of ``source``: log it, after saying how many were
        not and over how many seconds (none: ``(0, 0.0)``); say that the next are counted
        (``"used up"``); or count it."""
        with self._lock:
            now = self._clock()
            window = self._window(source, now)
            if window.logged >= self._lines:
                window.untold += 1
                if window.untold > 1:
                    return "counted"
                window.untold_since = now
                return "used up"
            window.logged += 1
            untold, since = window.untold, window.untold_since
            window.untold = 0
            return (untold, now - since) if untold else (0, 0.0)

    def _used_up(self, source: str) -> str:
        return (f"more than {self._lines} warnings of {source} in {self._window_s:.0f} s: the "
                "next are counted, and their number logged with the first one after that")

    @staticmethod
    def _untold(source: str, untold: int, seconds: float) -> str:
        return (f"{untold} more warnings of {source} were not logged in the {seconds:.0f} s "
                "before this one")

    def _window(self, source: str, now: float) -> _Window:
        window = self._windows.get(source)
        if window is None:
            window = self._windows[source] = _Window(start=now)
            while len(self._windows) > self._sources_max:
                self._windows.popitem(last=False)
        elif now - window.start >= self._window_s:
            window.start, window.logged = now, 0
        self._windows.move_to_end(source)
        return window


POOL_LOGGER: Final = "psycopg.pool"
_POOL_LOG: Final = ThrottledLog()


def throttle_pool_log() -> None:
    """Throttle the connection pools' warnings (once for each process): while the database
    is down, each pool logs every attempt to connect, tens of lines a minute."""
    logger = logging.getLogger(POOL_LOGGER)
    if _POOL_LOG not in logger.filters:
        logger.addFilter(_POOL_LOG)


def throttled() -> ThrottledLog:
    """The application's throttle (``create_app`` makes one for each app)."""
    log: ThrottledLog = current_app.extensions["pitboss.throttled_log"]
    return log

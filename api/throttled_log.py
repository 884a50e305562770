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
from typing import Any, Final

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
        with self._lock:
            now = self._clock()
            window = self._window(source, now)
            if window.logged >= self._lines:
                window.untold += 1
                if window.untold > 1:
                    return
                window.untold_since = now
                untold = None  # the first one not logged: say what happens to the next
            else:
                window.logged += 1
                untold, since = window.untold, window.untold_since
                window.untold = 0
        if untold is None:
            logger.warning("more than %d warnings of %s in %.0f s: the next are counted, "
                                "and their number logged with the first one after that",
                                self._lines, source, self._window_s)
            return
        if untold:
            logger.warning("%d more warnings of %s were not logged in the %.0f s before "
                                "this one", untold, source, now - since)
        logger.warning(message, *args, exc_info=exc_info)

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


def throttled() -> ThrottledLog:
    """The application's throttle (``create_app`` makes one for each app)."""
    log: ThrottledLog = current_app.extensions["pitboss.throttled_log"]
    return log

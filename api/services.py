"""What the views use: the GameLedger and the read models, built on first use.

Building them connects to PostgreSQL, so ``create_app`` only describes them: the app starts
(and ``/healthz`` answers) even while the database is down, and each gunicorn worker builds its
own after the fork. A worker's request threads share its ledger and read models (both are
safe to share, and the ledger's working set is what makes a decision cheap).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from flask import current_app

from api.secrets_files import YES, ShoeKeyError
from ledger.application import GameLedger
from ledger.storage import LedgerRecorder
from projections.queries import ReadModels

logger = logging.getLogger("pitboss.api")

ShoeKey = bytes | Callable[[], bytes]


T = TypeVar("T")


class _BuiltOnce(Generic[T]):
    """A thing built on first use, under a lock of its own. The threads that waited while a
    build failed fail with it, not trying again in turn: with the database down, each waited
    out the connect timeout after the last (four requests answered after 5, 10, 15 and 20 s).
    A request that comes after a failure tries again."""

    def __init__(self, build: Callable[[], T], built: T | None = None) -> None:
        self._build: Callable[[], T] = build
        self.value: T | None = built
        self._lock = threading.Lock()
        self._failure: tuple[float, Exception] | None = None

    def get(self) -> T:
        value = self.value
        if value is not None:
            return value
        asked = time.monotonic()
        with self._lock:
            if self.value is None:
                if self._failure is not None and self._failure[0] >= asked:
                    raise copy.copy(self._failure[1]) from self._failure[1]
                try:
                    self.value = self._build()
                except Exception as failure:
                    self._failure = (time.monotonic(), failure)
                    raise
                self._failure = None
            return self.value

    def close(self, closing: Callable[[T], None]) -> None:
        with self._lock:
            if self.value is not None:
                closing(self.value)
                self.value = None


class Services:
    """The ledger and the read models of one app, built once, on first use."""

    def __init__(self, env: dict[str, str], shoe_key: ShoeKey, *,
                 randbelow: Callable[[int], int] | None = None,
                 clock: Callable[[], datetime] | None = None,
                 create_tables: bool = True, ledger: GameLedger | None = None) -> None:
        self.env = dict(env)
        self._shoe_key = shoe_key
        self._randbelow = randbelow
        self._clock = clock
        self._create_tables = create_tables
        self._ledger = _BuiltOnce(self._build_ledger, ledger)
        self._read_models = _BuiltOnce(self._build_read_models)

    def shoe_key(self) -> bytes:
        key = self._shoe_key
        return key() if callable(key) else key

    def ledger(self) -> GameLedger:
        return self._ledger.get()

    def read_models(self) -> ReadModels:
        return self._read_models.get()

    def _env(self) -> dict[str, str]:
        env = dict(self.env)
        if not self._create_tables:
            # The tables exist (gunicorn's master made them): workers must not run the
            # schema statements again, concurrently, while others already serve requests.
            env["CREATE_TABLE"] = "n"
        return env

    def _build_ledger(self) -> GameLedger:
        kwargs: dict[str, Any] = {}
        if self._randbelow is not None:
            kwargs["randbelow"] = self._randbelow
        if self._clock is not None:
            kwargs["clock"] = self._clock
        return GameLedger(env=self._env(), shoe_key=self.shoe_key(), **kwargs)

    def _build_read_models(self) -> ReadModels:
        return ReadModels(self._env(), cursor_secret=self.shoe_key())

    def close(self) -> None:
        self._ledger.close(GameLedger.close)
        self._read_models.close(ReadModels.close)


def services() -> Services:
    found: Services = current_app.extensions["pitboss"]
    return found


def ledger() -> GameLedger:
    return services().ledger()


def create_tables_wanted(environ: Mapping[str, str]) -> bool:
    """Whether this process should create the tables (``PITBOSS_CREATE_TABLES``, default yes):
    ``pitboss serve`` and gunicorn's master create them once and tell the workers not to."""
    return environ.get("PITBOSS_CREATE_TABLES", "yes").strip().lower() in YES


def prepare_store(env: dict[str, str], shoe_key: bytes | None = None) -> int:
    """Create the ledger's and the read models' tables (once, before any worker serves), and
    check that ``shoe_key`` opens the newest live shoe (ShoeKeyError if not).

    Returns the ledger's last notification id (0 for an empty store).
    """
    ledger = GameLedger(env=dict(env), shoe_key=shoe_key)
    try:
        head = ledger.recorder.max_notification_id() or 0
        problem = ledger.check_shoe_key() if shoe_key is not None else None
        recorder = ledger.recorder
        missing = recorder.missing_indexes() if isinstance(recorder, LedgerRecorder) else {}
    finally:
        ledger.close()
    for index, otherwise in missing.items():
        # Tables an earlier version made, started by a role that makes no index: the checks
        # still answer, slower and (the round check) over the round's own accounts alone.
        logger.warning("the event table lacks %s as this version makes it (missing, or made "
                       "by an earlier version, without its mark): %s, until a start as the "
                       "tables' owner makes it (README: Upgrading)", index, otherwise)
    if problem is not None:
        raise ShoeKeyError(f"the shoe key does not open the newest live shoe ({problem}): "
                           "set PITBOSS_SHOE_KEY or PITBOSS_SHOE_KEY_FILE to the key this "
                           "database's shoes were sealed with, or, if it is lost, abandon "
                           "the shoes it sealed (pitboss shoes abandon)")
    with ReadModels(dict(env)) as read_models:  # makes their tables, where this role may
        unmade = read_models.unmade()
    if unmade is not None:
        logger.warning("%s Until then, the reads that need them answer 503.", unmade)
    return head

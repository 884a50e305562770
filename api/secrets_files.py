"""Where the shoe key and the API key file live, and how the shoe key is loaded or created.

The shoe key (32 bytes) seals every live shoe's order in the event log (R-H2): whoever holds it
can read the order of the cards still to come, and whoever loses it can no longer deal from the
shoes it sealed. It is loaded, in this order, from

1. ``PITBOSS_SHOE_KEY``: 64 hex digits;
2. ``PITBOSS_SHOE_KEY_FILE``: a file holding the 64 hex digits (mode 0600);
3. ``<parent of PITBOSS_DATA_DIR>/shoe.key`` (``var/shoe.key`` by default).

The file of 2 or 3 is created on first start when absent, but only for the embedded database:
with an external database (``DATABASE_URL`` or ``POSTGRES_*``) a missing key more likely means a
misconfigured deployment than a new one, and a fresh key would make its live shoes unreadable.
There, set ``PITBOSS_SHOE_KEY_CREATE=yes`` once to allow the creation.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from api.database import DEFAULT_DATA_DIR, external_database_configured
from ledger.sealing import KEY_BYTES, ShoeSealer

logger = logging.getLogger("pitboss.keys")

YES: Final = frozenset({"1", "y", "yes", "true", "on"})
_WAIT_STEPS: Final = 100
_WAIT_STEP_S: Final = 0.02


class ShoeKeyError(Exception):
    """The shoe key cannot be loaded or created as configured."""


def var_dir(environ: Mapping[str, str]) -> Path:
    """The folder beside the embedded database's data folder (``var/`` by default)."""
    data_dir = environ.get("PITBOSS_DATA_DIR", "").strip() or str(DEFAULT_DATA_DIR)
    return Path(data_dir).expanduser().parent


def default_keys_file(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("PITBOSS_KEYS_FILE", "").strip() or var_dir(environ) / "keys.jsonl")


def shoe_key_file(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("PITBOSS_SHOE_KEY_FILE", "").strip() or var_dir(environ) / "shoe.key")


def untrusted(path: Path, info: os.stat_result) -> str | None:
    """Why a file of secrets (the shoe key, the API keys) cannot be trusted, or None: a user
    other than this service's (or root) owns it, or users outside the service's own groups
    may write it; either could put a key of their own in it. (Group-writable is taken from a
    group of the service's user: a private group under umask 002, a volume's fsGroup.)"""
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (os.geteuid(), 0):
        return (f"{path} belongs to user {info.st_uid}, neither the user this service runs as "
                "nor root: chown it to one of them")
    if mode & stat.S_IWOTH:
        return f"{path} may be written by any user (mode {mode:o}): chmod o-w it"
    if mode & stat.S_IWGRP and info.st_gid not in {os.getegid(), *os.getgroups()}:
        return (f"{path} may be written by group {info.st_gid}, which the user this service "
                f"runs as is not in (mode {mode:o}): chmod g-w it")
    return None


def parse_shoe_key(text: str, *, source: str) -> bytes:
    text = text.strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise ShoeKeyError(f"{source} must hold {KEY_BYTES * 2} hex digits (a {KEY_BYTES}-byte "
                           "key)")
    return key


def load_shoe_key(environ: Mapping[str, str] = os.environ) -> bytes:
    """The shoe key, from the variable or the file, creating the file where that is safe."""
    inline = environ.get("PITBOSS_SHOE_KEY", "").strip()
    if inline:
        return parse_shoe_key(inline, source="PITBOSS_SHOE_KEY")
    path = shoe_key_file(environ)
    if path.exists():
        return _read(path)
    external = external_database_configured(environ)
    if external and environ.get("PITBOSS_SHOE_KEY_CREATE", "").strip().lower() not in YES:
        raise ShoeKeyError(
            f"no shoe key: {path} does not exist and an external database is configured. "
            "Set PITBOSS_SHOE_KEY or PITBOSS_SHOE_KEY_FILE to the key its shoes were sealed "
            "with, or PITBOSS_SHOE_KEY_CREATE=yes to create a new key (only for a new "
            "database, or one whose key is lost: shoes sealed with another key cannot be dealt "
            "from, and are abandoned with pitboss shoes abandon)")
    return _create(path)


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as file:  # the file read is the file checked
            info = os.fstat(file.fileno())
            content = file.read()
    except OSError as exc:
        raise ShoeKeyError(f"the shoe key file {path} cannot be read: {exc.strerror}") from None
    why = untrusted(path, info)
    if why is not None:
        raise ShoeKeyError(f"the shoe key file is not trusted: {why}")
    if info.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        logger.warning("the shoe key file %s is readable by others (mode %o): let only the "
                       "user this service runs as read it", path, stat.S_IMODE(info.st_mode))
    try:
        text = content.decode("ascii")
    except UnicodeDecodeError:
        raise ShoeKeyError(f"the shoe key file {path} must hold {KEY_BYTES * 2} hex digits "
                           "(it holds bytes other than ASCII)") from None
    return parse_shoe_key(text, source=str(path))


def _create(path: Path) -> bytes:
    key = ShoeSealer.new_key()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another process created it first: use theirs, once it has been written.
        for _ in range(_WAIT_STEPS):
            if path.stat().st_size >= KEY_BYTES * 2:
                break
            time.sleep(_WAIT_STEP_S)
        return _read(path)
    except OSError as exc:
        raise ShoeKeyError(f"the shoe key file {path} cannot be created: {exc.strerror}") from None
    with os.fdopen(fd, "w") as out:
        out.write(key.hex() + "\n")
        out.flush()
        os.fsync(out.fileno())
    logger.warning("created a new shoe key in %s: back it up; shoes sealed with it cannot be "
                   "dealt from without it", path)
    return key

"""Bearer API keys: each bound to one role and to the name recorded as the actor of its events.

A key is ``pbk_`` plus 43 URL-safe characters (256 random bits). Only its SHA-256 is stored:
a high-entropy key needs no slow hash, and a stolen key file reveals no usable key. Keys come
from a file (``PITBOSS_KEYS_FILE``: JSON lines or one JSON list of ``{name, role, key_hash}``)
or from the environment (``PITBOSS_KEYS``: the same JSON list). The file is read again when it
changes, so ``pitboss keys create`` takes effect without a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import secrets
import stat
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any, Final, TypeVar, cast

from flask import current_app, g, request
from werkzeug.exceptions import Forbidden, Unauthorized

from api.secrets_files import untrusted
from api.strict_json import RepeatedMember, members_once
from ledger.names import NAME_MAX_CHARS, is_name, unwritten

logger = logging.getLogger("pitboss.auth")

DEALER: Final = "dealer"
CASHIER: Final = "cashier"
MANAGER: Final = "manager"
AUDITOR: Final = "auditor"
ROLES: Final = (DEALER, CASHIER, MANAGER, AUDITOR)

KEY_PREFIX: Final = "pbk_"
KEY_RANDOM_BYTES: Final = 32
KEY_MAX_CHARS: Final = 256
KEYS_MAX: Final = 10_000

F = TypeVar("F", bound=Callable[..., Any])


class KeyConfigError(Exception):
    """The key file or variable cannot be used as given."""


@dataclass(frozen=True)
class ApiKey:
    """One key holder: the name recorded as actor, the role, and the key's SHA-256 (hex)."""

    name: str
    role: str
    key_hash: str

    def __post_init__(self) -> None:
        check_name(self.name)
        if not isinstance(self.role, str) or self.role not in ROLES:
            raise KeyConfigError(f"key {self.name!r}: role {self.role!r} is not one of "
                                 f"{', '.join(ROLES)}")
        if not is_key_hash(self.key_hash):
            raise KeyConfigError(f"key {self.name!r}: key_hash must be 64 lower-case hex digits "
                                 "(the SHA-256 of the key)")

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "role": self.role, "key_hash": self.key_hash}


def check_name(name: object) -> str:
    """A key holder's name is what the ledger records as actor: 1-64 printable characters."""
    if not is_name(name):
        raise KeyConfigError(f"a key name is 1 to {NAME_MAX_CHARS} printable characters "
                             f"without surrounding spaces, not {name!r}")
    return name


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)


def is_key_hash(value: object) -> bool:
    """Whether ``value`` is written as a key's hash is: 64 lower-case hex digits."""
    return isinstance(value, str) and len(value) == 64 \
        and all(c in "0123456789abcdef" for c in value)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _read_text(path: Path) -> str:
    """The key file's text, once it is known that nobody else could have written it."""
    try:
        with path.open(encoding="utf-8") as file:  # the file read is the file checked
            why = untrusted(path, os.fstat(file.fileno()))
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyConfigError(f"{path} cannot be read as UTF-8 text: {exc}") from None
    if why is not None:
        raise KeyConfigError(f"the key file is not trusted: {why}")
    return text


def read_keys(path: Path, *, most: int | None = KEYS_MAX) -> list[ApiKey]:
    """The keys of a key file; none when it does not exist."""
    return parse_keys(_read_text(path), source=str(path), most=most) if path.exists() else []


def parse_keys(text: str, *, source: str, most: int | None = KEYS_MAX) -> list[ApiKey]:
    """JSON lines, or one JSON list, of ``{name, role, key_hash}`` objects, ``most`` of them
    at most (None: any number, to list a file edited past the cap)."""
    return _keys_from(_parse_records(text, source=source, most=most), source)


def _keys_from(records: list[Any], source: str) -> list[ApiKey]:
    keys = [_key_from(item, source) for item in records]
    one_holder_each(keys, source)
    return keys


def one_holder_each(keys: Sequence[ApiKey], source: str) -> None:
    """Each name is one key holder's, and each key one holder's: the events name the holder,
    and a name or key held twice would record one holder's acts as the other's (a revocation
    of the one leaving the other working)."""
    names = sorted(n for n, times in Counter(k.name for k in keys).items() if times > 1)
    if names:
        raise KeyConfigError(f"{source} names {', '.join(names)} more than once: a name is one "
                             "holder's (revoke or rename all but one)")
    holders: dict[str, list[str]] = {}
    for key in keys:
        holders.setdefault(key.key_hash, []).append(key.name)
    shared = [sorted(named) for named in holders.values() if len(named) > 1]
    if shared:
        raise KeyConfigError(f"{source} holds one key under several names: "
                             f"{', '.join(shared[0])} (revoke all but one)")


def one_holder_beside(environment: Sequence[ApiKey], from_file: Sequence[ApiKey],
                      path: Path) -> None:
    """One holder per name and per key across ``PITBOSS_KEYS`` and the key file together."""
    one_holder_each([*environment, *from_file], f"PITBOSS_KEYS with {path}")


def _parse_records(text: str, *, source: str, most: int | None = KEYS_MAX) -> list[Any]:
    """The file's records; more than ``most`` are refused (None: any number, for a revoke
    that brings a file back under the cap)."""
    stripped = text.strip()
    if not stripped:
        return []
    items: Any
    try:
        if stripped.startswith("["):
            items = json.loads(stripped, object_pairs_hook=members_once)
        else:
            items = []
            for number, line in enumerate(text.splitlines(), 1):  # each line read alone
                if line.strip():
                    try:
                        items.append(json.loads(line, object_pairs_hook=members_once))
                    except json.JSONDecodeError as exc:  # (its line is 1: say the file's)
                        raise KeyConfigError(f"{source} is not JSON lines or a JSON list: "
                                             f"{exc.msg} (line {number})") from None
    except json.JSONDecodeError as exc:
        raise KeyConfigError(f"{source} is not JSON lines or a JSON list: {exc.msg} "
                             f"(line {exc.lineno})") from None
    except RepeatedMember as exc:
        raise KeyConfigError(f"{source}: a key gives {exc.args[0]!r} more than once") from None
    except (RecursionError, ValueError):  # nested too deeply, a number too long to read
        raise KeyConfigError(f"{source} is not JSON lines or a JSON list of keys") from None
    if not isinstance(items, list):
        raise KeyConfigError(f"{source} must hold a list of keys")
    if most is not None and len(items) > most:
        raise KeyConfigError(f"{source} holds {len(items)} keys, more than the {most} it may: "
                             "revoke keys (pitboss keys revoke) to bring it back under")
    return items


def _key_from(item: object, source: str) -> ApiKey:
    if not isinstance(item, dict) or set(item) - {"name", "role", "key_hash", "created"}:
        raise KeyConfigError(f"{source}: each key is an object with name, role and key_hash")
    try:
        return ApiKey(name=item["name"], role=item["role"], key_hash=item["key_hash"])
    except KeyError as exc:
        raise KeyConfigError(f"{source}: a key lacks {exc.args[0]!r}") from None
    except KeyConfigError as exc:  # a value the key refuses: say where it was read
        raise KeyConfigError(f"{source}: {exc}") from None


def _read_records(path: Path, *, most: int | None = KEYS_MAX) -> list[dict[str, Any]]:
    """The file's key records as written (``created`` kept), checked as the server reads
    them; none when the file does not exist."""
    if not path.exists():
        return []
    records = _parse_records(_read_text(path), source=str(path), most=most)
    _keys_from(records, str(path))  # refuse what the server would refuse
    return records


@contextmanager
def _editing(path: Path) -> Iterator[Path]:
    """The key file to edit (through a symlink to its target), held against every other
    edit meanwhile: two `keys create` at once must both land."""
    target = path.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target.with_name(target.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield target
    finally:
        os.close(fd)  # releases the lock


def _write_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Replace the file at once with ``records`` as JSON lines, keeping its mode (0600 for a
    new one): a server re-reading it sees the old keys or the new ones, never a part."""
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), mode)
            out.write("".join(json.dumps(record) + "\n" for record in records))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def append_key(path: Path, name: str, role: str, *, as_recorded: bool = False) -> str:
    """Create a key, store its hash in ``path`` (a new file gets mode 0600), and return the key
    (shown once). Its name is written one way only, as a new player's or table's (it names an
    actor); ``as_recorded``, it may hold the look-alike characters earlier versions took: a
    holder so named, given a new key, keeps the name the record knows."""
    why = unwritten("new key name", name, lookalikes=not as_recorded)
    with _editing(path) as target:
        records = _read_records(target)
        if any(r["name"] == name for r in records):
            raise KeyConfigError(f"{path} already has a key named {name!r}")
        if why is not None:
            # The look-alike characters alone were taken before: said only where it applies.
            hint = (" (a holder named so before such names were refused keeps the name: pitboss "
                    "keys create --as-recorded)"
                    if not as_recorded and unwritten("", name, lookalikes=False) is None else "")
            raise KeyConfigError(f"{why}, not {name!r}{hint}")
        if len(records) >= KEYS_MAX:
            raise KeyConfigError(f"{path} holds {len(records)} keys, the most it may: revoke "
                                 "one (pitboss keys revoke) before creating another")
        key = new_key()
        record = ApiKey(name=name, role=role, key_hash=hash_key(key))
        created = datetime.now(UTC).isoformat(timespec="seconds")
        _write_records(target, [*records, {**record.to_json(), "created": created}])
    return key


def remove_keys(path: Path, names: Iterable[str]) -> list[str]:
    """Revoke keys by name; returns the names removed."""
    with _editing(path) as target:
        records = _read_records(target, most=None)
        wanted = set(names)
        removed = [r["name"] for r in records if r["name"] in wanted]
        if removed:
            _write_records(target, [r for r in records if r["name"] not in wanted])
    return removed


# A key file is trusted to be as last read only once its stamp has stayed the same this long.
KEY_FILE_SETTLED_S = 2
_UNSETTLED = (-1,)  # the stamp of a file still to be read again
_MISSING = (0,) * 7  # the stamp of no file


class KeyRing:
    """The configured keys. A file is read again when its stamp (inode, size, times, owner,
    mode) changes, and at each request until that stamp has stayed the same for
    KEY_FILE_SETTLED_S by this process's clock: written twice within one tick of a coarse
    file clock, a file keeps its stamp, and a text read between the writes (half written: no
    keys) would otherwise be kept until the next edit."""

    def __init__(self, keys: Sequence[ApiKey] = (), *, path: Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._static = list(keys)
        self._path = path
        self._clock = clock
        self._stamp: tuple[int, ...] | None = None  # the stamp read and settled
        self._seen: tuple[tuple[int, ...], float] | None = None  # a stamp, and since when
        self._text: str | None = None  # the text last read: read again, it is not parsed again
        self._said: tuple[Any, ...] | None = None  # the file's last refusal logged
        self._from_file: list[ApiKey] = []  # taken now
        self._accepted: list[ApiKey] = []  # the file's keys when it was last accepted, settled
        self._unsettled: list[ApiKey] | None = None  # keys taken from a text not yet settled
        self._by_hash = self._index()
        self._lock = threading.Lock()
        if path is not None:
            self._reload()

    def _index(self) -> dict[str, ApiKey]:
        return {key.key_hash: key for key in (*self._static, *self._from_file)}

    def keys(self) -> list[ApiKey]:
        self._reload()
        return [*self._static, *self._from_file]

    def _reload(self) -> None:
        if self._path is None:
            return
        try:
            info = self._path.stat()
            # The inode too: an edit replaces the file, possibly within one mtime tick; and the
            # change time, which a chmod or chown moves (a file refused as others may write it
            # is read again once that is mended).
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size, info.st_ctime_ns,
                     info.st_mode, info.st_uid, info.st_gid)  # (ctime may move by ticks)
        except FileNotFoundError:
            stamp = _MISSING
        except OSError as exc:  # a symlink loop, a directory not searchable …
            if self._stamp is None:
                raise KeyConfigError(f"{self._path} cannot be read: {exc}") from None
            with self._lock:
                self._refused(KeyConfigError(f"{self._path} cannot be read: {exc}"),
                              _UNSETTLED, None)
            return
        if self._said is not None and self._said[0] is _UNSETTLED:
            self._said = None  # read again: a next failure to read it is said again
        if stamp == self._stamp:
            return
        with self._lock:
            now = self._clock()
            if self._seen is None or self._seen[0] != stamp:
                self._seen = (stamp, now)
            settled = stamp == _MISSING or now - self._seen[1] >= KEY_FILE_SETTLED_S
            try:
                text = _read_text(self._path) if stamp != _MISSING else ""
            except KeyConfigError as exc:  # unreadable, or others could have written it
                self._refused(exc, stamp, None)
                self._text = None  # once it reads again, its text is judged again
            else:
                if text != self._text or self._stamp is None:  # the same text, the same keys
                    self._take(text, stamp)
                    self._text = text
            if settled and self._unsettled is not None:
                # What a refused edit is judged against: never a text read half written
                # (truncated in place, it parses as no keys at all).
                self._accepted, self._unsettled = self._unsettled, None
            self._stamp = stamp if settled else _UNSETTLED

    def _take(self, text: str, stamp: tuple[int, ...]) -> None:
        try:
            from_file = parse_keys(text, source=str(self._path))
            one_holder_beside(self._static, from_file, cast(Path, self._path))
        except KeyConfigError as exc:
            self._refused(exc, stamp, text)
            return
        self._from_file = self._unsettled = from_file
        if self._stamp is None:  # the first read: nothing before it to keep
            self._accepted = from_file
        self._by_hash = self._index()

    def _refused(self, exc: KeyConfigError, stamp: tuple[int, ...], text: str | None) -> None:
        """A half-written edit must not lock everybody out: keep the last good keys, but none
        the file's ``text`` no longer lists (a revocation holds even in a file refused), where
        it can still be read for the hashes it lists (not when it could not be read, or
        others could have written it: ``text`` None)."""
        if self._stamp is None:
            raise exc
        self._unsettled = None
        listed = _hashes_in(text, str(self._path)) if text is not None else None
        if listed is not None:
            # The keys accepted, and those in force now, read from a text not yet settled
            # (a key created and used at once, the file then quiet): each still listed.
            kept = {k.key_hash: k for k in (*self._accepted, *self._from_file)}
            self._from_file = [k for h, k in kept.items() if h in listed]
            self._by_hash = self._index()
        said = (stamp, str(exc), listed is None)
        if said != self._said:  # once for each state of the file, not at each read of it
            logger.error("keeping the previous keys%s: %s",
                         "" if listed is None else " the file still lists", exc)
            self._said = said

    def find(self, presented: str) -> ApiKey | None:
        """The key holder for a presented key, looked up by the key's hash: what a lookup's
        timing could reveal is about a SHA-256 digest, which tells nothing of a key."""
        self._reload()
        return self._by_hash.get(hash_key(presented))


def _hashes_in(text: str, source: str) -> set[str] | None:
    """The key hashes the text of a refused key file still lists, whatever else is wrong
    with it: None when it cannot say (a text that is no key records, or a record without a
    well-formed hash), and no key should be dropped on its word."""
    try:
        records = _parse_records(text, source=source, most=None)
    except KeyConfigError:
        return None
    hashes = [r.get("key_hash") if isinstance(r, dict) else None for r in records]
    if not all(is_key_hash(h) for h in hashes):
        return None
    return {str(h) for h in hashes}


def keyring_from(environ: Mapping[str, str], default_file: Path) -> KeyRing:
    """``PITBOSS_KEYS`` (a JSON list) and/or ``PITBOSS_KEYS_FILE`` (default ``default_file``)."""
    inline = environ.get("PITBOSS_KEYS", "").strip()
    keys = parse_keys(inline, source="PITBOSS_KEYS") if inline else []
    path = Path(environ.get("PITBOSS_KEYS_FILE", "").strip() or default_file)
    return KeyRing(keys, path=path)


# --- request-time checks -------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    name: str
    role: str


def _bearer_token() -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("This request needs an API key: send 'Authorization: Bearer <key>'.")
    if len(token) > KEY_MAX_CHARS:
        g.refused_key = hash_key(token)[:12]  # (logged, as any key no holder has)
        raise _unauthorized("The API key is not valid.")
    return token


def _unauthorized(detail: str) -> Unauthorized:
    # The problem handler adds "WWW-Authenticate: Bearer" to every 401.
    return Unauthorized(detail)


def current_principal() -> Principal:
    principal = g.get("principal")
    if principal is None:
        raise RuntimeError("no principal: the view is not behind requires()")
    return cast(Principal, principal)


def requires(*roles: str) -> Callable[[F], F]:
    """Let the view run only for a valid key of one of ``roles`` (401 / 403 otherwise).

    Applied outermost, so that a request without a valid key learns nothing about the body
    it sent.
    """
    unknown = set(roles) - set(ROLES)
    if not roles or unknown:
        raise ValueError(f"unknown roles {unknown or roles}")

    def decorator(view: F) -> F:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            ring: KeyRing = current_app.extensions["pitboss.keys"]
            presented = _bearer_token()
            key = ring.find(presented)
            if key is None:
                # For the log of refusals (api.problems): a key no holder has, as a revoked
                # one, by the start of its hash.
                g.refused_key = hash_key(presented)[:12]
                raise _unauthorized("The API key is not valid.")
            g.principal = Principal(name=key.name, role=key.role)
            if key.role not in roles:
                needed = (roles[0] if len(roles) == 1 else
                          f"{', '.join(roles[:-1])} or {roles[-1]}")
                raise Forbidden(f"The {key.role} role may not do this; it needs the {needed} "
                                f"role.")
            return view(*args, **kwargs)

        return cast(F, guarded)

    return decorator

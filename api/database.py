"""Which PostgreSQL the service uses, and the private one it starts when none is configured.

Resolution order (the first that applies wins):

1. ``DATABASE_URL`` (``postgresql://user:password@host:port/dbname``, or ``?host=/socket/dir``);
2. the ``POSTGRES_*`` variables that the eventsourcing library reads itself;
3. an embedded server started through ``pgserver`` in ``PITBOSS_DATA_DIR``
   (default ``./var/pgdata``), reached over a Unix socket in that folder.

This module belongs to the composition root: ``ledger`` and ``projections`` receive the settings
(as the eventsourcing environment) and never import it. Passwords never appear in messages, logs
or ``repr``: everything shown to a person goes through :meth:`DatabaseSettings.masked`.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import quote, unquote, urlsplit

import psycopg
from eventsourcing.utils import strtobool
from psycopg.conninfo import make_conninfo

logger = logging.getLogger("pitboss.database")

DatabaseSource = Literal["embedded", "DATABASE_URL", "POSTGRES_*"]

DEFAULT_DATA_DIR: Final = Path("var/pgdata")
DEFAULT_PORT: Final = 5432
POSTGRES_VARIABLES: Final = (
    "POSTGRES_HOST",
    "POSTGRES_PORT",
    "POSTGRES_DBNAME",
    "POSTGRES_USER",
    "POSTGRES_PASSWORD",
)
# Linux allows 107 bytes in a Unix socket path and macOS 103; stay within both.
SOCKET_PATH_MAX_BYTES: Final = 103
# libpq ignores a connect_timeout under 2 seconds and uses 2.
_CONNECT_TIMEOUT_MIN_S: Final = 2
_SOCKET_NAME: Final = f".s.PGSQL.{DEFAULT_PORT}"
_URL_SCHEMES: Final = frozenset({"postgresql", "postgres"})
_URL_QUERY_KEYS: Final = frozenset({"host", "port", "dbname", "user", "password"})
_MASK: Final = "***"
# When started by root, pgserver runs postgres as this system user (postgres refuses root).
_PGSERVER_SYSTEM_USER: Final = "pgserver"

# Limits that operators may tune, under the variable names the eventsourcing library uses,
# with their smallest allowed value. Zero would mean "no limit" for most of them (no lock
# timeout, an unbounded wait queue), so it is refused.
_LIMIT_VARIABLES: Final = {
    "connect_timeout_s": ("POSTGRES_CONNECT_TIMEOUT", 1),
    "lock_timeout_s": ("POSTGRES_LOCK_TIMEOUT", 1),
    "statement_timeout_s": ("POSTGRES_STATEMENT_TIMEOUT", 1),
    "idle_in_transaction_timeout_s": ("POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT", 1),
    "pool_size": ("POSTGRES_POOL_SIZE", 1),
    "pool_max_overflow": ("POSTGRES_MAX_OVERFLOW", 0),
    "pool_max_waiting": ("POSTGRES_MAX_WAITING", 1),
    "pool_conn_max_age_s": ("POSTGRES_CONN_MAX_AGE", 1),
}
_LIMITS_MAX: Final = 100_000
# The eventsourcing library reads a setting under its application's name first: the
# ledger's own, and the read models' own.
_APP_PREFIXES: Final = ("LEDGER_", "PROJECTIONS_")
# Yes/no settings read by the library.
_SWITCH_VARIABLES: Final = tuple(f"{prefix}{name}" for prefix in ("", *_APP_PREFIXES)
                                  for name in ("CREATE_TABLE", "POSTGRES_PRE_PING"))


class DatabaseSetupError(Exception):
    """Root of the errors raised while choosing or reaching the database."""


class DatabaseConfigError(DatabaseSetupError):
    """The configured database settings cannot be used as given."""


class DatabaseUnavailable(DatabaseSetupError):
    """The chosen database does not answer (or the embedded one did not start)."""


@dataclass(frozen=True, kw_only=True)
class DatabaseSettings:
    """Where the database is and how to talk to it; the password is never shown."""

    host: str  # a host name, an IP address, or the directory of a Unix socket
    port: int
    dbname: str
    user: str
    password: str = field(default="", repr=False)
    source: DatabaseSource = "DATABASE_URL"
    connect_timeout_s: int = 5
    lock_timeout_s: int = 5
    statement_timeout_s: int = 30
    idle_in_transaction_timeout_s: int = 5
    pool_size: int = 5
    pool_max_overflow: int = 10
    pool_max_waiting: int = 50
    pool_conn_max_age_s: int = 3600

    def __post_init__(self) -> None:
        for name in ("host", "dbname", "user"):
            if not getattr(self, name):
                raise DatabaseConfigError(f"database settings need a {name}")
        if not 1 <= self.port <= 65535:
            raise DatabaseConfigError(f"database port {self.port} is outside 1..65535")
        for name, (variable, minimum) in _LIMIT_VARIABLES.items():
            value = getattr(self, name)
            if not minimum <= value <= _LIMITS_MAX:
                raise DatabaseConfigError(
                    f"{variable}={value} is outside {minimum}..{_LIMITS_MAX} ({name})"
                )

    def __str__(self) -> str:
        return self.masked()

    @property
    def is_unix_socket(self) -> bool:
        return self.host.startswith("/")

    def describe(self) -> str:
        """Where the database is, for messages: ``host:port/dbname``, or for a socket folder
        ``/folder (database dbname)`` (its port only if not the default); no user, no
        password."""
        if self.is_unix_socket:
            port = "" if self.port == DEFAULT_PORT else f", port {self.port}"
            return f"{self.host} (database {self.dbname}{port})"
        return f"{self.host}:{self.port}/{self.dbname}"

    def conninfo(self, *, connect_timeout_s: int | None = None) -> str:
        """A libpq connection string for psycopg."""
        timeout_s = self.connect_timeout_s if connect_timeout_s is None else connect_timeout_s
        return make_conninfo(
            host=self.host,
            port=str(self.port),
            dbname=self.dbname,
            user=self.user,
            password=self.password,
            connect_timeout=str(max(_CONNECT_TIMEOUT_MIN_S, timeout_s)),
            application_name="pitboss",
        )

    def url(self) -> str:
        """The settings as a ``postgresql://`` URL, password included: for child processes only."""
        return _format_url(self, quote(self.password, safe="") if self.password else "")

    def masked(self) -> str:
        """The settings as a ``postgresql://`` URL with the password, if there is one,
        replaced by ``***`` (the embedded server's has none: shown masked, it seemed set)."""
        return _format_url(self, _MASK if self.password else "")

    def eventsourcing_env(self) -> dict[str, str]:
        """The environment for an ``eventsourcing.application.Application`` on this database."""
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": self.dbname,
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": str(self.port),
            "POSTGRES_USER": self.user,
            # An empty password is fine: eventsourcing 9.5.6 only refuses a missing key.
            "POSTGRES_PASSWORD": self.password,
            "POSTGRES_CONNECT_TIMEOUT": str(self.connect_timeout_s),
            "POSTGRES_LOCK_TIMEOUT": str(self.lock_timeout_s),
            "POSTGRES_STATEMENT_TIMEOUT": str(self.statement_timeout_s),  # ledger.storage reads it
            "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": str(self.idle_in_transaction_timeout_s),
            "POSTGRES_POOL_SIZE": str(self.pool_size),
            "POSTGRES_MAX_OVERFLOW": str(self.pool_max_overflow),
            "POSTGRES_MAX_WAITING": str(self.pool_max_waiting),
            "POSTGRES_CONN_MAX_AGE": str(self.pool_conn_max_age_s),
            # No ping before every checkout (it cost a tenth of a decision): the library retries
            # a statement on a broken connection, and the pool drops broken connections.
            "POSTGRES_PRE_PING": "n",
            **_PINNED,
        }


# The library's own settings that change how events are stored, read or cached, or where a
# password comes from. The library reads them from the whole process environment (and under
# its applications' prefixes first), so a stray COMPRESSOR_TOPIC would store a record only
# processes with it can read, and every other tool would call it altered. None is a setting of
# pitboss: each is pinned, under every name the library looks for.
_LIBRARY_SETTINGS: Final = {
    # Never the library's database functions: their insert takes no lock, so notification ids
    # could commit out of order.
    "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
    "COMPRESSOR_TOPIC": "", "CIPHER_TOPIC": "", "CIPHER_KEY": "", "TRANSCODER_TOPIC": "",
    "MAPPER_TOPIC": "", "ORIGINATOR_ID_TYPE": "uuid", "APPLICATION_RECORDER_TOPIC": "",
    "TRACKING_RECORDER_TOPIC": "", "PROCESS_RECORDER_TOPIC": "", "SINGLE_ROW_TRACKING": "t",
    "IS_SNAPSHOTTING_ENABLED": "y", "AGGREGATE_CACHE_MAXSIZE": "",
    "AGGREGATE_CACHE_FASTFORWARD": "y", "AGGREGATE_CACHE_FASTFORWARD_SKIPPING": "n",
    "DEEPCOPY_FROM_AGGREGATE_CACHE": "y", "POSTGRES_GET_PASSWORD_TOPIC": "",
}
_PINNED: Final = {f"{prefix}{name}": value for name, value in _LIBRARY_SETTINGS.items()
                  for prefix in ("", *_APP_PREFIXES)}


def _format_url(settings: DatabaseSettings, password_part: str) -> str:
    userinfo = quote(settings.user, safe="")
    if password_part:
        userinfo += ":" + password_part
    path = "/" + quote(settings.dbname, safe="")
    if settings.is_unix_socket:
        query = "host=" + quote(settings.host, safe="/")
        if settings.port != DEFAULT_PORT:
            query += f"&port={settings.port}"
        return f"postgresql://{userinfo}@{path}?{query}"
    host = f"[{settings.host}]" if ":" in settings.host else quote(settings.host, safe="")
    return f"postgresql://{userinfo}@{host}:{settings.port}{path}"


# --- parsing ---------------------------------------------------------------------------------


def parse_database_url(url: str, *, variable: str = "DATABASE_URL") -> DatabaseSettings:
    """Parse a ``postgresql://`` or ``postgres://`` URL; messages never repeat the URL itself."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        raise DatabaseConfigError(f"{variable} is not a valid URL") from None
    if parts.scheme not in _URL_SCHEMES:
        raise DatabaseConfigError(f"{variable} must start with postgresql:// or postgres://")
    if "#" in url:
        raise DatabaseConfigError(
            f"{variable} must not contain '#': percent-encode it (%23) in the password"
        )
    userinfo, _, hostport = parts.netloc.rpartition("@")
    raw_user, _, raw_password = userinfo.partition(":")
    host, port = _parse_hostport(hostport, variable)
    values: dict[str, str] = {
        "user": unquote(raw_user),
        "password": unquote(raw_password),
        "host": host,
        "port": port,
        "dbname": _parse_dbname(parts.path, variable),
    }
    values.update(_parse_query(parts.query, variable))
    if not values["user"]:
        raise DatabaseConfigError(f"{variable} names no user")
    if not values["host"]:
        raise DatabaseConfigError(f"{variable} names no host (give host:port or ?host=/socket/dir)")
    return DatabaseSettings(
        host=values["host"],
        port=_parse_port(values["port"], variable),
        dbname=values["dbname"] or values["user"],
        user=values["user"],
        password=values["password"],
        source="DATABASE_URL",
    )


def _parse_hostport(hostport: str, variable: str) -> tuple[str, str]:
    if hostport.startswith("["):
        host, closed, rest = hostport[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise DatabaseConfigError(f"{variable} has a malformed [IPv6] host")
        return host, rest[1:]
    host, _, port = hostport.partition(":")
    if "," in hostport:
        raise DatabaseConfigError(f"{variable} names several hosts; give exactly one")
    return unquote(host), port


def _parse_dbname(path: str, variable: str) -> str:
    raw = path.removeprefix("/")
    # An unencoded '/' or '@' here usually means a password with special characters that
    # was not percent-encoded, so part of it ended up in the path: refuse, and show none of it.
    if "/" in raw or "@" in raw:
        raise DatabaseConfigError(
            f"{variable} has '/' or '@' in its database name: percent-encode special "
            "characters in the user name and password"
        )
    return unquote(raw)


def _parse_query(query: str, variable: str) -> dict[str, str]:
    # A '?' inside an unencoded password moves the rest of the URL, '@host' included, into
    # the query: refuse that without repeating any of it. Past this check no part of the
    # query can come from the password, so parameter names may be quoted back.
    if "@" in query:
        raise DatabaseConfigError(
            f"{variable} has '@' after '?': percent-encode special characters in the password"
        )
    values: dict[str, str] = {}
    for item in query.split("&") if query else ():
        key, equals, value = item.partition("=")
        if not equals:
            raise DatabaseConfigError(f"{variable} has a malformed query string")
        if key not in _URL_QUERY_KEYS:
            raise DatabaseConfigError(
                f"{variable} parameter {key!r} is not supported (supported: "
                f"{', '.join(sorted(_URL_QUERY_KEYS))}; use libpq's PG* variables for others)"
            )
        values[key] = unquote(value)
    return values


def _parse_port(text: str, variable: str) -> int:
    if not text:
        return DEFAULT_PORT
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise DatabaseConfigError(f"{variable}: the port must be a number in 1..65535")
    return int(text)


def _from_postgres_variables(environ: Mapping[str, str]) -> DatabaseSettings:
    required = ("POSTGRES_HOST", "POSTGRES_DBNAME", "POSTGRES_USER")
    missing = [name for name in required if not environ.get(name)]
    if missing:
        raise DatabaseConfigError(
            "the POSTGRES_* configuration is incomplete: set "
            + ", ".join(missing)
            + " (or set DATABASE_URL instead)"
        )
    return DatabaseSettings(
        host=environ["POSTGRES_HOST"],
        port=_parse_port(environ.get("POSTGRES_PORT", ""), "POSTGRES_PORT"),
        dbname=environ["POSTGRES_DBNAME"],
        user=environ["POSTGRES_USER"],
        password=environ.get("POSTGRES_PASSWORD", ""),
        source="POSTGRES_*",
    )


def _limits_from(environ: Mapping[str, str]) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    for name, (variable, _) in _LIMIT_VARIABLES.items():
        text = environ.get(variable, "").strip()
        if not text:
            continue
        if not (text.isascii() and text.isdigit()):
            raise DatabaseConfigError(f"{variable} must be a whole number, not {text!r}")
        limits[name] = int(text)
    return limits


def _check_library_settings(environ: Mapping[str, str]) -> None:
    """The settings the eventsourcing library reads itself, checked here with a sentence
    naming the variable: the library would stop the start with a traceback, or name the
    variable without its prefix. The yes/no ones, and the ledger's and the read models' own
    limits (the unprefixed ones are read with the database settings)."""
    for variable in _SWITCH_VARIABLES:
        text = environ.get(variable, "")
        try:
            if text:
                strtobool(text)  # as the library reads it: unstripped
        except ValueError:
            raise DatabaseConfigError(f"{variable} is yes or no (y, n, true, false, 1, 0), "
                                      f"not {text!r}") from None
    for prefix in _APP_PREFIXES:
        for name, minimum in _LIMIT_VARIABLES.values():
            variable, text = prefix + name, environ.get(prefix + name, "").strip()
            if text and not (text.isascii() and text.isdigit()
                             and minimum <= int(text) <= _LIMITS_MAX):
                raise DatabaseConfigError(f"{variable} must be a whole number from {minimum} "
                                          f"to {_LIMITS_MAX}, not {text!r}")


def external_database_configured(environ: Mapping[str, str]) -> bool:
    """True when ``DATABASE_URL`` or any ``POSTGRES_*`` connection variable is set."""
    return bool(environ.get("DATABASE_URL", "").strip()) or any(
        environ.get(name) for name in POSTGRES_VARIABLES
    )


def resolve_database(
    environ: Mapping[str, str] = os.environ,
    data_dir: Path | str | None = None,
    *,
    existing: bool = False,
) -> DatabaseSettings:
    """Choose the database (see the module docstring), starting the embedded one if needed.

    ``data_dir`` overrides ``PITBOSS_DATA_DIR`` for the embedded server; ``existing``: an
    embedded one is not created where there is none (a command that only reads).
    """
    _check_library_settings(environ)
    settings = _configured(environ)
    if settings is None:
        folder = data_dir if data_dir is not None else environ.get("PITBOSS_DATA_DIR", "")
        settings = start_embedded(folder or DEFAULT_DATA_DIR, existing=existing)
    settings = replace(settings, **_limits_from(environ))
    logger.info("database: %s (from %s)", settings.masked(), origin(settings))
    return settings


def origin(settings: DatabaseSettings) -> str:
    """Where the settings came from, as the start-up log and ``pitboss db check`` say it: a
    ``DATABASE_URL`` may reach an embedded server (``pitboss serve`` hands the one it started
    to its workers so, and an operator may too)."""
    if settings.source == "DATABASE_URL" and _embedded_folder(settings):
        return f"DATABASE_URL, the embedded PostgreSQL in {settings.host}"
    return settings.source


def _embedded_folder(settings: DatabaseSettings) -> bool:
    """Whether the settings reach a server through the socket in an embedded data folder."""
    return bool(settings.host) and (Path(settings.host) / "PG_VERSION").is_file()


def _configured(environ: Mapping[str, str]) -> DatabaseSettings | None:
    """The database ``DATABASE_URL`` or the ``POSTGRES_*`` variables name, if they do."""
    url = environ.get("DATABASE_URL", "").strip()
    if url:
        return parse_database_url(url)
    if external_database_configured(environ):
        return _from_postgres_variables(environ)
    return None


def external_database_named(environ: Mapping[str, str]) -> str | None:
    """The database the environment names, if it is not an embedded one (as a message
    names it); starts nothing."""
    settings = _configured(environ)
    return None if settings is None or _embedded_folder(settings) else settings.describe()


# PostgreSQL's reserved words (and those that may name only a function or a type): as a
# schema, written unquoted into SQL as the event store library writes it, each is a syntax
# error (pg_get_keywords(), catcode R and T, PostgreSQL 16).
_RESERVED_WORDS: Final = frozenset("""
    all analyse analyze and any array as asc asymmetric authorization binary both case cast
    check collate collation column concurrently constraint create cross current_catalog
    current_date current_role current_schema current_time current_timestamp current_user
    default deferrable desc distinct do else end except false fetch for foreign freeze from
    full grant group having ilike in initially inner intersect into is isnull join lateral
    leading left like limit localtime localtimestamp natural not notnull null offset on only
    or order outer overlaps placing primary references returning right select session_user
    similar some symmetric system_user table tablesample then to trailing true union unique
    user using variadic verbose when where window with
""".split())  # noqa: SIM905 (read as words)


def check_schema_name(schema: str) -> str:
    """``schema`` (POSTGRES_SCHEMA), refused unless it reads the same unquoted and quoted: the
    library writes it into its SQL unquoted, the ledger and the read models quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema) is None or schema in _RESERVED_WORDS:
        raise DatabaseConfigError(
            "POSTGRES_SCHEMA is a plain name: a lowercase letter or _, then up to 62 lowercase "
            f"letters, digits or _, and no word PostgreSQL reserves; not {schema!r}")
    return schema


# --- the embedded server ---------------------------------------------------------------------


def embedded_data_dir(data_dir: Path | str) -> Path:
    """The absolute data folder, refused when its socket path would be too long."""
    path = Path(data_dir).expanduser().resolve()
    socket_path = path / _SOCKET_NAME
    if len(os.fsencode(socket_path)) > SOCKET_PATH_MAX_BYTES:
        raise DatabaseConfigError(
            f"the embedded PostgreSQL data folder {path} is too deep: its socket path would be "
            f"{len(os.fsencode(socket_path))} bytes (at most {SOCKET_PATH_MAX_BYTES}); "
            "set PITBOSS_DATA_DIR to a shorter path"
        )
    return path


def start_embedded(data_dir: Path | str, *, existing: bool = False) -> DatabaseSettings:
    """Start (or reuse) the embedded server in ``data_dir``; it keeps running after exit.
    ``existing``: refuse to create one where there is none."""
    path = embedded_data_dir(data_dir)
    if existing and not (path / "PG_VERSION").exists():
        raise DatabaseConfigError(
            f"there is no embedded database in {path}: run this where the service runs (the "
            "folder holding var/pgdata), or set PITBOSS_DATA_DIR or DATABASE_URL")
    path.parent.mkdir(parents=True, exist_ok=True)
    pgserver = _import_pgserver()
    was_running = _running(path)
    try:
        with _quiet_runtime_dir_warning():
            # cleanup_mode=None: the server outlives this process, so the next start (or a
            # gunicorn worker) reuses it and its data instead of paying for a restart.
            server = pgserver.get_server(path, cleanup_mode=None)
            uri: str = server.get_uri()
    except Exception as exc:  # pgserver raises bare subprocess and assertion errors
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {path} did not start ({type(exc).__name__}); "
            f"see its log {path / 'log'}"
        ) from exc
    if not was_running:  # a command that only reads leaves it running too: said, not silent
        logger.info("started the embedded PostgreSQL in %s; it keeps running after this "
                    "(pitboss db stop, or make db-stop, stops it)", path)
    return replace(parse_database_url(uri), source="embedded")


def stop_embedded(data_dir: Path | str) -> bool:
    """Stop the embedded server in ``data_dir``; False when none was running there."""
    path = Path(data_dir).expanduser().resolve()
    if not (path / "PG_VERSION").exists():
        return False
    pgserver = _import_pgserver()
    server = pgserver.PostgresServer._instances.pop(path, None)
    if server is not None:
        # Forget this process's handle so pgserver's exit hook has nothing left to do.
        atexit.unregister(server._cleanup)
        server.global_process_id_list.get_and_remove(os.getpid())
    if not _running(path):
        return False
    pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=path, user=_postgres_system_user())
    logger.debug("stopped the embedded PostgreSQL in %s", path)
    return True


def _running(path: Path) -> bool:
    """Whether a server runs in the embedded data folder ``path``. Read under pgserver's own
    lock, which a process starting the server holds until it is ready: the server writes its
    postmaster.pid a line at a time, and a command started beside another (``pitboss serve``
    and ``pitboss project`` at once, on a new folder) read it half written and stopped."""
    pgserver = _import_pgserver()
    from pgserver.utils import PostmasterInfo

    with pgserver.PostgresServer._lock:
        info = PostmasterInfo.read_from_pgdata(path)
    return info is not None and bool(info.is_running())


def _postgres_system_user() -> str | None:
    return _PGSERVER_SYSTEM_USER if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def _import_pgserver() -> Any:  # pgserver carries no annotations
    with _quiet_runtime_dir_warning():
        import pgserver
    return pgserver


@contextmanager
def _quiet_runtime_dir_warning() -> Iterator[None]:
    # pgserver asks platformdirs for a runtime folder (for its lock file) at import time;
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI) and falls back to a
    # private folder under /tmp, which is fine for a lock file.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", category=UserWarning)
        yield


# --- reachability ----------------------------------------------------------------------------


def check_database(settings: DatabaseSettings, timeout_s: float = 2.0) -> None:
    """Connect and run ``select 1``; raise :class:`DatabaseUnavailable` if that fails."""
    timeout_ms = max(1, math.ceil(timeout_s * 1000))
    conninfo = settings.conninfo(connect_timeout_s=math.ceil(timeout_s))
    try:
        with psycopg.connect(
            conninfo, autocommit=True, options=f"-c statement_timeout={timeout_ms}"
        ) as conn:
            conn.execute("select 1").fetchone()
    except psycopg.Error as exc:
        reason = _without_secrets(_first_line(str(exc)))
        raise DatabaseUnavailable(
            f"PostgreSQL at {settings.describe()} is unavailable: {reason}"
        ) from None


# Where a driver's message could quote a password: a connection string's ``password=`` and a
# URL's ``user:password@``. Masked there only, so that the rest of the message stays readable
# and says nothing of the password by what is missing from it.
_SECRET_IN_CONNINFO = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_SECRET_IN_URL = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def _without_secrets(text: str) -> str:
    return _SECRET_IN_URL.sub(rf"\1{_MASK}@", _SECRET_IN_CONNINFO.sub(rf"\1{_MASK}", text))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "no reason given"

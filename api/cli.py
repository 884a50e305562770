"""The ``pitboss`` command line."""

from __future__ import annotations

import errno
import logging
import math
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from uuid import UUID

import click
import psycopg
from eventsourcing.persistence import OperationalError as PersistenceOperationalError
from eventsourcing.persistence import ProgrammingError as PersistenceProgrammingError
from eventsourcing.utils import strtobool

from api.app import configured_schema, ledger_env
from api.auth import (
    KEYS_MAX,
    ROLES,
    ApiKey,
    KeyConfigError,
    append_key,
    keyring_from,
    one_holder_beside,
    parse_keys,
    read_keys,
    remove_keys,
)
from api.client import ApiError, Client
from api.database import (
    DEFAULT_DATA_DIR,
    DatabaseSettings,
    DatabaseSetupError,
    check_database,
    external_database_named,
    origin,
    resolve_database,
    stop_embedded,
)
from api.document import swagger_ui_url
from api.launch import CHAIN_NOT_WALKED_EXIT, INTERRUPTED_EXIT
from api.replay_text import render
from api.secrets_files import ShoeKeyError, default_keys_file, load_shoe_key, shoe_key_file
from api.services import prepare_store
from api.simulate import (
    Keys,
    SimulationAbandoned,
    SimulationError,
    SimulationStopped,
    TablePlay,
)
from api.throttled_log import throttle_pool_log
from ledger.application import GameLedger
from ledger.errors import InvariantBroken, LedgerError, QueryRefused
from ledger.storage import (
    HEAD_PATTERN,
    LedgerRecorder,
    chain_head,
    chain_start,
    kept_head_unfound,
    verify_chain,
)
from projections.engine import NAMES, ahead_of_the_log
from projections.rebuild import rebuild as rebuild_projection
from projections.settings import (
    BATCH_SIZE_DEFAULT,
    BATCH_SIZE_MAX,
    POLL_INTERVAL_MAX_S,
    POLL_INTERVAL_MIN_S,
    ProjectionSetupError,
)
from projections.worker import run_worker

# deploy/ sits next to the packages in a source checkout (the editable install of `make run`).
_REPO_GUNICORN_CONFIG = Path(__file__).resolve().parent.parent / "deploy" / "gunicorn.conf.py"
WSGI_APP = "api.wsgi:app"
GUNICORN_TIMEOUT_MAX_S = 3600


# What the person at the terminal can mend (a setting, a key file, a database that is down or
# not prepared, a server that refuses): one line and exit status 1, not a traceback (which
# --log-level DEBUG still shows).
_DATABASE_ERRORS = (PersistenceOperationalError, PersistenceProgrammingError,
                    psycopg.OperationalError, psycopg.ProgrammingError)
_OPERATOR_ERRORS = (DatabaseSetupError, ShoeKeyError, KeyConfigError, ProjectionSetupError,
                    ApiError, SimulationError, OSError, *_DATABASE_ERRORS)
# Of the database's refusals of a statement, those of a database not prepared for this
# command: no such table or schema (yet), no right to it. Any other is a defect.
_NO_RIGHT = "42501"  # insufficient_privilege
_NO_SUCH_TABLE = "42P01"  # undefined_table
_QUERY_CANCELED = "57014"  # query_canceled: the statement timeout, or an operator's cancel
_UNPREPARED_SQLSTATES = frozenset({_NO_SUCH_TABLE, "3F000", _NO_RIGHT})


# The commands that create the tables unless CREATE_TABLE=n says not to.
_CREATING = frozenset({"serve", "project", "demo"})


def _no_create_table() -> bool:
    with suppress(ValueError):
        return not strtobool(os.environ.get("CREATE_TABLE") or "y")
    return False


def _sqlstate(exc: BaseException) -> str | None:
    cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    return getattr(cause, "sqlstate", None)


def _operator_can_mend(exc: BaseException) -> bool:
    if isinstance(exc, (PersistenceProgrammingError, psycopg.ProgrammingError)):
        return _sqlstate(exc) in _UNPREPARED_SQLSTATES
    return isinstance(exc, _OPERATOR_ERRORS)


CHAIN_ALTERED = "pitboss.chain.altered"  # (the context's meta) the walk found an alteration
CHAIN_PART_ROWS = 10_000  # rows `pitboss chain` walks before it reports what it found


class _ChainNotWalked(click.ClickException):
    exit_code = CHAIN_NOT_WALKED_EXIT


def _reader_gone() -> bool:
    """Whether standard output or standard error is a pipe or socket whose reader has
    closed it."""
    for stream in (sys.stdout, sys.stderr):
        try:
            poll = select.poll()
            poll.register(stream.fileno(), select.POLLOUT)
            if any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0)):
                return True
        except (AttributeError, OSError, ValueError):  # none, or no descriptor (captured)
            continue
    return False


def _quiet() -> None:
    """Standard output and error to /dev/null: their reader has gone, and Python would
    complain again at exit, flushing them."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with suppress(AttributeError, OSError, ValueError):
            os.dup2(devnull, stream.fileno())


class _Commands(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return self._invoke(ctx)
        except click.ClickException as exc:
            if ctx.invoked_subcommand != "chain" or isinstance(exc, click.UsageError):
                raise
            raise _ChainNotWalked(exc.message) from exc
        except (click.exceptions.Exit, click.Abort):  # --help, and the like
            raise
        except (Exception, KeyboardInterrupt) as exc:
            if ctx.invoked_subcommand != "chain":
                raise
            with suppress(OSError):  # standard error's reader may be gone too
                if isinstance(exc, KeyboardInterrupt):
                    click.echo("interrupted: the chain was not walked to its end", err=True)
                else:
                    traceback.print_exc()
            raise SystemExit(CHAIN_NOT_WALKED_EXIT) from None

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            if not _reader_gone():  # a connection's, not the reader's: an error like any other
                raise click.ClickException(str(exc)) from exc
            # The reader went away (`pitboss replay ... | head`): there is nowhere left to
            # write. A chain walk it cut short was not walked to its end, not "altered" (1),
            # which an alarm reads; unless it had found an alteration, which stands.
            _quiet()
            if ctx.invoked_subcommand == "chain" and not ctx.meta.get(CHAIN_ALTERED):
                raise SystemExit(CHAIN_NOT_WALKED_EXIT) from None
            raise SystemExit(1) from None
        except _OPERATOR_ERRORS as exc:
            said = operator_sentence(exc, ctx.invoked_subcommand)
            if said is None:
                raise
            logging.getLogger("pitboss.cli").debug("the command failed", exc_info=exc)
            raise click.ClickException(said) from exc


def operator_sentence(exc: BaseException, command: str | None) -> str | None:
    """What an operator reads of ``exc``, met running ``command``: the error's first line,
    with a hint where a database error has a usual cause; None for a defect (not an error
    of the setup, the database or the input), which is raised with its traceback."""
    if isinstance(exc, click.ClickException):
        return exc.format_message()
    if not _operator_can_mend(exc):
        return None
    first_line = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    if isinstance(exc, _DATABASE_ERRORS):
        first_line = f"database error: {first_line}"
        if _sqlstate(exc) == _NO_RIGHT and command in _CREATING and not _no_create_table():
            first_line += (" (a role that may not create tables, such as the service role, "
                           "runs with CREATE_TABLE=n: see Database roles in the README)")
        elif _sqlstate(exc) == _NO_RIGHT and command == "rebuild":
            first_line += (" (a rebuild makes new tables and swaps them in: run it as the "
                           "tables' owner, see Database roles in the README)")
        elif _sqlstate(exc) == _NO_SUCH_TABLE and _no_create_table():
            first_line += (" (with CREATE_TABLE=n the tables are made by a start as their "
                           "owner: see Database roles in the README)")
        elif _sqlstate(exc) == _QUERY_CANCELED:
            first_line += (" (a statement of the ledger ran past POSTGRES_STATEMENT_TIMEOUT: "
                           "most often it waited on a lock an operator holds on the event "
                           "table, such as VACUUM FULL or ALTER TABLE; run the command again "
                           "once it is released)")
    return first_line


@click.group(cls=_Commands)
@click.option(
    "--log-level",
    default="INFO",
    envvar="PITBOSS_LOG_LEVEL",
    show_envvar=True,
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def main(log_level: str) -> None:
    """pitboss: the event-sourced game ledger for casino blackjack tables."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # pgserver reports every step of starting postgres at INFO.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    throttle_pool_log()


@main.command()
@click.option("--host", default="127.0.0.1", envvar="PITBOSS_HOST", show_envvar=True,
              show_default=True)
@click.option(
    "--port", default=8000, envvar="PORT", show_envvar=True, show_default=True,
    type=click.IntRange(1, 65535),
)
@click.option(
    "--workers", default=2, envvar="WEB_CONCURRENCY", show_envvar=True, show_default=True,
    type=click.IntRange(1, 64),
)
@click.option(
    "--threads", default=4, envvar="PITBOSS_THREADS", show_envvar=True, show_default=True,
    type=click.IntRange(1, 64), help="request threads per worker",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="gunicorn configuration file [default: deploy/gunicorn.conf.py of the checkout]",
)
def serve(host: str, port: int, workers: int, threads: int, config_file: Path | None) -> None:
    """Serve the API with gunicorn (starting the embedded PostgreSQL if none is configured)."""
    host = _check_serving(host, port)
    settings, _ = prepare_service()
    os.environ["DATABASE_URL"] = settings.url()
    if config_file is None and _REPO_GUNICORN_CONFIG.is_file():
        config_file = _REPO_GUNICORN_CONFIG
    argv = gunicorn_argv(host=host, port=port, workers=workers, threads=threads,
                         config_file=config_file)
    if not os.environ.get("WEB_CONCURRENCY", "2").strip():
        # Set empty, it is unset (as above), where gunicorn reading it for its default of
        # --workers would stop on it, whatever --workers says.
        del os.environ["WEB_CONCURRENCY"]
    click.echo(f"serving on http://{bind_address(host, port)} ({settings.masked()})", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)


def prepare_service() -> tuple[DatabaseSettings, int]:
    """What gunicorn's workers must find ready: the API keys, the database, the shoe key,
    the tables.
    Returns the settings and the ledger's last notification id (0 for an empty store).

    Done once, here, so the embedded server starts once and not in every worker, a missing
    or wrong shoe key stops the start instead of the first deal, and the workers do not
    create the tables concurrently. A bare gunicorn start does it in the ``on_starting`` hook
    of deploy/gunicorn.conf.py.
    """
    key_file, new_key_file = _shoe_key_file()
    try:
        swagger_ui_url(os.environ)  # read by each worker: refused here, not by each
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        # The keys first: a worker that cannot read them would die after "serving on".
        keyring_from(os.environ, default_keys_file(os.environ))
        settings = resolve_database(os.environ)
        check_database(settings, timeout_s=settings.connect_timeout_s)
        head = prepare_store(ledger_env(settings, os.environ), load_shoe_key(os.environ))
    except ShoeKeyError as exc:
        if new_key_file and key_file.exists():
            # Made for a database whose shoes another key sealed: left, it would stand in the
            # way of the right one at every start.
            key_file.unlink()
            raise click.ClickException(f"{exc} (the key file {key_file} made for this start "
                                       "was removed)") from exc
        raise click.ClickException(str(exc)) from exc
    except (KeyConfigError, DatabaseSetupError) as exc:
        raise click.ClickException(str(exc)) from exc
    except InvariantBroken as exc:  # the newest live shoe, read to check the key, is broken
        raise click.ClickException(f"the record does not read back: {exc}; `pitboss chain` "
                                   "shows whether it was altered once stored") from exc
    os.environ["PITBOSS_CREATE_TABLES"] = "no"
    return settings, head


def _shoe_key_file() -> tuple[Path, bool]:
    """The shoe key file, and whether reading the key will make it (no key given, no file)."""
    key_file = shoe_key_file(os.environ)
    return key_file, not (os.environ.get("PITBOSS_SHOE_KEY", "").strip() or key_file.exists())


def _check_serving(host: str, port: int) -> str:
    """What gunicorn would refuse only in its log, or with a traceback: its timeout settings,
    and an address it cannot bind (a port in use: it retries, then stops). The host as
    gunicorn takes it: an IPv6 address without brackets, which ``bind_address`` adds."""
    for variable in ("GUNICORN_TIMEOUT_S", "PITBOSS_READ_TIMEOUT_S"):
        timeout = os.environ.get(variable, "").strip()
        if timeout and not (timeout.isascii() and timeout.isdigit()
                            and 1 <= int(timeout) <= GUNICORN_TIMEOUT_MAX_S):
            raise click.ClickException(f"{variable} is a whole number of seconds from 1 to "
                                       f"{GUNICORN_TIMEOUT_MAX_S}, not {timeout!r}")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise click.ClickException("the host to serve on is empty (--host, PITBOSS_HOST)")
    # The family gunicorn binds: IPv6 for an IPv6 address only, IPv4 for any name.
    try:
        socket.inet_pton(socket.AF_INET6, host)
        family = socket.AF_INET6
    except OSError:
        family = socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            sock.bind((host, port))
        except socket.gaierror as exc:
            raise click.ClickException(f"cannot serve on {host}: {exc.strerror}") from exc
        except OSError as exc:
            why = _BIND_REFUSALS.get(exc.errno or 0, "")
            raise click.ClickException(f"cannot serve on {bind_address(host, port)}: "
                                       f"{exc.strerror or exc}{why}") from exc
    return host


_BIND_REFUSALS = {
    errno.EADDRINUSE: " (another pitboss, or another server, may be using it: stop it, or "
                      "choose another port with PORT or --port)",
    errno.EACCES: " (a port below 1024 needs the rights of root: choose another with PORT or "
                  "--port)",
    errno.EADDRNOTAVAIL: " (no network interface of this machine has that address)",
}


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gunicorn_argv(*, host: str, port: int, workers: int, threads: int,
                  config_file: Path | None) -> list[str]:
    """The gunicorn command line; command-line options override the config file."""
    argv = [sys.executable, "-m", "gunicorn"]
    if config_file is not None:
        argv += ["--config", str(config_file)]
    argv += ["--bind", bind_address(host, port), "--workers", str(workers),
             "--threads", str(threads), WSGI_APP]
    return argv


@main.group()
def db() -> None:
    """The database: check which one is in use, stop the embedded one."""


@db.command("check")
def db_check() -> None:
    """Resolve the database (starting the embedded one if it is stopped, but making none
    where there is none), check POSTGRES_SCHEMA as the service does, and run select 1."""
    configured_schema(os.environ)  # one the service would refuse is no "ok" (nothing started)
    settings = resolve_database(os.environ, existing=True)
    check_database(settings, timeout_s=settings.connect_timeout_s)
    click.echo(f"ok: {settings.masked()} (from {origin(settings)})")


@db.command("stop")
@click.option(
    "--data-dir",
    default=str(DEFAULT_DATA_DIR),
    envvar="PITBOSS_DATA_DIR",
    show_envvar=True,
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
)
def db_stop(data_dir: Path) -> None:
    """Stop the embedded PostgreSQL that keeps running in the data folder."""
    if stop_embedded(data_dir):
        click.echo(f"stopped the embedded PostgreSQL in {data_dir}")
    else:
        click.echo(f"no embedded PostgreSQL running in {data_dir}")


# --- the projection worker -------------------------------------------------------------------


class _Seconds(click.FloatRange):
    """A number of seconds in a range; NaN, which every comparison lets through, is none."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value!r} is not a number of seconds.", param, ctx)
        return seconds


@main.command()
@click.option("--batch-size", default=BATCH_SIZE_DEFAULT, show_default=True,
              type=click.IntRange(1, BATCH_SIZE_MAX), envvar="PITBOSS_PROJECTION_BATCH_SIZE",
              show_envvar=True, help="events applied per transaction")
@click.option("--poll-interval", "poll_interval_s", default=1.0, show_default=True,
              type=_Seconds(POLL_INTERVAL_MIN_S, POLL_INTERVAL_MAX_S),
              envvar="PITBOSS_PROJECTION_POLL_INTERVAL_S", show_envvar=True,
              help="seconds between looks when idle (a NOTIFY wakes it sooner)")
def project(batch_size: int, poll_interval_s: float) -> None:
    """Run the projection worker: keep the read models up to date until SIGTERM or Ctrl-C."""
    env = _projection_env()
    stop = threading.Event()
    with _stopping_on_signals(stop):
        run_worker(env, stop, batch_size=batch_size, poll_interval_s=poll_interval_s,
                   log=logging.getLogger("pitboss.projections"))


@main.command()
@click.argument("name", type=click.Choice(NAMES))
@click.option("--batch-size", default=BATCH_SIZE_DEFAULT, show_default=True,
              type=click.IntRange(1, BATCH_SIZE_MAX), help="events per transaction")
@click.option("--new-gaming-day", is_flag=True,
              help="table_days: count gaming days as PITBOSS_GAMING_DAY_TZ and "
                   "PITBOSS_GAMING_DAY_START now say, though the live view counts them "
                   "otherwise (every day's figures move)")
def rebuild(name: str, batch_size: int, new_gaming_day: bool) -> None:
    """Rebuild projection NAME from event zero into fresh tables and swap it in."""
    if new_gaming_day and name != "table_days":  # said, not taken for done
        raise click.UsageError(f"--new-gaming-day is for table_days; {name} counts no days")
    settings = _answering_database(existing=True)
    with _database_ledger(settings):  # nothing to rebuild from: it would make the tables
        pass
    env = ledger_env(settings, os.environ)
    stop = threading.Event()
    with _stopping_on_signals(stop):
        try:
            report = rebuild_projection(env, name, batch_size=batch_size, stop=stop,
                                        log=logging.getLogger("pitboss.projections"),
                                        new_gaming_day=new_gaming_day)
        except InvariantBroken as exc:
            # Events the ledger would never have written in that order: a finding, said so.
            raise click.ClickException(
                f"{name}: the rebuild stopped at events that do not add up ({exc}). They were "
                "written around the ledger, or decided on a snapshot that was (whoever holds "
                "the shoe key and the service's credentials can sign one), or the ledger has "
                "a defect: walk the chain (pitboss chain), and check what it names (an account's "
                "statement, a round's check)") from exc
    click.echo(f"{report['projection']}: {report['events_read']:,} events read in "
               f"{report['seconds']:.1f} s, now at notification {report['position']}"
               + ("" if report["swapped"] else "; stopped before the swap, live view kept"))
    if not report["swapped"]:
        raise SystemExit(1)  # not rebuilt: a script must not take it for done


@main.command()
def positions() -> None:
    """Each projection's position and how many events it is behind the ledger."""
    from projections.queries import ReadModels, ReadModelsNotMade

    settings = _answering_database(existing=True)
    # Reading only: on a database the worker never ran on, it says so instead of creating.
    read_models = ReadModels({**ledger_env(settings, os.environ), "CREATE_TABLE": "n"})
    try:
        with _database_ledger(settings):  # a database, and a schema, that hold a ledger
            pass
        try:
            rows = read_models.positions()
        except ReadModelsNotMade as exc:
            raise click.ClickException(str(exc)) from None
        for row in rows:
            click.echo(f"{row['projection']:<12} at {row['position']:>10,}  ledger head "
                       f"{row['ledger_head']:>10,}  behind {row['lag_events']:,}")
        for row in rows:
            if (ahead := ahead_of_the_log(row)) is not None:
                click.echo(f"warning: {ahead}", err=True)
        unmade = read_models.unmade()  # the positions answer; reads of those tables do not
        if unmade is not None:
            click.echo(f"warning: {unmade}", err=True)
    finally:
        read_models.close()


def _projection_env() -> dict[str, str]:
    return ledger_env(_answering_database(), os.environ)


def _answering_database(*, existing: bool = False) -> DatabaseSettings:
    """The database, checked to answer: the pool would only say it got no connection, where
    this names the reason (refused, no such database, the password...). ``existing``: an
    embedded one is not created for a command that only reads."""
    settings = resolve_database(os.environ, existing=existing)
    check_database(settings, timeout_s=settings.connect_timeout_s)
    return settings


@contextmanager
def _stopping_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (a second Ctrl-C still interrupts at once)."""
    def handler(signum: int, _frame: object) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        logging.getLogger("pitboss").info("stopping (%s)", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# --- API keys --------------------------------------------------------------------------------


def _keys_file_option() -> Any:
    return click.option(
        "--file", "keys_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="the key file [default: PITBOSS_KEYS_FILE, else var/keys.jsonl beside the data]")


@main.group()
def keys() -> None:
    """API keys: each holds one role; its name is recorded as the actor of its requests."""


@keys.command("create")
@click.option("--name", required=True, help="the key holder, recorded as actor")
@click.option("--role", required=True, type=click.Choice(ROLES))
@click.option("--as-recorded", is_flag=True,
              help="take the name as it is: a holder named before names were checked (a full-"
                   "width letter, a ligature ...), given a new key, keeps the name the record "
                   "knows")
@_keys_file_option()
def keys_create(name: str, role: str, as_recorded: bool, keys_file: Path | None) -> None:
    """Create a key: its hash goes to the key file, the key is printed once."""
    path = keys_file or default_keys_file(os.environ)
    beside = _environment_keys()
    if any(key.name == name for key in beside):
        # The server would refuse the file (one holder per name), keeping the keys it had.
        raise click.ClickException(f"PITBOSS_KEYS already names {name}: choose another name")
    key = append_key(path, name, role, as_recorded=as_recorded)
    _warn_of_a_clash(path, beside)
    article = "an" if role[0] in "aeiou" else "a"
    click.echo(f"created {article} {role} key for {name} in {path}; it is shown only now:",
               err=True)
    click.echo(key)


@keys.command("list")
@_keys_file_option()
def keys_list(keys_file: Path | None) -> None:
    """The key holders and their roles (never the keys)."""
    path = keys_file or default_keys_file(os.environ)
    if not path.exists():  # run from elsewhere than the service, say: not an empty list
        click.echo(f"no key file at {path}", err=True)
    listed = read_keys(path, most=None)  # over the cap too: to choose what to revoke
    if len(listed) > KEYS_MAX:
        click.echo(f"{path} holds {len(listed)} keys, more than the {KEYS_MAX} the server "
                   "reads: revoke some (pitboss keys revoke)", err=True)
    for key in listed:
        click.echo(f"{key.name}\t{key.role}")
    beside = _environment_keys()
    for key in beside:
        click.echo(f"{key.name}\t{key.role}\t(PITBOSS_KEYS)")
    _warn_of_a_clash(path, beside)


@keys.command("revoke")
@click.option("--name", required=True, multiple=True)
@_keys_file_option()
def keys_revoke(name: tuple[str, ...], keys_file: Path | None) -> None:
    """Remove keys by holder name; the server stops accepting them at once."""
    path = keys_file or default_keys_file(os.environ)
    removed = remove_keys(path, name)
    missing = sorted(set(name) - set(removed))
    for holder in removed:
        click.echo(f"revoked {holder}")
    beside = _environment_keys()
    _warn_of_a_clash(path, beside)
    if missing:
        elsewhere = sorted(set(missing) & {key.name for key in beside})
        raise click.ClickException(
            f"no key named {', '.join(missing)} in {path}"
            + (f"; {', '.join(elsewhere)} in PITBOSS_KEYS, which the service's environment "
               "sets: remove it there" if elsewhere else ""))


def _environment_keys() -> list[ApiKey]:
    """The keys ``PITBOSS_KEYS`` gives here."""
    inline = os.environ.get("PITBOSS_KEYS", "").strip()
    return parse_keys(inline, source="PITBOSS_KEYS") if inline else []


def _warn_of_a_clash(path: Path, beside: list[ApiKey]) -> None:
    """Say so when a service with this environment would refuse the key file beside the keys
    of ``PITBOSS_KEYS`` (it then keeps the keys it had that the file still lists)."""
    if not beside or not path.exists():
        return
    try:
        one_holder_beside(beside, read_keys(path, most=None), path)
    except KeyConfigError as exc:
        click.echo(f"warning: a service with this PITBOSS_KEYS refuses the key file: {exc}; "
                   "it takes no key added to the file until then, and drops those removed",
                   err=True)


# --- simulate and replay ---------------------------------------------------------------------


PROGRESS_LINE_S = 5.0  # off a terminal, the longest a progress line waits for the next


@contextmanager
def _progress(length: int, label: str, *, shown: bool = True,
              clock: Callable[[], float] = time.monotonic) -> Iterator[Callable[[int], None]]:
    """Progress on stderr, told how far the work has reached (as often as it likes: it is
    drawn a thousandth at a time): a bar on a terminal; elsewhere (a log, a pipe), where a bar
    shows nothing until the end, a line at each tenth, and one after ``PROGRESS_LINE_S`` of
    work without (a chain walk of millions of events went silent for minutes)."""
    if not shown or sys.stderr is None:  # none to show it on (2>&-)
        yield lambda _: None
        return
    step = max(1, length // 1000)
    if sys.stderr.isatty():
        with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
            def to_bar(reached: int) -> None:
                if reached - bar.pos >= step or reached >= length > bar.pos:
                    bar.update(min(reached, length) - bar.pos)
            yield to_bar
            bar.render_progress()  # the last update may not have been drawn
        return
    last = {"tenth": 0, "reached": 0, "at": clock()}

    def to_lines(reached: int) -> None:
        tenth = 10 if length <= 0 else min(10, reached * 10 // length)
        now = clock()
        if tenth > last["tenth"] or (reached > last["reached"]
                                     and now - last["at"] >= PROGRESS_LINE_S):
            last.update(tenth=tenth, reached=reached, at=now)
            percent = 100 if length <= 0 else min(100, reached * 100 // length)
            click.echo(f"{label}: {min(reached, length):,} of {length:,} ({percent}%)",
                       err=True)
    click.echo(f"{label}: 0 of {length:,}", err=True)
    yield to_lines


def _api_url(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        try:
            Client(value, "")  # parses the URL, connects to nothing
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


_URL = click.option("--url", default="http://127.0.0.1:8000", envvar="PITBOSS_URL",
                    show_envvar=True, show_default=True, callback=_api_url,
                    help="the API's base URL")


@main.command()
@click.option("--tables", default=1, show_default=True, type=click.IntRange(1, 64))
@click.option("--rounds", default=10, show_default=True, type=click.IntRange(1, 100_000),
              help="rounds per table")
@click.option("--preset", default="casino", show_default=True,
              type=click.Choice(["casino", "wild21", "casino_wild"]))
@_URL
@click.option("--key", "api_keys", multiple=True, envvar="PITBOSS_API_KEYS", show_envvar=True,
              required=True,
              help="a dealer's and a cashier's key (give --key twice; or PITBOSS_API_KEYS, "
              "space-separated, which the process list does not show)")
def simulate(tables: int, rounds: int, preset: str, url: str, api_keys: tuple[str, ...]) -> None:
    """Play rounds through the HTTP API: basic-strategy players, one terminal per table."""
    stop = threading.Event()
    try:
        played = run_simulation(url, list(api_keys), tables=tables, rounds=rounds,
                                preset=preset, progress=True, stop=stop)
    except SimulationStopped as stopped:
        _tables_played(stopped.tables)  # and the rounds left in play, to be finished or voided
        raise
    except SimulationAbandoned as abandoned:  # a second Ctrl-C
        _tables_played(abandoned.tables)
        raise SystemExit(INTERRUPTED_EXIT) from None
    _tables_played(played)
    if stop.is_set():
        raise SystemExit(INTERRUPTED_EXIT)  # stopped by Ctrl-C: not every round asked for played


def _tables_played(tables: list[TablePlay]) -> None:
    for table in tables:
        count = len(table.rounds)
        in_play = table.left_in_play()
        left = f" (left in play: {in_play})" if in_play else ""
        click.echo(f"table {table.name} ({table.table_id or '-'}): {count} round"
                   f"{'' if count == 1 else 's'}, "
                   f"last {table.rounds[-1] if table.rounds else '-'}{left}")


def run_simulation(url: str, api_keys: list[str], *, tables: int, rounds: int, preset: str,
                   progress: bool, stop: threading.Event | None = None) -> list[TablePlay]:
    """Each table plays its rounds in a thread of its own; the bar counts rounds. Ctrl-C (or
    ``stop``), or one table stopped by an error, lets each table finish the round in play and
    play no more; a second Ctrl-C leaves at once, rounds in play left open."""
    stop = stop or threading.Event()
    terminals = []
    for _ in range(tables):
        keys = Keys.discover(url, api_keys)
        terminals.append(TablePlay(keys.dealer, keys.cashier, preset))
    errors: list[BaseException] = []
    failed = threading.Event()  # not ``stop``: that is the caller's (a demo's, its server's)
    done = [0]
    lock = threading.Lock()

    def play(terminal: TablePlay) -> None:
        try:
            terminal.open()
            for _ in range(rounds):
                if stop.is_set() or failed.is_set():
                    break
                terminal.play_round()
                with lock:
                    done[0] += 1
        except BaseException as exc:  # reported by the main thread
            with lock:
                errors.append(exc)
                first = not failed.is_set()
                failed.set()  # said at once, not once every other table has played its rounds
            if first:
                click.echo(f"table {terminal.name} stopped: {exc}; each other table finishes "
                           "the round in play", err=True)
        finally:
            terminal.dealer.close()
            terminal.cashier.close()

    threads = [threading.Thread(target=play, args=(t,), daemon=True) for t in terminals]
    for thread in threads:
        thread.start()
    label = f"{preset}: {tables} table(s) x {rounds} rounds"
    with _progress(tables * rounds, label, shown=progress) as reached:
        while any(t.is_alive() for t in threads):
            try:
                time.sleep(0.1)
                reached(done[0])
            except KeyboardInterrupt:
                if stop.is_set():
                    raise SimulationAbandoned(terminals) from None
                stop.set()
                click.echo("stopping: each table finishes the round in play (Ctrl-C again to "
                           "leave at once, rounds in play left open)", err=True)
        reached(done[0])
    if errors:
        if isinstance(errors[0], Exception):
            raise SimulationStopped(errors[0], terminals) from errors[0]
        raise errors[0]  # (KeyboardInterrupt, SystemExit: as they are)
    return terminals


@main.command()
@click.argument("round_id", type=click.UUID)
@click.option("--url", default=None, show_envvar=True, envvar="PITBOSS_URL", callback=_api_url,
              help="read the replay from this API (with --key) instead of the database")
@click.option("--key", "api_key", default=None, show_envvar=True, envvar="PITBOSS_API_KEY",
              help="an auditor's or a manager's key, with --url (PITBOSS_API_KEY, which the "
              "process list does not show)")
def replay(round_id: UUID, url: str | None, api_key: str | None) -> None:
    """Print a round step by step: every event, by whom and when, and the table after each card.

    Without --url it reads the database directly (as `pitboss db check` finds it).
    """
    if url is not None:
        if not api_key:
            raise click.ClickException("--url needs --key (an auditor's or a manager's key)")
        client = Client(url, api_key)
        try:
            lines = _replay_from_api(client, round_id)
        finally:
            client.close()
    else:
        frames, name = _replay_from_database(round_id)
        lines = render(frames, table_name=name)
    for line in lines:
        click.echo(line)


def _replay_from_api(client: Client, round_id: UUID) -> list[str]:
    """The round's replay as the API at ``client.url`` gives it, as text; refused in a
    sentence if what answered is not the API (a server answering JSON of another shape)."""
    frames = client.get(f"/audit/rounds/{round_id}/replay")
    try:
        if not (isinstance(frames, list) and frames and all(
                isinstance(f, dict) and isinstance(f.get("state"), dict) for f in frames)):
            raise TypeError("not a list of frames")
        table = client.get(f"/tables/{frames[0]['state']['table_id']}")
        return render(frames, table_name=table["name"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise click.ClickException(
            f"the server at {client.url} answered the replay of round {round_id} with "
            f"something else than a replay ({type(exc).__name__}: {exc}): is it the pitboss "
            "API?") from exc


def _replay_from_database(round_id: UUID) -> tuple[list[dict[str, Any]], str | None]:
    """The round's frames, and the name of its table."""
    with _database_ledger() as ledger:
        try:
            frames = ledger.replay(round_id)
            return frames, ledger.table(UUID(frames[0]["state"]["table_id"]))["name"]
        except LedgerError as exc:
            raise click.ClickException(str(exc)) from exc
        except InvariantBroken as exc:
            raise click.ClickException(
                f"the record of round {round_id} does not replay ({exc}): it was altered "
                "behind the ledger, or the ledger has a defect; walk the chain (pitboss "
                "chain) and check the round (GET /audit/rounds/<id>/check)") from exc


@contextmanager
def _database_ledger(settings: DatabaseSettings | None = None, *,
                     shoe_key: bytes | None = None) -> Iterator[GameLedger]:
    """A ledger reading the database directly (as `pitboss db check` finds it, unless
    ``settings`` were found already), creating nothing."""
    settings = settings or _answering_database(existing=True)
    env = ledger_env(settings, os.environ)
    env["CREATE_TABLE"] = "n"
    ledger = GameLedger(env=env, shoe_key=shoe_key)
    try:
        recorder = ledger.recorder
        if isinstance(recorder, LedgerRecorder) and not recorder.table_exists():
            raise click.ClickException(f"{settings.describe()} holds no ledger yet (no table "
                                       f"{recorder.qualified_table}): nothing to read")
        yield ledger
    finally:
        ledger.close()


@main.group()
def shoes() -> None:
    """Live shoes the shoe key does not open, as a lost key leaves them."""


@shoes.command("abandon")
@click.argument("shoe_ids", nargs=-1, type=click.UUID)
@click.option("--reason", required=True, help="why, recorded with each shoe")
@click.option("--by", "actor", required=True, help="who abandons them, recorded as actor")
def shoes_abandon(shoe_ids: tuple[UUID, ...], reason: str, actor: str) -> None:
    """List the live shoes the shoe key does not open; abandon those named (SHOE_IDS).

    An abandoned shoe is retired without its reveal: no card is dealt from it again, its
    table's next round starts a new shoe, and a round in play on it takes no more stakes or
    decisions: a manager voids it, or, its dealer finished, the dealer settles it. Its cards
    can never be checked against its commitment (unless the lost key is found). Run it with the
    service stopped; the shoe key is read, or created, as `pitboss serve` does."""
    settings = _answering_database(existing=True)
    key_file, new_key_file = _shoe_key_file()
    with _database_ledger(settings, shoe_key=load_shoe_key(os.environ)) as ledger:
        if new_key_file and key_file.exists():
            click.echo(f"a new shoe key was created in {key_file}: keep it with the database")
        unopened = ledger.unopened_shoes()
        for shoe in unopened:
            in_play = (f"; round {shoe['round_id']} in play there" if shoe["round_id"]
                       else "")
            click.echo(f"shoe {shoe['shoe_id']} (table {shoe['table']}, shoe "
                       f"{shoe['shoe_no']}, {shoe['position']} of {shoe['size']} cards "
                       f"dealt{in_play}) does not open with this key")
        if not shoe_ids:
            click.echo(f"{len(unopened)} live shoe(s) the shoe key does not open"
                       + (": name those to abandon" if unopened else ""))
            return
        refused = 0
        for shoe_id in dict.fromkeys(shoe_ids):  # each once, named twice or not
            try:
                ledger.abandon_shoe(str(uuid.uuid4()), actor, shoe_id, reason)
            except LedgerError as exc:
                refused += 1
                click.echo(f"shoe {shoe_id} not abandoned: {exc}", err=True)
                continue
            round_id = next((s["round_id"] for s in unopened
                             if s["shoe_id"] == str(shoe_id)), None)
            then = ""
            if round_id is not None:  # what finishes it now, as its round state offers
                legal = {x["decision"] for x in ledger.round_state(UUID(round_id))["legal"]}
                then = (f": the dealer settles round {round_id} (POST /rounds/{round_id}/settle)"
                        if "settle" in legal else
                        f": the dealer plays round {round_id} out, needing no card, and settles "
                        f"it (POST /rounds/{round_id}/dealer, then /settle)"
                        if "play_dealer" in legal else f": a manager voids round {round_id} "
                        f"(POST /rounds/{round_id}/void)")
            click.echo(f"shoe {shoe_id} abandoned{then}")
        if refused:
            raise click.exceptions.Exit(1)


def _head_hash(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None and re.fullmatch(HEAD_PATTERN, value) is None:
        raise click.BadParameter("a head hash is 64 lowercase hexadecimal digits")
    return value


@main.command()
@click.option("--expected-head", default=None, callback=_head_hash,
              help="a head kept outside the database (GET /audit/chain/head)")
@click.option("--expected-at", default=None, type=click.IntRange(min=1),
              help="the notification id it was taken at; without it, the walk looks for the "
                   "kept head at every event")
@click.option("--after", "start", default=0, type=click.IntRange(min=0),
              help="walk from the event after this notification id, taking the link stored "
                   "there on trust (a walk interrupted says where to go on from)")
def chain(expected_head: str | None, expected_at: int | None, start: int) -> None:
    """Walk the event store's hash chain in the database, every event recomputed against its
    link, with a progress bar. Exits with status 1 if the record was altered, 2 for options it
    cannot use (an --after that is no event's id, or past --expected-at), 3 if the chain
    could not be walked (the database does not answer, or holds no ledger, or Ctrl-C)."""
    if expected_at is not None and expected_head is None:
        raise click.UsageError("--expected-at names where --expected-head was taken: give both")
    if expected_head is not None and expected_at is None and start:
        raise click.UsageError("--expected-head without --expected-at is looked for from the "
                               "first event: a walk --after a later one could not tell a head "
                               "kept before it from an altered record; give --expected-at")
    with _database_ledger() as ledger:
        recorder = ledger.recorder
        if not isinstance(recorder, LedgerRecorder):
            raise click.ClickException("the ledger does not store in PostgreSQL")
        last_id, _ = chain_head(recorder)
        try:  # refused before the progress shows a walk begun
            chain_start(recorder, after=start, expected_head=expected_head,
                        expected_at=expected_at)
        except QueryRefused as refused:
            raise click.UsageError(str(refused)) from None
        kept_head, kept_at = expected_head, expected_at
        rows = altered = 0
        with _progress(last_id, "walking the chain") as reached:
            after: int | None = start
            try:
                # In parts, each reported as it ends: what a walk stopped midway found is
                # printed, and it goes on from the end of the last part reported.
                while after is not None:
                    report = verify_chain(recorder, after=after, limit=CHAIN_PART_ROWS,
                                          expected_head=expected_head, expected_at=expected_at,
                                          on_row=reached)
                    rows += report.rows
                    altered += len(report.findings)
                    # Said at once: a reader gone from here on does not make it unsaid.
                    click.get_current_context().meta[CHAIN_ALTERED] = bool(altered)
                    for finding in report.findings:
                        click.echo(f"BROKEN: {finding}")
                    if report.kept_head_checked and expected_head is not None:
                        kept_at = report.kept_head_at
                        expected_head = expected_at = None  # compared: later parts lie past it
                    after = report.next_after
                if expected_head is not None and expected_at is None:  # looked for from the
                    # first event, part after part, and never found
                    altered += 1
                    click.get_current_context().meta[CHAIN_ALTERED] = True
                    click.echo(f"BROKEN: {kept_head_unfound(expected_head)}")
            except QueryRefused as refused:
                raise click.UsageError(str(refused)) from None
            except KeyboardInterrupt:
                still = "" if expected_head is None else " and the same --expected-head" + (
                    "" if expected_at is None else " and --expected-at")
                click.echo(f"stopped: checked up to notification {after:,}; go on with pitboss "
                           f"chain --after {after}{still}", err=True)
                if altered:
                    raise SystemExit(1) from None  # what was found stands
                raise
            reached(last_id)
    click.echo(f"{rows:,} events checked, up to notification {report.head_notification_id}"
               + ("" if altered else f"; head {report.head}"))
    for warning in report.warnings:
        click.echo(f"WARNING: {warning}")
    if altered:
        raise SystemExit(1)
    kept = "" if kept_head is None else (
        f": the link at notification {kept_at} is the one kept outside (the record up to it"
        + ("" if start == 0 else f", from notification {start} on,")
        + " is as it was when the head was kept)")
    part = "" if start == 0 else (
        f" after notification {start} (the link stored there taken on trust: the events up to "
        "it were not checked)")
    click.echo("intact" + part + kept)


# --- the demo of `make run` ------------------------------------------------------------------

DEMO_ROLES = ("auditor", "dealer", "cashier", "manager")
HEALTH_WAIT_S = 60.0
STOP_WAIT_S = 40.0  # longer than gunicorn's graceful_timeout (deploy/gunicorn.conf.py)


@main.command()
@click.option("--host", default="127.0.0.1", envvar="PITBOSS_HOST", show_envvar=True,
              show_default=True)
@click.option(
    "--port", default=8000, envvar="PORT", show_envvar=True, show_default=True,
    type=click.IntRange(1, 65535),
)
@click.option("--rounds", default=5, show_default=True, type=click.IntRange(0, 1000),
              help="rounds to simulate at the demo table when the database is empty")
@click.option("--external-database", is_flag=True,
              help="run on the database DATABASE_URL (or POSTGRES_HOST) names, not only on the "
                   "embedded one: its demo rounds, buy-ins and keys stay there")
def demo(host: str, port: int, rounds: int, external_database: bool) -> None:
    """Serve the API and run the projection worker; on an empty database, add a demo table.

    New demo keys (demo-auditor, demo-dealer, demo-cashier, demo-manager) replace the last
    run's in the key file, and are printed. Ctrl-C stops everything. It runs on the embedded
    database unless told otherwise (``--external-database``).
    """
    # Before anything: another server on the port would answer the health check as this one.
    host = _check_serving(host, port)
    # A shell with a service's variables exported would play demo rounds into its ledger,
    # for good, and give a demo manager's key to its key file.
    external = external_database_named(os.environ)
    if external is not None and not external_database:
        raise click.ClickException(
            f"the demo plays rounds with demo buy-ins into its database and adds demo keys (a "
            f"manager's among them) to its key file, and DATABASE_URL or POSTGRES_HOST names "
            f"{external}: unset them to run on the embedded database, or give "
            "--external-database to run the demo there")
    demo_names = [f"demo-{role}" for role in DEMO_ROLES]
    taken = sorted({key.name for key in _environment_keys()} & set(demo_names))
    if taken:  # the server would refuse the key file beside them (one holder per name)
        names = "a name" if len(taken) == 1 else "names"
        raise click.ClickException(f"PITBOSS_KEYS names {', '.join(taken)}, {names} the demo "
                                   "gives its own keys: remove them there, or unset "
                                   "PITBOSS_KEYS")
    settings, head = prepare_service()
    empty = head == 0
    keys_path = default_keys_file(os.environ)
    remove_keys(keys_path, demo_names)
    demo_keys = {role: append_key(keys_path, f"demo-{role}", role) for role in DEMO_ROLES}
    env = {**os.environ, "DATABASE_URL": settings.url(), "PITBOSS_KEYS_FILE": str(keys_path),
           "PITBOSS_CREATE_TABLES": "no", "PORT": str(port), "PITBOSS_HOST": host}
    # Each child in a process group of its own (gunicorn's workers with its master): stopped
    # as a group, none is left behind holding the port.
    children = [subprocess.Popen([sys.executable, "-m", "api.cli", "serve"], env=env,
                                 start_new_session=True)]
    stop = threading.Event()
    url = f"http://{bind_address(host, port)}"
    ready = False
    try:
        with _stopping_on_signals(stop):
            _wait_for_health(url, children[0], stop)
            children.append(subprocess.Popen([sys.executable, "-m", "api.cli", "project"],
                                             env=env, start_new_session=True))
            if empty and rounds and not stop.is_set():
                run_simulation(url, [demo_keys["dealer"], demo_keys["cashier"]], tables=1,
                               rounds=rounds, preset="casino", progress=True, stop=stop)
            # Asked to stop before this (Ctrl-C during the demo rounds), it serves no more.
            ready = not stop.is_set()
            if ready:
                _announce(url, demo_keys)
            while not stop.is_set() and all(c.poll() is None for c in children):
                stop.wait(0.5)
    finally:
        stop_groups(children, wait_s=STOP_WAIT_S)
    failed = [c for c in children if c.returncode not in (0, -signal.SIGTERM)]
    if failed and not stop.is_set():
        raise click.ClickException(f"{failed[0].args!r} stopped unexpectedly")
    if not ready:
        click.echo("stopped before the demo was ready: nothing is served (demo rounds played "
                   "so far stay in the database; the next start plays them only on a database "
                   "still empty)", err=True)
        raise SystemExit(INTERRUPTED_EXIT)


def stop_groups(children: list[subprocess.Popen[bytes]], *, wait_s: float) -> None:
    """Ask each child's process group to stop (SIGTERM: gunicorn stops gracefully), and kill
    what is left of a group after ``wait_s`` seconds: a worker gunicorn could not stop in its
    own graceful timeout would otherwise outlive its master, and keep the port."""
    for child in children:
        _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    for child in children:
        with suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        _signal_group(child, signal.SIGKILL)  # the master's workers too, if any remain
        child.wait()


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def _wait_for_health(url: str, server: subprocess.Popen[bytes], stop: threading.Event) -> None:
    deadline = time.monotonic() + HEALTH_WAIT_S
    while time.monotonic() < deadline and not stop.is_set():
        if server.poll() is not None:
            raise click.ClickException("the API server did not start (see its log above)")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        stop.wait(0.2)
    if not stop.is_set():
        raise click.ClickException(f"{url}/healthz did not answer within {HEALTH_WAIT_S:.0f} s")


def _announce(url: str, demo_keys: dict[str, str]) -> None:
    lines = [
        "",
        f"pitboss is serving on {url}",
        f"  interactive docs  {url}/docs   (OpenAPI document: {url}/openapi.json)",
        *(f"  {role:<8} key      {key}" for role, key in demo_keys.items()),
        "",
        "  for example:",
        f"  curl -H 'Authorization: Bearer {demo_keys['auditor']}' {url}/whoami",
        "",
        "Ctrl-C stops the server and the projection worker (the database keeps running;",
        "`make db-stop` stops it).",
    ]
    click.echo("\n".join(lines), err=True)


if __name__ == "__main__":
    main()

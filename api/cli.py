"""The ``pitboss`` command line."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from api.database import (
    DEFAULT_DATA_DIR,
    DatabaseSetupError,
    check_database,
    resolve_database,
    stop_embedded,
)

# deploy/ sits next to the packages in a source checkout (the editable install of `make run`).
_REPO_GUNICORN_CONFIG = Path(__file__).resolve().parent.parent / "deploy" / "gunicorn.conf.py"
WSGI_APP = "api.wsgi:app"


@click.group()
@click.option(
    "--log-level",
    default="INFO",
    envvar="PITBOSS_LOG_LEVEL",
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


@main.command()
@click.option("--host", default="127.0.0.1", envvar="PITBOSS_HOST", show_default=True)
@click.option(
    "--port", default=8000, envvar="PORT", show_default=True, type=click.IntRange(1, 65535)
)
@click.option(
    "--workers", default=2, envvar="WEB_CONCURRENCY", show_default=True, type=click.IntRange(1, 64)
)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="gunicorn configuration file [default: deploy/gunicorn.conf.py of the checkout]",
)
def serve(host: str, port: int, workers: int, config_file: Path | None) -> None:
    """Serve the API with gunicorn (starting the embedded PostgreSQL if none is configured)."""
    try:
        # Resolve once, here, so the embedded server starts once and not in every worker.
        settings = resolve_database(os.environ)
        check_database(settings, timeout_s=settings.connect_timeout_s)
    except DatabaseSetupError as exc:
        raise click.ClickException(str(exc)) from exc
    os.environ["DATABASE_URL"] = settings.url()
    if config_file is None and _REPO_GUNICORN_CONFIG.is_file():
        config_file = _REPO_GUNICORN_CONFIG
    argv = gunicorn_argv(host=host, port=port, workers=workers, config_file=config_file)
    click.echo(f"serving on http://{bind_address(host, port)} ({settings.masked()})", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gunicorn_argv(*, host: str, port: int, workers: int, config_file: Path | None) -> list[str]:
    """The gunicorn command line; command-line options override the config file."""
    argv = [sys.executable, "-m", "gunicorn"]
    if config_file is not None:
        argv += ["--config", str(config_file)]
    argv += ["--bind", bind_address(host, port), "--workers", str(workers), WSGI_APP]
    return argv


@main.group()
def db() -> None:
    """The database: check which one is in use, stop the embedded one."""


@db.command("check")
def db_check() -> None:
    """Resolve the database (starting the embedded one if needed) and run ``select 1``."""
    try:
        settings = resolve_database(os.environ)
        check_database(settings, timeout_s=settings.connect_timeout_s)
    except DatabaseSetupError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"ok: {settings.masked()} (from {settings.source})")


@db.command("stop")
@click.option(
    "--data-dir",
    default=str(DEFAULT_DATA_DIR),
    envvar="PITBOSS_DATA_DIR",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
)
def db_stop(data_dir: Path) -> None:
    """Stop the embedded PostgreSQL that keeps running in the data folder."""
    if stop_embedded(data_dir):
        click.echo(f"stopped the embedded PostgreSQL in {data_dir}")
    else:
        click.echo(f"no embedded PostgreSQL running in {data_dir}")

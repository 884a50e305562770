"""The ``pitboss`` command line, short of starting a server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from api import cli
from api.cli import gunicorn_argv, main


def test_serve_runs_gunicorn_on_the_wsgi_app_with_the_bind_address():
    argv = gunicorn_argv(
        host="127.0.0.1", port=8001, workers=3, threads=5,
        config_file=Path("deploy/gunicorn.conf.py")
    )
    assert argv[:3] == [sys.executable, "-m", "gunicorn"]
    assert argv[argv.index("--config") + 1] == "deploy/gunicorn.conf.py"
    assert argv[argv.index("--bind") + 1] == "127.0.0.1:8001"
    assert argv[argv.index("--workers") + 1] == "3"
    assert argv[argv.index("--threads") + 1] == "5"
    assert argv[-1] == "api.wsgi:app"


def test_an_ipv6_bind_address_is_bracketed():
    argv = gunicorn_argv(host="::1", port=8000, workers=1, threads=1, config_file=None)
    assert "--config" not in argv
    assert argv[argv.index("--bind") + 1] == "[::1]:8000"


def test_serve_refuses_a_malformed_database_url_with_a_clear_message():
    result = CliRunner().invoke(main, ["serve"], env={"DATABASE_URL": "mysql://bob:s3cret@db/x"})
    assert result.exit_code == 1
    assert "DATABASE_URL must start with postgresql://" in result.output
    assert "s3cret" not in result.output


def test_progress_off_a_terminal_gives_a_line_at_each_tenth_and_after_a_long_silence(
        capsys: pytest.CaptureFixture[str]) -> None:
    # A chain walk of millions of events, off a terminal, went silent for minutes between
    # two tenths: a line also comes when PROGRESS_LINE_S passed since the last one.
    now = [0.0]
    with cli._progress(1000, "walking", clock=lambda: now[0]) as reached:
        reached(50)  # quickly: no line
        now[0] += cli.PROGRESS_LINE_S
        reached(60)  # after the silence: a line
        now[0] += cli.PROGRESS_LINE_S
        reached(60)  # nothing more done: no line
        reached(100)  # a tenth: a line
        now[0] += cli.PROGRESS_LINE_S / 2
        reached(150)
        reached(1000)
    assert capsys.readouterr().err.splitlines() == [
        "walking: 0 of 1,000", "walking: 60 of 1,000 (6%)", "walking: 100 of 1,000 (10%)",
        "walking: 1,000 of 1,000 (100%)"]

"""The ``pitboss`` command line, short of starting a server."""

from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

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

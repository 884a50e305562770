"""Choosing the database from the environment, without starting or reaching one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.database import (
    DEFAULT_PORT,
    DatabaseConfigError,
    DatabaseSettings,
    embedded_data_dir,
    external_database_configured,
    parse_database_url,
    resolve_database,
)

SECRET = "s3cret"


def test_a_url_gives_every_part():
    settings = parse_database_url("postgresql://bob:s3cret@db.example:6543/ledger")
    assert (settings.host, settings.port, settings.dbname, settings.user) == (
        "db.example",
        6543,
        "ledger",
        "bob",
    )
    assert settings.password == SECRET
    assert settings.source == "DATABASE_URL"


def test_the_short_scheme_and_the_default_port_are_accepted():
    settings = parse_database_url("postgres://bob@db.example/ledger")
    assert settings.port == DEFAULT_PORT
    assert settings.password == ""


def test_the_database_name_defaults_to_the_user_name():
    assert parse_database_url("postgresql://bob@db.example").dbname == "bob"


def test_a_socket_folder_comes_from_the_host_parameter():
    settings = parse_database_url("postgresql://postgres:@/postgres?host=/tmp/pg")
    assert settings.host == "/tmp/pg"
    assert settings.is_unix_socket
    assert settings.password == ""
    # Named in messages as a folder, not as a host with a port ("/tmp/pg:5432/postgres").
    assert settings.describe() == "/tmp/pg (database postgres)"
    assert parse_database_url("postgresql://u@/x?host=/tmp/pg&port=5433").describe() == \
        "/tmp/pg (database x, port 5433)"
    assert parse_database_url("postgresql://u@db.example/x").describe() == "db.example:5432/x"


def test_percent_encoded_credentials_are_decoded():
    settings = parse_database_url("postgresql://b%40b:p%3Aw%2Fd%23@[::1]:5433/led%20ger")
    assert (settings.user, settings.password, settings.host, settings.dbname) == (
        "b@b",
        "p:w/d#",
        "::1",
        "led ger",
    )


@pytest.mark.parametrize(
    "url",
    [
        "mysql://bob:s3cret@db.example/ledger",
        "bob:s3cret@db.example/ledger",
        "postgresql://bob:s3cret@db.example:port/ledger",
        "postgresql://bob:s3cret@db.example:70000/ledger",
        "postgresql://bob:s3cret@[::1/ledger",
        "postgresql://bob:s3cret@a,b/ledger",
        "postgresql://bob:s3#cret@db.example/ledger",
        "postgresql://bob:s3/cret@db.example/ledger",
        "postgresql://bob:s3cret@db.example/ledger?sslmode",
        "postgresql://bob:s3?cret=1@db.example/ledger",
        "postgresql://bob:s3cret@db.example/ledger?host=/tmp&x",
        "postgresql://bob:s3cret@/ledger",
        "postgresql://:s3cret@db.example/ledger",
    ],
)
def test_a_malformed_url_is_refused_without_showing_the_password(url):
    with pytest.raises(DatabaseConfigError) as caught:
        parse_database_url(url)
    assert "s3cret" not in str(caught.value)


def test_an_unsupported_url_parameter_is_named():
    with pytest.raises(DatabaseConfigError, match="sslmode"):
        parse_database_url("postgresql://bob@db.example/ledger?sslmode=require")


_TEXT = st.text(st.characters(exclude_characters="\x00", codec="utf-8"), min_size=1, max_size=20)
_HOSTS = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){0,2}", fullmatch=True),
    st.just("::1"),
    st.from_regex(r"/[a-zA-Z0-9_ .&=-]{1,20}(/[a-zA-Z0-9_.-]{1,10}){0,2}", fullmatch=True),
)


@given(
    user=_TEXT,
    password=st.one_of(st.just(""), _TEXT),
    dbname=_TEXT,
    host=_HOSTS,
    port=st.integers(1, 65535),
)
def test_url_round_trips(user, password, dbname, host, port):
    settings = DatabaseSettings(host=host, port=port, dbname=dbname, user=user, password=password)
    assert parse_database_url(settings.url()) == settings


def test_the_password_is_masked_everywhere_it_could_be_shown():
    settings = parse_database_url("postgresql://bob:s3cret@db.example/ledger")
    assert settings.masked() == "postgresql://bob:***@db.example:5432/ledger"
    assert str(settings) == settings.masked()
    assert SECRET not in repr(settings)
    assert SECRET not in settings.describe()


def test_a_socket_url_is_masked_too():
    settings = DatabaseSettings(host="/tmp/pg", port=5432, dbname="postgres", user="postgres",
                                password=SECRET)
    assert settings.masked() == "postgresql://postgres:***@/postgres?host=/tmp/pg"


def test_a_url_without_a_password_shows_none_masked():
    # The embedded server's: "postgres:***@" had a reader look for a password never set.
    settings = DatabaseSettings(host="/tmp/pg", port=5432, dbname="postgres", user="postgres")
    assert settings.masked() == "postgresql://postgres@/postgres?host=/tmp/pg"


def test_the_eventsourcing_environment_names_the_postgres_module_and_limits():
    env = parse_database_url("postgresql://bob:s3cret@db.example/ledger").eventsourcing_env()
    assert env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"
    assert (env["POSTGRES_HOST"], env["POSTGRES_PORT"], env["POSTGRES_DBNAME"]) == (
        "db.example",
        "5432",
        "ledger",
    )
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]) == ("bob", SECRET)
    assert int(env["POSTGRES_LOCK_TIMEOUT"]) > 0
    assert int(env["POSTGRES_STATEMENT_TIMEOUT"]) > int(env["POSTGRES_LOCK_TIMEOUT"])
    assert int(env["POSTGRES_POOL_SIZE"]) > 0
    assert int(env["POSTGRES_MAX_WAITING"]) > 0
    assert env["POSTGRES_ENABLE_DB_FUNCTIONS"] == "n"


def test_database_url_wins_over_postgres_variables():
    environ = {"DATABASE_URL": "postgresql://bob@url.example/a", "POSTGRES_HOST": "other"}
    assert resolve_database(environ).host == "url.example"


def test_postgres_variables_are_used_when_there_is_no_url():
    environ = {
        "POSTGRES_HOST": "db.example",
        "POSTGRES_PORT": "6543",
        "POSTGRES_DBNAME": "ledger",
        "POSTGRES_USER": "bob",
        "POSTGRES_PASSWORD": SECRET,
    }
    settings = resolve_database(environ)
    assert (settings.host, settings.port, settings.dbname, settings.user) == (
        "db.example",
        6543,
        "ledger",
        "bob",
    )
    assert settings.source == "POSTGRES_*"


def test_incomplete_postgres_variables_name_what_is_missing():
    with pytest.raises(DatabaseConfigError, match="POSTGRES_DBNAME, POSTGRES_USER"):
        resolve_database({"POSTGRES_HOST": "db.example", "POSTGRES_PASSWORD": SECRET})


def test_limit_variables_override_the_defaults():
    environ = {"DATABASE_URL": "postgresql://bob@db.example/a", "POSTGRES_POOL_SIZE": "7"}
    assert resolve_database(environ).pool_size == 7


def test_a_malformed_limit_is_refused():
    environ = {"DATABASE_URL": "postgresql://bob@db.example/a", "POSTGRES_LOCK_TIMEOUT": "soon"}
    with pytest.raises(DatabaseConfigError, match="POSTGRES_LOCK_TIMEOUT"):
        resolve_database(environ)


@pytest.mark.parametrize("variable", ["POSTGRES_LOCK_TIMEOUT", "POSTGRES_MAX_WAITING",
                                      "POSTGRES_STATEMENT_TIMEOUT",
                                      "LEDGER_POSTGRES_STATEMENT_TIMEOUT"])
def test_a_limit_of_zero_meaning_unlimited_is_refused(variable):
    environ = {"DATABASE_URL": "postgresql://bob@db.example/a", variable: "0"}
    with pytest.raises(DatabaseConfigError, match=variable):
        resolve_database(environ)


@pytest.mark.parametrize("variable", ["CREATE_TABLE", "PROJECTIONS_POSTGRES_PRE_PING",
                                      "LEDGER_CREATE_TABLE", "PROJECTIONS_CREATE_TABLE",
                                      "LEDGER_POSTGRES_PRE_PING"])
def test_a_yes_or_no_setting_is_refused_with_a_sentence_unless_yes_or_no(variable):
    # The eventsourcing library would stop the start with a traceback of its own.
    environ = {"DATABASE_URL": "postgresql://bob@db.example/a", variable: "maybe"}
    with pytest.raises(DatabaseConfigError, match=f"{variable} is yes or no.*'maybe'"):
        resolve_database(environ)
    for word in ("n", "No", "TRUE", "1", ""):
        resolve_database({**environ, variable: word})


@pytest.mark.parametrize(("variable", "value"), [
    ("PROJECTIONS_POSTGRES_POOL_SIZE", "abc"), ("LEDGER_POSTGRES_MAX_OVERFLOW", "-1"),
    ("PROJECTIONS_POSTGRES_CONNECT_TIMEOUT", "0"), ("LEDGER_POSTGRES_POOL_SIZE", "1e3")])
def test_the_ledgers_and_read_models_own_limits_are_refused_under_their_own_names(variable,
                                                                                  value):
    # The library named them without their prefix ("key 'POSTGRES_POOL_SIZE' is invalid").
    environ = {"DATABASE_URL": "postgresql://bob@db.example/a", variable: value}
    with pytest.raises(DatabaseConfigError, match=f"^{variable} must be a whole number from "):
        resolve_database(environ)
    resolve_database({**environ, variable: "3"})


def test_resolving_logs_the_masked_url(caplog):
    with caplog.at_level(logging.INFO, logger="pitboss.database"):
        resolve_database({"DATABASE_URL": "postgresql://bob:s3cret@db.example/ledger"})
    assert "postgresql://bob:***@db.example:5432/ledger" in caplog.text
    assert SECRET not in caplog.text


def test_only_connection_variables_count_as_configuration():
    assert not external_database_configured({"POSTGRES_POOL_SIZE": "3", "DATABASE_URL": " "})
    assert external_database_configured({"POSTGRES_USER": "bob"})


def test_a_data_folder_too_deep_for_a_socket_is_refused():
    too_deep = Path("/tmp", "x" * 120)
    with pytest.raises(DatabaseConfigError, match="PITBOSS_DATA_DIR"):
        embedded_data_dir(too_deep)
    assert not too_deep.exists()


def test_the_data_folder_is_made_absolute():
    assert embedded_data_dir("var/pgdata") == Path.cwd().resolve() / "var" / "pgdata"


def test_the_librarys_own_storage_settings_in_the_environment_change_nothing(monkeypatch):
    # Read from the whole process environment, a stray one compressed or encrypted the events
    # of one process only, and every tool without it then called the record altered.
    from ledger.application import GameLedger
    from ledger.transcoding import CheckedMapper, LedgerTranscoder

    for name, value in {"COMPRESSOR_TOPIC": "eventsourcing.compressor:ZlibCompressor",
                        "LEDGER_CIPHER_TOPIC": "eventsourcing.cipher:AESCipher",
                        "CIPHER_KEY": "a" * 44, "LEDGER_MAPPER_TOPIC": "eventsourcing:nothing",
                        "TRANSCODER_TOPIC": "eventsourcing:nothing",
                        "LEDGER_IS_SNAPSHOTTING_ENABLED": "n"}.items():
        monkeypatch.setenv(name, value)
    env = parse_database_url("postgresql://u:p@h/d").eventsourcing_env()
    ledger = GameLedger(env={**env, "PERSISTENCE_MODULE": "eventsourcing.popo"})
    assert (ledger.mapper.compressor, ledger.mapper.cipher) == (None, None)
    assert type(ledger.mapper) is CheckedMapper
    assert type(ledger.mapper.transcoder) is LedgerTranscoder
    assert ledger.snapshots is not None
    ledger.close()


def test_a_ledger_without_snapshots_saves_the_event_a_snapshot_would_follow():
    # Snapshotting turned off, the 200th event of an account (when one is due) failed a bare
    # assertion.
    from ledger.application import GameLedger

    ledger = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo",
                             "IS_SNAPSHOTTING_ENABLED": "n"})
    assert ledger.snapshots is None
    ledger.open_account("a", "cashier", "P1")
    for n in range(200):
        ledger.buy_in(f"b{n}", "cashier", "P1", 1)
    assert ledger.balance("P1")["available"] == 200
    ledger.close()

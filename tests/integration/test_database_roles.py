"""deploy/postgres-roles.sql, applied as written: the service appends events only through
the ledger's insert function, the auditor only reads.

The file's grants run against a fresh schema (its roles renamed for this test), the tables
created by the session's superuser standing in for ``pitboss_owner``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from eventsourcing.persistence import ProgrammingError as PersistenceProgrammingError

from api.app import ledger_env
from api.cli import main
from api.database import DatabaseSettings
from api.services import prepare_store
from ledger.application import GameLedger
from ledger.rules import CASINO
from ledger.sealing import ShoeSealer
from ledger.storage import LedgerRecorder, verify_chain
from projections.engine import Engine
from projections.rebuild import rebuild
from projections.settings import ProjectionSetupError
from projections.worker import run_worker

ROLES_FILE = Path(__file__).parents[2] / "deploy" / "postgres-roles.sql"
Env = dict[str, str]


def grants(schema: str, names: dict[str, str]) -> list[str]:
    """The file's statements after the tables exist (GRANT, ALTER DEFAULT PRIVILEGES and the
    DO block granting the projection tables), for ``schema`` and the renamed roles."""
    text = re.sub(r"--[^\n]*", "", ROLES_FILE.read_text())
    text = (text.replace("pitboss.", f'"{schema}".').replace("SCHEMA pitboss", f'SCHEMA "{schema}"')
            .replace("'pitboss'", f"'{schema}'"))
    for role, renamed in names.items():
        text = text.replace(role, renamed)
    # Statements end at a semicolon outside $$ quotes (a DO block's body holds its own).
    parts = text.split("$$")
    pieces = [part.split(";") if n % 2 == 0 else [part] for n, part in enumerate(parts)]
    statements, current = [], ""
    for n, split in enumerate(pieces):
        current += ("$$" if n else "") + split[0]
        for rest in split[1:]:
            statements.append(current)
            current = rest
    statements = [" ".join(s.split()) for s in [*statements, current] if s.strip()]
    return [s for s in statements if s.startswith(("GRANT", "ALTER DEFAULT", "DO"))]


@pytest.fixture
def roles(database: DatabaseSettings, postgres_env: Any) -> Iterator[tuple[Env, dict[str, str]]]:
    env: Env = postgres_env()
    GameLedger(env=env).close()  # the tables, made by the owner
    tag = uuid.uuid4().hex[:8]
    names = {f"pitboss_{r}": f"pb_{r}_{tag}" for r in ("owner", "service", "auditor")}
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {names['pitboss_owner']} NOLOGIN")
        for role in ("service", "auditor"):
            conn.execute(f"CREATE ROLE {names[f'pitboss_{role}']} LOGIN")
        for statement in grants(env["POSTGRES_SCHEMA"], names):
            conn.execute(statement)
    yield env, names
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        for role in names.values():
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_the_file_run_again_takes_back_what_an_earlier_version_granted_beyond_it(
        roles: tuple[Env, dict[str, str]], database: DatabaseSettings) -> None:
    # An earlier version granted the service INSERT on the event table: kept through an
    # upgrade, it let the service append around the insert function, its lock and its ids.
    env, names = roles
    service = names["pitboss_service"]
    events = f'"{env["POSTGRES_SCHEMA"]}".ledger_events'
    sequence = f"pg_get_serial_sequence('{events}', 'notification_id')"
    ledger = GameLedger(env=env)
    recorder = ledger.recorder
    assert isinstance(recorder, LedgerRecorder)
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f"GRANT INSERT, UPDATE, DELETE ON {events} TO {service}")
        (name,) = conn.execute(f"SELECT {sequence}").fetchone() or (None,)
        conn.execute(f"GRANT USAGE ON SEQUENCE {name} TO {service}")
        # The chain walk says so.
        assert verify_chain(recorder).warnings == [inserting(f"the role {service}")]
        for statement in grants(env["POSTGRES_SCHEMA"], names):
            conn.execute(statement)
    assert verify_chain(recorder).warnings == []
    # A grant on the columns, and the built-in role that may write every table, insert too.
    auditor, writer = names["pitboss_auditor"], f"pb_writer_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f"GRANT INSERT (topic, state) ON {events} TO {auditor}")
        conn.execute(f"CREATE ROLE {writer} IN ROLE pg_write_all_data")
        try:
            assert verify_chain(recorder).warnings == [
                inserting(f"the role {role}") for role in sorted([auditor, writer])]
        finally:
            conn.execute(f"DROP ROLE {writer}")
        conn.execute(f"REVOKE INSERT (topic, state) ON {events} FROM {auditor}")
        # A member of the owner's role, inheriting nothing, may still SET ROLE to it: it was
        # not named.
        owner = names["pitboss_owner"]
        conn.execute(f"ALTER TABLE {events} OWNER TO {owner}")
        conn.execute(f"GRANT {owner} TO {auditor} WITH INHERIT FALSE")
        try:
            assert verify_chain(recorder).warnings == [
                f"the role {auditor} may act as the event table's owner (a member of the "
                "owner's role): it may disable the refusing triggers and write the table as it "
                "likes: take the membership back"]
        finally:
            conn.execute(f"REVOKE {owner} FROM {auditor}")
            conn.execute(f"ALTER TABLE {events} OWNER TO {database.user}")
        # A grant to PUBLIC (to every role, those made later too) is said as such.
        for grant in (f"INSERT ON {events}", f"INSERT (state) ON {events}"):
            conn.execute(f"GRANT {grant} TO PUBLIC")
            try:
                assert verify_chain(recorder).warnings == [inserting("every role (PUBLIC)")]
            finally:
                conn.execute(f"REVOKE {grant} FROM PUBLIC")
    assert verify_chain(recorder).warnings == []
    ledger.close()
    with as_role(database, service) as conn:
        for statement in (f"INSERT INTO {events} (originator_id, originator_version, topic, "
                          "state, chain_hash) VALUES (gen_random_uuid(), 1, 'x', 'x', 'x')",
                          f"SELECT nextval({sequence})"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        assert conn.execute(f"SELECT count(*) FROM {events}").fetchone() == (0,)


def inserting(who: str) -> str:
    """The chain walk's warning of ``who`` may insert into the event table."""
    return (f"{who} may INSERT into the event table directly, around the insert function and "
            "its append lock: revoke it (deploy/postgres-roles.sql does for the service and "
            "auditor roles)")


def _must_not_start(*_: object) -> None:
    raise AssertionError("serve went on to start gunicorn")


def as_role(database: DatabaseSettings, role: str) -> psycopg.Connection[Any]:
    conninfo = database.conninfo().replace(f"user={database.user}", f"user={role}")
    return psycopg.connect(conninfo, autocommit=True)


def test_the_service_role_records_rounds_but_cannot_write_around_the_ledger(
        roles: tuple[Env, dict[str, str]], database: DatabaseSettings) -> None:
    env, names = roles
    service, auditor = names["pitboss_service"], names["pitboss_auditor"]
    ledger = GameLedger(env={**env, "POSTGRES_USER": service, "CREATE_TABLE": "n"},
                        shoe_key=ShoeSealer.new_key())
    try:
        table = ledger.open_table("t", "boss", "T1", CASINO)
        ledger.open_account("a", "cashier", "P1")
        ledger.buy_in("b", "cashier", "P1", 500)
        r = ledger.start_round("s", "dealer", table)
        ledger.place_stake("p1", "dealer", r, "P1", 1, 50)
        ledger.place_stake("p2", "dealer", r, "P1", 2, 50)
        ledger.deal("d", "dealer", r)
        balance = ledger.balance("P1")
        assert (balance["available"], balance["held"]) == (400, 100)  # naturals settle last
        recorder = ledger.recorder
        assert isinstance(recorder, LedgerRecorder)
        assert verify_chain(recorder).intact
    finally:
        ledger.close()
    events = f'"{env["POSTGRES_SCHEMA"]}".ledger_events'
    insert_function = f'"{env["POSTGRES_SCHEMA"]}".ledger_events_insert'
    with as_role(database, service) as conn:
        for statement in (f"INSERT INTO {events} (originator_id, originator_version, topic, "
                          f"state, chain_hash) VALUES (gen_random_uuid(), 1, 'x', 'x', 'x')",
                          f"UPDATE {events} SET topic = topic",
                          f"DELETE FROM {events}",
                          # nor take notification ids, leaving gaps readers would wait on
                          f"SELECT nextval(pg_get_serial_sequence('{events}', "
                          "'notification_id'))"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    with as_role(database, auditor) as conn:
        rows = conn.execute(f"SELECT count(*) FROM {events}").fetchone()
        assert rows is not None
        assert rows[0] > 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT * FROM {insert_function}(%s, %s, %s, %s)",
                         ([uuid.uuid4()], [1], ["x"], [b"x"]))


def test_a_rebuilt_read_model_keeps_the_grants_of_the_one_it_replaced(
        roles: tuple[Env, dict[str, str]], database: DatabaseSettings) -> None:
    env, names = roles
    service, auditor = names["pitboss_service"], names["pitboss_auditor"]
    schema = env["POSTGRES_SCHEMA"]
    Engine(env).close()  # the projection tables, made by the owner
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        for statement in grants(schema, names):  # as the roles file says, once they exist
            if statement.startswith("DO"):
                conn.execute(statement)
    ledger = GameLedger(env=env, shoe_key=ShoeSealer.new_key())
    try:
        ledger.open_account("a", "cashier", "P1")
        ledger.buy_in("b", "cashier", "P1", 500)
        rebuild(env, "balances")  # as the owner
        ledger.buy_in("c", "cashier", "P1", 200)
    finally:
        ledger.close()
    with Engine({**env, "POSTGRES_USER": service, "CREATE_TABLE": "n"},
                names=["balances"]) as worker:
        assert worker.catch_up(100) > 0
    with as_role(database, auditor) as conn:
        row = conn.execute(f'SELECT available FROM "{schema}".balances_accounts').fetchone()
        assert row == (700,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f'DELETE FROM "{schema}".balances_accounts')


def test_the_service_role_starts_the_service_on_the_owners_tables_with_create_table_n(
        roles: tuple[Env, dict[str, str]], database: DatabaseSettings,
        monkeypatch: pytest.MonkeyPatch, unused_port: int) -> None:
    env, names = roles
    service = dataclasses.replace(database, user=names["pitboss_service"])
    environ = {"POSTGRES_SCHEMA": env["POSTGRES_SCHEMA"]}
    # As the tables' owner may: replacing the insert function is refused to anyone else.
    with pytest.raises(PersistenceProgrammingError):
        prepare_store(ledger_env(service, environ), ShoeSealer.new_key())
    # Started so, the service says what it lacks and where the README tells what to do.
    monkeypatch.setenv("DATABASE_URL", service.url())
    monkeypatch.setenv("POSTGRES_SCHEMA", env["POSTGRES_SCHEMA"])
    monkeypatch.setenv("PITBOSS_SHOE_KEY", ShoeSealer.new_key().hex())
    monkeypatch.delenv("CREATE_TABLE", raising=False)
    monkeypatch.setattr("api.cli.os.execv", _must_not_start)
    result = CliRunner().invoke(main, ["serve", "--port", str(unused_port)])
    assert result.exit_code == 1
    assert "permission denied" in result.output
    assert "runs with CREATE_TABLE=n: see Database roles in the README" in result.output
    # Where the setting changes nothing (a rebuild creates its tables whatever it says), the
    # refusal does not point at it, but at the role a rebuild runs as.
    result = CliRunner().invoke(main, ["rebuild", "balances"])
    assert result.exit_code == 1
    assert "permission denied" in result.output
    assert "CREATE_TABLE" not in result.output
    assert "run it as the tables' owner, see Database roles in the README)" in result.output
    monkeypatch.setenv("CREATE_TABLE", "n")  # as README's Database roles says to start it
    assert prepare_store(ledger_env(service, environ), ShoeSealer.new_key()) == 0


@pytest.mark.parametrize("step_left_out", ["the owner's start", "the roles file"])
def test_a_worker_started_before_the_upgrade_is_done_names_the_tables_it_cannot_write(
        roles: tuple[Env, dict[str, str]], database: DatabaseSettings,
        step_left_out: str) -> None:
    # After an upgrade that adds a table to a read model, a worker started as the service
    # before the owner's start, or before the roles file was run again, went on until the
    # first event that needed the table, hours later perhaps, and stopped with the
    # database's "relation does not exist" or "permission denied".
    env, names = roles
    with Engine(env):  # the owner's start makes the read models' tables
        pass
    table = f'"{env["POSTGRES_SCHEMA"]}".balances_movements'
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        for statement in grants(env["POSTGRES_SCHEMA"], names):
            conn.execute(statement)
        if step_left_out == "the owner's start":
            conn.execute(f"DROP TABLE {table}")
        else:
            conn.execute(f"REVOKE ALL ON {table} FROM {names['pitboss_service']}")
    stop = threading.Event()
    stop.set()  # start, and stop at once
    with pytest.raises(ProjectionSetupError, match=re.escape(
            "the read models' tables balances_movements do not exist or may not be written by "
            "this role: start pitboss once as the database owner")):
        run_worker({**env, "POSTGRES_USER": names["pitboss_service"], "CREATE_TABLE": "n"},
                   stop, batch_size=10, poll_interval_s=1.0, log=logging.getLogger("test"))
    # Done, the worker starts (and stops, as asked).
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        with Engine(env):
            pass
        for statement in grants(env["POSTGRES_SCHEMA"], names):
            conn.execute(statement)
    run_worker({**env, "POSTGRES_USER": names["pitboss_service"], "CREATE_TABLE": "n"},
               stop, batch_size=10, poll_interval_s=1.0, log=logging.getLogger("test"))

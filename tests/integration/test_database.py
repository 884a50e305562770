"""The database the service runs on: the embedded server, an external one, eventsourcing on it."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from api.database import (
    DatabaseConfigError,
    DatabaseUnavailable,
    _without_secrets,
    check_database,
    resolve_database,
    start_embedded,
    stop_embedded,
)


def test_the_session_database_answers_a_query(database):
    check_database(database, timeout_s=5)
    with psycopg.connect(database.conninfo()) as conn:
        row = conn.execute("select current_setting('server_version_num')::int").fetchone()
    assert row is not None
    assert row[0] >= 140000


def test_the_embedded_server_is_used_when_nothing_is_configured(embedded_folder):
    settings = resolve_database({}, data_dir=embedded_folder)
    assert settings.source == "embedded"
    assert settings.host == str(embedded_folder.resolve())
    assert settings.password == ""
    check_database(settings, timeout_s=5)


def test_pitboss_data_dir_chooses_the_embedded_folder(embedded_folder):
    settings = resolve_database({"PITBOSS_DATA_DIR": str(embedded_folder)})
    assert settings.host == str(embedded_folder.resolve())


def test_a_second_start_on_the_same_folder_reuses_the_running_server(embedded_folder):
    first = start_embedded(embedded_folder)
    started = _postmaster_start_time(first.conninfo())

    # A second process (a restarted service, another worker) finds the server running.
    code = "import sys; from api.database import start_embedded; print(start_embedded(sys.argv[1]))"
    other = subprocess.run(
        [sys.executable, "-c", code, str(embedded_folder)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )

    assert other.stdout.strip() == first.masked()
    assert _postmaster_start_time(first.conninfo()) == started
    assert start_embedded(embedded_folder) == first


def _postmaster_start_time(conninfo: str) -> object:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("select pg_postmaster_start_time()").fetchone()
    assert row is not None
    return row[0]


def test_a_restart_on_the_same_folder_keeps_the_data(embedded_folder, caplog):
    first = resolve_database({}, data_dir=embedded_folder)
    with psycopg.connect(first.conninfo(), autocommit=True) as conn:
        conn.execute("create table kept (n int)")
        conn.execute("insert into kept values (21)")

    assert stop_embedded(embedded_folder)
    with pytest.raises(DatabaseUnavailable):
        check_database(first, timeout_s=2)

    with caplog.at_level(logging.INFO, logger="pitboss.database"):
        again = resolve_database({}, data_dir=embedded_folder)
    with psycopg.connect(again.conninfo()) as conn:
        assert conn.execute("select n from kept").fetchall() == [(21,)]
    # A command that only reads started it, and left it running, without a word.
    assert f"started the embedded PostgreSQL in {embedded_folder.resolve()}; it keeps running " \
           "after this (pitboss db stop, or make db-stop, stops it)" in caplog.messages
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pitboss.database"):
        resolve_database({}, data_dir=embedded_folder)  # running: nothing to say
    assert not [m for m in caplog.messages if m.startswith("started")]


def test_a_ledger_and_its_projections_started_fresh_and_again_leave_no_error_in_the_log(
        embedded_folder):
    # Each start tried to create the event type again in a savepoint: PostgreSQL's log took
    # "ERROR: type ... already exists" twice at every pitboss serve. The projections' first
    # start probed each tracking table before making it: "relation ... does not exist".
    from ledger.application import GameLedger
    from ledger.sealing import ShoeSealer
    from projections.engine import Engine

    settings = start_embedded(embedded_folder)
    log = embedded_folder / "log"  # pgserver's: the server's output, from its start
    for _ in range(2):
        GameLedger(env=settings.eventsourcing_env(), shoe_key=ShoeSealer.new_key()).close()
        Engine(settings.eventsourcing_env()).close()
    written = log.read_text(errors="replace")
    assert "ERROR" not in written, written


def test_stopping_a_folder_without_a_server_reports_false(embedded_folder):
    assert not stop_embedded(embedded_folder)


_HALF_STARTED = """
import os, subprocess, sys, time
from pathlib import Path
import pgserver
pid_file = Path(sys.argv[1]) / "postmaster.pid"
gone = subprocess.Popen(["true"])
gone.wait()
lines = [str(gone.pid), sys.argv[1], "1796091278", "5432", "", "", "  3089265   3145769"]
with pgserver.PostgresServer._lock:  # as pgserver holds it while its server starts
    pid_file.write_text("\\n".join(lines) + "\\n")  # as postgres writes it: status last
    print("starting", flush=True)
    time.sleep(0.5)
    pid_file.write_text("\\n".join([*lines, "ready"]) + "\\n")
"""


def test_a_server_another_process_is_starting_is_waited_for_not_read_half_written(tmp_path):
    # pitboss serve and pitboss project started at once on a new folder: one read the other's
    # postmaster.pid half written, and stopped on pgserver's assertion.
    (tmp_path / "PG_VERSION").write_text("15\n")
    with subprocess.Popen([sys.executable, "-c", _HALF_STARTED, str(tmp_path)],
                          stdout=subprocess.PIPE, text=True) as starter:
        assert starter.stdout is not None
        assert starter.stdout.readline() == "starting\n"
        assert not stop_embedded(tmp_path)  # its server, once started, is no longer running


def test_an_unreachable_url_names_the_host_but_not_the_password():
    settings = resolve_database({"DATABASE_URL": "postgresql://bob:s3cret@nohost.invalid:5432/x"})
    with pytest.raises(DatabaseUnavailable) as caught:
        check_database(settings, timeout_s=2)
    message = str(caught.value)
    assert "nohost.invalid" in message
    assert "s3cret" not in message


def test_an_unreachable_socket_folder_is_named_as_a_folder(tmp_path):
    settings = resolve_database({"DATABASE_URL": f"postgresql://bob@/x?host={tmp_path}"})
    with pytest.raises(DatabaseUnavailable,
                       match=f"^PostgreSQL at {tmp_path} \\(database x\\) is unavailable: "):
        check_database(settings, timeout_s=2)


def test_a_ledger_that_cannot_reach_its_database_closes_its_pool_before_it_fails(unused_port):
    # Left to the garbage collector, the pool's close could run on one of its own threads,
    # which cannot join itself.
    from eventsourcing.persistence import OperationalError

    from ledger.application import GameLedger

    def pool_threads() -> int:
        return sum(t.name.startswith("pool-") for t in threading.enumerate())

    before = pool_threads()
    env = {"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": "x",
           "POSTGRES_HOST": "127.0.0.1", "POSTGRES_PORT": str(unused_port),
           "POSTGRES_USER": "bob", "POSTGRES_PASSWORD": "x", "POSTGRES_CONNECT_TIMEOUT": "1",
           "CREATE_TABLE": "n"}
    with pytest.raises(OperationalError) as caught:
        GameLedger(env=env)
    # The error, held as a command line's handler holds it, keeps the half-built ledger.
    assert caught.tb is not None
    assert pool_threads() == before


def test_a_refused_connection_names_the_port(unused_port):
    url = f"postgresql://bob:s3cret@127.0.0.1:{unused_port}/x"
    with pytest.raises(DatabaseUnavailable, match=f"127.0.0.1:{unused_port}/x") as caught:
        check_database(resolve_database({"DATABASE_URL": url}), timeout_s=2)
    assert "s3cret" not in str(caught.value)


def test_a_short_password_does_not_blank_its_letters_in_the_reason(unused_port):
    url = f"postgresql://bob:o@127.0.0.1:{unused_port}/x"
    with pytest.raises(DatabaseUnavailable) as caught:
        check_database(resolve_database({"DATABASE_URL": url}), timeout_s=2)
    assert "connection" in str(caught.value).lower()
    assert "***" not in str(caught.value)


@pytest.mark.parametrize("quoted", [
    "invalid connection option near password=s3cret host=db",
    "missing value in password = 's3 cret\\'d' dbname=x",
    "could not parse postgresql://bob:s3cret@db/x",
])
def test_a_password_quoted_by_the_driver_is_masked(quoted):
    assert "s3" not in _without_secrets(quoted)
    assert "***" in _without_secrets(quoted)


def test_a_malformed_url_is_a_configuration_error():
    with pytest.raises(DatabaseConfigError, match="DATABASE_URL"):
        resolve_database({"DATABASE_URL": "postgresql://bob:s3cret@db:notaport/x"})


def test_the_external_path_works_with_the_embedded_server_as_its_url(database, caplog):
    with caplog.at_level(logging.INFO, logger="pitboss.database"):
        settings = resolve_database({"DATABASE_URL": database.url()})
    assert settings.source == "DATABASE_URL"
    check_database(settings, timeout_s=5)
    # As pitboss serve's workers get the server it started: the log says which it is.
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("database:")]
    assert said == [f"database: {settings.masked()} (from DATABASE_URL, the embedded "
                    f"PostgreSQL in {settings.host})"]


def test_a_database_url_of_a_server_not_embedded_is_logged_as_that(caplog):
    with caplog.at_level(logging.INFO, logger="pitboss.database"):
        settings = resolve_database({"DATABASE_URL": "postgresql://bob@db.invalid:5432/x"})
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("database:")] \
        == [f"database: {settings.masked()} (from DATABASE_URL)"]


class RoundTripProbe(Aggregate):
    @event("Created")
    def __init__(self, label: str) -> None:
        self.label = label
        self.count = 0

    @event("Counted")
    def count_up(self) -> None:
        self.count += 1


class ProbeApplication(Application[uuid.UUID]):
    name = "pitboss_probe"


def test_an_eventsourcing_application_saves_and_replays_on_the_database(database):
    app = ProbeApplication(env=database.eventsourcing_env())
    try:
        probe = RoundTripProbe("table 1")
        probe.count_up()
        app.save(probe)

        stored: RoundTripProbe = app.repository.get(probe.id)
        assert (stored.label, stored.count, stored.version) == ("table 1", 1, 2)
        assert app.repository.get(probe.id, version=1).count == 0
    finally:
        app.close()
        with psycopg.connect(database.conninfo(), autocommit=True) as conn:
            conn.execute("drop table if exists pitboss_probe_events")


def test_the_read_models_answer_at_once_after_the_database_restarts(embedded_folder):
    # Their pool pings each connection before use: without it, every connection the restart
    # broke failed one request (an auditor saw 503s for a minute).
    from projections.queries import ReadModels

    settings = start_embedded(embedded_folder)
    reads = ReadModels(settings.eventsourcing_env())
    try:
        before = reads.positions()  # the pool has its connections now
        stop_embedded(embedded_folder)
        start_embedded(embedded_folder)
        for _ in range(3):
            assert reads.positions() == before
    finally:
        reads.close()


def test_the_ledger_gives_up_at_once_while_the_database_is_down_and_answers_once_it_is_back(
        embedded_folder):
    # Each read tried ten times, each waiting out the pool's timeout: a request answered its
    # 503 after 27 to 52 s. And after the restart the pool waited out its doubling pauses
    # between tries to reconnect: requests then timed out too, for up to a minute.
    import time

    from eventsourcing.persistence import OperationalError

    from ledger.application import GameLedger
    from ledger.sealing import ShoeSealer
    from ledger.storage import RECONNECT_GIVE_UP_S

    env = {**start_embedded(embedded_folder).eventsourcing_env(), "POSTGRES_CONNECT_TIMEOUT": "2"}
    ledger = GameLedger(env=env, shoe_key=ShoeSealer.new_key())
    try:
        ledger.open_account("o", "cashier", "P1")
        ledger.buy_in("b", "cashier", "P1", 100)
        pool = ledger.recorder.datastore.pool  # type: ignore[attr-defined]
        stop_embedded(embedded_folder)
        timeouts = pool.get_stats().get("requests_errors", 0)
        with pytest.raises(OperationalError):
            ledger.buy_in("b2", "cashier", "P1", 50)  # a fresh read, then the append
        assert pool.get_stats().get("requests_errors", 0) == timeouts + 1  # one wait, not ten
        time.sleep(RECONNECT_GIVE_UP_S + 1)  # the pool's tries to reconnect run out meanwhile
        start_embedded(embedded_folder)
        timeouts = pool.get_stats().get("requests_errors", 0)
        ledger.buy_in("b2", "cashier", "P1", 50)
        assert ledger.balance("P1")["available"] == 150
        assert pool.get_stats().get("requests_errors", 0) == timeouts  # no wait timed out
    finally:
        ledger.close()


@contextlib.contextmanager
def _worker(env: dict[str, str], caplog: pytest.LogCaptureFixture,
            ) -> Iterator[Callable[[str], None]]:
    """A projection worker running in a thread, logging to ``caplog``, stopped at the end; what
    is yielded waits for a line of its log holding the words given."""
    from projections.worker import run_worker

    log = logging.getLogger("pitboss.test.worker")
    stop = threading.Event()
    worker = threading.Thread(target=run_worker, args=(env, stop), kwargs={
        "batch_size": 10, "poll_interval_s": 0.05, "log": log})

    def said(words: str) -> None:
        while not any(words in r.getMessage() for r in caplog.records):
            assert worker.is_alive()
            stop.wait(0.05)

    with caplog.at_level(logging.INFO, logger=log.name):
        worker.start()
        try:
            yield said
        finally:
            stop.set()
            worker.join()


def test_the_projection_worker_stopped_while_the_database_is_down_asks_it_nothing_more(
        embedded_folder, caplog):
    # It reloaded its positions and logged them on the way out, each waiting out the connect
    # timeouts: stopped with the database down, it took 97 s to exit.
    from api.services import prepare_store

    env = {**start_embedded(embedded_folder).eventsourcing_env(),
           "POSTGRES_CONNECT_TIMEOUT": "1"}
    prepare_store(env)
    with _worker(env, caplog) as logged:
        logged("worker started")
        stop_embedded(embedded_folder)
        logged("not answering")
        caplog.clear()
    said = [r.getMessage() for r in caplog.records]
    # (A retry may have been under way when it was stopped.)
    assert said[-1] == ("projection worker stopped while the database was not answering; it "
                        "resumes from the positions last committed"), said
    assert all("not answering" in line for line in said[:-1]), said


def test_a_read_models_position_asked_while_the_database_is_down_waits_once(
        embedded_folder, caplog):
    # The library's max_tracking_id tries ten times, each waiting out the connect timeout: a
    # worker reloading its positions while the database was down took 50 s to see its stop.
    from eventsourcing.persistence import OperationalError

    from api.services import prepare_store
    from projections.engine import Engine

    env = {**start_embedded(embedded_folder).eventsourcing_env(),
           "POSTGRES_CONNECT_TIMEOUT": "1"}
    prepare_store(env)
    with Engine(env) as engine:
        engine.reload()
        pool = engine.projections[0].view.datastore.pool
        stop_embedded(embedded_folder)
        waits = pool.get_stats().get("requests_errors", 0)
        with pytest.raises(OperationalError):
            engine.reload()
        assert pool.get_stats().get("requests_errors", 0) == waits + 1  # one wait, not ten
    # And a worker says so when the database is back.
    start_embedded(embedded_folder)
    with _worker(env, caplog) as logged:
        logged("worker started")
        stop_embedded(embedded_folder)
        logged("not answering")
        start_embedded(embedded_folder)
        logged("answers again")

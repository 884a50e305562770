"""``GET /healthz`` over HTTP (the Flask test client)."""

from __future__ import annotations

import logging

import pytest

from api.app import create_app
from api.database import DatabaseSettings
from api.problems import PROBLEM_JSON
from api.throttled_log import LINES_PER_WINDOW


@pytest.fixture
def client(database):
    return create_app({"DATABASE": database, "TESTING": True}).test_client()


def test_healthz_answers_ok_and_nothing_of_the_database(client):
    # Anyone may ask: it gave the database's user, host, port and name.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_healthz_answers_503_problem_details_when_the_database_is_unreachable(unused_port,
                                                                               caplog):
    settings = DatabaseSettings(
        host="127.0.0.1", port=unused_port, dbname="x", user="bob", password="s3cret"
    )
    client = create_app({"DATABASE": settings, "HEALTH_DB_TIMEOUT_S": 1}).test_client()

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.mimetype == PROBLEM_JSON
    body = response.get_json(force=True)
    # A title of its own, so a type of its own (RFC 7807: about:blank takes the status phrase).
    assert body["type"] == "urn:pitboss:problem:database-unavailable"
    assert body["title"] == "Database unavailable"
    assert body["status"] == 503
    # Why goes to the log, not to whoever asked (the driver's text names host, port, user).
    assert body["detail"] == "The database does not answer; the service's log says why."
    assert response.headers["Retry-After"] == "1"
    (said,) = [r.getMessage() for r in caplog.records
               if r.getMessage().startswith("health check: ")]
    assert f"127.0.0.1:{unused_port}" in said
    assert "s3cret" not in said
    # A probe every few seconds through an outage wrote a warning each.
    for _ in range(LINES_PER_WINDOW + 3):
        assert client.get("/healthz").status_code == 503
    told = [m for m in map(logging.LogRecord.getMessage, caplog.records) if "health check" in m]
    assert len(told) == LINES_PER_WINDOW + 1, told
    assert told[-1].startswith(f"more than {LINES_PER_WINDOW} warnings of health checks in")


@pytest.mark.parametrize("path", ["/no/such/thing", "/rounds/not-a-uuid"])
def test_an_unknown_path_is_a_problem_details_404(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.mimetype == PROBLEM_JSON
    body = response.get_json(force=True)
    assert body["status"] == 404
    assert "tables, rounds and shoes are named by UUID" in body["detail"]


def test_a_wrong_method_is_a_problem_details_405_naming_the_allowed_ones(client):
    response = client.post("/healthz")
    assert response.status_code == 405
    assert response.mimetype == PROBLEM_JSON
    assert "GET" in response.headers["Allow"]


@pytest.mark.parametrize("path", ["/healthz", "/whoami", "/accounts/ann/cash-out",
                                  "/audit/chain", "/static/anything"])
def test_options_is_a_405_as_any_method_a_route_does_not_take(client, path):
    # Flask answered it itself, before any key was asked for: a 200 in HTML, empty.
    response = client.options(path)
    assert response.status_code in (404, 405)  # Flask's own /static route: none any more
    assert response.mimetype == PROBLEM_JSON
    assert "OPTIONS" not in response.headers.get("Allow", "")


def test_the_openapi_document_describes_healthz(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    operation = response.get_json()["paths"]["/healthz"]["get"]
    assert set(operation["responses"]) >= {"200", "503"}


def test_create_app_refuses_a_database_that_is_not_settings():
    with pytest.raises(TypeError, match="DatabaseSettings"):
        create_app({"DATABASE": "postgresql://bob@db/x"})


def test_the_pools_warnings_are_throttled_in_the_api_and_the_command_line(make_app, tmp_path):
    # While the database was down, each pool logged every attempt to connect: tens a minute.
    from click.testing import CliRunner

    from api.cli import main
    from api.throttled_log import POOL_LOGGER, ThrottledLog

    pool_log = logging.getLogger(POOL_LOGGER)

    def throttles() -> list[ThrottledLog]:
        return [f for f in pool_log.filters if isinstance(f, ThrottledLog)]

    for start in (make_app, lambda: CliRunner().invoke(
            main, ["keys", "list", "--file", str(tmp_path / "keys.jsonl")])):
        for throttle in throttles():
            pool_log.removeFilter(throttle)
        start()
        assert len(throttles()) == 1


@pytest.mark.parametrize(("status", "title", "kind"), [
    (505, "HTTP version not supported", "http-version-not-supported"),
    (414, "Request URI too large", "request-uri-too-large"),
    (404, "Not found", "not-found")])
def test_a_problems_title_and_type_keep_an_acronym_one_word(make_app, status, title, kind):
    # "H t t p version not supported", and its type "h-t-t-p-version-not-supported".
    from flask import abort

    app = make_app()
    app.add_url_rule("/aborts", "aborts", lambda: abort(status))
    body = app.test_client().get("/aborts").get_json()
    assert (body["title"], body["type"]) == (title, f"urn:pitboss:problem:{kind}")

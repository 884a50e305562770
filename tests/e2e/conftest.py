"""HTTP tests: the app on the session's PostgreSQL, a fresh schema per app, one key per role."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from api.app import create_app
from api.auth import ROLES, ApiKey, hash_key
from api.problems import PROBLEM_JSON
from ledger.sealing import ShoeSealer

# One key per role; the name is what the ledger records as actor.
KEYS = {role: f"pbk_test-{role}-key-0123456789abcdefghijklmnopqrstuv" for role in ROLES}
NAMES = {role: f"{role}-terminal" for role in ROLES}
AUTO = object()

MakeApp = Callable[..., Flask]


@pytest.fixture
def make_app(database, postgres_env) -> Iterator[MakeApp]:
    """Apps on fresh schemas; ``randbelow`` steers the shuffle (tests.scripted.SteeredShuffle)."""
    made: list[Flask] = []

    def make(randbelow: Any = None, **config: Any) -> Flask:
        settings = {
            "DATABASE": database,
            "EVENTSOURCING_ENV": postgres_env(),
            "SHOE_KEY": ShoeSealer.new_key(),
            "API_KEYS": [ApiKey(name=NAMES[r], role=r, key_hash=hash_key(k))
                         for r, k in KEYS.items()],
            "LEDGER_RANDBELOW": randbelow,
            "TESTING": True,
            **config,
        }
        app = create_app(settings)
        made.append(app)
        return app

    yield make
    for app in made:
        app.extensions["pitboss"].close()


class Http:
    """Requests as each role's terminal, with a fresh Idempotency-Key unless one is given."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self._ids = count(1)

    def request(self, method: str, path: str, *, role: str | None = "dealer", json: Any = None,
                key: Any = AUTO, query: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> TestResponse:
        sent = dict(headers or {})
        if role is not None:
            sent["Authorization"] = f"Bearer {KEYS[role]}"
        if key is AUTO and method != "GET":
            key = f"req-{next(self._ids)}"
        if key is not AUTO and key is not None:
            sent["Idempotency-Key"] = key
        return self.client.open(path, method=method, json=json, headers=sent,
                                query_string=query)

    def post(self, path: str, json: Any = None, *, role: str = "dealer", key: Any = AUTO,
             ) -> TestResponse:
        return self.request("POST", path, role=role, json=json, key=key)

    def get(self, path: str, *, role: str = "auditor", **query: Any) -> TestResponse:
        return self.request("GET", path, role=role, query=query or None)

    def ok(self, response: TestResponse, status: int = 200) -> Any:
        assert response.status_code == status, response.get_data(as_text=True)
        return response.get_json()


def problem_of(response: TestResponse, status: int) -> dict[str, Any]:
    """The problem-details body of an error response, checked for shape."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM_JSON
    body: dict[str, Any] = response.get_json(force=True)
    assert body["status"] == status
    assert {"type", "title", "detail", "error", "rule"} <= set(body)  # one shape for all
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", body["error"]).split()
    assert body["type"] == "urn:pitboss:problem:" + "-".join(words).lower()
    # One title for each type (RFC 7807): the HTTP layer's NotFound said "Not Found".
    assert body["title"] == " ".join([words[0], *(w.lower() for w in words[1:])])
    return body


class Desk:
    """A table opened over HTTP with funded players."""

    def __init__(self, http: Http, preset: str = "casino", players: tuple[str, ...] = ("P1", "P2"),
                 chips: int = 1000, name: str = "T1", **table: Any) -> None:
        self.http = http
        body = {"name": name, "preset": preset, **table}
        self.table = http.ok(http.post("/tables", body), 201)["id"]
        for player in players:
            http.ok(http.post("/accounts", {"player": player}, role="cashier"), 201)
            http.ok(http.post(f"/accounts/{player}/buy-in", {"amount": chips}, role="cashier"))

    def round(self) -> str:
        state = self.http.ok(self.http.post(f"/tables/{self.table}/rounds"), 201)
        round_id: str = state["round_id"]
        self.round_id = round_id
        return round_id

    def do(self, path: str, role: str = "dealer", **body: Any) -> dict[str, Any]:
        """POST /rounds/<id>/<path>; the new round state."""
        answer = self.http.ok(self.http.post(f"/rounds/{self.round_id}/{path}", body or None,
                                             role=role))
        state: dict[str, Any] = answer["round"]
        return state

    def balance(self, player: str) -> tuple[int, int]:
        b = self.http.ok(self.http.get(f"/accounts/{player}", role="cashier"))
        return b["available"], b["held"]


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def http(app) -> Http:
    return Http(app.test_client())

"""Retries with the same Idempotency-Key return the first result and never move money twice."""

from __future__ import annotations

from api.views import REPLAYED
from tests.e2e.conftest import Desk, Http, problem_of
from tests.scripted import SteeredShuffle


def test_every_retry_returns_the_first_result(make_app):
    app = make_app(SteeredShuffle("TS TH TD 9S 7C 8D"))
    http = Http(app.test_client())
    body = {"name": "T1", "preset": "casino"}
    first = http.post("/tables", body, key="open-1")
    again = http.post("/tables", body, key="open-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.get_json() == again.get_json()
    # A repeat says so: a cashier re-sending yesterday's key took its answer for a sale.
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    table = first.get_json()["id"]
    for player in ("P1", "P2"):
        for _ in range(2):
            http.ok(http.post("/accounts", {"player": player}, role="cashier",
                              key=f"acct-{player}"), 201)
            http.ok(http.post(f"/accounts/{player}/buy-in", {"amount": 1000}, role="cashier",
                              key=f"buy-{player}"))
    assert http.ok(http.get("/accounts/P1", role="cashier"))["available"] == 1000
    sale = http.post("/accounts/P1/buy-in", {"amount": 5}, role="cashier", key="buy-more")
    resent = http.post("/accounts/P1/buy-in", {"amount": 5}, role="cashier", key="buy-more")
    assert "Idempotent-Replayed" not in sale.headers
    assert resent.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in http.get("/accounts/P1", role="cashier").headers
    http.ok(http.post("/accounts/P1/cash-out", {"amount": 5}, role="cashier"))

    started = [http.ok(http.post(f"/tables/{table}/rounds", key="round-1"), 201)
               for _ in range(2)]
    assert started[0]["round_id"] == started[1]["round_id"]
    r = started[0]["round_id"]
    stake = {"bettor": "P1", "box": 1, "amount": 100}
    results = [http.ok(http.post(f"/rounds/{r}/stakes", stake, key="stake-1"))
               for _ in range(3)]
    assert results[0]["result"] == results[1]["result"] == results[2]["result"]
    assert http.ok(http.get("/accounts/P1", role="cashier"))["held"] == 100
    http.ok(http.post(f"/rounds/{r}/stakes", {"bettor": "P2", "box": 2, "amount": 100}))
    http.ok(http.post(f"/rounds/{r}/deal", key="deal-1"))
    stood = http.ok(http.post(f"/rounds/{r}/stand", {"player": "P1", "box": 1}, key="stand-1"))
    http.ok(http.post(f"/rounds/{r}/stand", {"player": "P2", "box": 2}))
    # A late retry: the same answer, the round as the first request left it.
    late = http.ok(http.post(f"/rounds/{r}/stand", {"player": "P1", "box": 1}, key="stand-1"))
    assert late == stood
    assert http.ok(http.get(f"/rounds/{r}"))["version"] > stood["round"]["version"]
    again = http.ok(http.post(f"/rounds/{r}/deal", key="deal-1"))
    assert again["result"]["phase"] == "playing"
    http.ok(http.post(f"/rounds/{r}/dealer"))
    settled = [http.ok(http.post(f"/rounds/{r}/settle", key="settle-1")) for _ in range(2)]
    assert settled[0]["result"] == settled[1]["result"]
    assert http.ok(http.get("/accounts/P1", role="cashier"))["available"] == 1100


def test_a_key_is_bound_to_its_request_and_its_caller(make_app):
    desk = Desk(Http(make_app().test_client()))
    http = desk.http
    http.ok(http.post("/accounts/P1/buy-in", {"amount": 10}, role="cashier", key="k"))
    body = problem_of(http.post("/accounts/P1/buy-in", {"amount": 20}, role="cashier",
                                key="k"), 422)
    assert body["rule"] == "R-M4"
    body = problem_of(http.post("/accounts/P1/cash-out", {"amount": 10}, role="cashier",
                                key="k"), 422)
    assert body["error"] == "RequestIdReused"
    assert http.ok(http.get("/accounts/P1", role="cashier"))["available"] == 1010


def test_the_api_document_declares_the_repeat_header_on_every_change_and_no_read(http: Http):
    document = http.ok(http.get("/openapi.json"))
    declared = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method == "parameters":  # the path's own, not an operation
                continue
            successes = [r for code, r in operation["responses"].items() if code.startswith("2")]
            assert successes, (method, path)
            declared[method, path] = [REPLAYED in r.get("headers", {}) for r in successes]
    changes = {k: v for k, v in declared.items() if k[0] == "post"}
    assert changes
    assert all(all(v) for v in changes.values()), changes
    assert not any(any(v) for k, v in declared.items() if k[0] != "post")

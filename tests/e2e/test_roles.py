"""Role enforcement, route by route: the table below must name every route the app serves."""

from __future__ import annotations

import logging
import re
import uuid
from pathlib import Path

import pytest

from api.auth import ROLES, ApiKey, hash_key
from api.throttled_log import LINES_PER_WINDOW
from tests.e2e.conftest import NAMES, Http, problem_of
from tests.e2e.routes import MUTATING, fill, routes

D, C, M, A = "dealer", "cashier", "manager", "auditor"
VIEW = {D, M, A}
AUDIT = {A, M}

ROUTE_ROLES: dict[tuple[str, str], set[str]] = {
    ("GET", "/whoami"): set(ROLES),
    ("POST", "/tables"): {D, M},  # overrides and limits: M only (test_refusals)
    ("GET", "/tables/<uuid:table_id>"): VIEW,
    ("POST", "/tables/<uuid:table_id>/close"): {D},
    ("POST", "/tables/<uuid:table_id>/reopen"): {D},
    ("POST", "/tables/<uuid:table_id>/rounds"): {D},
    ("GET", "/tables/<uuid:table_id>/rounds"): VIEW,
    ("POST", "/tables/<uuid:table_id>/rules"): {M},
    ("GET", "/rounds/<uuid:round_id>"): VIEW,
    **{("POST", f"/rounds/<uuid:round_id>/{path}"): {D} for path in (
        "stakes", "stakes/withdraw", "deal", "hit", "stand", "double", "split", "surrender",
        "match", "decline", "insurance", "even-money", "dealer", "settle")},
    ("POST", "/rounds/<uuid:round_id>/void"): {M},
    ("POST", "/rounds/<uuid:round_id>/rulings"): {M},
    ("POST", "/accounts"): {C},
    ("POST", "/accounts/<player>/buy-in"): {C},
    ("POST", "/accounts/<player>/cash-out"): {C},
    ("GET", "/accounts/<player>"): {C, M, A},
    ("GET", "/accounts/<player>/entries"): {C, M, A},
    ("GET", "/audit/rounds/<uuid:round_id>/events"): AUDIT,
    ("GET", "/audit/rounds/<uuid:round_id>/versions/<int(signed=True):version>"):
        AUDIT,
    ("GET", "/audit/rounds/<uuid:round_id>/replay"): AUDIT,
    ("GET", "/audit/rounds/<uuid:round_id>/check"): AUDIT,
    ("GET", "/audit/rounds/<uuid:round_id>/postings"): AUDIT,
    ("GET", "/audit/shoes/<uuid:shoe_id>"): AUDIT,
    ("GET", "/audit/shoes/<uuid:shoe_id>/verification"): AUDIT,
    ("GET", "/audit/tables/<uuid:table_id>/house"): AUDIT,
    ("GET", "/audit/tables/<uuid:table_id>/events"): AUDIT,
    ("GET", "/audit/tables/<uuid:table_id>/house/entries"): AUDIT,
    ("GET", "/audit/chain"): AUDIT,
    ("GET", "/audit/chain/head"): AUDIT,
}
READ_MODEL_ROUTES: dict[tuple[str, str], set[str]] = {
    ("GET", "/audit/rounds"): AUDIT,
    ("GET", "/audit/balances"): AUDIT,
    ("GET", "/audit/balances/check"): AUDIT,
    ("GET", "/audit/house"): AUDIT,
    ("GET", "/audit/tables/<uuid:table_id>/report"): AUDIT,
    ("GET", "/audit/tables/<uuid:table_id>/report/rounds"): AUDIT,
    ("GET", "/audit/cashier"): AUDIT,
    ("GET", "/audit/projections"): AUDIT,
}
VALUES = {"table_id": uuid.uuid4(), "round_id": uuid.uuid4(), "shoe_id": uuid.uuid4(),
          "player": "P1", "version": 1}


def expected_table(app) -> dict[tuple[str, str], set[str]]:
    return {**ROUTE_ROLES, **READ_MODEL_ROUTES}


def test_the_table_names_every_route_the_app_serves(app):
    assert set(routes(app)) == set(expected_table(app))


def test_no_mutating_route_admits_the_auditor(app):
    for (method, rule), roles in expected_table(app).items():
        if method in MUTATING:
            assert A not in roles, rule


def test_every_route_refuses_a_request_without_a_key(app, http):
    for method, rule in routes(app):
        problem_of(http.request(method, fill(rule, VALUES), role=None, json={}), 401)


@pytest.mark.parametrize("role", ROLES)
def test_every_route_admits_exactly_its_roles(app, role):
    http = Http(app.test_client())
    for (method, rule), roles in expected_table(app).items():
        response = http.request(method, fill(rule, VALUES), role=role, json={})
        if role in roles:
            assert response.status_code not in (401, 403), (method, rule, role)
        else:
            body = problem_of(response, 403)
            assert role in body["detail"], (method, rule)
            # In words: "it needs the dealer or manager or auditor role" read badly.
            needed = body["detail"].split("; it needs the ")[1].removesuffix(" role.")
            assert sorted(needed.replace(" or ", ", ").split(", ")) == sorted(roles), needed
            assert needed.count(" or ") == (len(roles) > 1), needed


def test_no_answer_is_kept_by_a_cache_or_sniffed_as_another_type(app, http):
    # Balances and rounds went out with no Cache-Control: a shared cache could keep them.
    answers = [http.request(method, fill(rule, VALUES), role=None, json={})
               for method, rule in routes(app)]
    answers += [http.get(path, role="auditor") for path in ("/healthz", "/openapi.json",
                                                             "/docs", "/whoami", "/nowhere")]
    for answer in answers:
        assert answer.headers["Cache-Control"] == "no-store", answer.request.path
        assert answer.headers["X-Content-Type-Options"] == "nosniff", answer.request.path


def test_a_refused_request_is_logged_naming_who_tried(http, caplog):
    # A refused request records no event, and the access log names no one: a dealer trying a
    # manager's void, or a revoked key, left no trace of who it was.
    # A path is quoted one way (JSON): decoded, a %0A in it wrote a log line of the caller's
    # own, and Python's quoting changed its quotes with an apostrophe in a player id.
    round_id = uuid.uuid4()
    with caplog.at_level(logging.WARNING, logger="pitboss.auth"):
        problem_of(http.post(f"/rounds/{round_id}/void", {"reason": "x"}, role="dealer"), 403)
        problem_of(http.post("/tables", {"name": "T", "preset": "casino", "limits": {
            "boxes": 3}}, role="dealer"), 403)  # refused by the view, not by the route's roles
        problem_of(http.request("GET", "/accounts/O'Brien%0Aforged", role=None,
                                headers={"Authorization": "Bearer pbk_revoked"}), 401)
        problem_of(http.request("GET", "/whoami", role=None), 401)  # no key: nobody to name
        problem_of(http.request("GET", "/whoami", role=None,  # too long to be any key
                                headers={"Authorization": "Bearer " + "k" * 300}), 401)
    assert [r.getMessage() for r in caplog.records if r.name == "pitboss.auth"] == [
        f'refused POST "/rounds/{round_id}/void" to {NAMES["dealer"]} (dealer): The dealer role '
        "may not do this; it needs the manager role.",
        f'refused POST "/tables" to {NAMES["dealer"]} (dealer): The dealer role opens a table '
        "under a preset as it is, with its default limits; rules or limits of its own need the "
        "manager role.",
        """refused GET "/accounts/O'Brien\\nforged": a key no holder has (sha256 """
        f"{hash_key('pbk_revoked')[:12]}…)",
        f'refused GET "/whoami": a key no holder has (sha256 {hash_key("k" * 300)[:12]}…)']


def test_a_flood_of_refused_keys_is_counted_without_hiding_a_holders_refusal(http, caplog):
    # A client sending unknown keys wrote a warning per request, as fast as it could send.
    with caplog.at_level(logging.WARNING, logger="pitboss.auth"):
        for n in range(LINES_PER_WINDOW + 5):
            problem_of(http.request("GET", "/whoami", role=None,
                                    headers={"Authorization": f"Bearer pbk_guess{n}"}), 401)
        problem_of(http.post(f"/rounds/{uuid.uuid4()}/void", {"reason": "x"}, role="dealer"),
                   403)
    said = [r.getMessage() for r in caplog.records if r.name == "pitboss.auth"]
    assert len(said) == LINES_PER_WINDOW + 2, said
    assert said[LINES_PER_WINDOW - 1].startswith('refused GET "/whoami": a key no holder has')
    assert said[LINES_PER_WINDOW] == (
        f"more than {LINES_PER_WINDOW} warnings of refusals of unknown keys in 60 s: the next "
        "are counted, and their number logged with the first one after that")
    assert said[-1].startswith('refused POST "/rounds/')
    assert f'to {NAMES["dealer"]} (dealer)' in said[-1]


def test_a_holder_named_like_the_unknown_keys_is_heard_through_their_flood(make_app, caplog):
    # Sources were "refusals of <name>": a holder named "unknown keys" shared the guessed keys'
    # throttle, and a flood of those silenced its refusals.
    app = make_app(API_KEYS=[ApiKey("unknown keys", "dealer", hash_key("pbk_odd"))])
    http = Http(app.test_client())
    with caplog.at_level(logging.WARNING, logger="pitboss.auth"):
        for n in range(LINES_PER_WINDOW + 1):
            problem_of(http.request("GET", "/whoami", role=None,
                                    headers={"Authorization": f"Bearer pbk_guess{n}"}), 401)
        problem_of(http.request("POST", f"/rounds/{uuid.uuid4()}/void", role=None,
                                json={"reason": "x"}, headers={
                                    "Authorization": "Bearer pbk_odd",
                                    "Idempotency-Key": "k1"}), 403)
    said = [r.getMessage() for r in caplog.records if r.name == "pitboss.auth"]
    assert said[-1].startswith('refused POST "/rounds/'), said[-1]


def test_views_carry_the_roles_of_the_table(app):
    table = expected_table(app)
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
            if (method, rule.rule) in table:
                assert view.pitboss_roles == table[method, rule.rule], rule.rule
                assert view.pitboss_mutating == (method in MUTATING), rule.rule


README = Path(__file__).parents[2] / "README.md"
_README_ROUTE = re.compile(r"^\| (GET|POST) `([^`]+)` \| ([^|]+) \|", re.M)


def test_the_readme_lists_every_route_with_its_roles(app):
    # A route the README's table left out, or roles it gave wrong, sent users to the API
    # document for what the README should have told them.
    listed = {(method, path): roles.strip()
              for method, path, roles in _README_ROUTE.findall(README.read_text())}
    listed.pop(("GET", "/healthz"))  # anyone's

    def said(roles: set[str]) -> str:
        return ("every role" if roles == set(ROLES)
                else ", ".join(r for r in (D, C, M, A) if r in roles))

    served = {(method, re.sub(r"<(?:[^<>]*:)?([^<>:]+)>", r"{\1}", rule)): said(roles)
              for (method, rule), roles in expected_table(app).items()}
    assert listed == served

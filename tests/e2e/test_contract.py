"""A property-based fuzz of the whole API from its own OpenAPI document (schemathesis).

Every operation gets schema-fitting and schema-breaking requests, with a key of a role it
admits, against ids that exist and ids that do not. No response may be a 5xx, and every
response must fit the document: its status documented, its content type and body as declared.
A second key-less pass checks that no operation answers without a key.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from api.auth import ApiKey, hash_key
from api.database import DatabaseSettings
from api.schemas import PLAYER_PATTERN
from ledger.application import VERSION_MAX
from ledger.sealing import ShoeSealer
from projections.settings import GamingDay
from tests.e2e.conftest import KEYS, NAMES, Desk, Http
from tests.e2e.test_reports import catch_up
from tests.scripted import SteeredShuffle

# Examples per operation and generation mode: about 45 operations, kept under a minute in all,
# the same examples each run. PITBOSS_FUZZ_EXAMPLES sets more, for a longer search, and draws
# new examples each run.
LONGER = os.environ.get("PITBOSS_FUZZ_EXAMPLES")
EXAMPLES = max(12, int(LONGER or "12"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance, negative_data_rejection,
          ignored_auth]


def _document_only_app() -> Flask:
    # The document needs no database: the ledger is only built on the first request.
    nowhere = DatabaseSettings(host="127.0.0.1", port=1, dbname="x", user="x")
    return create_app({"DATABASE": nowhere, "API_KEYS": [], "SHOE_KEY": b"k" * 32})


def _operations(schema: Any) -> dict[str, Any]:
    return {op.label: op for op in (r.ok() for r in schema.get_all_operations())}


def _labels() -> list[str]:
    return sorted(_operations(schemathesis.openapi.from_wsgi("/openapi.json",
                                                             _document_only_app())))


@pytest.fixture(scope="module")
def fuzzed(database: DatabaseSettings) -> Iterator[tuple[Flask, dict[str, Any]]]:
    """One app for the module, on a schema of its own, with a table, a round and accounts,
    projected."""
    schema_name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema_name}"')
    app = create_app({
        "DATABASE": database,
        "EVENTSOURCING_ENV": {**database.eventsourcing_env(), "POSTGRES_SCHEMA": schema_name},
        "SHOE_KEY": ShoeSealer.new_key(),
        "API_KEYS": [ApiKey(name=NAMES[r], role=r, key_hash=hash_key(k))
                     for r, k in KEYS.items()],
        "LEDGER_RANDBELOW": SteeredShuffle("TS TH TD 9S 7C 8D"),
        "TESTING": True,
    })
    try:
        desk = Desk(Http(app.test_client()), players=("P1", "P2"), chips=10_000)
        round_id = desk.round()
        desk.do("stakes", bettor="P1", box=1, amount=100)
        http = desk.http
        shoe_id = http.ok(http.get(f"/rounds/{round_id}"))["shoe_id"]
        # The read models hold them too, so that their answers are checked with rows in them.
        catch_up(app)
        yield app, {"table_id": desk.table, "round_id": round_id, "shoe_id": shoe_id,
                    "player": "P1", "version": 2,
                    "day": GamingDay().day_of(datetime.now(UTC)).isoformat()}
    finally:
        app.extensions["pitboss"].close()
        with psycopg.connect(database.conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema_name}" CASCADE')


def _role_for(app: Flask, method: str, path: str) -> str:
    adapter = app.url_map.bind("localhost")
    rule_path = path
    for name in ("table_id", "round_id", "shoe_id"):
        rule_path = rule_path.replace("{" + name + "}", str(uuid.UUID(int=1)))
    rule_path = rule_path.replace("{player}", "P1").replace("{version}", "1")
    endpoint, _ = adapter.match(rule_path, method=method)
    roles: frozenset[str] = getattr(app.view_functions[endpoint], "pitboss_roles")  # noqa: B009
    return "dealer" if "dealer" in roles else sorted(roles)[0]


@pytest.mark.parametrize("label", _labels())
def test_no_request_gets_a_5xx_or_an_answer_off_the_document(fuzzed, label):
    app, existing = fuzzed
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    operation = _operations(schema)[label]
    method, path = label.split(" ", 1)
    headers = {}
    if path != "/healthz":
        headers["Authorization"] = f"Bearer {KEYS[_role_for(app, method, path)]}"
    known = {p.name: existing[p.name] for p in operation.path_parameters}
    strategies = [operation.as_strategy(GenerationMode.POSITIVE),
                  operation.as_strategy(GenerationMode.NEGATIVE)]
    if known:
        strategies.append(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=known))
    if any(p.name == "day" for p in operation.query):
        # The one gaming day that holds rows, which a generated day never names.
        strategies.append(operation.as_strategy(
            GenerationMode.POSITIVE, path_parameters=known or None,
            query={"day": existing["day"]}))

    @settings(max_examples=EXAMPLES * len(strategies), deadline=None, derandomize=not LONGER,
              database=None, suppress_health_check=list(HealthCheck))
    @given(case=st.one_of(strategies))
    def run(case: Any) -> None:
        dropped = case.meta.components.get(ParameterLocation.HEADER)
        if (dropped is not None and dropped.mode is GenerationMode.NEGATIVE
                and "Authorization" not in (case.headers or {})):
            # The case leaves the key out on purpose: adding ours back would make it valid,
            # and the negative check would fault the answer. Without a key it must be 401.
            case.call_and_validate(checks=CHECKS)
            return
        case.call_and_validate(headers=headers, checks=CHECKS)

    run()


def test_the_document_declares_the_statuses_and_headers_every_route_may_answer() -> None:
    # 503 (with Retry-After), 413 and 415 were answered but declared nowhere but /healthz.
    doc = _document_only_app().test_client().get("/openapi.json").get_json()
    responses = doc["components"]["responses"]
    assert "Retry-After" in responses["SERVICE_UNAVAILABLE"]["headers"]
    assert "WWW-Authenticate" in responses["UNAUTHORIZED"]["headers"]
    operations = [(path, method, op) for path, item in doc["paths"].items()
                  for method, op in item.items() if method in ("get", "post")]
    assert len(operations) > 40
    for path, method, op in operations:
        declared = set(op["responses"])
        if path == "/whoami":  # reads the key alone: no database to be unavailable
            assert declared == {"200", "401", "422", "default"}
            continue
        assert "503" in declared, (method, path)
        if method == "post":
            assert {"413", "415"} <= declared, (method, path)
    health = doc["paths"]["/healthz"]["get"]["responses"]["503"]
    assert "Retry-After" in health["headers"]


def _every_property(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _every_property(value)
    elif isinstance(node, list):
        for value in node:
            yield from _every_property(value)


def test_a_generated_client_gets_names_roles_and_types_it_can_use() -> None:
    app = _document_only_app()
    doc = app.test_client().get("/openapi.json").get_json()
    # Without operationId, generators named methods after paths (post_tables_table_id_rounds).
    named = {(method.upper(), path): op["operationId"] for path, item in doc["paths"].items()
             for method, op in item.items() if method in ("get", "post")}
    assert len(set(named.values())) == len(named)
    assert named["POST", "/tables/{table_id}/rounds"] == "start_round"
    assert named["GET", "/healthz"] == "health"
    # Who may call each operation, which a client learnt from a 403.
    guarded = 0
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        roles = getattr(view, "pitboss_roles", None)
        if roles is not None:
            guarded += 1
            path = rule.rule.replace("<uuid:", "{").replace("<int(signed=True):", "{") \
                .replace("<", "{").replace(">", "}")
            (method,) = (rule.methods or set()) - {"HEAD", "OPTIONS"}
            description = doc["paths"][path][method.lower()]["description"]
            assert description.endswith("Roles: " + ", ".join(sorted(roles)) + "."), path
    assert guarded == len(named) - 1  # all but /healthz
    # A round's turn and pending may be null: typed as "any object" (apispec's anyOf with
    # {"type": "object", "nullable": true}), generated models refused every round.
    assert "PaginationMetadata" not in doc["components"]["schemas"]  # no route uses it
    state = doc["components"]["schemas"]["RoundState"]["properties"]
    assert state["turn"] == {"allOf": [{"$ref": "#/components/schemas/Turn"}],
                             "nullable": True}
    assert not [p for p in _every_property(doc)
                if {"type": "object", "nullable": True} in p.get("anyOf", [])]
    # Path parameters as checked: any string for a player, any integer for a version.
    (player,) = doc["paths"]["/accounts/{player}/entries"]["parameters"]
    assert player["schema"]["pattern"] == PLAYER_PATTERN
    version = doc["paths"]["/audit/rounds/{round_id}/versions/{version}"]["parameters"][0]
    assert (version["schema"]["minimum"], version["schema"]["maximum"]) == (1, VERSION_MAX)
    # If-Match was "nullable, default null": a client sent the header "null".
    (if_match,) = [p for p in doc["paths"]["/rounds/{round_id}/hit"]["post"]["parameters"]
                   if p["name"] == "If-Match"]
    assert not {"nullable", "default"} & set(if_match["schema"])
    # Names and reasons as the server checks them, not lengths alone: clients validated
    # "M\u0012" as a reason, and the server refused it.
    schemas = doc["components"]["schemas"]
    for schema, field in (("OpenTable", "name"), ("RuleOverrides", "name"),
                          ("Reason", "reason"), ("Reopen", "reason")):
        assert "Printable characters" in schemas[schema]["properties"][field]["description"]


@pytest.mark.parametrize(("mirror", "base"), [
    ("/swagger-ui", "/swagger-ui/"),
    ("https://docs.casino.example/swagger-ui-dist@5.35.0/",
     "https://docs.casino.example/swagger-ui-dist@5.35.0/"),
    ("http://mirror.casino.example:8080", "http://mirror.casino.example:8080/")])
def test_the_docs_page_loads_the_same_swagger_ui_files_from_a_mirror(monkeypatch, mirror,
                                                                     base) -> None:
    # On a casino's network without the internet, /docs loaded nothing from the CDN.
    monkeypatch.setenv("PITBOSS_SWAGGER_UI_URL", mirror)
    app = _document_only_app()
    page = app.test_client().get("/docs").get_data(as_text=True)
    for name, digest in app.config["SWAGGER_UI_INTEGRITY"].items():
        assert f'"{base}{name}"' in page
        assert f'integrity="{digest}"' in page
    assert "cdn.jsdelivr.net" not in page


@pytest.mark.parametrize("mirror", ["ftp://mirror/", "//mirror/swagger", "swagger-ui/",
                                    '/a"><script>', "/swagger ui/", "/s?v=1"])
def test_a_swagger_ui_mirror_that_is_no_url_or_path_stops_the_start(monkeypatch, mirror) -> None:
    monkeypatch.setenv("PITBOSS_SWAGGER_UI_URL", mirror)
    with pytest.raises(ValueError, match="PITBOSS_SWAGGER_UI_URL is an http"):
        _document_only_app()


def test_the_docs_page_runs_only_the_swagger_ui_files_it_pins() -> None:
    # The page where a key is typed loaded swagger-ui-dist@5 from a CDN, whatever it served.
    app = _document_only_app()
    page = app.test_client().get("/docs").get_data(as_text=True)
    base = app.config["OPENAPI_SWAGGER_UI_URL"]
    assert re.fullmatch(r"https://cdn\.jsdelivr\.net/npm/swagger-ui-dist@\d+\.\d+\.\d+/", base)
    loaded = re.findall(r'(?:src|href)="([^"]+)"\s+(?:rel="stylesheet" type="text/css"\s+)?'
                        r'integrity="(sha384-[A-Za-z0-9+/]{64})"\s+crossorigin="anonymous"', page)
    assert sorted(loaded) == sorted((base + name, digest) for name, digest
                                    in app.config["SWAGGER_UI_INTEGRITY"].items())
    assert len(re.findall(r"<script src=|<link ", page)) == 3  # no file without its digest
    # And the key typed there is not kept in the browser's storage.
    assert '"persistAuthorization": false' in page

"""The composition root: ``create_app`` wires settings, database, keys and blueprints together.

Nothing is built at import time; ``api.wsgi`` (gunicorn) and the tests call ``create_app``.
The ledger and the read models are built on first use (:mod:`api.services`), so the app starts
and ``/healthz`` answers while the database is still down.

Configuration keys (all optional; the environment supplies what is not given):

``DATABASE``            a :class:`~api.database.DatabaseSettings` (else resolved from the env)
``EVENTSOURCING_ENV``   the ledger's environment (else the database's, plus ``POSTGRES_SCHEMA``)
``SHOE_KEY``            the 32-byte shoe key (else :func:`api.secrets_files.load_shoe_key`)
``API_KEYS``            a list of :class:`~api.auth.ApiKey` (else ``PITBOSS_KEYS[_FILE]``)
``LEDGER_RANDBELOW``    the shuffle's ``randbelow`` (tests steer the cards with it)
``LEDGER_CLOCK``        the ledger's clock
``LEDGER_CREATE_TABLES`` whether this process may create the event tables (default yes)
``LEDGER``              a ready GameLedger to serve (the benchmark measures the layer with one)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from flask import Flask, Response, g, request

from api import accounts, audit, health, reports, session, supervision, tables
from api.auth import KeyRing, keyring_from
from api.database import DatabaseSettings, check_schema_name, resolve_database
from api.document import SWAGGER_UI_CDN, documented_api, swagger_ui_url
from api.problems import KEPT_PRIVATE, register_problem_handlers
from api.secrets_files import default_keys_file, load_shoe_key
from api.services import Services, create_tables_wanted, ledger
from api.throttled_log import ThrottledLog, throttle_pool_log
from api.views import REPLAYED, AsciiInteger

logger = logging.getLogger("pitboss.api")

DEFAULT_CONFIG: Mapping[str, Any] = {
    "API_TITLE": "pitboss",
    "OPENAPI_VERSION": "3.0.3",
    "OPENAPI_URL_PREFIX": "/",
    "OPENAPI_JSON_PATH": "openapi.json",
    "OPENAPI_SWAGGER_UI_PATH": "docs",
    # One release of Swagger UI (api/document.py, api/templates/swagger_ui.html).
    "OPENAPI_SWAGGER_UI_URL": SWAGGER_UI_CDN,
    "SWAGGER_UI_INTEGRITY": {
        "swagger-ui.css": "sha384-WlYgdmXYOOBWL5apwjDEZwN+U3HmXSSu5R6V5aGxEcf7z+KuRNwBhoxKVN1i3D5I",
        "swagger-ui-standalone-preset.js":
            "sha384-My2aDM4r2Mbm3ybHcubKm9O9U8FEjvF/O5nGvE9YK5dzqOTbWEKa79RPJ1krdMaF",
        "swagger-ui-bundle.js":
            "sha384-gjRm0bEPMeTmMh5jT2cHccIwCUZSTd8YC+j0d0sXw0MdGEfScduGpSyF3ZSSLkX9",
    },
    # The key typed into /docs is forgotten with the page, not kept in the browser's storage.
    "OPENAPI_SWAGGER_UI_CONFIG": {"persistAuthorization": False},
    # OPTIONS is no method of the API (it serves no browser from another origin): Flask's own
    # answer was a 200 in HTML on every route, without a key, where any other method a route
    # does not take is a 405 in problem details, naming those it does (Allow).
    "PROVIDE_AUTOMATIC_OPTIONS": False,
    "API_SPEC_OPTIONS": {
        "info": {
            "description": "An event-sourced game ledger for casino blackjack tables. Every "
            "route but /healthz needs a bearer API key; every mutating route an "
            "Idempotency-Key. Errors are RFC 7807 problem details.",
        },
    },
    # Limits: request bodies are small JSON commands.
    "MAX_CONTENT_LENGTH": 64 * 1024,
    "HEALTH_DB_TIMEOUT_S": 2,
}


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the Flask application.

    ``config`` overrides the defaults. ``config["DATABASE"]`` may carry a ready
    :class:`~api.database.DatabaseSettings` (the tests pass theirs); otherwise the database is
    resolved from the environment here, which may start the embedded server.
    """
    app = Flask("api", static_folder=None)  # it serves no files: no /static route
    # A path is taken as written: werkzeug would answer "//" with a 308 to the merged path,
    # built from the request's Host header, and read a version's digits in any script.
    app.url_map.merge_slashes = False
    app.url_map.converters["int"] = AsciiInteger
    app.config.from_mapping(DEFAULT_CONFIG)
    app.config["OPENAPI_SWAGGER_UI_URL"] = swagger_ui_url(os.environ)
    app.config["API_VERSION"] = _package_version()
    if config is not None:
        app.config.from_mapping(config)
    settings = app.config["DATABASE"] = _database(app)
    app.extensions["pitboss"] = _services(app, settings)
    app.extensions["pitboss.keys"] = _keys(app)
    app.extensions["pitboss.throttled_log"] = ThrottledLog()
    throttle_pool_log()

    api = documented_api(app)
    api.register_blueprint(health.blp)
    api.register_blueprint(session.blp)
    api.register_blueprint(tables.blp)
    api.register_blueprint(tables.rounds)
    api.register_blueprint(supervision.blp)
    api.register_blueprint(accounts.blp)
    api.register_blueprint(audit.blp)
    api.register_blueprint(reports.blp)
    # After Api(): it registers its own JSON error handler, which this one replaces.
    register_problem_handlers(app)
    _time_requests(app)
    _mark_repeats(app)
    _kept_private(app)
    return app


def log_through(server: logging.Logger) -> None:
    """Under a server whose logger has handlers (gunicorn's) and a root logger with none:
    the application's lines (which database is in use) and the connection pool's warnings
    (why no connection could be had: a 503's reason, which the pool keeps to its log) reach
    the server's stream."""
    for name, level in (("pitboss", server.level), ("psycopg.pool",
                                                    max(server.level, logging.WARNING))):
        logger = logging.getLogger(name)
        if server.handlers and not logger.handlers:
            logger.handlers = list(server.handlers)
            logger.setLevel(level)
            logger.propagate = False


def _time_requests(app: Flask) -> None:
    """``Server-Timing: app;dur=<ms>`` on every response: the time spent inside the app, so a
    client can tell the server's share of a slow answer from the network's."""

    @app.before_request
    def start_clock() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def stop_clock(response: Response) -> Response:
        started = g.get("started")
        if started is not None:
            spent_ms = (time.perf_counter() - started) * 1e3
            response.headers["Server-Timing"] = f"app;dur={spent_ms:.2f}"
        return response


def _kept_private(app: Flask) -> None:
    """Every answer carries :data:`api.problems.KEPT_PRIVATE`."""

    @app.after_request
    def private(response: Response) -> Response:
        response.headers.update(KEPT_PRIVATE)
        return response


def _mark_repeats(app: Flask) -> None:
    """``Idempotent-Replayed: true`` on a change answered from its first time's receipt (an
    Idempotency-Key sent again): the answer is the first one, and nothing changed now."""

    @app.after_request
    def mark(response: Response) -> Response:
        if request.method == "POST" and 200 <= response.status_code < 300 \
                and request.headers.get("Idempotency-Key") and ledger().repeated():
            response.headers[REPLAYED] = "true"
        return response


def _database(app: Flask) -> DatabaseSettings:
    settings = app.config.get("DATABASE")
    if settings is None:
        return resolve_database(os.environ, data_dir=app.config.get("PITBOSS_DATA_DIR"))
    if not isinstance(settings, DatabaseSettings):
        raise TypeError(f"config DATABASE must be DatabaseSettings, not {type(settings).__name__}")
    return settings


def configured_schema(environ: Mapping[str, str]) -> str | None:
    """POSTGRES_SCHEMA, checked (DatabaseConfigError), or None where it is not set."""
    schema = environ.get("POSTGRES_SCHEMA", "").strip()
    return check_schema_name(schema) if schema else None


def ledger_env(settings: DatabaseSettings, environ: Mapping[str, str]) -> dict[str, str]:
    """The eventsourcing environment for the ledger and read models on ``settings``."""
    env = settings.eventsourcing_env()
    schema = configured_schema(environ)
    if schema is not None:
        env["POSTGRES_SCHEMA"] = schema
    return env


def _services(app: Flask, settings: DatabaseSettings) -> Services:
    env = app.config.get("EVENTSOURCING_ENV") or ledger_env(settings, os.environ)
    shoe_key = app.config.get("SHOE_KEY")
    create_tables = app.config.get("LEDGER_CREATE_TABLES")
    if create_tables is None:
        create_tables = create_tables_wanted(os.environ)
    return Services(env, shoe_key if shoe_key is not None else (lambda: load_shoe_key(os.environ)),
                    randbelow=app.config.get("LEDGER_RANDBELOW"),
                    clock=app.config.get("LEDGER_CLOCK"), create_tables=bool(create_tables),
                    ledger=app.config.get("LEDGER"))


def _keys(app: Flask) -> KeyRing:
    configured = app.config.get("API_KEYS")
    ring = (KeyRing(configured) if configured is not None
            else keyring_from(os.environ, default_keys_file(os.environ)))
    if not ring.keys():
        logger.warning("no API keys are configured: every route but /healthz, /docs and "
                       "/openapi.json answers 401 "
                       "(create one with `pitboss keys create --name N --role R`)")
    return ring


def _package_version() -> str:
    try:
        return version("pitboss")
    except PackageNotFoundError:
        return "0+unknown"

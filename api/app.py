"""The composition root: ``create_app`` wires settings, database and blueprints together.

Nothing is built at import time; ``api.wsgi`` (gunicorn) and the tests call ``create_app``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from flask import Flask
from flask_smorest import Api

from api import health
from api.database import DatabaseSettings, resolve_database
from api.problems import register_problem_handlers

DEFAULT_CONFIG: Mapping[str, Any] = {
    "API_TITLE": "pitboss",
    "OPENAPI_VERSION": "3.0.3",
    "OPENAPI_URL_PREFIX": "/",
    "OPENAPI_JSON_PATH": "openapi.json",
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
    app = Flask("api")
    app.config.from_mapping(DEFAULT_CONFIG)
    app.config["API_VERSION"] = _package_version()
    if config is not None:
        app.config.from_mapping(config)
    app.config["DATABASE"] = _database(app)

    api = Api(app)
    api.register_blueprint(health.blp)
    # After Api(): it registers its own JSON error handler, which this one replaces.
    register_problem_handlers(app)
    return app


def _database(app: Flask) -> DatabaseSettings:
    settings = app.config.get("DATABASE")
    if settings is None:
        return resolve_database(os.environ, data_dir=app.config.get("PITBOSS_DATA_DIR"))
    if not isinstance(settings, DatabaseSettings):
        raise TypeError(f"config DATABASE must be DatabaseSettings, not {type(settings).__name__}")
    return settings


def _package_version() -> str:
    try:
        return version("pitboss")
    except PackageNotFoundError:
        return "0+unknown"

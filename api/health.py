"""``GET /healthz``: is the service up, and does its database answer?

Anyone may ask (probes carry no key), so the answer says no more than that: which database
is in use, and why it does not answer, go to the log (and ``pitboss db check``)."""

from __future__ import annotations

import logging
from typing import Any

from flask import Response, current_app
from flask.views import MethodView
from marshmallow import Schema, fields

from api.database import DatabaseSettings, DatabaseUnavailable, check_database
from api.problems import PROBLEM_JSON, ProblemSchema, database_unavailable
from api.throttled_log import throttled
from api.views import Blueprint

logger = logging.getLogger("pitboss.api")

blp = Blueprint("health", __name__, description="Liveness and database reachability.")


class HealthSchema(Schema):
    status = fields.String(required=True, metadata={"description": 'Always "ok".'})


@blp.route("/healthz")
class Health(MethodView):
    @blp.response(200, HealthSchema)
    @blp.alt_response(
        503,
        schema=ProblemSchema,
        content_type=PROBLEM_JSON,
        description="The database does not answer.",
        headers={"Retry-After": {"description": "Seconds to wait before asking again.",
                                 "schema": {"type": "string"}}},
    )
    def get(self) -> dict[str, Any] | Response:
        """Answer 200 when the database runs ``select 1`` within the timeout, else 503."""
        settings: DatabaseSettings = current_app.config["DATABASE"]
        try:
            check_database(settings, timeout_s=current_app.config["HEALTH_DB_TIMEOUT_S"])
        except DatabaseUnavailable as exc:
            throttled().warning(logger, "health checks", "health check: %s", exc)
            return database_unavailable("The database does not answer; the service's log "
                                        "says why.")
        return {"status": "ok"}

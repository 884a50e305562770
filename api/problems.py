"""The one error shape of the API: RFC 7807 problem details (``application/problem+json``)."""

from __future__ import annotations

from typing import Any, Final

from flask import Flask, Response, jsonify
from marshmallow import Schema, fields
from werkzeug.exceptions import HTTPException

PROBLEM_JSON: Final = "application/problem+json"


class ProblemSchema(Schema):
    """RFC 7807 problem details, as every error response carries them."""

    type = fields.String(required=True, metadata={"description": "A URI naming the problem."})
    title = fields.String(required=True, metadata={"description": "A short summary."})
    status = fields.Integer(required=True, metadata={"description": "The HTTP status code."})
    detail = fields.String(required=True, metadata={"description": "What happened this time."})


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    type_: str = "about:blank",
    **extensions: Any,
) -> Response:
    """A problem-details response; ``extensions`` become extra members of the body."""
    body = {"type": type_, "title": title, "status": status, "detail": detail, **extensions}
    response = jsonify(body)
    response.status_code = status
    response.mimetype = PROBLEM_JSON
    return response


def http_exception_problem(error: HTTPException) -> Response:
    """Any HTTP error (404, 405, 413, 500 …) as problem details."""
    status = error.code or 500
    extensions: dict[str, Any] = {}
    # flask-smorest (webargs) attaches the schema validation messages to its 422 errors.
    data = getattr(error, "data", None)
    if isinstance(data, dict) and "messages" in data:
        extensions["errors"] = data["messages"]
    return problem(status, error.name, error.description or error.name, **extensions)


def register_problem_handlers(app: Flask) -> None:
    """Replace the default (HTML, or flask-smorest's JSON) error pages with problem details."""
    app.register_error_handler(HTTPException, http_exception_problem)

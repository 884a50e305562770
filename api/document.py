"""The OpenAPI document (``/openapi.json``) as the API is: flask-smorest's, with problem
details as the error shape of every status, each operation named as its view and described
with the roles it admits, and nested schemas that may be null written as client generators
read them."""

from __future__ import annotations

import http
import re
from collections.abc import Mapping
from typing import Any

from apispec import BasePlugin
from flask import Flask
from flask_smorest import Api
from flask_smorest.utils import prepare_response
from marshmallow import fields

from api.problems import PROBLEM_JSON, ProblemSchema

# Where /docs loads Swagger UI from, unless PITBOSS_SWAGGER_UI_URL names a mirror of the same
# release: each file is taken only as its bytes on the npm registry (the page's integrity
# digests, api/app.py), so a CDN or a mirror serving other script cannot run it on the page
# where a key is typed.
SWAGGER_UI_CDN = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.35.0/"
_MIRROR = re.compile(r"https?://[^/\s\"'<>`?#]+(?:/(?!/)[^\s\"'<>`?#]*)?"
                     r"|/(?!/)[^\s\"'<>`?#]*")


def swagger_ui_url(environ: Mapping[str, str]) -> str:
    """The folder /docs loads Swagger UI from: ``PITBOSS_SWAGGER_UI_URL`` (an http(s) URL, or a
    path on this host, such as a reverse proxy serves) or the CDN. ValueError if malformed."""
    url = environ.get("PITBOSS_SWAGGER_UI_URL", "").strip()
    if not url:
        return SWAGGER_UI_CDN
    if _MIRROR.fullmatch(url) is None or len(url) > 500:
        raise ValueError(f"PITBOSS_SWAGGER_UI_URL is an http(s) URL or a path starting with "
                         f"'/' (the folder holding swagger-ui-dist 5.35.0's files), without a "
                         f"query, not {url[:100]!r}")
    return url if url.endswith("/") else url + "/"


def documented_api(app: Flask) -> Api:
    """The app's flask-smorest ``Api``, its document set up as this module says."""
    api = PitbossApi(app, spec_kwargs={"extra_plugins": (_OperationNames(app),)})
    api.ma_plugin.converter.add_attribute_function(_nullable_reference)
    api.spec.components.security_scheme(
        "bearerAuth", {"type": "http", "scheme": "bearer",
                       "description": "An API key: `pitboss keys create --name N --role R`."})
    return api


# The header an error response carries, by status.
_HEADERS = {
    401: ("WWW-Authenticate", "Bearer: the key goes in an Authorization header."),
    503: ("Retry-After", "Seconds to wait before retrying (with the same Idempotency-Key)."),
}


class PitbossApi(Api):  # type: ignore[misc]  # flask-smorest carries no types
    """flask-smorest's Api with problem details as the documented error shape."""

    ERROR_SCHEMA = ProblemSchema

    def _register_pagination_header(self) -> None:
        """None: lists page by a cursor in their body, not by flask-smorest's header, whose
        schema (PaginationMetadata) a client generator made a model of for nothing."""

    def _register_responses(self) -> None:
        for status in http.HTTPStatus:
            response: dict[str, Any] = {"description": status.phrase}
            if not (100 <= status < 200) and status not in (204, 304):
                response["schema"] = self.ERROR_SCHEMA
            if status in _HEADERS:
                name, description = _HEADERS[status]
                response["headers"] = {name: {"description": description,
                                              "schema": {"type": "string"}}}
            prepare_response(response, self.spec, PROBLEM_JSON)
            self.spec.components.response(status.name, response, lazy=True)
        default: dict[str, Any] = {"description": "Problem details", "schema": ProblemSchema}
        prepare_response(default, self.spec, PROBLEM_JSON)
        self.spec.components.response("DEFAULT_ERROR", default, lazy=True)


class _OperationNames(BasePlugin):
    """Each operation named as its view is (``operationId``: ``start_round``, not a client
    generator's ``post_tables_table_id_rounds``), and described with the roles it admits."""

    def __init__(self, app: Flask) -> None:
        self._app = app

    def operation_helper(self, path: str | None = None, operations: dict[str, Any] | None = None,
                         **kwargs: Any) -> None:
        rule = kwargs.get("rule")
        if rule is None or not operations:
            return
        view = self._app.view_functions[rule.endpoint]
        view_class = getattr(view, "view_class", None)
        name = rule.endpoint.rpartition(".")[2]
        for method, operation in operations.items():
            function = getattr(view_class, method) if view_class is not None else view
            operation["operationId"] = name.lower() if view_class is not None else name
            roles = getattr(function, "pitboss_roles", None)
            who = ("Roles: " + ", ".join(sorted(roles)) + "." if roles
                   else "Anyone may call it, without a key.")
            operation["description"] = "\n\n".join(
                part for part in (operation.get("description"), who) if part)


def _nullable_reference(self: Any, field: fields.Field[Any], ret: dict[str, Any]) -> dict[str, Any]:
    """A nested schema that may be null as OpenAPI 3.0 client generators read it: apispec's
    ``anyOf`` of the schema and "any object or null" let them type it as any object."""
    if field.allow_none and len(ret.get("anyOf", ())) == 2 and \
            ret["anyOf"][0] == {"type": "object", "nullable": True}:
        return {"allOf": [ret.pop("anyOf")[1]], "nullable": True}
    return {}

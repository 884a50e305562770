"""What every view shares: the key check, the Idempotency-Key, the documented errors."""

from __future__ import annotations

import codecs
import functools
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar, cast

import flask
import flask_smorest
from gunicorn.http.errors import ParseException
from marshmallow import Schema
from webargs.core import missing
from webargs.flaskparser import FlaskParser, abort
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge, RequestTimeout
from werkzeug.routing import IntegerConverter

from api.auth import current_principal, requires
from api.gunicorn_worker import CLOSE_CONNECTION, refused_request
from api.problems import GIVEN_TWICE, NOT_A_QUERY_PARAMETER
from api.schemas import IdempotencyHeaderSchema
from api.strict_json import NotJson, RepeatedMember, members_once, no_constant

F = TypeVar("F", bound=Callable[..., Any])


class AsciiInteger(IntegerConverter):
    """A route's integer in ASCII digits (werkzeug's takes ``\\d``: Arabic-Indic or fullwidth
    digits read as 0 to 9)."""

    regex = "[0-9]+"


class Parser(FlaskParser):
    """webargs' parser, stricter about bodies. A body is JSON in UTF-8, uncompressed (415 for
    any other content type, charset or coding, content or transfer: webargs would read another
    type as no body at all, and the others as UTF-8 JSON all the same), well framed (400 for
    malformed chunks, and the connection closed, where gunicorn would let them out as a 500),
    whole (413 for a body sent in chunks that reaches the size cap: werkzeug would cut it
    there), and names each member once (400: a proxy keeping the first of two would see
    another request), and arriving (408 for one that ends short or stops coming). A 400, not
    webargs' 500, for JSON nested past the recursion limit or an integer of more digits than
    Python converts, and for NaN or Infinity."""

    def _raw_load_json(self, req: flask.Request) -> Any:
        try:
            data = req.get_data(cache=True)  # 413 for a declared length over the cap
        except ClientDisconnected:
            # The body stopped arriving (deploy/gunicorn.conf.py bounds each read), or ended
            # short under werkzeug's own server: told as a timeout, to a client that may
            # still be listening.
            raise RequestTimeout() from None
        except ParseException as malformed:  # chunks framed wrongly, under gunicorn
            req.environ.get(CLOSE_CONNECTION, lambda: None)()
            abort(400, messages={"request": [refused_request(400, str(malformed))]})
        if req.content_length is not None and len(data) < req.content_length:
            # Ended short under gunicorn, which hands over what came: a part that parses
            # would be carried out as if it were the whole request.
            raise RequestTimeout()
        # (an empty body too: framed so, it is not sent as the API takes it)
        if req.headers.get("Content-Encoding", "").strip().lower() not in ("", "identity"):
            abort(415, messages={"Content-Encoding": [
                "A request body is sent uncompressed: send it without Content-Encoding."]})
        codings = req.headers.get("Transfer-Encoding", "").lower().replace(" ", "").split(",")
        if set(codings) - {"", "chunked", "identity"}:  # gunicorn lets gzip through, unread
            abort(415, messages={"Transfer-Encoding": [
                "A request body is sent uncompressed: send it with no transfer coding but "
                "chunked."]})
        if not data:
            return missing  # no body is no body; the schema says whether one is needed
        cap = flask.current_app.config.get("MAX_CONTENT_LENGTH")
        if cap is not None and req.content_length is None and len(data) >= cap \
                and (len(data) > cap or _one_more_byte(req)):
            raise RequestEntityTooLarge()  # a byte past the cap: more than werkzeug read
        if req.mimetype != "application/json" \
                or req.mimetype_params.get("charset", "utf-8").lower() not in _UTF_8:
            abort(415, messages={"Content-Type": [
                "A request body is JSON in UTF-8: send it with Content-Type: "
                "application/json, with no charset or charset=utf-8."]})
        if data.startswith(codecs.BOM_UTF8):
            abort(400, messages={"json": ["The body starts with a byte order mark: send the "
                                          "JSON without one."]})
        try:
            return json.loads(data.decode(), object_pairs_hook=members_once,
                              parse_constant=no_constant)
        except RecursionError:
            abort(400, messages={"json": ["The JSON body is nested too deeply."]})
        except RepeatedMember as repeated:
            abort(400, messages={"json": [f"The JSON body names '{repeated}' twice."]})
        except NotJson as constant:
            abort(400, messages={"json": [f"The JSON body holds {constant}, which is not a "
                                          "JSON number."]})
        except json.JSONDecodeError as error:  # webargs would say "Invalid JSON body."
            abort(400, messages={"json": [f"The body is not JSON: {error.msg} at line "
                                          f"{error.lineno}, column {error.colno}."]})
        except UnicodeDecodeError as error:
            abort(400, messages={"json": [f"The body is not UTF-8: byte {error.start + 1} "
                                          f"({error.object[error.start]:#04x}) cannot be read "
                                          "there."]})
        except ValueError:  # an integer of more digits than Python converts
            abort(400, messages={"json": ["The JSON body holds a number too long to read."]})


def _one_more_byte(req: flask.Request) -> bytes:
    """The byte after what werkzeug read of a body sent in chunks (none at its end)."""
    try:
        return cast(bytes, req.environ["wsgi.input"].read(1))
    except OSError:  # the read waited its time out (deploy/gunicorn.conf.py)
        raise RequestTimeout() from None


# Charsets a JSON body may be declared in: UTF-8, and ASCII, which is UTF-8 too.
_UTF_8 = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


class Blueprint(flask_smorest.Blueprint):  # type: ignore[misc]  # flask-smorest has no types
    """Every blueprint of the API: flask-smorest's, with the parser above."""

    ARGUMENTS_PARSER = Parser()

SECURITY: list[dict[str, list[str]]] = [{"bearerAuth": []}]
# On a change answered from its first time's receipt (its Idempotency-Key sent again).
REPLAYED = "Idempotent-Replayed"
_REPLAYED_DOC = {"description": "true on an answer repeated from the first time this "
                                "Idempotency-Key was used: nothing changed now. Absent otherwise.",
                 "schema": {"type": "string", "enum": ["true"]}}

# Documented on every route that reads or writes the ledger (405, for a method a route does
# not take, is the path's, not an operation's: it falls under "default").
_READ_ERRORS = (401, 403, 404, 422, 503)
_WRITE_ERRORS = (401, 403, 404, 408, 409, 413, 415, 422, 503)


def guard(blp: Blueprint, *roles: str, mutating: bool = False,
          headers: Schema | None = None,
          errors: tuple[int, ...] | None = None) -> Callable[[F], F]:
    """The view answers only keys of ``roles``; a mutating one also needs an Idempotency-Key.

    ``errors`` are the refusals the document declares, when the view cannot answer all those of
    a view that reads (or writes) the ledger.

    The key check runs first (outermost), then the headers (``headers``, by default the
    Idempotency-Key alone; 400 when missing or malformed), then the view's own arguments. The
    view receives the key as ``request_id``, and any other header field by its name.
    """

    def decorator(view: F) -> F:
        decorated: Any = _query_as_documented(view)
        if mutating:
            schema = headers or IdempotencyHeaderSchema()
            if not any(f.data_key == "If-Match" for f in schema.fields.values()):
                decorated = _no_precondition(decorated)
            decorated = blp.arguments(schema, location="headers", as_kwargs=True,
                                      error_status_code=400)(decorated)
            _declares_replays(decorated)
        decorated = requires(*roles)(decorated)
        decorated = blp.doc(security=SECURITY)(decorated)
        for status in errors or (_WRITE_ERRORS if mutating else _READ_ERRORS):
            decorated = blp.alt_response(status, response=HTTPStatus(status).name)(decorated)
        decorated.pitboss_roles = frozenset(roles)
        decorated.pitboss_mutating = mutating
        return decorated  # type: ignore[no-any-return]

    return decorator


def _declares_replays(view: Any) -> None:
    """The view's success responses declare the header a repeat carries (``REPLAYED``)."""
    doc = getattr(view, "_apidoc", {})
    for code in doc.get("success_status_codes", []):
        for response in doc["response"]["responses"][code]:
            response.setdefault("headers", {})[REPLAYED] = _REPLAYED_DOC


def _query_as_documented(view: F) -> F:
    """The view refuses (422, naming it) a query parameter its documentation does not list,
    and one given twice: ignored, ``?version=1`` would answer with the latest version, and of
    ``?limit=1&limit=500`` webargs would keep the first where a proxy may keep the last."""
    documented = frozenset(
        field.data_key or name
        for parameters in getattr(view, "_apidoc", {}).get("arguments", {}).get(
            "parameters", [])
        if parameters.get("in") == "query"
        for name, field in _schema(parameters["schema"]).fields.items())

    @functools.wraps(view)
    def checked(*args: Any, **kwargs: Any) -> Any:
        query = flask.request.args
        unknown = [name for name in query if name not in documented]
        twice = [name for name in query if len(query.getlist(name)) > 1]
        if unknown or twice:
            abort(422, messages={"query": {
                **{name: [NOT_A_QUERY_PARAMETER] for name in unknown},
                **{name: [GIVEN_TWICE] for name in twice if name not in unknown}}})
        return view(*args, **kwargs)

    return checked  # type: ignore[return-value]


def _no_precondition(view: F) -> F:
    """A route that takes no ``If-Match`` refuses one (400): ignored, it would let a client
    that sent a precondition believe its change was conditional."""

    @functools.wraps(view)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if "If-Match" in flask.request.headers:
            abort(400, messages={"headers": {"If-Match": [
                "This route takes no If-Match: only round commands are made on a version."]}})
        return view(*args, **kwargs)

    return checked  # type: ignore[return-value]


def _schema(schema: Schema | type[Schema]) -> Schema:
    return schema() if isinstance(schema, type) else schema


def actor() -> str:
    """The name of the key holder: the actor of every event this request records."""
    return current_principal().name

"""The one error shape of the API: RFC 7807 problem details (``application/problem+json``).

Every error names what is at fault: ``error`` is its type, one word a client can switch on (the
ledger's refusal type, ``NotYourTurn``, ``InsufficientChips`` …, or the HTTP layer's,
``Unauthorized``, ``MethodNotAllowed`` …), and ``type`` the same as a URN; ``rule`` is the rule
of RULES.md a refusal enforces (or null); ``errors`` maps each offending field to its messages
(validation).

Statuses: a ledger refusal is 422, a missing table, round, shoe or account 404, a lost race
409 (look again and decide again), a round no longer at the version named in ``If-Match``
412; a body or query that does not fit the schema 422, a malformed body or a missing
``Idempotency-Key`` 400; a value the database refuses that got past the schemas 422 (a safety
net: the schemas refuse a NUL character first); no or a wrong API key 401, the wrong role 403;
an unreachable database 503.
A broken invariant of the ledger is a 500 (``InvariantBroken``): a defect, logged with its
traceback, and never the answer to any input; so is any other error nothing here expected
(``InternalServerError``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from eventsourcing.persistence import (
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
)
from flask import Flask, Response, current_app, g, jsonify, request
from marshmallow import Schema, fields
from werkzeug.exceptions import HTTPException

from api.schemas import RULING_MOVES_CHIPS, RULING_NAMES_NOBODY
from api.throttled_log import throttled
from ledger.errors import InvariantBroken, LedgerError
from projections.queries import ReadModelsNotMade

logger = logging.getLogger("pitboss.api")
refusals = logging.getLogger("pitboss.auth")

PROBLEM_JSON: Final = "application/problem+json"
STATUS_BY_KIND: Final = {"refused": 422, "not_found": 404, "conflict": 409, "stale": 412}
RETRY_AFTER_S: Final = 1
_BODY_LOCATIONS: Final = frozenset({"json", "form", "json_or_form"})


class ProblemSchema(Schema):
    """RFC 7807 problem details, as every error response carries them."""

    type = fields.String(required=True, metadata={
        "description": "A URI naming the problem: urn:pitboss:problem: and its error in words."})
    title = fields.String(required=True, metadata={"description": "A short summary."})
    status = fields.Integer(required=True, metadata={"description": "The HTTP status code."})
    detail = fields.String(required=True, metadata={"description": "What happened this time."})
    rule = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "The rule of RULES.md that refused the request (R-…), or "
                                 "null where none does."},
    )
    error = fields.String(
        required=True,
        metadata={"description": "The problem's type: the ledger's refusal (NotYourTurn, "
                                 "InsufficientChips …) or the HTTP layer's (Unauthorized, "
                                 "Forbidden, NotFound, MethodNotAllowed, "
                                 "RequestEntityTooLarge, InvalidRequest …)."},
    )
    errors = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String()),
        metadata={"description": "Messages by offending field (dotted for nested fields)."},
    )


def problem(
    status: int,
    detail: str,
    *,
    error: str,
    rule: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> Response:
    """A problem-details response of type ``error`` (its ``type`` is the URN of it);
    ``extensions`` become extra members of the body."""
    response = jsonify(problem_body(status, detail, error=error, rule=rule, **extensions))
    response.status_code = status
    response.mimetype = PROBLEM_JSON
    if headers:
        response.headers.update(headers)
    return response


def problem_body(status: int, detail: str, *, error: str, rule: str | None = None,
                 **extensions: Any) -> dict[str, Any]:
    """The members of a problem's body (also written outside Flask, by the gunicorn worker of
    :mod:`api.gunicorn_worker`). The title is the type in words (werkzeug's NotFound is "Not
    found", as the ledger's is): one title for each type (RFC 7807)."""
    return {"type": f"urn:pitboss:problem:{_kebab(error)}", "title": _words(error),
            "status": status, "detail": detail, "error": error, "rule": rule, **extensions}


def _log_refusal(detail: str) -> None:
    """A refused request records no event, and the access log names no one: say who tried
    (the key's holder, or the start of the hash of a key no holder has). The path is quoted:
    decoded, it may hold a line break, which would write a line of the caller's own."""
    who = g.get("principal")
    path = json.dumps(request.path)  # one way of quoting, whatever the path holds
    if who is not None:
        # The name quoted: a holder named "unknown keys" is not the source of unknown keys.
        throttled().warning(refusals, f"refusals of {json.dumps(who.name)}",
                            "refused %s %s to %s (%s): %s",
                            request.method, path, who.name, who.role, detail)
    elif g.get("refused_key") is not None:
        throttled().warning(refusals, "refusals of unknown keys",
                            "refused %s %s: a key no holder has (sha256 %s…)", request.method,
                            path, g.refused_key)


def http_exception_problem(error: HTTPException) -> Response:
    """Any HTTP error (400, 401, 404, 405, 413, 422, 500 …) as problem details."""
    status = error.code or 500
    extensions: dict[str, Any] = {}
    # What the error itself says in headers (Allow on a 405, …), but not its content type.
    headers = {name: value for name, value in error.get_headers()
               if name.lower() != "content-type"}
    data = getattr(error, "data", None)
    if isinstance(data, dict) and "messages" in data:
        # webargs (through flask-smorest) attaches the schema's messages by location.
        errors = flatten_messages(data["messages"])
        rule = _rule_of(errors)
        # A body of thousands of faulty items is answered with the first few, not a copy of
        # each, so the answer stays small whatever was sent: values at fault first (the rule
        # cited is theirs), then names the route does not take.
        ordered = sorted(errors.items(), key=lambda item: (set(item[1]) <= NOT_A_FIELD, item[0]))
        shown = {_shortened(name): messages[:FIELDS_SHOWN]
                 for name, messages in ordered[:FIELDS_SHOWN]}
        kind, detail = _SCHEMA_PROBLEMS.get(status, _OFF_SCHEMA)
        detail += "; ".join(f"{name}: {' '.join(messages)}" for name, messages in shown.items())
        if (more := len(errors) - len(shown)) > 0:
            detail += f"; and {more:,} more field{'s' if more > 1 else ''}"
        return problem(status, detail, error=kind, rule=rule, errors=shown)
    if status in (401, 403):
        # Both are about the key sent in the Authorization header: name it as the field.
        extensions["errors"] = {"Authorization": [error.description or error.name]}
        _log_refusal(error.description or error.name)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_S)
    detail = error.description or error.name
    if status == 404:  # no route matched: a value in the path is malformed, or no route
        detail = ("There is no such route, or a value in the path is not one it takes: "
                  "tables, rounds and shoes are named by UUID, a round's version by a whole "
                  "number in digits 0 to 9.")
    if status == 408:
        detail = ("The request's body stopped arriving before it was whole; nothing was done. "
                  "Send the request again, with the same Idempotency-Key.")
        extensions["errors"] = {"body": [detail]}
    if status == 413:
        cap = current_app.config["MAX_CONTENT_LENGTH"]
        detail = f"The body is larger than the {cap // 1024} KiB a request may hold."
        extensions["errors"] = {"body": [detail]}
    return problem(status, detail, error=type(error).__name__, headers=headers, **extensions)


# Headers of every answer, the app's and gunicorn's own refusals alike: no cache keeps one
# (they carry balances, rounds and keys' holders), and no browser reads one as another type
# than it says.
KEPT_PRIVATE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
# A refusal by a schema (webargs'), its type and the start of its detail, by status.
_OFF_SCHEMA = ("InvalidRequest", "The request does not fit its schema: ")
_SCHEMA_PROBLEMS = {400: ("MalformedRequest", "The request is malformed: "),
                    415: ("UnsupportedMediaType", "The body is not sent as the API takes it: ")}
# The most fields (and messages of one field) a schema refusal names, and the most characters
# of a field's name it shows (a name the route does not take may be as long as the body).
FIELDS_SHOWN = 10
FIELD_NAME_SHOWN_MAX = 100
# Messages about a name the request should not have sent, not about a value.
NOT_A_QUERY_PARAMETER = "Not a query parameter of this route."
GIVEN_TWICE = "Given more than once in the query."
NOT_A_FIELD = frozenset({"Unknown field.", NOT_A_QUERY_PARAMETER, GIVEN_TWICE})


def _shortened(name: str) -> str:
    return name if len(name) <= FIELD_NAME_SHOWN_MAX else name[:FIELD_NAME_SHOWN_MAX - 1] + "\u2026"


def _rule_of(errors: Mapping[str, list[str]]) -> str | None:
    """The rule a schema refusal enforces, where one does: an amount (a stake's, or a ruling's
    adjustment for a player) is a whole number of minor units (R-M1), and a ruling moves chips
    (R-V2); a change names its request (R-M4); a rule setting is one of its values (R-S1).
    Other fields are format only, and so is a name the request should not have sent (an
    unknown member or query parameter named ``amount``)."""
    valued = {name: set(messages) - NOT_A_FIELD for name, messages in errors.items()}
    if valued.get("Idempotency-Key"):
        return "R-M4"
    adjustments = [messages for name, messages in valued.items()
                   if name.startswith("adjustments.") and name.endswith(".value") and messages]
    if any(name.rsplit(".", 1)[-1] == "amount" and messages
           for name, messages in valued.items()) or any(
            messages - {RULING_MOVES_CHIPS} for messages in adjustments):
        return "R-M1"
    if adjustments or RULING_NAMES_NOBODY in valued.get("adjustments", ()):
        return "R-V2"
    # A rule setting out of its range, as the ledger cites it.
    return "R-S1" if any(name.startswith("overrides.") and messages
                         for name, messages in valued.items()) else None


def flatten_messages(messages: object) -> dict[str, list[str]]:
    """webargs' ``{location: {field: [msg] | {nested…}}}`` as ``{"a.b": [msg]}``."""
    out: dict[str, list[str]] = {}
    if not isinstance(messages, Mapping):
        return {"body": [str(messages)]}
    for location, found in messages.items():
        prefix = "" if location in _BODY_LOCATIONS or location in ("query", "headers") else (
            f"{location}."
        )
        _flatten(found, prefix, out, whole="body" if location in _BODY_LOCATIONS else location)
    return out


def _flatten(found: object, prefix: str, out: dict[str, list[str]], *, whole: str) -> None:
    if isinstance(found, Mapping):
        for name, inner in found.items():
            key = str(name)
            if key == "_schema":
                _flatten(inner, prefix, out, whole=whole)
                continue
            _flatten(inner, f"{prefix}{key}.", out, whole=whole)
        return
    name = prefix.rstrip(".") or whole
    items = found if isinstance(found, list | tuple) else [found]
    out.setdefault(name, []).extend(str(m) for m in items if not isinstance(m, Mapping))
    for m in items:
        if isinstance(m, Mapping):
            _flatten(m, prefix, out, whole=whole)


def _split(name: str) -> list[str]:
    """A class name's words, an acronym one word (``HTTPVersionNotSupported``: HTTP, Version,
    Not, Supported)."""
    return re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name) or [name]


def _words(name: str) -> str:
    first, *rest = _split(name)
    return " ".join([first, *(w if len(w) > 1 and w.isupper() else w.lower() for w in rest)])


def _kebab(name: str) -> str:
    return "-".join(_split(name)).lower()


def ledger_error_problem(error: LedgerError) -> Response:
    """A refusal of the ledger: its sentence, its rule, its type."""
    status = STATUS_BY_KIND.get(error.kind, 422)
    name = type(error).__name__
    extensions: dict[str, Any] = {}
    if error.field is not None:
        extensions["errors"] = {error.field: [error.message]}
    return problem(status, error.message, error=name, rule=error.rule or None,
                   **extensions)


def invariant_problem(error: InvariantBroken) -> Response:
    logger.error("a ledger invariant is broken", exc_info=error)
    return problem(500,
                   "The ledger found a broken guarantee and refused to continue; the event "
                   "has been logged for the operators. If the stored record itself is at "
                   "fault, an auditor finds where: walk the hash chain (GET /audit/chain) and "
                   "check what was read: a round (GET /audit/rounds/{id}/check), a shoe (GET "
                   "/audit/shoes/{id}/verification), the balances (GET /audit/balances/check).",
                   error="InvariantBroken")


def persistence_problem(error: PersistenceError) -> Response:
    if isinstance(error, IntegrityError):
        # The ledger retries its own races; one that escapes is a race lost for good.
        return problem(409, "Another request changed this first; nothing was "
                       "changed. Look at the current state and decide again.",
                       error="Conflict")
    throttled().warning(logger, "the database's unavailability", "database unavailable: %s",
                        type(error).__name__, exc_info=error)
    if request.method in ("GET", "HEAD"):  # a read records nothing, and carries no key
        return database_unavailable("The database did not answer in time or is busy; nothing "
                                    "was read. Ask again.")
    return database_unavailable("The database did not answer in time or is busy; the request "
                                "may not have been recorded. Retry it with the same "
                                "Idempotency-Key.")


def database_unavailable(detail: str) -> Response:
    """503, to be retried after :data:`RETRY_AFTER_S`."""
    return problem(503, detail, error="DatabaseUnavailable",
                   headers={"Retry-After": str(RETRY_AFTER_S)})


def read_models_problem(error: ReadModelsNotMade) -> Response:
    # Not the request's fault, nor a defect: the service runs before the tables it reads were
    # made (the worker never ran, or an upgrade's owner's start has not).
    throttled().warning(logger, "the read models' tables", "%s", error)
    return problem(503, str(error), error="ReadModelsNotMade",
                   headers={"Retry-After": str(RETRY_AFTER_S)})


def data_problem(error: DataError) -> Response:
    # The database refused a value the request carried. A safety net: the schemas refuse the
    # values known to do this (a NUL character in a text, a number out of range) first.
    logger.info("a request carried a value the database refuses: %s", error)
    return problem(422, "A value in this request cannot be stored or compared "
                   "by the database.", error="InvalidValue")


def register_problem_handlers(app: Flask) -> None:
    """Replace the default (HTML, or flask-smorest's JSON) error pages with problem details."""
    app.register_error_handler(HTTPException, http_exception_problem)
    app.register_error_handler(LedgerError, ledger_error_problem)
    app.register_error_handler(InvariantBroken, invariant_problem)
    # Unreachable, timed out or busy: retry later. Any other database error is a defect (500).
    for error in (OperationalError, InterfaceError, IntegrityError):
        app.register_error_handler(error, persistence_problem)
    app.register_error_handler(DataError, data_problem)
    app.register_error_handler(ReadModelsNotMade, read_models_problem)

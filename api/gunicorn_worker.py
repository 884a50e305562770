"""gunicorn's threaded worker, answering the requests gunicorn refuses itself in the API's one
error shape.

A request line over ``limit_request_line``, too many or too long header fields, a malformed
request line or header never reach the app: gunicorn answers them before it calls the app,
with an HTML page of its own. This worker has gunicorn write problem details instead
(``application/problem+json``, as :mod:`api.problems` writes every other error), with the
same status gunicorn chose, a sentence that says what to change, and the part of the request
at fault under ``errors``. ``deploy/gunicorn.conf.py`` names it as the worker class.
"""

from __future__ import annotations

import json
from contextlib import suppress
from http import HTTPStatus
from typing import Any

from gunicorn import util
from gunicorn.http import wsgi
from gunicorn.workers.gthread import ThreadWorker
from werkzeug.exceptions import default_exceptions

from api.problems import KEPT_PRIVATE, PROBLEM_JSON, problem_body

SHOWN_CHARS_MAX = 200  # of gunicorn's own words for a malformed request (they may quote it)
# In a request's environ under this worker: what closes its connection once it is answered
# (a body whose chunks are malformed leaves no telling where the next request would start).
CLOSE_CONNECTION = "pitboss.close_connection"


class ProblemThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no types
    """gunicorn's ``gthread`` worker whose own error answers are problem details."""

    def init_process(self) -> None:
        # gunicorn writes every answer of its own through ``util.write_error`` (Worker.
        # handle_error): in this worker process it writes problem details.
        cfg = self.cfg

        def write_problem(sock: Any, status: int, reason: str, mesg: str) -> None:
            util.write_nonblock(sock, problem_response(status, reason, mesg, cfg))

        def create(req: Any, sock: Any, client: Any, server: Any, cfg: Any) -> Any:
            resp, environ = created(req, sock, client, server, cfg)
            environ[CLOSE_CONNECTION] = resp.force_close
            return resp, environ

        util.write_error = write_problem
        created, wsgi.create = wsgi.create, create
        super().init_process()


def problem_response(status: int, reason: str, mesg: str, cfg: Any) -> bytes:
    """The whole HTTP response for one of gunicorn's own refusals (``mesg``: gunicorn's words
    for it; ``cfg``: its settings, for the limits a refusal names)."""
    error, detail, at_fault = _described(status, mesg, cfg)
    members: dict[str, Any] = {"errors": {at_fault: [detail]}} if at_fault else {}
    body = json.dumps(problem_body(status, detail, error=error, **members)).encode()
    # (gunicorn's reason for a transfer coding it does not take, 501, was "Bad Request")
    with suppress(ValueError):
        reason = HTTPStatus(status).phrase
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: {PROBLEM_JSON}\r\nContent-Length: {len(body)}\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in KEPT_PRIVATE.items()) + "\r\n")
    return head.encode("latin-1") + body


def _described(status: int, mesg: str, cfg: Any) -> tuple[str, str, str | None]:
    """The problem's type, its detail, and the part of the request at fault (None: not the
    request's)."""
    error = getattr(default_exceptions.get(status), "__name__", "BadRequest")
    if status == 414:
        return error, (f"The request line (method, path and query) is longer than the "
                       f"{cfg.limit_request_line:,} bytes the server reads; nothing was "
                       "done."), "request line"
    if status == 431:
        # gunicorn counts a field's line end in its size limit (0: no limit).
        longest = (f", or one (its name and value) longer than "
                   f"{cfg.limit_request_field_size - 2:,} bytes"
                   if cfg.limit_request_field_size else "")
        return error, (f"The request has more than {cfg.limit_request_fields} header "
                       f"fields{longest}, which the server does not read; nothing was done."
                       ), "headers"
    if status >= 500 and status != 501:
        return ("InternalServerError", "The server failed while answering this request; it "
                "has been logged for the operators. It may not have been carried out: retry "
                "it with the same Idempotency-Key.", None)
    return error, refused_request(status, mesg), "request"


def refused_request(status: int, mesg: str) -> str:
    """The sentence for a request gunicorn finds malformed (400) or cannot take (501), in its
    head or, read by the app, in its body (``mesg``: gunicorn's words)."""
    words = mesg if len(mesg) <= SHOWN_CHARS_MAX else mesg[:SHOWN_CHARS_MAX - 1] + "\u2026"
    what = ("is not well-formed HTTP" if status == 400 else
            "asks what the server does not do")
    return f"The request {what}, so the server did not read it and nothing was done: {words}."

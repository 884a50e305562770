"""A small HTTP client of the pitboss API for the command line and the benchmark.

One keep-alive connection per client (use one client per thread). Every mutating call carries
a fresh Idempotency-Key, and a call that lost its connection or met a busy database (503) is
sent again with the same key, so a retry never records anything twice: at once when the server
had closed the kept connection before answering (idle past gunicorn's keepalive, 5 s: the call
took 103 ms, paused for, and takes 4 ms), after a pause otherwise. A server that answered
before and then stops answering (a restart takes seconds) is tried again for up to
:data:`RECONNECT_WINDOW_S`; one that never answered is named at once.

It speaks just the HTTP/1.1 the API answers with (a status line, headers, a body of known
length or in chunks) over a plain socket: ``http.client`` parses every answer's headers as
an e-mail message, which cost each decision of ``pitboss simulate`` 0.2 to 0.3 ms.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import uuid
from collections.abc import Mapping
from typing import Any, BinaryIO, Final
from urllib.parse import urlencode, urlsplit, urlunsplit

RETRIES_MAX: Final = 3
RETRY_PAUSE_S: Final = 0.1  # the first pause after a lost connection; each one doubles
RETRY_PAUSE_MAX_S: Final = 2.0
RECONNECT_WINDOW_S: Final = 20.0  # how long a server that answered before is waited for,
# from the first lost connection of a request
# Longer than the server's own limit on a statement (POSTGRES_STATEMENT_TIMEOUT, 30 s by
# default), so that its answer (503: busy) arrives rather than this client's giving up.
TIMEOUT_S: Final = 60.0
RETRY_AFTER_MAX_S: Final = 5.0
LINE_MAX: Final = 65_536  # bytes in a status or header line
HEADERS_MAX: Final = 100
BODY_MAX: Final = 256 * 1024 * 1024  # bytes in one answer


class ProtocolError(ConnectionError):
    """The server's answer was not HTTP/1.1 as expected; the connection is dropped."""


class ApiError(Exception):
    """The API refused a request: its status and problem details."""

    def __init__(self, method: str, path: str, status: int, problem: Mapping[str, Any]) -> None:
        detail = problem.get("detail") or problem.get("title") or "no detail"
        rule = f" ({problem['rule']})" if problem.get("rule") else ""
        super().__init__(f"{method} {path}: {status} {detail}{rule}")
        self.status = status
        self.problem = dict(problem)


class Unreachable(ConnectionError):
    """No connection to the API could be made (retried as any lost connection is)."""


class NotAnswered(ConnectionResetError):
    """The server closed the connection before a byte of its answer: on a kept-alive connection,
    most likely one it had closed as idle (or a worker stopping) as the request was sent."""


class Client:
    """Calls the API with one bearer key over one keep-alive connection."""

    def __init__(self, url: str, key: str, *, timeout_s: float = TIMEOUT_S) -> None:
        parts = urlsplit(url)
        if "@" in url.replace(parts.netloc, "", 1):
            # A user and password holding a '/', '?' or '#' not percent-encoded (the host then
            # read from them), or an '@' in the path: which, cannot be told, so nothing of it
            # is shown.
            raise ValueError(f"not an http(s) URL pitboss can read ({parts.scheme}://…): it "
                             "holds an '@' after its host (in a user and password, which the "
                             "API does not take, percent-encode any '/', '?' or '#'; or leave "
                             "them out)")
        # Shown in every error: a user and password written in it (which the API does not
        # read: it takes a key) are left out.
        self._host_header = parts.netloc.rsplit("@", 1)[-1]
        self.url = urlunsplit(parts._replace(netloc=self._host_header)).rstrip("/")
        try:
            port = parts.port  # its refusal's words would quote the port as written
        except ValueError:
            raise ValueError(f"not an http(s) URL: {self.url!r}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {self.url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._key = key
        self._timeout_s = timeout_s
        self._conn: _Connection | None = None
        self._answered = False  # the server has answered this client before
        # The server's own time for the last answer (its Server-Timing header), in ms.
        self.last_server_ms: float | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> _Connection:
        if self._conn is None:
            try:
                self._conn = _Connection(self._host, self._port, self._https, self._timeout_s)
            except OSError as exc:  # refused, no route, no such host, TLS refused...
                # The message alone ("Connection refused") would not say which server.
                raise Unreachable(f"the API at {self.url} does not answer: "
                                  f"{exc.strerror or exc}") from exc
        return self._conn

    def get(self, path: str, **query: Any) -> Any:
        if query:
            path = f"{path}?{urlencode({k: v for k, v in query.items() if v is not None})}"
        return self.request("GET", path)

    def post(self, path: str, body: Mapping[str, Any] | None = None, *,
             idempotency_key: str | None = None, if_match: int | None = None) -> Any:
        """``if_match``: the round version a round command is meant for."""
        return self.request("POST", path, body, idempotency_key=idempotency_key or
                            str(uuid.uuid4()), if_match=if_match)

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                idempotency_key: str | None = None, if_match: int | None = None) -> Any:
        headers = {"Authorization": f"Bearer {self._key}", "Accept": "application/json"}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if if_match is not None:
            headers["If-Match"] = f'"{if_match}"'
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        lost, busy, first_lost, stale = 0, 0, 0.0, False
        while True:
            reused = self._conn is not None
            try:
                status, data, retry_after = self._send(method, path, payload, headers)
            except (ConnectionError, TimeoutError) as exc:
                self.close()
                if idempotency_key is None and method != "GET":
                    raise
                if isinstance(exc, NotAnswered) and reused and not stale:
                    # The server closed the connection kept from the last request (gunicorn
                    # closes one idle for its keepalive, 5 s): sent again at once, on a new one.
                    stale = True
                    continue
                lost += 1
                first_lost = first_lost or time.monotonic()
                pause = min(RETRY_PAUSE_S * 2 ** (lost - 1), RETRY_PAUSE_MAX_S)
                # A server that answered before is being restarted: waited for. One that never
                # answered, or answers in something other than HTTP, will not start to.
                patient = self._answered and not isinstance(exc, ProtocolError)
                if (lost > RETRIES_MAX and not patient) \
                        or time.monotonic() + pause - first_lost > RECONNECT_WINDOW_S:
                    raise
                time.sleep(pause)
                continue
            self._answered = True
            if status == 503 and busy < RETRIES_MAX:
                busy += 1
                time.sleep(min(retry_after, RETRY_AFTER_MAX_S))
                continue
            if status >= 400:
                raise ApiError(method, path, status, data if isinstance(data, dict) else {})
            return data

    def _send(self, method: str, path: str, payload: bytes | None,
              headers: dict[str, str]) -> tuple[int, Any, float]:
        lines = [f"{method} {self._prefix}{path} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if payload is not None:
            lines.append(f"Content-Length: {len(payload)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        conn = self._connection()
        try:
            status, answer, raw = conn.exchange(head + (payload or b""))
        except TimeoutError as exc:
            self.close()  # (the message alone, "timed out", would not say which server)
            raise TimeoutError(f"the API at {self.url} did not answer within "
                               f"{self._timeout_s:g} s") from exc
        except BaseException:
            self.close()
            raise
        if answer.get("connection", "").lower() == "close":
            self.close()
        try:
            data = json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            shown = " ".join(raw[:80].decode("utf-8", "replace").split())
            data = {"detail": f"an answer that is not the API's JSON "
                              f"({answer.get('content-type') or 'no content type'}: "
                              f"{shown!r}): is {self.url} the pitboss API?"}
        try:
            retry_after = float(answer.get("retry-after", "1") or 1)
        except ValueError:
            retry_after = 1.0
        self.last_server_ms = _server_ms(answer.get("server-timing", ""))
        return status, data, retry_after


class _Connection:
    """One socket to the server, kept open between requests."""

    def __init__(self, host: str, port: int, https: bool, timeout_s: float) -> None:
        sock = socket.create_connection((host, port), timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if https:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._reader: BinaryIO = sock.makefile("rb")

    def close(self) -> None:
        self._reader.close()
        self._sock.close()

    def exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        """Send one request; its answer's status, headers (names in lower case) and body."""
        try:
            self._sock.sendall(request)
            status_line = self._line()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise NotAnswered("the server closed the connection without answering") from exc
        while True:
            if not status_line:
                raise NotAnswered("the server closed the connection without answering")
            version, status, headers = self._head(status_line)
            if not 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
                break
            status_line = self._line()
        if version == b"HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            headers["connection"] = "close"
        return status, headers, self._body(status, headers)

    def _head(self, status_line: bytes) -> tuple[bytes, int, dict[str, str]]:
        version, _, rest = status_line.partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        for _ in range(HEADERS_MAX + 1):
            line = self._line()
            if line in (b"\r\n", b"\n"):
                return version, int(code), headers
            if not line:
                raise ConnectionResetError("the answer ended within its headers")
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon:
                raise ProtocolError(f"not a header line: {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        raise ProtocolError(f"more than {HEADERS_MAX} headers in one answer")

    def _body(self, status: int, headers: dict[str, str]) -> bytes:
        if status in (204, 304):
            return b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return self._chunks()
        if "content-length" not in headers:
            headers["connection"] = "close"  # the body runs to the end of the connection
            return self._exactly(BODY_MAX, to_end=True)
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise ProtocolError(f"a Content-Length of {headers['content-length']!r}") from None
        if not 0 <= length <= BODY_MAX:
            raise ProtocolError(f"a body of {length} bytes (at most {BODY_MAX})")
        return self._exactly(length)

    def _chunks(self) -> bytes:
        body = bytearray()
        while True:
            size_line = self._line().split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                size = -1
            if size < 0:
                raise ProtocolError(f"a chunk size of {size_line[:20]!r}")
            if size == 0:
                while self._line() not in (b"\r\n", b"\n", b""):
                    pass  # trailer fields, unused
                return bytes(body)
            if len(body) + size > BODY_MAX:
                raise ProtocolError(f"a body of more than {BODY_MAX} bytes")
            body += self._exactly(size)
            self._line()  # the CRLF after the chunk

    def _exactly(self, length: int, *, to_end: bool = False) -> bytes:
        data = self._reader.read(length)
        if len(data) < length and not to_end:
            raise ConnectionResetError(f"the answer ended after {len(data)} of {length} bytes")
        return data

    def _line(self) -> bytes:
        line = self._reader.readline(LINE_MAX + 1)
        if len(line) > LINE_MAX:
            raise ProtocolError(f"a line of more than {LINE_MAX} bytes")
        return line


def _server_ms(header: str) -> float | None:
    """``app;dur=1.23`` → 1.23."""
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == "dur":
            try:
                return float(value)
            except ValueError:
                return None
    return None

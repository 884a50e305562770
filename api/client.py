"""A small HTTP client of the pitboss API for the command line and the benchmark.

One keep-alive connection per client (use one client per thread). Every mutating call carries
a fresh Idempotency-Key, and a call that lost its connection or met a busy database (503) is
sent again with the same key, so a retry never records anything twice.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

RETRIES_MAX: Final = 3
TIMEOUT_S: Final = 30.0
RETRY_AFTER_MAX_S: Final = 5.0


class ApiError(Exception):
    """The API refused a request: its status and problem details."""

    def __init__(self, method: str, path: str, status: int, problem: Mapping[str, Any]) -> None:
        detail = problem.get("detail") or problem.get("title") or "no detail"
        rule = f" ({problem['rule']})" if problem.get("rule") else ""
        super().__init__(f"{method} {path}: {status} {detail}{rule}")
        self.status = status
        self.problem = dict(problem)


class Client:
    """Calls the API with one bearer key over one keep-alive connection."""

    def __init__(self, url: str, key: str, *, timeout_s: float = TIMEOUT_S) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._key = key
        self._timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        # The server's own time for the last answer (its Server-Timing header), in ms.
        self.last_server_ms: float | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout_s)
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
        for attempt in range(RETRIES_MAX + 1):
            try:
                status, data, retry_after = self._send(method, path, payload, headers)
            except (ConnectionError, http.client.HTTPException, TimeoutError):
                self.close()
                if attempt >= RETRIES_MAX or (idempotency_key is None and method != "GET"):
                    raise
                time.sleep(0.1 * (attempt + 1))
                continue
            if status == 503 and attempt < RETRIES_MAX:
                time.sleep(min(retry_after, RETRY_AFTER_MAX_S))
                continue
            if status >= 400:
                raise ApiError(method, path, status, data if isinstance(data, dict) else {})
            return data
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(self, method: str, path: str, payload: bytes | None,
              headers: dict[str, str]) -> tuple[int, Any, float]:
        conn = self._connection()
        conn.request(method, self._prefix + path, body=payload, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self.close()
        try:
            data = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            data = {"detail": raw[:200].decode("utf-8", "replace")}
        try:
            retry_after = float(response.getheader("Retry-After", "1") or 1)
        except ValueError:
            retry_after = 1.0
        self.last_server_ms = _server_ms(response.getheader("Server-Timing", ""))
        return response.status, data, retry_after


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

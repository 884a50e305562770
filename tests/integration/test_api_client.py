"""The command line's HTTP client against a real socket server that answers as scripted:
keep-alive, chunked and close-delimited bodies, a dropped connection, a broken answer."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from api import client as client_module
from api.client import ApiError, Client, ProtocolError, Unreachable

DROP = b""  # close the connection instead of answering
SLOW = b"slow"  # answer nothing for SLOW_S, then close the connection
SLOW_S = 1.5


@dataclass
class Scripted:
    """Answers each request with the next scripted bytes; records what it was sent."""

    listener: socket.socket
    answers: list[bytes] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    connections: int = 0
    thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def start(self, *answers: bytes) -> None:
        self.answers[:] = answers
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                self._converse(conn)

    def _converse(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        while self.answers:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = reader.readline()
                if not line:
                    return
                head += line
            request_line, *lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (x.partition(":") for x in lines if x)}
            body = reader.read(int(headers.get("content-length", "0")))
            self.requests.append((request_line, headers, body))
            answer = self.answers.pop(0)
            if answer == SLOW:
                time.sleep(SLOW_S)
                return
            if answer == DROP:
                return
            conn.sendall(answer)
            head = answer.split(b"\r\n\r\n")[0]
            if b"Connection: close" in head or head.startswith(b"HTTP/1.0"):
                return


@pytest.fixture
def server() -> Iterator[Scripted]:
    scripted = Scripted(socket.create_server(("127.0.0.1", 0)))
    try:
        yield scripted
    finally:
        scripted.listener.close()
        if scripted.thread is not None:
            scripted.thread.join(timeout=5)


def answer(status: str, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def test_answers_share_one_kept_alive_connection(server):
    server.start(answer("200 OK", b'{"a": 1}', "Server-Timing: app;dur=1.25"),
                 answer("200 OK", b'{"b": 2}'))
    client = Client(server.url, "k")
    assert client.get("/one", page=2) == {"a": 1}
    assert client.last_server_ms == 1.25
    assert client.post("/two", {"x": 1}, idempotency_key="req-1", if_match=7) == {"b": 2}
    client.close()
    assert server.connections == 1
    (first, first_headers, _), (second, headers, body) = server.requests
    assert first == "GET /one?page=2 HTTP/1.1"
    assert first_headers["authorization"] == "Bearer k"
    assert second == "POST /two HTTP/1.1"
    assert headers["idempotency-key"] == "req-1"
    assert headers["if-match"] == '"7"'
    assert json.loads(body) == {"x": 1}


def test_a_chunked_answer_is_put_together(server):
    server.start(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"4\r\n{\"a\"\r\n5;ext=1\r\n: [1]\r\n1\r\n}\r\n0\r\n\r\n")
    client = Client(server.url, "k")
    assert client.get("/chunked") == {"a": [1]}
    client.close()


def test_connection_close_and_a_body_without_length_open_a_new_connection(server):
    server.start(answer("200 OK", b"[1]", "Connection: close"),
                 b'HTTP/1.0 200 OK\r\n\r\n{"to": "the end"}',
                 answer("200 OK", b"[3]"))
    client = Client(server.url, "k")
    assert client.get("/a") == [1]
    assert client.get("/b") == {"to": "the end"}
    assert client.get("/c") == [3]
    client.close()
    assert server.connections == 3


def test_an_interim_answer_is_passed_over(server):
    server.start(b"HTTP/1.1 100 Continue\r\n\r\n" + answer("200 OK", b'{"after": "100"}'))
    client = Client(server.url, "k")
    assert client.get("/x") == {"after": "100"}
    client.close()


def test_an_answer_cut_off_in_its_headers_is_a_lost_connection(server):
    server.start(*[b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n"] * 4)
    client = Client(server.url, "k")
    with pytest.raises(ConnectionResetError, match="ended within its headers"):
        client.get("/x")
    client.close()
    assert server.connections == 4


def test_a_dropped_connection_is_retried_with_the_same_idempotency_key(server):
    server.start(DROP, answer("200 OK", b'{"ok": true}'))
    client = Client(server.url, "k")
    assert client.post("/rounds/r/hit", {"box": 1}) == {"ok": True}
    client.close()
    keys = [headers["idempotency-key"] for _, headers, _ in server.requests]
    assert len(keys) == 2
    assert keys[0] == keys[1]
    assert server.connections == 2


def test_a_kept_connection_the_server_closed_is_sent_again_at_once(server, monkeypatch):
    # gunicorn closes a connection idle for its keepalive (5 s), or one of a worker that stops:
    # the next request on it met a closed connection and waited 0.1 s before it was sent again.
    pauses: list[float] = []
    monkeypatch.setattr("api.client.time.sleep", pauses.append)
    server.start(answer("200 OK", b'{"a": 1}'), DROP, DROP, answer("200 OK", b'{"b": 2}'))
    client = Client(server.url, "k")
    assert client.get("/a") == {"a": 1}
    # Dropped on the kept connection: sent again at once; dropped on the new one too: a
    # connection lost as any other, paused for.
    assert client.post("/b", {"x": 1}, idempotency_key="req-b") == {"b": 2}
    client.close()
    assert pauses == [client_module.RETRY_PAUSE_S]
    assert server.connections == 3
    assert [headers.get("idempotency-key") for _, headers, _ in server.requests] == [
        None, "req-b", "req-b", "req-b"]


def test_a_refusal_carries_its_problem_details(server):
    problem = json.dumps({"title": "Conflict", "detail": "The round moved on.",
                          "rule": "R-V1"}).encode()
    server.start(answer("412 Precondition Failed", problem,
                        "Content-Type: application/problem+json"))
    client = Client(server.url, "k")
    with pytest.raises(ApiError) as refused:
        client.post("/rounds/r/stand", {}, if_match=3)
    client.close()
    assert refused.value.status == 412
    assert str(refused.value) == "POST /rounds/r/stand: 412 The round moved on. (R-V1)"


def test_a_refusal_that_is_not_the_apis_says_so_and_names_the_url(server):
    # It said "GET /x: 404 <!DOCTYPE HTML>": a server other than the API, unnamed.
    page = b"<!DOCTYPE HTML>\n<html><head><title>Error response</title></head></html>"
    server.start(answer("404 File not found", page, "Content-Type: text/html"))
    client = Client(server.url, "k")
    with pytest.raises(ApiError) as refused:
        client.get("/x")
    client.close()
    assert str(refused.value) == (
        "GET /x: 404 an answer that is not the API's JSON (text/html: '<!DOCTYPE HTML> <html>"
        f"<head><title>Error response</title></head></html>'): is {server.url} the pitboss "
        "API?")


@pytest.mark.parametrize(("body", "table_asked"), [
    (b'[{"version": 1}]', False), (b'{"not": "a list"}', False), (b"[]", False),
    (b'[{"state": {"table_id": "t"}}]', True)])
def test_a_replay_from_a_server_that_is_not_the_api_is_refused_in_a_sentence(server, body,
                                                                              table_asked):
    # A traceback (KeyError), or for [] nothing printed and exit status 0.
    from click.testing import CliRunner

    from api.cli import main

    table = answer("200 OK", b'{"name": "T1"}', "Content-Type: application/json")
    server.start(answer("200 OK", body, "Content-Type: application/json"),
                 *([table] if table_asked else []))
    round_id = "00000000-0000-0000-0000-000000000001"
    replayed = CliRunner().invoke(main, ["replay", round_id, "--url", server.url, "--key", "k"])
    assert replayed.exit_code == 1, replayed.output
    assert replayed.output.startswith(
        f"Error: the server at {server.url} answered the replay of round {round_id} with "
        "something else than a replay ("), replayed.output
    assert replayed.output.endswith("): is it the pitboss API?\n")


def test_an_answer_that_is_not_http_is_a_protocol_error(server):
    server.start(*[b"SSH-2.0-OpenSSH\r\n\r\n"] * 4)
    client = Client(server.url, "k")
    with pytest.raises(ProtocolError, match=r"not an HTTP/1\.1 status line"):
        client.get("/x")
    client.close()
    assert len(server.requests) == 4  # the first try and three more, each on a new connection


def test_an_api_that_does_not_answer_is_named_with_its_url(unused_port):
    # The CLI said only "[Errno 111] Connection refused".
    url = f"http://127.0.0.1:{unused_port}"
    with pytest.raises(Unreachable, match=re.escape(
            f"the API at {url} does not answer: Connection refused")):
        Client(url, "pbk_x").get("/healthz")
    # A user and password written in the URL (the API takes a key, not them) were shown too.
    with pytest.raises(Unreachable, match=re.escape(f"the API at {url} does not answer")):
        Client(url.replace("//", "//ann:s3cret@"), "pbk_x").get("/healthz")
    with pytest.raises(ValueError, match=re.escape("not an http(s) URL: 'htp://127.0.0.1:1'")):
        Client("htp://ann:s3cret@127.0.0.1:1", "pbk_x")  # nor where it is refused
    for cut in ("s3#cret", "s3/cret", "s3?cret"):  # nor any part of one that does not parse
        with pytest.raises(ValueError, match="holds an '@' after its host") as refused:
            Client(f"http://ann:{cut}@127.0.0.1:1", "pbk_x")
        assert "s3" not in str(refused.value)
        assert "ann" not in str(refused.value)


def test_an_api_that_does_not_speak_tls_is_named_with_its_url():
    # An https URL for a plain-HTTP server: the TLS refusal did not name the URL either.
    with socket.create_server(("127.0.0.1", 0)) as plain:
        def answer_in_plain_http() -> None:
            while True:
                try:
                    conn, _ = plain.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        threading.Thread(target=answer_in_plain_http, daemon=True).start()
        url = f"https://127.0.0.1:{plain.getsockname()[1]}"
        with pytest.raises(Unreachable, match=re.escape(f"the API at {url} does not answer: ")):
            Client(url, "pbk_x", timeout_s=5).get("/healthz")


def test_a_server_restarting_is_waited_for_and_the_change_sent_again_with_its_key(unused_port):
    # A restart of `pitboss serve` takes seconds; the client gave up after half a second, and
    # `pitboss simulate` with it, leaving its rounds open.
    first = Scripted(socket.create_server(("127.0.0.1", unused_port)))
    first.start(answer("200 OK", b'{"role": "dealer"}'), DROP)
    client = Client(first.url, "k")
    assert client.get("/whoami") == {"role": "dealer"}  # the server has answered this client
    restarted: list[Scripted] = []

    def restart() -> None:
        assert first.thread is not None
        first.thread.join(timeout=5)  # it dropped the change's connection: it is gone
        first.listener.close()  # refused from now on
        time.sleep(1.5)
        again = Scripted(socket.create_server(("127.0.0.1", unused_port)))
        restarted.append(again)  # before it answers: the client may return before the next line
        again.start(answer("200 OK", b'{"ok": true}'))

    threading.Thread(target=restart, daemon=True).start()
    assert client.post("/rounds/r/hit", {"box": 1}) == {"ok": True}
    client.close()
    (again,) = restarted
    again.listener.close()
    sent = [headers["idempotency-key"] for _, headers, _ in first.requests[1:] + again.requests]
    assert len(sent) == 2
    assert sent[0] == sent[1]


def test_a_slow_answer_is_waited_for_again_from_when_it_was_lost(server, monkeypatch):
    # The window was counted from the request's start: a request that timed out after it was
    # never sent again, and "timed out" did not say which server.
    monkeypatch.setattr(client_module, "RECONNECT_WINDOW_S", 1.0)  # shorter than the timeout
    server.start(answer("200 OK", b'{"role": "dealer"}'), SLOW, answer("200 OK", b'{"ok": 1}'))
    client = Client(server.url, "k", timeout_s=1.2)
    assert client.get("/whoami") == {"role": "dealer"}
    assert client.post("/rounds/r/stand", {"box": 1}) == {"ok": 1}  # timed out, then sent again
    client.close()
    keys = [headers["idempotency-key"] for _, headers, _ in server.requests[1:]]
    assert len(keys) == 2
    assert keys[0] == keys[1]


def test_a_timeout_names_the_api(server, monkeypatch):
    monkeypatch.setattr(client_module, "RECONNECT_WINDOW_S", 0.5)  # tried once more at most
    server.start(answer("200 OK", b"{}"), SLOW)
    client = Client(server.url, "k", timeout_s=0.5)
    client.get("/whoami")
    with pytest.raises(TimeoutError, match=re.escape(
            f"the API at {server.url} did not answer within 0.5 s")):
        client.post("/rounds/r/stand", {"box": 1}, idempotency_key=None)  # (a fresh key)
    client.close()

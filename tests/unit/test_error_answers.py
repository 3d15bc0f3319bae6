"""Errors on the wire, pinned byte for byte: the full stack's `error_response`, the fast
path's ASGI handler and the edge server's raw answers (to `/v1/invoke` and to the app
behind it) carry the same status, headers and JSON body they always have."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.errors import AgentFailed, Overloaded, QuotaExceeded, ReachError, Unauthorized
from agent_reach.server.fastpath import handle_invoke
from agent_reach.server.responses import error_response
from agent_reach.testing.servers import run_coordinator

TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE}-b7ad6b7169203331-01"
ERRORS: dict[str, Callable[[], ReachError]] = {
    "unauthorized": lambda: Unauthorized("send an API key"),
    "token": lambda: Unauthorized('the "token" is\nbad', code="token_signature"),
    "quota": lambda: QuotaExceeded("slow down", retry_after_s=1.2, capability="echo"),
    "overloaded": lambda: Overloaded("busy", retry_after_s=2, limit="coordinator"),
    "agent": lambda: AgentFailed(
        "the agent answered HTTP 500", http_status=500, agent_answer={"n": [1, None]}
    ),
}
FULL_STACK: dict[str, tuple[int, list[tuple[bytes, bytes]], bytes]] = {
    "agent": (
        502,
        [(b"content-length", b"120"), (b"content-type", b"application/json")],
        (
            b'{"error":{"code":"agent_error","message":"the agent answered HTTP 500","http_stat'
            b'us":500,"agent_answer":{"n":[1,null]}}}'
        ),
    ),
    "overloaded": (
        503,
        [
            (b"retry-after", b"2"),
            (b"content-length", b"88"),
            (b"content-type", b"application/json"),
        ],
        (
            b'{"error":{"code":"overloaded","message":"busy","retry_after_s":2,"limit":"coordin'
            b'ator"}}'
        ),
    ),
    "quota": (
        429,
        [
            (b"retry-after", b"2"),
            (b"content-length", b"97"),
            (b"content-type", b"application/json"),
        ],
        (
            b'{"error":{"code":"quota_exceeded","message":"slow down","retry_after_s":1.2,"capa'
            b'bility":"echo"}}'
        ),
    ),
    "token": (
        401,
        [
            (
                b"www-authenticate",
                (
                    b'Bearer realm="agent-reach", error="invalid_token", error_description="the'
                    b' token isbad"'
                ),
            ),
            (b"content-length", b"70"),
            (b"content-type", b"application/json"),
        ],
        b'{"error":{"code":"token_signature","message":"the \\"token\\" is\\nbad"}}',
    ),
    "unauthorized": (
        401,
        [
            (b"www-authenticate", b'Bearer realm="agent-reach"'),
            (b"content-length", b"61"),
            (b"content-type", b"application/json"),
        ],
        b'{"error":{"code":"unauthorized","message":"send an API key"}}',
    ),
}
FAST_PATH: dict[str, tuple[int, list[tuple[bytes, bytes]], bytes]] = {
    "agent": (
        502,
        [
            (b"content-type", b"application/json"),
            (b"x-trace-id", b"0af7651916cd43dd8448eb211c80319c"),
        ],
        (
            b'{"error":{"code":"agent_error","message":"the agent answered HTTP 500","http_stat'
            b'us":500,"agent_answer":{"n":[1,null]},"trace_id":"0af7651916cd43dd8448eb211c80319'
            b'c"}}'
        ),
    ),
    "overloaded": (
        503,
        [
            (b"content-type", b"application/json"),
            (b"x-trace-id", b"0af7651916cd43dd8448eb211c80319c"),
            (b"retry-after", b"2"),
        ],
        (
            b'{"error":{"code":"overloaded","message":"busy","retry_after_s":2,"limit":"coordin'
            b'ator","trace_id":"0af7651916cd43dd8448eb211c80319c"}}'
        ),
    ),
    "quota": (
        429,
        [
            (b"content-type", b"application/json"),
            (b"x-trace-id", b"0af7651916cd43dd8448eb211c80319c"),
            (b"retry-after", b"2"),
        ],
        (
            b'{"error":{"code":"quota_exceeded","message":"slow down","retry_after_s":1.2,"capa'
            b'bility":"echo","trace_id":"0af7651916cd43dd8448eb211c80319c"}}'
        ),
    ),
    "token": (
        401,
        [
            (b"content-type", b"application/json"),
            (b"x-trace-id", b"0af7651916cd43dd8448eb211c80319c"),
            (
                b"www-authenticate",
                (
                    b'Bearer realm="agent-reach", error="invalid_token", error_description="the'
                    b' token isbad"'
                ),
            ),
        ],
        (
            b'{"error":{"code":"token_signature","message":"the \\"token\\" is\\nbad","trace_id'
            b'":"0af7651916cd43dd8448eb211c80319c"}}'
        ),
    ),
    "unauthorized": (
        401,
        [
            (b"content-type", b"application/json"),
            (b"x-trace-id", b"0af7651916cd43dd8448eb211c80319c"),
            (b"www-authenticate", b'Bearer realm="agent-reach"'),
        ],
        (
            b'{"error":{"code":"unauthorized","message":"send an API key","trace_id":"0af765191'
            b'6cd43dd8448eb211c80319c"}}'
        ),
    ),
}
EDGE: dict[str, bytes] = {
    "app without a key": (
        b'HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer realm="agent-reach"\r\ncontent-'
        b"length: 103\r\ncontent-type: application/json\r\nx-reach-node: *\r\nconnection: close"
        b'\r\n\r\n{"error":{"code":"unauthorized","message":"a valid API key is required (Autho'
        b'rization: Bearer <key>)"}}'
    ),
    "bad json": (
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 118\r\n"
        b"x-trace-id: 0af7651916cd43dd8448eb211c80319c\r\nx-reach-node: *\r\nconnection: close"
        b'\r\n\r\n{"error":{"code":"invalid_json","message":"the body is not valid JSON","trace'
        b'_id":"0af7651916cd43dd8448eb211c80319c"}}'
    ),
    "invoke with a bad token": (
        b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 149\r"
        b"\nx-trace-id: 0af7651916cd43dd8448eb211c80319c\r\nx-reach-node: *\r\nwww-authenticate"
        b': Bearer realm="agent-reach"\r\nconnection: close\r\n\r\n{"error":{"code":"unauthoriz'
        b'ed","message":"a valid API key is required (Authorization: Bearer <key>)","trace_id":'
        b'"0af7651916cd43dd8448eb211c80319c"}}'
    ),
    "invoke without a key": (
        b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 149\r"
        b"\nx-trace-id: 0af7651916cd43dd8448eb211c80319c\r\nx-reach-node: *\r\nwww-authenticate"
        b': Bearer realm="agent-reach"\r\nconnection: close\r\n\r\n{"error":{"code":"unauthoriz'
        b'ed","message":"a valid API key is required (Authorization: Bearer <key>)","trace_id":'
        b'"0af7651916cd43dd8448eb211c80319c"}}'
    ),
}


EDGE_REQUESTS = {
    "invoke without a key": (
        "POST /v1/invoke HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n"
        f"traceparent: {TRACEPARENT}\r\ncontent-type: application/json\r\ncontent-length: 2"
        "\r\n\r\n{}"
    ),
    "invoke with a bad token": (
        "POST /v1/invoke HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n"
        f"traceparent: {TRACEPARENT}\r\nauthorization: Bearer a.b.c\r\n"
        "content-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    ),
    "app without a key": (
        "GET /v1/agents HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"
    ),
    "bad json": (
        "POST /v1/invoke HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n"
        f"traceparent: {TRACEPARENT}\r\nauthorization: Bearer {'k' * 40}\r\n"
        "content-type: application/json\r\ncontent-length: 1\r\n\r\n{"
    ),
}


class _Security:
    """Refuses every request with the error under test, as authentication would."""

    def __init__(self, error: ReachError) -> None:
        self.error = error
        self.origins = self

    def check(self, *_: Any) -> None:
        return None

    def authenticate_cached(self, *_: Any) -> None:
        return None

    async def authenticate(self, *_: Any) -> None:
        raise self.error


class _Service:
    def __init__(self, error: ReachError) -> None:
        self.security = _Security(error)


def full_stack(name: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    response = error_response(ERRORS[name]())
    return response.status_code, list(response.raw_headers), bytes(response.body)


async def fast_path(name: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body is not read once the caller is refused")

    scope = {"type": "http", "headers": [(b"traceparent", TRACEPARENT.encode())]}
    service: Any = _Service(ERRORS[name]())
    await handle_invoke(scope, receive, send, service, 1024)
    start, body = sent
    return start["status"], list(start["headers"]), body["body"]


def raw(url: str, request: str) -> bytes:
    """The whole answer to one request on its own connection, the per-process headers
    (date, the node's name) masked."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request.encode())
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    answer = b"".join(chunks)
    return re.sub(rb"(?im)^(date|x-reach-node): [^\r]*", rb"\1: *", answer)


@pytest.fixture(scope="module")
def coordinator() -> Iterator[str]:
    settings = Settings(auth="on", admin_key=SecretStr("k" * 40), decision_log="off")
    with run_coordinator(settings) as (url, _):
        yield url


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_the_full_stack_renders_each_error_as_pinned(name: str) -> None:
    assert full_stack(name) == FULL_STACK[name]


@pytest.mark.parametrize("name", sorted(ERRORS))
async def test_the_fast_path_renders_each_error_as_pinned(name: str) -> None:
    assert await fast_path(name) == FAST_PATH[name]


@pytest.mark.parametrize("name", sorted(EDGE_REQUESTS))
def test_the_edge_server_answers_each_refusal_as_pinned(coordinator: str, name: str) -> None:
    assert raw(coordinator, EDGE_REQUESTS[name]) == EDGE[name]

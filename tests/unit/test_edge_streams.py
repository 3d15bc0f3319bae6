"""The edge server and event streams: a client that leaves an SSE answer is noticed at
once, even while nothing is being written (an EOF is not a half-close to outlive)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agent_reach.server.edge import EdgeConfig
from agent_reach.server.edge_stream import relay_asgi
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until
from agent_reach.wire.event_stream import EventStream


def _silent_stream(left: threading.Event) -> Starlette:
    """One event, then silence until the client goes (`left` is set then)."""

    async def events(_: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            try:
                yield b"data: hello\n\n"
                await asyncio.Event().wait()  # never set: only the client leaving ends it
            finally:
                left.set()

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/events", events)])


def test_a_client_closing_an_event_stream_is_told_to_the_app_while_it_writes_nothing() -> None:
    left = threading.Event()
    with ServerThread(_silent_stream(left), edge=EdgeConfig()) as server:
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            seen = b""
            while b"hello" not in seen:
                seen += sock.recv(65536)
            assert b"text/event-stream" in seen
        wait_until(left.is_set, "the app to learn its client left")
        wait_until(lambda: not server.server.connections, "the connection to close")


async def test_a_streamed_invoke_answer_through_asgi_is_one_response_of_events() -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client never leaves
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    stream = EventStream.of_answer({"status": "ok", "result": {"text": "hi"}})
    await relay_asgi(stream, [(b"x-trace-id", b"t-1")], receive, send)
    assert sent[0]["type"] == "http.response.start"
    assert (b"content-type", b"text/event-stream") in sent[0]["headers"]
    assert (b"x-trace-id", b"t-1") in sent[0]["headers"]
    assert sent[1] == {
        "type": "http.response.body",
        "body": b'event: reach.end\ndata: {"status":"ok","result":{"text":"hi"}}\n\n',
        "more_body": True,
    }
    assert sent[2] == {"type": "http.response.body", "body": b""}

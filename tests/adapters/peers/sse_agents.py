"""Streaming agents: one on Starlette's StreamingResponse (uvicorn), one on Node's `http`.

Both answer a delivery with server-sent events `event: token` carrying the payload's
`words` (default first, second, third); every event after the first waits until the
test opens that request's gate (`POST /gate/{request_id}`), so a caller that reads the
first event before opening it proves the event was forwarded before the stream ended.
`GET /ledger` lists the deliveries run and the streams closed before their end;
`{"plain": true}` in the payload answers JSON instead, `{"break": true}` sends half an
event after the first and drops the connection, `{"wait": false}` (the Starlette agent,
for the benchmark) streams without waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from peers.foreign import HERE, _need, _serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_reach.testing.servers import ServerThread

DEFAULT_WORDS = ["first", "second", "third"]


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """Events of an SSE body as its caller reads them, one at a time as their blank line
    arrives: field -> value, a repeated field's values joined by newlines."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        event[name] = f"{event[name]}\n{value}" if name in event else value


def starlette_agent() -> Starlette:
    """The Python streaming agent as an app (its state lives in the app)."""
    ledger: dict[str, list[str]] = {"executions": [], "disconnected": []}
    gates: dict[str, asyncio.Event] = {}

    def gate(request_id: str) -> asyncio.Event:
        return gates.setdefault(request_id, asyncio.Event())

    async def invoke(request: Request) -> Response:
        delivery = await request.json()
        request_id = delivery["request_id"]
        ledger["executions"].append(request_id)
        payload = delivery.get("payload") or {}
        words = payload.get("words") or DEFAULT_WORDS
        if payload.get("plain"):
            return JSONResponse({"words": words})

        async def events() -> AsyncIterator[str]:
            finished = False
            try:
                yield f"event: token\nid: 1\ndata: {words[0]}\n\n"
                if payload.get("break"):
                    yield "event: token\ndata: half an ev"
                    raise RuntimeError("the agent broke off")  # uvicorn drops the connection
                if payload.get("wait", True):
                    await gate(request_id).wait()
                for number, word in enumerate(words[1:], start=2):
                    yield f"event: token\nid: {number}\ndata: {word}\n\n"
                finished = True
            finally:
                if not finished:  # cancelled: Starlette saw the client leave
                    ledger["disconnected"].append(request_id)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def open_gate(request: Request) -> Response:
        gate(request.path_params["request_id"]).set()
        return JSONResponse({"opened": True})

    async def read_ledger(request: Request) -> Response:
        return JSONResponse(ledger)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/invoke", invoke, methods=["POST"]),
            Route("/gate/{request_id:path}", open_gate, methods=["POST"]),
            Route("/ledger", read_ledger),
            Route("/health", health),
        ]
    )


@contextmanager
def python_sse_agent() -> Iterator[str]:
    with ServerThread(starlette_agent()) as server:
        yield server.url


@contextmanager
def node_sse_agent() -> Iterator[str]:
    with _serve([_need("node"), str(HERE / "sse_agent.js")]) as url:
        yield url


AGENTS: dict[str, Any] = {"starlette": python_sse_agent, "node": node_sse_agent}


def ledger_of(url: str) -> dict[str, list[str]]:
    """A streaming agent's ledger: deliveries run, streams closed before their end."""
    ledger: dict[str, list[str]] = httpx.get(f"{url}/ledger").json()
    return ledger


def open_gate(url: str, request_id: str) -> None:
    """Let the agent send the rest of `request_id`'s stream."""
    assert httpx.post(f"{url}/gate/{request_id}").status_code == 200


@contextmanager
def invoke_stream(coordinator: str, body: dict[str, Any]) -> Iterator[httpx.Response]:
    """`POST /v1/invoke` asking for a stream: the response, open to be read as it comes."""
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", f"{coordinator}/v1/invoke", json=body, headers={"accept": "text/event-stream"}
        ) as response,
    ):
        yield response

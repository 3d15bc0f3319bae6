"""FakeAgent: an agent-contract server with knobs and a ledger of what reached it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson

Scope = dict[str, Any]


@dataclass(slots=True)
class Received:
    """One delivery as it arrived: the decoded body and the headers (names lower-cased)."""

    body: dict[str, Any]
    headers: dict[str, str]


@dataclass(slots=True)
class FakeAgent:
    """A bare ASGI agent: answers `POST` with `answer` (or echoes), `GET /health` with 200.

    Knobs may be changed while it serves: `status` (HTTP status of answers),
    `delay_s` (before answering), `answer` (JSON result; None echoes the payload),
    `raw_answer` (bytes sent as they are), `headers` (added to answers), `healthy`
    (the health endpoint's verdict). `received` is the ledger.
    """

    name: str = "fake"
    status: int = 200
    delay_s: float = 0.0
    answer: Any = None
    healthy: bool = True
    raw_answer: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _serve_lifespan(receive, send)
            return
        if scope["method"] == "GET":
            await _answer(send, 200 if self.healthy else 503, b'{"status":"ok"}')
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        delivery = orjson.loads(body) if body else {}
        self.received.append(Received(delivery, headers))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.raw_answer is not None:
            await _answer(send, self.status, self.raw_answer, self.headers)
            return
        result = (
            self.answer
            if self.answer is not None
            else {"agent": self.name, "echo": delivery.get("payload")}
        )
        await _answer(send, self.status, orjson.dumps(result), self.headers)


async def _answer(
    send: Any, status: int, body: bytes, headers: dict[str, str] | None = None
) -> None:
    extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _serve_lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return

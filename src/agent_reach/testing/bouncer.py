"""BouncingAgent: an agent that answers 421 "not mine" to a share of what it gets.

The quality measurement's shirker (bench/quality.py, tests/integration/test_quality.py):
of every delivery it answers `bounce_rate` with 421 — deterministically, the n-th
delivery bounces when floor(n x rate) steps up, so 0.5 is every other one — and serves
the rest after `delay_s`. `bounce_rate` may be changed while it serves; `served` and
`bounced` count what it did.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

import orjson

from agent_reach.testing.fake_agent import FakeAgent, Scope

NOT_MINE = orjson.dumps({"error": {"code": "not_mine", "message": "not mine"}})


@dataclass(slots=True)
class BouncingAgent:
    """A bare ASGI agent: `POST` is served or bounced, `GET /health` answers 200."""

    name: str
    bounce_rate: float = 0.0
    delay_s: float = 0.0
    received: int = 0
    served: int = 0
    bounced: int = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan" or scope["method"] == "GET":
            await FakeAgent(self.name)(scope, receive, send)
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        self.received += 1
        n, rate = self.received, self.bounce_rate
        if math.floor(n * rate) > math.floor((n - 1) * rate):
            self.bounced += 1
            await _answer(send, 421, NOT_MINE)
            return
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.served += 1
        await _answer(send, 200, orjson.dumps({"agent": self.name}))


async def _answer(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

"""The floor of one coordinator hop, for `bench/overhead.py`: the least a Python process
on the coordinator's stack (asyncio on uvloop, httptools, orjson) can do for
`POST /v1/invoke` naming a capability.

    python bench/relay_floor.py --port 9050 --route echo=echo-1@http://127.0.0.1:9040/invoke

Each client connection (keep-alive HTTP/1.1, parsed with httptools) gets one kept-alive
connection to the agent. A request's JSON body is read with orjson, its capability looked
up in one dict, the agent contract's body (request id, capability, payload, trace id,
hop) sent to the agent, the agent's answer parsed with httptools and orjson, and the
coordinator's envelope (ids, status, agent, result, route, attempts) written back.
Protocol callbacks only: no task, future or timer per request; no authentication, no
scoring, no tracing, no timeout. `GET /health` answers 200. Bad JSON is a 400, an
unknown capability a 404, an agent that cannot be reached or answers no JSON a 502.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import deque
from typing import Any
from urllib.parse import urlsplit

import httptools
import orjson
import uvloop

Route = tuple[str, tuple[str, int], bytes]  # agent id, (host, port), the request head
_HEALTHY = b'HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n{"status":"ok"}'
_HEAD = b"POST %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"


def answer(status: bytes, document: Any) -> bytes:
    body = orjson.dumps(document)
    head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % (status, len(body)) + body


def error(status: bytes, code: str, message: str) -> bytes:
    return answer(status, {"error": {"code": code, "message": message}})


def parse_route(text: str) -> tuple[str, Route]:
    """`CAPABILITY=AGENT_ID@http://HOST:PORT/PATH` as (capability, route)."""
    capability, _, target = text.partition("=")
    agent_id, _, url = target.partition("@")
    parts = urlsplit(url)
    if not capability or not agent_id or parts.scheme != "http" or parts.hostname is None:
        raise ValueError(f"not CAPABILITY=AGENT_ID@http://HOST:PORT/PATH: {text!r}")
    address = (parts.hostname, parts.port or 80)
    head = _HEAD % ((parts.path or "/").encode(), parts.netloc.encode())
    return capability, (agent_id, address, head)


class Upstream(asyncio.Protocol):
    """The client connection's kept-alive connection to one agent."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.parser = httptools.HttpResponseParser(self)
        self.chunks: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.client.answered(0, b"")
            self.transport.close()  # type: ignore[union-attr]

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        body, self.chunks = b"".join(self.chunks), []
        self.client.answered(self.parser.get_status_code(), body)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.upstream_lost(self)


class Client(asyncio.Protocol):
    """One caller's connection: its requests are answered one at a time, in order."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.chunks: list[bytes] = []
        self.queue: deque[tuple[bytes, bytes, bytes, bool]] = (
            deque()
        )  # method, url, body, keep-alive
        self.upstreams: dict[tuple[str, int], Upstream] = {}
        self.pending: tuple[str, dict[str, Any], bool, float] | None = None  # in flight
        self.connecting: set[asyncio.Future[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.write(error(b"400 Bad Request", "invalid_request", "not HTTP/1.1"))
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        method, keep_alive = self.parser.get_method(), self.parser.should_keep_alive()
        self.queue.append((method, self.url, b"".join(self.chunks), keep_alive))
        self.chunks = []
        if self.pending is None:
            self.serve_next()

    def serve_next(self) -> None:
        while self.queue and self.pending is None and not self.transport.is_closing():
            method, url, body, keep_alive = self.queue.popleft()
            if method == b"GET" and url == b"/health":
                self.reply(_HEALTHY, keep_alive)
            elif method != b"POST" or url != b"/v1/invoke":
                self.reply(error(b"404 Not Found", "not_found", "POST /v1/invoke"), keep_alive)
            else:
                self.invoke(body, keep_alive)

    def invoke(self, body: bytes, keep_alive: bool) -> None:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return self.reply(error(b"400 Bad Request", "invalid_json", "not JSON"), keep_alive)
        capability = request.get("capability") if type(request) is dict else None
        route = self.routes.get(capability) if type(capability) is str else None
        if route is None or capability is None:
            unknown = error(b"404 Not Found", "unknown_capability", "no agent has it")
            return self.reply(unknown, keep_alive)
        agent_id, address, head = route
        ids = os.urandom(32).hex()
        request_id, trace_id = ids[:32], ids[32:]
        delivery = orjson.dumps(
            {
                "request_id": request_id,
                "capability": capability,
                "payload": request.get("payload"),
                "context": None,
                "trace_id": trace_id,
                "hop": 1,
            }
        )
        envelope = {"request_id": request_id, "trace_id": trace_id, "agent_id": agent_id}
        self.pending = (capability, envelope, keep_alive, time.perf_counter())
        message = head + b"x-request-id: %s\r\ncontent-length: %d\r\n\r\n%s" % (
            request_id.encode(),
            len(delivery),
            delivery,
        )
        upstream = self.upstreams.get(address)
        if upstream is not None and upstream.transport is not None:
            upstream.transport.write(message)
        else:
            task = asyncio.ensure_future(self.connect(address, message))
            self.connecting.add(task)
            task.add_done_callback(self.connecting.discard)
        return None

    async def connect(self, address: tuple[str, int], message: bytes) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, upstream = await loop.create_connection(lambda: Upstream(self), *address)
        except OSError:
            return self.answered(0, b"")
        if self.transport.is_closing():  # the caller left while it connected
            upstream.transport.close()  # type: ignore[union-attr]
            return None
        self.upstreams[address] = upstream
        upstream.transport.write(message)  # type: ignore[union-attr]

    def answered(self, status: int, body: bytes) -> None:
        """The agent's answer (status 0: none) to the request in flight."""
        if self.pending is None:
            return
        capability, envelope, keep_alive, started = self.pending
        self.pending = None
        try:
            result = orjson.loads(body) if status == 200 else None
        except orjson.JSONDecodeError:
            status = 0
        if status != 200:
            failed = error(b"502 Bad Gateway", "agent_error", f"the agent answered {status}")
            return self.reply(failed, keep_alive)
        agent_id = envelope["agent_id"]
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        envelope["status"], envelope["result"], envelope["normalized"] = "ok", result, "json"
        envelope["route"] = {"capability": capability, "agent_id": agent_id, "rule": "exact"}
        attempt = {"agent_id": agent_id, "number": 1, "outcome": "ok", "duration_ms": duration_ms}
        envelope["attempts"] = [attempt]
        self.reply(answer(b"200 OK", envelope), keep_alive)
        return self.serve_next()

    def reply(self, message: bytes, keep_alive: bool) -> None:
        if self.transport.is_closing():  # the caller left first; uvloop raises on a write
            return
        self.transport.write(message)
        if not keep_alive:
            self.transport.close()

    def upstream_lost(self, upstream: Upstream) -> None:
        self.upstreams = {a: u for a, u in self.upstreams.items() if u is not upstream}
        self.answered(0, b"")  # never re-sent: the agent may have acted on it

    def connection_lost(self, exc: Exception | None) -> None:
        for upstream in self.upstreams.values():
            upstream.transport.close()  # type: ignore[union-attr]


async def serve(host: str, port: int, routes: dict[str, Route]) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Client(routes), host, port, backlog=4096)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9050)
    parser.add_argument(
        "--route", action="append", required=True, help="CAPABILITY=AGENT_ID@http://HOST:PORT/PATH"
    )
    args = parser.parse_args()
    try:
        routes = dict(parse_route(text) for text in args.route)
    except ValueError as exc:
        parser.error(str(exc))
    uvloop.run(serve(args.host, args.port, routes))


if __name__ == "__main__":
    main()

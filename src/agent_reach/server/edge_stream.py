"""A streamed invoke answer on the edge server (or through ASGI): the agent's events out
as they come.

The head goes out at once (`text/event-stream`, chunked; HTTP/1.0: delimited by the
close), then each complete event the agent sends as its own chunk, written when the
client reads again (so a slow caller slows the agent, `wire/pool_stream.py`), then
the coordinator's last event and the end of the body. When the caller goes — the
connection lost, or its EOF, which on an event stream cannot mean a half-close the
answer should outlive — the stream is aborted and the agent's connection closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from agent_reach.server.edge_asgi import connection_header, status_line
from agent_reach.wire.answer import Answer
from agent_reach.wire.event_stream import EventStream
from agent_reach.wire.sse import MEDIA_TYPE

_HEAD = b"content-type: %s\r\ncache-control: no-cache\r\nx-accel-buffering: no\r\n" % (
    MEDIA_TYPE.encode()
)
_CHUNKED = b"transfer-encoding: chunked\r\n"
_LAST_CHUNK = b"0\r\n\r\n"


class StreamWire(Protocol):
    """The connection as a streamed answer sees it (`HttpConnection`)."""

    draining: bool

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def finish(self, keep_alive: bool) -> None: ...


async def relay_answer(
    wire: StreamWire,
    answer: Answer,
    headers: bytes,
    *,
    keep_alive: bool,
    http10: bool,
) -> None:
    """Write `answer`'s stream as the response; `headers` are the invoke answer's own."""
    stream = answer.stream
    assert stream is not None  # only streamed answers come here
    keep_alive = keep_alive and not http10 and not wire.draining
    framing = b"" if http10 else _CHUNKED
    wire.write(
        b"%s%s%s%s%s\r\n"
        % (status_line(200), _HEAD, headers, framing, connection_header(keep_alive, http10))
    )

    async def write(data: bytes) -> None:
        await wire.drain()
        wire.write(data if http10 else b"%x\r\n%s\r\n" % (len(data), data))

    await stream.relay(write)
    if stream.aborted:
        wire.finish(False)
        return
    if not http10:
        wire.write(_LAST_CHUNK)
    wire.finish(keep_alive)


def abort_stream(stream: EventStream | None) -> None:
    """The caller has gone: stop the agent's stream, if one is being relayed."""
    if stream is not None:
        stream.abort()


async def relay_asgi(
    stream: EventStream, headers: list[tuple[bytes, bytes]], receive: Any, send: Any
) -> None:
    """The same answer through ASGI (the coordinator under another server): the stream
    is aborted on `http.disconnect`."""

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        stream.abort()

    async def write(data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    head = [
        (b"content-type", MEDIA_TYPE.encode()),
        (b"cache-control", b"no-cache"),
        *headers,
    ]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    watcher = asyncio.create_task(watch())
    try:
        await stream.relay(write)
        if not stream.aborted:
            await send({"type": "http.response.body", "body": b""})
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher

"""A response read as it arrives: the pool's path for answers that stream.

`open_stream` sends one request on a connection of its own (dialled through the pool's
`resolve` hook, so the endpoint guard applies) and returns once the response head is
in; its body is then read chunk by chunk. One timer covers the whole exchange, head and
body: when it fires the connection is closed and the next read raises `RequestTimeout`.
Reading pauses while more than `HIGH_WATER` bytes wait for the reader, so a slow
caller slows the agent instead of filling memory. The connection is never pooled: a
stream holds it for its whole life, and closing it is how the agent learns the reader
has gone.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

import httptools

from agent_reach.wire.pool import (
    ConnectFailed,
    ConnectionLost,
    ConnectTimedOut,
    HttpPool,
    InvalidResponse,
    PoolError,
    RequestTimeout,
    ResponseTooLarge,
    _encode_head,
)

HIGH_WATER = 64 * 1024  # as the edge server's request bodies (uvicorn's HIGH_WATER_LIMIT)


class StreamResponse(asyncio.Protocol):
    """One streamed exchange: `status` and `headers` (lower-case names) once `open_stream`
    returns, then the body by `next_chunk`."""

    transport: asyncio.Transport

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        self.loop = loop
        self.limit = limit
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.head: asyncio.Future[None] = loop.create_future()
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.received = 0
        self.ended = False
        self.error: PoolError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.framed = False  # Content-Length or chunked: else the body ends with the close
        self.timer: asyncio.TimerHandle | None = None
        self.paused = False

    async def next_chunk(self) -> bytes | None:
        """The next body bytes as they came, None at the end; a `PoolError` when the
        exchange broke (`RequestTimeout` once the timer fired)."""
        while not self.chunks:
            if self.error is not None:
                raise self.error
            if self.ended:
                return None
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        chunk = self.chunks.popleft()
        self.buffered -= len(chunk)
        if self.paused and self.buffered <= HIGH_WATER:
            self.paused = False
            self.transport.resume_reading()
        return chunk

    def header(self, name: bytes) -> bytes | None:
        """The first value of header `name` (lower case), None when absent."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    async def read_all(self) -> bytes:
        """The rest of the body, whole (within the same timer and limit)."""
        parts: list[bytes] = []
        while (chunk := await self.next_chunk()) is not None:
            parts.append(chunk)
        return b"".join(parts)

    def close(self) -> None:
        """Stop: the connection is aborted (the agent sees it close)."""
        if self.timer is not None:
            self.timer.cancel()
        if not self.ended and self.error is None:
            self.error = ConnectionLost("the stream was closed by its reader", sent=True)
        self.transport.abort()
        self._wake()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # always a Transport for TCP

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if self.error is None:
                self._fail(InvalidResponse(f"unparseable HTTP response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.ended or self.error is not None:
            return
        if self.head.done() and not self.framed and exc is None:
            self.ended = True  # the body was delimited by the close
        else:
            self.error = ConnectionLost("the connection closed mid-exchange", sent=True)
        self._settle_head()
        self._wake()

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            self.framed = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200:  # 100 Continue, 103 Early Hints: the answer follows
            self.headers, self.framed = [], False
            return
        self.status = status
        self._settle_head()

    def on_body(self, body: bytes) -> None:
        self.received += len(body)
        if self.received > self.limit:
            self._fail(ResponseTooLarge(f"response body over {self.limit} bytes"))
            return
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status == 0:
            return  # the end of an interim (1xx) response
        self.ended = True
        if self.timer is not None:
            self.timer.cancel()
        self.transport.close()
        self._wake()

    # Inside

    def on_timeout(self) -> None:
        self._fail(RequestTimeout("the stream did not end within the timeout", sent=True))

    def _fail(self, error: PoolError) -> None:
        if self.error is None and not self.ended:
            self.error = error
        if self.timer is not None:
            self.timer.cancel()
        self.transport.abort()
        self._settle_head()
        self._wake()

    def _settle_head(self) -> None:
        if not self.head.done():
            self.head.set_result(None)

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


async def open_stream(
    client: HttpPool,
    method: str,
    url: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    timeout_s: float,
) -> StreamResponse:
    """Send one request and return once the response head has arrived; `timeout_s`
    covers the head and the whole body. Errors as `HttpPool.request` raises them."""
    if client.closed:
        raise PoolError("the pool is closed")
    target = client._parse(url)
    origin = target.origin
    payload = _encode_head(method, target.head, headers, body) + body
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    limit = min(timeout_s, client.connect_timeout_s)
    try:
        async with asyncio.timeout(limit):
            address = origin.host if client.resolve is None else await client.resolve(origin.host)
            _, response = await loop.create_connection(
                lambda: StreamResponse(loop, client.max_response_bytes),
                address,
                origin.port,
                ssl=origin.ssl,
                server_hostname=origin.host if origin.ssl is not None else None,
            )
    except TimeoutError:
        raise ConnectTimedOut(f"connect to {origin.name} timed out after {limit:g} s") from None
    except OSError as exc:
        raise ConnectFailed(f"cannot connect to {origin.name}: {exc}") from exc
    response.timer = loop.call_at(deadline, response.on_timeout)
    response.transport.write(payload)
    try:
        await response.head
    except asyncio.CancelledError:
        response.close()
        raise
    if response.error is not None and response.status == 0:
        response.close()
        raise response.error
    return response

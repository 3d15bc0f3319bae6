"""`open_stream` against raw HTTP peers on 127.0.0.1: the head first, the body as it
comes, one timer for all of it, a reader that stops reading slows the peer down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agent_reach.wire.pool import (
    ConnectFailed,
    ConnectionLost,
    HttpPool,
    RequestTimeout,
    ResponseTooLarge,
)
from agent_reach.wire.pool_stream import HIGH_WATER, StreamResponse, open_stream

TIMEOUT_S = 5.0
Peer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Peer], Awaitable[str]]]:
    servers: list[asyncio.Server] = []

    async def start(peer: Peer) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            try:
                await peer(reader, writer)
            finally:
                writer.transport.abort()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/invoke"

    yield start
    for server in servers:
        server.close()


async def _open(
    url: str, pool: HttpPool | None = None, timeout_s: float = TIMEOUT_S
) -> StreamResponse:
    return await open_stream(pool or HttpPool(), "GET", url, timeout_s=timeout_s)


async def _wait(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT_S
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        await asyncio.sleep(0.001)


async def test_the_head_comes_before_the_body_and_chunks_as_they_are_sent(serve) -> None:
    sent = asyncio.Event()

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await sent.wait()
        writer.write(b"4\r\nlast\r\n0\r\n\r\n")
        await writer.drain()
        await reader.read()

    response = await _open(await serve(peer))
    assert response.status == 200
    assert await response.next_chunk() == b"first"  # the peer still waits for `sent`
    sent.set()
    assert await response.read_all() == b"last"
    assert await response.next_chunk() is None


async def test_a_body_without_framing_ends_with_the_close_and_interim_answers_are_skipped(
    serve,
) -> None:
    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\nall of it")
        writer.close()
        await writer.wait_closed()  # all sent before the fixture aborts the connection

    response = await _open(await serve(peer))
    assert response.status == 200
    assert await response.read_all() == b"all of it"


async def test_one_timer_covers_the_whole_body(serve) -> None:
    # The peer never ends the body but keeps it flowing, a chunk every few milliseconds:
    # a timer reset by each read would never fire (the outer bound fails the test), the
    # stream's one timer fires once timeout_s has passed, whatever arrived meanwhile.
    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while True:
            writer.write(b"2\r\nhi\r\n")
            await writer.drain()
            await asyncio.sleep(0.005)

    url = await serve(peer)
    for _ in range(3):  # a host too loaded to read one chunk in time proves nothing: again
        chunks: list[bytes | None] = []
        with pytest.raises(RequestTimeout) as timed_out:
            async with asyncio.timeout(10 * TIMEOUT_S):  # a TimeoutError fails the raises
                response = await _open(url, timeout_s=0.3)
                while True:
                    chunks.append(await response.next_chunk())
        assert timed_out.value.sent is True
        if chunks:
            break
    assert chunks and set(chunks) == {b"hi"}  # the body flowed, and the timer still fired


async def test_a_body_over_the_limit_is_refused(serve) -> None:
    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100)
        await reader.read()

    response = await _open(await serve(peer), HttpPool(max_response_bytes=10))
    with pytest.raises(ResponseTooLarge):
        await response.read_all()


async def test_a_connection_lost_mid_body_says_the_peer_may_have_acted(serve) -> None:
    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome")
        await writer.drain()

    response = await _open(await serve(peer))
    with pytest.raises(ConnectionLost) as lost:
        await response.read_all()
    assert lost.value.sent is True


async def test_reading_pauses_while_the_reader_does_not_read(serve) -> None:
    block = b"y" * 65536
    blocks = 512  # 32 MiB: more than loopback's socket buffers can hold
    written: list[int] = []
    blocked = asyncio.Event()

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        for n in range(blocks):
            writer.write(block)
            if writer.transport.get_write_buffer_size() > len(block):
                blocked.set()  # the kernel's buffers are full: the reader is not reading
            await writer.drain()
            written.append(n)
        # drain() leaves up to its high-water mark unsent: wait until close() has sent it
        # all, for the fixture aborts the connection once the peer returns
        writer.close()
        await writer.wait_closed()

    response = await _open(await serve(peer), HttpPool(max_response_bytes=blocks * len(block)))
    await asyncio.wait_for(blocked.wait(), TIMEOUT_S)
    assert response.paused
    assert response.buffered <= HIGH_WATER + 256 * 1024  # at most one read past the mark
    assert len(written) < blocks
    received = 0
    while (chunk := await response.next_chunk()) is not None:
        received += len(chunk)
    assert received == blocks * len(block)


async def test_the_dial_passes_the_resolve_hook(serve) -> None:
    async def refuse(host: str) -> str:
        raise ConnectFailed(f"{host} is not allowed")

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise AssertionError("never dialled")

    with pytest.raises(ConnectFailed, match="not allowed"):
        await _open(await serve(peer), HttpPool(resolve=refuse))


async def test_closing_the_stream_closes_the_peers_connection(serve) -> None:
    closed = asyncio.Event()

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n")
        await reader.read()  # EOF once the client closes
        closed.set()

    response = await _open(await serve(peer))
    assert await response.next_chunk() == b"hi"
    response.close()
    await asyncio.wait_for(closed.wait(), TIMEOUT_S)
    with pytest.raises(ConnectionLost):
        await response.next_chunk()

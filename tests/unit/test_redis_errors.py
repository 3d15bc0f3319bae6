"""The redis-py error seam: what escapes a store operation is `StoreUnavailable`, and a
bug is still a bug."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.errors import StoreUnavailable


async def _write_on_a_closed_transport() -> None:
    """What redis-py does when a node dies while it sets a connection up: a write on a
    transport uvloop has already closed (a real one, on loopback)."""
    server = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.transport.abort()
        await asyncio.sleep(0)
        writer.writelines([b"PING\r\n"])
    finally:
        server.close()
        await server.wait_closed()


def test_a_write_on_a_transport_closed_under_the_driver_is_store_unavailable() -> None:
    @translate_errors
    async def operation() -> None:
        await _write_on_a_closed_transport()

    with pytest.raises(StoreUnavailable, match="redis is unreachable"):
        uvloop.run(operation())


def test_any_other_runtime_error_still_escapes() -> None:
    @translate_errors
    async def operation() -> None:
        raise RuntimeError("a bug in the caller")

    with pytest.raises(RuntimeError, match="a bug in the caller"):
        uvloop.run(operation())

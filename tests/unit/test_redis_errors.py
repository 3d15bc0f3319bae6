"""The redis-py error seam: what escapes a store operation is `StoreUnavailable`, and a
bug is still a bug."""

from __future__ import annotations

import asyncio

import pytest
import uvloop
from redis.asyncio.connection import Connection

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.errors import StoreUnavailable


async def _send_on_a_closed_transport() -> None:
    """A redis-py connection whose transport uvloop has closed under it (a node killed
    while the connection was being set up), on loopback."""
    server = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = Connection(host="127.0.0.1", port=port)
    try:
        connection._reader, connection._writer = await asyncio.open_connection("127.0.0.1", port)
        connection._writer.transport.abort()
        await asyncio.sleep(0)
        await connection._send_packed_command([b"PING\r\n"])
    finally:
        server.close()
        await server.wait_closed()


async def _send_after_another_task_disconnected() -> None:
    """A redis-py connection whose writer another task's disconnect has cleared."""
    await Connection(host="127.0.0.1", port=9)._send_packed_command([b"PING\r\n"])


@pytest.mark.parametrize(
    "send", [_send_on_a_closed_transport, _send_after_another_task_disconnected]
)
def test_a_connection_lost_inside_the_driver_is_store_unavailable(send) -> None:
    @translate_errors
    async def operation() -> None:
        await send()

    with pytest.raises(StoreUnavailable, match="redis is unreachable"):
        uvloop.run(operation())


@pytest.mark.parametrize("error", [RuntimeError, AttributeError])
def test_the_same_errors_raised_elsewhere_still_escape(error: type[Exception]) -> None:
    @translate_errors
    async def operation() -> None:
        raise error("a bug in the caller")

    with pytest.raises(error, match="a bug in the caller"):
        uvloop.run(operation())

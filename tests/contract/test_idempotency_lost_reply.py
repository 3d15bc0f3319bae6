"""A claim whose answer Redis sent but the coordinator never read (the connection dropped
in between): the claim was made, nothing was delivered under it, and the caller's re-send
through the same coordinator takes it over at once instead of a 409 for the lease's
length. Through a real TCP relay in front of a real Redis that drops replies on demand."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from agent_reach.backends.selection import open_backends
from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.config import Settings
from agent_reach.errors import StoreUnavailable

FINGERPRINT = "sha256:" + "1" * 64
LEASE_S = 60.0  # does not run out during the test


class ReplyDropper:
    """127.0.0.1:port -> Redis; while `dropping`, a reply is swallowed and its connection
    closed, so the command ran but its client never hears of it."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.dropping = False
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> ReplyDropper:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)

        async def pump(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, back: bool
        ) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await source.read(65536):
                    if back and self.dropping:
                        break
                    sink.write(data)
                    await sink.drain()
            writer.close()
            up_writer.close()

        await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))


@pytest.fixture
async def dropper(redis_url: str) -> AsyncIterator[ReplyDropper]:
    parts = urlsplit(redis_url)
    async with ReplyDropper(parts.hostname or "127.0.0.1", parts.port or 6379) as relay:
        yield relay


@pytest.mark.redis
async def test_a_claim_whose_answer_was_lost_is_taken_over_by_the_re_send(
    dropper: ReplyDropper, redis_url: str, redis_prefix: str
) -> None:
    db = urlsplit(redis_url).path.lstrip("/") or "0"
    via_relay = Settings(
        registry_backend="redis",
        redis_url=f"redis://127.0.0.1:{dropper.port}/{db}",
        redis_prefix=redis_prefix,
        redis_timeout_s=1.0,
    )
    direct = via_relay.model_copy(update={"redis_url": redis_url})
    relayed, other = (
        await open_backends(via_relay, SYSTEM_CLOCK),
        await open_backends(direct, SYSTEM_CLOCK),
    )
    try:
        store = relayed.idempotency
        assert (await store.claim("warm-up", FINGERPRINT, LEASE_S)).state == "claimed"
        dropper.dropping = True
        with pytest.raises(StoreUnavailable):
            await store.claim("req-lost", FINGERPRINT, LEASE_S)
        dropper.dropping = False
        # the claim was made: another coordinator finds it in progress
        taken = await other.idempotency.claim("req-lost", FINGERPRINT, LEASE_S)
        assert taken.state == "in_progress"

        again = await store.claim("req-lost", FINGERPRINT, LEASE_S)

        assert again.state == "claimed"
        assert again.fence == taken.fence
    finally:
        await relayed.aclose()
        await other.aclose()

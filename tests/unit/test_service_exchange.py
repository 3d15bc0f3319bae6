"""A translated call's failures are read as every delivery's are (`wire/failures.py`):
nothing sent is `AgentUnreachable`, an answer that is not HTTP or too large is the
service's, said in its own words; a probe is a GET answered 2xx, anything else is a no.

Real sockets on 127.0.0.1: a port nobody listens on, a server that answers garbage,
one that answers more than the pool reads, and one that answers 200 and 503."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import pytest

from agent_reach.adapters.exchange import call_service
from agent_reach.adapters.translation import CompiledTranslation, parse_translation
from agent_reach.errors import AgentFailed, AgentUnreachable
from agent_reach.wire import pool

TRANSLATION = CompiledTranslation(parse_translation({"body": "{{ payload }}"}, "json", "t"))
GARBAGE = b"NOT HTTP AT ALL\r\n\r\n"
LARGE = b"HTTP/1.1 200 OK\r\ncontent-length: 4096\r\n\r\n" + b"x" * 4096


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _serve(answer: Callable[[bytes], bytes]) -> tuple[asyncio.Server, str]:
    """A server writing `answer(request head)` to each connection, then closing it."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(head))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture
async def client() -> AsyncIterator[pool.HttpPool]:
    http = pool.HttpPool(max_response_bytes=1024)
    yield http
    await http.aclose()


async def _call(client: pool.HttpPool, url: str, *, stream: bool = False) -> object:
    return await call_service(
        client, TRANSLATION, url, {"payload": {"a": 1}}, headers=[], timeout_s=5, stream=stream
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_nothing_listening_is_unreachable(client: pool.HttpPool, stream: bool) -> None:
    with pytest.raises(AgentUnreachable, match="could not connect to the service"):
        await _call(client, f"http://127.0.0.1:{_free_port()}/", stream=stream)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_that_is_not_http_is_the_service_s(
    client: pool.HttpPool, stream: bool
) -> None:
    server, url = await _serve(lambda head: GARBAGE)
    async with server:
        with pytest.raises(AgentFailed, match="the service's answer is not valid HTTP") as got:
            await _call(client, url, stream=stream)
    assert not isinstance(got.value, AgentUnreachable)  # the service did answer
    assert not got.value.retryable and got.value.outcome_unknown  # it may have acted


async def test_an_answer_over_the_limit_is_too_large(client: pool.HttpPool) -> None:
    server, url = await _serve(lambda head: LARGE)
    async with server:
        with pytest.raises(AgentFailed, match="too large") as got:
            await _call(client, url)
    assert got.value.code == "agent_response_too_large"
    assert not got.value.retryable and got.value.outcome_unknown


async def test_a_closed_pool_is_unreachable_not_a_bare_pool_error(client: pool.HttpPool) -> None:
    await client.aclose()
    with pytest.raises(AgentUnreachable, match="could not reach the service"):
        await _call(client, f"http://127.0.0.1:{_free_port()}/")


async def test_a_probe_is_a_get_answered_2xx(client: pool.HttpPool) -> None:
    def status(head: bytes) -> bytes:
        code = b"200 OK" if head.startswith(b"GET /up ") else b"503 Busy"
        return b"HTTP/1.1 " + code + b"\r\ncontent-length: 0\r\n\r\n"

    server, url = await _serve(status)
    async with server:
        assert await client.probe(f"{url}/up", timeout_s=5)
        assert not await client.probe(f"{url}/down", timeout_s=5)
        server.close()
        await server.wait_closed()
        assert not await client.probe(f"http://127.0.0.1:{_free_port()}/up", timeout_s=5)

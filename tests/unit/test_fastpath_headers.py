"""The invoke fast path's reading of its headers: a name sent twice counts its last value,
save Authorization, which is refused when sent twice."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson

from agent_reach.server.fastpath import answer_invoke

FIRST = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
LAST = "00-" + "3" * 32 + "-" + "4" * 16 + "-01"


def service() -> Any:
    """Enough of an `InvokeService` for requests refused before they are authenticated."""
    origins = SimpleNamespace(check=lambda *args: None)
    return SimpleNamespace(security=SimpleNamespace(origins=origins))


async def test_a_second_authorization_header_is_refused() -> None:
    headers = [
        (b"authorization", b"Bearer a"),
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer b"),
    ]
    answer, _ = await answer_invoke(service(), headers, b"{}")
    assert answer.status == 400
    assert orjson.loads(answer.body)["error"]["code"] == "duplicate_authorization"


async def test_another_header_sent_twice_counts_its_last_value() -> None:
    headers = [
        (b"traceparent", FIRST.encode()),
        (b"content-type", b"application/json"),
        (b"traceparent", LAST.encode()),
        (b"content-type", b"text/plain"),
    ]
    answer, trace_id = await answer_invoke(service(), headers, b"{}")
    assert answer.status == 415  # the last Content-Type, not the first
    assert trace_id == "3" * 32


async def test_the_body_is_read_with_the_last_content_length_that_is_a_number() -> None:
    read: list[int | None] = []

    async def body(declared: int | None) -> bytes:
        read.append(declared)
        return b"{"

    headers = [
        (b"content-length", b"2"),
        (b"authorization", b"Bearer a"),
        (b"content-length", b"x"),
    ]
    security = SimpleNamespace(
        origins=SimpleNamespace(check=lambda *args: None),
        authenticate_cached=lambda presented, peer: object(),
    )
    answer, _ = await answer_invoke(SimpleNamespace(security=security), headers, body)
    assert read == [2]
    assert answer.status == 400  # the body is no JSON

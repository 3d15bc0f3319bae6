"""The `TaskStore`, `AnswerCache` and `KeySetStore` contracts on every backend: bytes by
key, expiring."""

from __future__ import annotations

import pytest
from contract_kit import Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import AnswerCache, KeySetStore, TaskStore

TTL_S = 0.3  # short, so a real Redis expiry runs out within the test
LONG_S = 60.0
DOCUMENT = '{"status": "suspended", "原因": "无可用实例"}'.encode() + b"\x00\xff"


Blobs = TaskStore | AnswerCache | KeySetStore


@pytest.fixture(params=["tasks", "answers", "keysets"])
def blobs(backends: Backends, request: pytest.FixtureRequest) -> Blobs:
    """The three stores keep bytes under a key for a ttl: one suite covers them."""
    store: Blobs = getattr(backends, request.param)
    return store


async def test_a_stored_document_is_returned_byte_for_byte(blobs: Blobs) -> None:
    await blobs.put("task-1", DOCUMENT, LONG_S)

    assert await blobs.get("task-1") == DOCUMENT


async def test_put_again_replaces_the_document(blobs: Blobs) -> None:
    await blobs.put("task-1", b"old", LONG_S)
    await blobs.put("task-1", b"new", LONG_S)

    assert await blobs.get("task-1") == b"new"


async def test_an_unknown_key_is_none(blobs: Blobs) -> None:
    assert await blobs.get("never-stored") is None


async def test_a_document_expires_after_its_ttl(blobs: Blobs, timeline: Timeline) -> None:
    await blobs.put("task-1", DOCUMENT, TTL_S)
    await blobs.put("task-2", DOCUMENT, LONG_S)

    async def has_expired() -> bool:
        return await blobs.get("task-1") is None

    await timeline.wait_out(TTL_S, has_expired, failure="the document never expired")
    assert await blobs.get("task-2") == DOCUMENT


async def test_tasks_and_answers_do_not_share_keys(backends: Backends) -> None:
    await backends.tasks.put("same-key", b"task", LONG_S)
    await backends.answers.put("same-key", b"answer", LONG_S)

    assert await backends.tasks.get("same-key") == b"task"
    assert await backends.answers.get("same-key") == b"answer"


async def test_put_new_keeps_the_first_document_until_it_expires(
    backends: Backends, timeline: Timeline
) -> None:
    store = backends.keysets
    assert await store.put_new("signing", b"first", TTL_S) == b"first"
    assert await store.put_new("signing", b"second", TTL_S) == b"first"
    assert await store.get("signing") == b"first"
    await timeline.elapse(TTL_S + 0.1)
    assert await store.put_new("signing", b"third", LONG_S) == b"third"

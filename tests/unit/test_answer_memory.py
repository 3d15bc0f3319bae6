"""Remembered answers (the degraded fallback) stay within their byte bounds."""

from __future__ import annotations

from agent_reach.backends.memory.tasks import MemoryAnswerCache
from agent_reach.clock import ManualClock
from agent_reach.invoke.answer_memory import AnswerMemory, answer_key
from agent_reach.registry.index import RegistryIndex


async def test_the_memory_cache_evicts_the_oldest_answers_past_its_byte_bound() -> None:
    cache = MemoryAnswerCache(ManualClock(), max_bytes=1000)
    for n in range(10):
        await cache.put(f"k{n}", bytes([n]) * 300, ttl_s=3600)
        assert cache.size <= 1000
    assert [await cache.get(f"k{n}") is not None for n in range(10)] == [False] * 7 + [True] * 3
    await cache.put("k9", b"x" * 10, ttl_s=3600)  # a newer answer replaces the old bytes
    assert cache.size == 610


async def test_the_memory_cache_skips_an_answer_larger_than_its_bound() -> None:
    cache = MemoryAnswerCache(ManualClock(), max_bytes=1000)
    await cache.put("small", b"s", ttl_s=3600)
    await cache.put("huge", b"h" * 1001, ttl_s=3600)
    assert await cache.get("huge") is None
    assert await cache.get("small") == b"s"


async def test_expired_answers_give_their_bytes_back() -> None:
    clock = ManualClock()
    cache = MemoryAnswerCache(clock, max_bytes=1000)
    await cache.put("a", b"a" * 500, ttl_s=10)
    clock.advance(11)
    assert await cache.get("a") is None
    assert cache.size == 0


async def test_answers_over_the_size_limit_are_not_remembered() -> None:
    cache = MemoryAnswerCache(ManualClock(), max_bytes=1 << 20)
    memory = AnswerMemory(cache, max_bytes=100, index=RegistryIndex())
    memory.remember("cap", {"n": 1}, {"big": "x" * 200}, 3600)
    memory.remember("cap", {"n": 2}, {"small": 1}, 3600)
    await memory.flush()
    assert await cache.get(answer_key("cap", {"n": 2})) == b'{"small":1}'
    assert await cache.get(answer_key("cap", {"n": 1})) is None
    assert memory.skipped == 1


class CountingCache(MemoryAnswerCache):
    """Counts the writes a flush makes."""

    def __init__(self) -> None:
        super().__init__(ManualClock(), max_bytes=1 << 20)
        self.puts = 0

    async def put(self, key: str, value: bytes, ttl_s: float) -> None:
        self.puts += 1
        await super().put(key, value, ttl_s)


async def test_one_flush_writes_the_newest_answer_once_per_payload_whatever_its_key_order() -> None:
    cache = CountingCache()
    memory = AnswerMemory(cache, max_bytes=1 << 20, index=RegistryIndex())
    memory.remember("cap", {"a": 1, "b": 2}, "first", 3600)
    memory.remember("cap", {"n": 9}, "other", 3600)
    memory.remember("cap", {"a": 1, "b": 2}, "second", 3600)
    memory.remember("cap", {"b": 2, "a": 1}, "third", 3600)
    memory.remember("other-cap", {"a": 1, "b": 2}, "elsewhere", 3600)
    await memory.flush()

    assert await cache.get(answer_key("cap", {"a": 1, "b": 2})) == b'"third"'
    assert await cache.get(answer_key("cap", {"n": 9})) == b'"other"'
    assert await cache.get(answer_key("other-cap", {"b": 2, "a": 1})) == b'"elsewhere"'
    assert cache.puts == 3

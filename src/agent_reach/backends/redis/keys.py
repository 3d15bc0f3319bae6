"""How the Redis stores name their keys and fields, and express durations.

Every key lives under the configured prefix, so one `SCAN <prefix>:*` finds a
deployment's whole state; every duration goes to Redis in whole milliseconds.
"""

from __future__ import annotations

PAYLOAD_FIELD = b"p"  # the one field of a stream entry (queues, journals): its payload

StreamEntries = list[tuple[bytes, dict[bytes, bytes]]]  # stream entries as redis-py reads them


def join_key(prefix: str, *parts: str) -> str:
    """``<prefix>:<part>:<part>...``."""
    return ":".join((prefix, *parts))


def to_ms(seconds: float) -> int:
    """`seconds` in whole milliseconds, at least 1: Redis refuses an expiry of 0."""
    return max(1, round(seconds * 1000))

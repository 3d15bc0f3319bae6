"""How the Redis stores name their keys and fields, and express durations.

Every key lives under the configured prefix, so one `SCAN <prefix>:*` finds a
deployment's whole state; every duration goes to Redis in whole milliseconds.

Redis Cluster places a key by the hash of its *hash tag*, the part between the first
``{`` and the next ``}``; keys with the same tag share a slot, and only keys in one slot
may meet in one Lua script or MULTI. The layout, one line per store (the prefix
``<p>`` allows no braces, so a tag is always the one the store chose):

- registry: ``<p>:{<p>:registry}:agent:<id>``, ``...:lease:<id>``, ``...:agents`` and the
  change channel ``...:events``: one tag, because `load` reads them all at once and the
  scripts publish in the same slot (sharded pub/sub on a cluster). Heartbeat-rate traffic,
  off the invoke path; the one slot that does not spread (docs/scaling.md).
- idempotency: ``<p>:idem:{<p>:i<n>}:<request key>`` with its fence counter
  ``<p>:idem-fence:{<p>:i<n>}``, n = crc32(request key) mod `IDEMPOTENCY_SHARDS`: a
  claim touches one record and one counter, and requests spread over all masters.
- contexts: ``<p>:ctx:{<id>}`` and its segments ``<p>:ctx:{<id>}:<list>:<n>``: per context.
- api keys: ``<p>:{<p>:apikeys}:apikey:<id>`` and ``...:apikeys``: put is one MULTI.
  Scale events are deduplicated as idempotency records (``scale-event:<event id>``).
- learned examples: ``<p>:{<p>:learned}:docs``, ``...:cap``, ``...:all``, ``...:version``
  and ``...:by:<capability>``: one tag, because adding or deleting an example updates the
  documents, the indexes and the version together. Feedback-rate traffic.
- single-key stores need no tag and spread by their whole name: ``quota:<bucket>``
  (per caller-capability pair), ``fleet:load``, ``queue:<name>``, ``journal:<name>``, ``task:<id>``,
  ``answer:<key>``, ``why:<request id>``, ``context-secret``, the outcome ledger's
  ``quality:<series>:<bucket>``, ``served:<request id>`` and ``rated:<request id>``.
- a queue's push-once markers: ``<p>:{<p>:queue:<name>}:once:<id>``, tagged with the
  stream's whole name, so a marker and its stream share the stream's slot.

A new store with a multi-key script adds its tag helper here, next to these.
"""

from __future__ import annotations

import zlib

PAYLOAD_FIELD = b"p"  # the one field of a stream entry (queues, journals): its payload

# Enough shards that they fall on every master of any sensible cluster, few enough that
# their fence counters (which never expire) stay a few KB.
IDEMPOTENCY_SHARDS = 1024

StreamEntries = list[tuple[bytes, dict[bytes, bytes]]]  # stream entries as redis-py reads them


def join_key(prefix: str, *parts: str) -> str:
    """``<prefix>:<part>:<part>...``."""
    return ":".join((prefix, *parts))


def hash_tag(prefix: str, name: str) -> str:
    """``{<prefix>:<name>}``: keys holding it share one cluster slot."""
    return f"{{{prefix}:{name}}}"


def registry_key(prefix: str, *parts: str) -> str:
    """A key (or the channel) of the registry, all in the registry's one slot."""
    return join_key(prefix, hash_tag(prefix, "registry"), *parts)


def apikey_key(prefix: str, *parts: str) -> str:
    """A key of the API key store, all in one slot."""
    return join_key(prefix, hash_tag(prefix, "apikeys"), *parts)


def learning_key(prefix: str, *parts: str) -> str:
    """A key of the learned-examples store, all in one slot."""
    return join_key(prefix, hash_tag(prefix, "learned"), *parts)


def queue_once_key(prefix: str, stream: str, once: str) -> str:
    """The marker that `once` was pushed to `stream`, in the stream's slot."""
    return join_key(prefix, f"{{{stream}}}", "once", once)


def idempotency_shard(request_key: str) -> int:
    """The shard of a request key: its record and fence counter share the shard's tag."""
    return zlib.crc32(request_key.encode()) % IDEMPOTENCY_SHARDS


def idempotency_tag(prefix: str, shard: int) -> str:
    """The hash tag of one idempotency shard."""
    return hash_tag(prefix, f"i{shard}")


def to_ms(seconds: float) -> int:
    """`seconds` in whole milliseconds, at least 1: Redis refuses an expiry of 0."""
    return max(1, round(seconds * 1000))

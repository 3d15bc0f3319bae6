"""What every server path writes for an error: the full stack's responses, the invoke
fast path's ASGI handler and the edge server's own answers all take an error's JSON
body and its headers from here.

The headers are `Retry-After` (whole seconds, when the error says when to retry) then
`WWW-Authenticate` (the RFC 6750 challenge of a 401), as (lower-case name, value) text
pairs; each server encodes them as it encodes its other headers.
"""

from __future__ import annotations

from agent_reach.errors import ReachError
from agent_reach.wire.json_answers import dump_json


def error_body(exc: ReachError) -> bytes:
    """`{"error": {"code", "message", ...details}}` as JSON bytes."""
    return dump_json(exc.to_body())


def error_headers(retry_after: str | None, challenge: str | None) -> list[tuple[str, str]]:
    """The headers of an error answer, from `ReachError.retry_after()` and `.challenge()`
    (kept on an `Answer` as they were)."""
    headers = []
    if retry_after is not None:
        headers.append(("retry-after", retry_after))
    if challenge is not None:
        headers.append(("www-authenticate", challenge))
    return headers

"""Which contexts this coordinator's in-flight requests refer to.

A request takes a reference when its delivery is given a context and drops it when
the request ends; the sweeper keeps every referenced context alive meanwhile. Each
coordinator knows only its own requests, which is all it must protect: a request
lives on the coordinator running it.
"""

from __future__ import annotations


class References:
    """request_id -> the context it refers to (a request has at most one)."""

    def __init__(self) -> None:
        self._by_request: dict[str, str] = {}

    def take(self, request_id: str, context_id: str) -> None:
        self._by_request[request_id] = context_id

    def drop(self, request_id: str) -> None:
        self._by_request.pop(request_id, None)

    def context_ids(self) -> set[str]:
        """Every context some in-flight request refers to."""
        return set(self._by_request.values())

"""JSON responses rendered with orjson; errors as `wire/rendering.py` renders them."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from agent_reach.errors import ReachError
from agent_reach.wire.rendering import dump_json, error_body, error_headers

JSON = "application/json"
__all__ = ["JSON", "dump_json", "error_response", "json_response"]


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dump_json(value), status_code=status, media_type=JSON, headers=headers)


def error_response(exc: ReachError) -> Response:
    """`{"error": {"code", "message", ...}}` with the error's own status and headers."""
    headers = dict(error_headers(exc.retry_after(), exc.challenge()))
    return Response(error_body(exc), exc.status, headers or None, media_type=JSON)

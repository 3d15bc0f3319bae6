"""JSON responses rendered with orjson, and the one way errors reach the wire."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel
from starlette.responses import Response

from agent_reach.errors import ReachError

JSON = "application/json"


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def dump_json(value: Any) -> bytes:
    """orjson with pydantic models and dataclasses understood."""
    return orjson.dumps(value, default=_default)


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dump_json(value), status_code=status, media_type=JSON, headers=headers)


def error_response(exc: ReachError) -> Response:
    """`{"error": {"code", "message", ...}}` with the error's own status."""
    headers = {}
    if (retry_after := exc.retry_after()) is not None:
        headers["retry-after"] = retry_after
    if (challenge := exc.challenge()) is not None:
        headers["www-authenticate"] = challenge
    return json_response(exc.to_body(), exc.status, headers or None)

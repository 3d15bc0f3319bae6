"""JSON answers rendered with orjson: the one encoder every HTTP surface answers with."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel
from starlette.responses import Response

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

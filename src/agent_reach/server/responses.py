"""Errors as `wire/rendering.py` renders them; JSON answers are `wire/json_answers`."""

from __future__ import annotations

from starlette.responses import Response

from agent_reach.errors import ReachError
from agent_reach.wire.json_answers import JSON as JSON
from agent_reach.wire.json_answers import dump_json as dump_json
from agent_reach.wire.json_answers import json_response as json_response
from agent_reach.wire.rendering import error_body, error_headers


def error_response(exc: ReachError) -> Response:
    """`{"error": {"code", "message", ...}}` with the error's own status and headers."""
    headers = dict(error_headers(exc.retry_after(), exc.challenge()))
    return Response(error_body(exc), exc.status, headers or None, media_type=JSON)

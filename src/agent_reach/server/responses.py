"""The one way errors reach the wire; JSON answers themselves are `wire/json_answers`."""

from __future__ import annotations

from starlette.responses import Response

from agent_reach.errors import ReachError
from agent_reach.wire.json_answers import JSON as JSON
from agent_reach.wire.json_answers import dump_json as dump_json
from agent_reach.wire.json_answers import json_response


def error_response(exc: ReachError) -> Response:
    """`{"error": {"code", "message", ...}}` with the error's own status."""
    headers = {}
    if (retry_after := exc.retry_after()) is not None:
        headers["retry-after"] = retry_after
    if (challenge := exc.challenge()) is not None:
        headers["www-authenticate"] = challenge
    return json_response(exc.to_body(), exc.status, headers or None)

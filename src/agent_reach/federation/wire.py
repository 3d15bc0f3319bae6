"""JSON-RPC messages over MCP's streamable HTTP: what is sent, and how an answer body
(one JSON message, or server-sent events carrying several) is read back.

A POST's answer may be `application/json` or a `text/event-stream` whose events are
notifications and requests from the server followed by the response (MCP 2025-11-25,
"Sending Messages to the Server"); both are read whole here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from agent_reach.wire.sse import SseFramer, is_event_stream

ACCEPT = "application/json, text/event-stream"  # both, as the spec requires of a client
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


class BadMessage(Exception):
    """The body is not JSON-RPC as MCP sends it."""


@dataclass(slots=True)
class Answer:
    """What one POST's answer carried: the response to our id, and everything else."""

    response: dict[str, Any] | None = None
    others: list[dict[str, Any]] = field(default_factory=list)  # notifications, server requests


def request(message_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id, "method": method}
    if params is not None:
        body["params"] = params
    return orjson.dumps(body)


def notification(method: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method})


def reply(message_id: Any, result: dict[str, Any] | None, error: str | None = None) -> bytes:
    """Our answer to a request the server sent us (`ping`, or one we do not serve)."""
    if error is None:
        return orjson.dumps({"jsonrpc": "2.0", "id": message_id, "result": result or {}})
    failure = {"code": -32601, "message": error}
    return orjson.dumps({"jsonrpc": "2.0", "id": message_id, "error": failure})


def messages_of(body: bytes) -> list[dict[str, Any]]:
    """One JSON-RPC message or a batch, as a list of objects."""
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadMessage("the answer is not JSON") from None
    items = decoded if isinstance(decoded, list) else [decoded]
    if not all(isinstance(item, dict) for item in items):
        raise BadMessage("the answer is not a JSON-RPC message")
    return items


def read_answer(content_type: bytes | None, body: bytes, message_id: int) -> Answer:
    """The response to `message_id` and the other messages the answer carried."""
    answer = Answer()
    if is_event_stream(content_type):
        framer = SseFramer()
        framer.feed(body + b"\n\n")  # a last event without its blank line still counts
        items = [
            m
            for event in framer.events
            if event["data"]
            for m in messages_of(event["data"].encode())
        ]
    else:
        items = messages_of(body)
    for item in items:
        if item.get("id") == message_id and ("result" in item or "error" in item):
            answer.response = item
        else:
            answer.others.append(item)
    return answer


def events_of(framer: SseFramer, chunk: bytes) -> list[dict[str, Any]]:
    """The complete messages a listening stream's next chunk finished."""
    framer.feed(chunk)
    found: list[dict[str, Any]] = []
    for event in framer.events:
        try:
            found.extend(messages_of(event["data"].encode()))
        except BadMessage:
            continue  # a stray event does not end the stream
    framer.events.clear()
    return found

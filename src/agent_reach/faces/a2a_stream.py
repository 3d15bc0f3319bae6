"""`SendStreamingMessage` / v0.3 `message/stream` at `/a2a` (and `POST /a2a/message:stream`):
the routed agent's answer as an A2A event stream.

The invocation asks for a stream. When the agent streams (its own events, or an A2A
agent's translated ones), the caller gets a Task in `working`, one artifact update per
event (the event's data as a text part, appended to one artifact), then a status
update: `completed` with the invoke answer's ids in its metadata, or `failed` with the
error. A whole answer (an agent that does not stream, a replayed one) is one event: the
Message, or the Task of a queued request, as `SendMessage` would answer. Each event is a
JSON-RPC response with the call's id. The caller leaving closes the agent's stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from agent_reach.wire.event_stream import END_EVENT, ERROR_EVENT, EventStream
from agent_reach.wire.sse import SseFramer

QUEUE_EVENTS = 16  # events relayed ahead of a caller that reads slowly
_finishing: set[asyncio.Task[Any]] = set()  # relays left to end by themselves


@dataclass(frozen=True, slots=True)
class StreamedReply:
    """What a streaming call answers: a stream to relay, or one event's result."""

    version: str
    task_id: str
    context_id: str | None
    stream: EventStream | None = None
    result: Any = None  # the single event, when there is no stream


async def sse_body(call_id: Any, reply: StreamedReply, *, rpc: bool = True) -> AsyncIterator[bytes]:
    """The response body: each event as `data: <JSON-RPC response>`, or (`rpc` False, the
    HTTP+JSON binding) as `data: <StreamResponse>`."""
    framed = _frame if rpc else _bare
    if reply.stream is None:
        yield framed(call_id, reply.result)
        return
    stream = reply.stream
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_EVENTS)
    framer = SseFramer()
    chunks = 0

    async def write(data: bytes) -> None:
        nonlocal chunks
        seen = len(framer.events)
        framer.feed(data)
        for event in framer.events[seen:]:
            if event["event"] in (END_EVENT, ERROR_EVENT):
                result = _final(reply, event["event"] == END_EVENT, orjson.loads(event["data"]))
            else:
                result = _chunk(reply, event["data"], append=chunks > 0)
                chunks += 1
            await queue.put(framed(call_id, result))

    async def relay() -> None:
        try:
            await stream.relay(write)
        finally:
            await queue.put(None)

    yield framed(call_id, _task(reply))
    task = asyncio.get_running_loop().create_task(relay())
    try:
        while (frame := await queue.get()) is not None:
            yield frame
    finally:
        if not task.done():  # the caller left: the relay ends by itself once aborted
            stream.abort()
            _finishing.add(task)
            task.add_done_callback(_finishing.discard)
            while not queue.empty():
                queue.get_nowait()  # a relay blocked on a full queue may go on


def _frame(call_id: Any, result: Any) -> bytes:
    body = orjson.dumps({"jsonrpc": "2.0", "id": call_id, "result": result})
    return b"data: %s\n\n" % body


def _bare(call_id: Any, result: Any) -> bytes:
    return b"data: %s\n\n" % orjson.dumps(result)


def _task(reply: StreamedReply) -> dict[str, Any]:
    task: dict[str, Any] = {
        "id": reply.task_id,
        "contextId": reply.context_id or reply.task_id,
        "status": {"state": _state(reply.version, "working")},
    }
    if reply.version == "0.3":
        task["kind"] = "task"
        return task
    return {"task": task}


def _chunk(reply: StreamedReply, text: str, *, append: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"text": text}
    update: dict[str, Any] = {
        "taskId": reply.task_id,
        "contextId": reply.context_id or reply.task_id,
        "artifact": {"artifactId": f"{reply.task_id}-result", "parts": [part]},
        "append": append,
        "lastChunk": False,
    }
    if reply.version == "0.3":
        part["kind"] = "text"
        update["kind"] = "artifact-update"
        return update
    return {"artifactUpdate": update}


def _final(reply: StreamedReply, ok: bool, document: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = {"state": _state(reply.version, "completed" if ok else "failed")}
    metadata = {key: document.get(key) for key in ("request_id", "trace_id", "agent_id", "status")}
    if not ok:
        error = document.get("error") or {}
        parts: list[dict[str, Any]] = [{"text": str(error.get("message", ""))}, {"data": error}]
        if reply.version == "0.3":
            parts = [{"kind": "text", **parts[0]}, {"kind": "data", **parts[1]}]
        status["message"] = {
            "messageId": f"{reply.task_id}-error",
            "role": "ROLE_AGENT" if reply.version == "1.0" else "agent",
            "parts": parts,
        }
        if reply.version == "0.3":
            status["message"]["kind"] = "message"
        metadata = {"request_id": error.get("request_id"), "trace_id": error.get("trace_id")}
    update: dict[str, Any] = {
        "taskId": reply.task_id,
        "contextId": reply.context_id or reply.task_id,
        "status": status,
        "metadata": metadata,
    }
    if reply.version == "0.3":
        update["kind"] = "status-update"
        update["final"] = True
        return update
    return {"statusUpdate": update}


def _state(version: str, state: str) -> str:
    return state if version == "0.3" else f"TASK_STATE_{state.upper()}"

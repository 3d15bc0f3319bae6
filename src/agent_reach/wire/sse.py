"""Server-sent events (the WHATWG `text/event-stream` format) read as they arrive.

An agent's stream is forwarded event by event: `SseFramer.feed` returns the bytes up to
the end of the last complete event (the blank line that dispatches it) and keeps the
rest until it is complete, so a stream cut in the middle of an event never reaches the
caller half-written and the coordinator's own last event always starts on a boundary.
The events read on the way make the assembled answer a caller who did not ask for a
stream gets: `{"text": <every event's data, joined>, "events": [{"event", "data", "id"?}]}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

MEDIA_TYPE = "text/event-stream"
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(slots=True)
class SseFramer:
    """Cuts a byte stream at event boundaries and keeps the events' fields."""

    events: list[dict[str, Any]] = field(default_factory=list)
    pending: bytes = b""  # the start of an event whose blank line has not come yet
    _data: list[str] = field(default_factory=list)
    _name: str = ""
    _id: str | None = None

    def feed(self, chunk: bytes) -> bytes:
        """The complete events of what has arrived so far (raw, as the agent sent them)."""
        buffer = self.pending + chunk if self.pending else chunk
        # A CR at the very end may be the first half of a CRLF: wait for the next byte.
        scan_to = len(buffer) - 1 if buffer.endswith(b"\r") else len(buffer)
        cut = start = 0
        self._reset()
        for end in _LINE_END.finditer(buffer, 0, scan_to):
            line = buffer[start : end.start()]
            start = end.end()
            if line:
                self._field(line)
                continue
            self._dispatch()
            cut = start
        self._reset()  # the lines after the cut are read again once their event is whole
        self.pending = buffer[cut:]
        return buffer[:cut]

    def finish(self) -> bool:
        """The stream has ended: an unfinished event is dropped, as the format says
        (WHATWG 9.2.6); True when there was one."""
        dropped, self.pending = self.pending, b""
        return bool(dropped.strip())

    def assembled(self) -> dict[str, Any]:
        """The stream as one answer (see the module docstring)."""
        return {"text": "".join(e["data"] for e in self.events), "events": self.events}

    def _field(self, line: bytes) -> None:
        if line.startswith(b":"):
            return  # a comment (a keep-alive ping)
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        text = value.decode("utf-8", "replace")
        if name == b"data":
            self._data.append(text)
        elif name == b"event":
            self._name = text
        elif name == b"id" and "\0" not in text:
            self._id = text

    def _dispatch(self) -> None:
        if self._data:  # an event without data is not dispatched (WHATWG 9.2.6)
            event: dict[str, Any] = {
                "event": self._name or "message",
                "data": "\n".join(self._data),
            }
            if self._id is not None:
                event["id"] = self._id
            self.events.append(event)
        self._reset()

    def _reset(self) -> None:
        self._data = []
        self._name = ""
        self._id = None


def assemble(body: bytes) -> dict[str, Any]:
    """A whole `text/event-stream` body as the assembled answer."""
    framer = SseFramer()
    framer.feed(body)
    framer.finish()
    return framer.assembled()


def encode_event(event: dict[str, Any]) -> bytes:
    """An event (`event`, `data`, `id`?) in the wire form, one `data:` line per line."""
    lines = [f"event: {event['event']}".encode()]
    if event.get("id") is not None:
        lines.append(f"id: {event['id']}".encode())
    lines += (b"data: " + line for line in _LINE_END.split(str(event["data"]).encode()))
    return b"\n".join(lines) + b"\n\n"


def sse_event(name: str, document: Any) -> bytes:
    """One event with a JSON document as its data (orjson never writes a raw newline)."""
    return b"event: %s\ndata: %s\n\n" % (name.encode(), orjson.dumps(document))


def is_event_stream(content_type: bytes | None) -> bool:
    """Whether a Content-Type header names `text/event-stream`."""
    if content_type is None:
        return False
    return content_type.split(b";", 1)[0].strip().lower() == MEDIA_TYPE.encode()


def accepts_event_stream(accept: bytes | str | None) -> bool:
    """Whether an Accept header asks for `text/event-stream` (with a non-zero q)."""
    if accept is None:
        return False
    value = accept.decode("latin-1") if isinstance(accept, bytes) else accept
    for item in value.split(","):
        media, *parameters = (p.strip() for p in item.split(";"))
        if media.lower() != MEDIA_TYPE:
            continue
        for parameter in parameters:
            name, _, q = parameter.partition("=")
            if name.strip().lower() == "q" and q.strip() in ("0", "0.0", "0.00", "0.000"):
                return False
        return True
    return False

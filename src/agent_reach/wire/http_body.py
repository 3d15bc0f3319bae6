"""What an agent's HTTP answer body means: content codings undone, then one result shape.

The pool returns bytes as they came. Deliveries ask for `gzip` and `deflate` (any
other coding is refused: an agent that ignores Accept-Encoding is a bad answer), and
decoding stops at the response limit, so a small compressed body cannot grow into
gigabytes (a decompression bomb is `agent_response_too_large`). Then the body
becomes the result: JSON as it is, `text/plain` as `{"text": ...}`, XML as
`{"xml": ...}`, `text/event-stream` as the assembled events (`wire/sse.py`), an empty
body as null; anything else is `agent_bad_answer`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from agent_reach.wire.sse import MEDIA_TYPE as SSE_MEDIA_TYPE
from agent_reach.wire.sse import assemble

ERROR_EXCERPT_BYTES = 512  # how much of a failing agent's answer the caller gets to see
ERROR_JSON_BYTES = 8 * 1024  # a failing agent's JSON answer up to this size comes whole
ACCEPT_ENCODING = "gzip, deflate"  # what deliveries ask for (RFC 9110 §12.5.3)
_DECODE_STEP = 64 * 1024  # output produced per decompress call while watching the limit
_TEXT_TYPES = frozenset({"text/plain"})
_XML_TYPES = frozenset({"application/xml", "text/xml"})

# A registration's own reading of an XML answer (the adapters' response mapping); the
# http transport has none and answers `{"xml": ...}`.
XmlMapping = Callable[[str], Any]

# How an answer became the result: JSON as sent, or wrapped so every caller gets JSON.
Normalization = Literal["json", "text", "xml", "sse", "empty"]


@dataclass(frozen=True, slots=True)
class Shaped:
    """A result with the normalization that produced it; a transport's `deliver` may return one."""

    value: Any
    normalized: Normalization
    cost: float | None = None  # what the agent reported it cost (`X-Reach-Cost`), if it did


class BadBody(Exception):
    """The body cannot be read as any result shape: the agent acted, answered badly."""


class BodyTooLarge(Exception):
    """The decoded body is over the limit (a decompression bomb included)."""


def decode_content(coding: bytes | None, body: bytes, limit: int) -> bytes:
    """The body with its Content-Encoding undone, at most `limit` bytes of it."""
    if coding is None:
        return body
    codings = [c.strip().lower() for c in coding.split(b",") if c.strip()]
    for name in reversed(codings):  # the last coding applied is undone first
        if name == b"identity":
            continue
        if name in (b"gzip", b"x-gzip"):
            body = _inflate(body, zlib.MAX_WBITS | 16, limit)
        elif name == b"deflate":
            try:
                body = _inflate(body, zlib.MAX_WBITS, limit)  # RFC 9110: zlib-wrapped
            except BadBody:
                body = _inflate(body, -zlib.MAX_WBITS, limit)  # what some servers send: raw
        else:
            raise BadBody(f"unsupported content coding {name.decode('latin-1')!r}")
    return body


def _inflate(data: bytes, wbits: int, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out: list[bytes] = []
    size = 0
    try:
        chunk = inflater.decompress(data, _DECODE_STEP)
        while True:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"the decoded answer is over {limit} bytes")
            out.append(chunk)
            if inflater.eof or not inflater.unconsumed_tail:
                break
            chunk = inflater.decompress(inflater.unconsumed_tail, _DECODE_STEP)
        tail = inflater.flush()
    except zlib.error as exc:
        raise BadBody(f"the compressed answer is corrupt: {exc}") from None
    if not inflater.eof:
        raise BadBody("the compressed answer is cut short")
    if size + len(tail) > limit:
        raise BodyTooLarge(f"the decoded answer is over {limit} bytes")
    out.append(tail)
    return b"".join(out)


def shape_result(content_type: bytes | None, body: bytes, xml: XmlMapping | None = None) -> Shaped:
    """The one result shape of a 2xx body (see the module docstring)."""
    if not body:
        return Shaped(None, "empty")
    if content_type == b"application/json":  # nearly every answer: no parsing of the type
        return _json(body, "application/json")
    media, charset = _media_type(content_type)
    if media in _TEXT_TYPES:
        return Shaped({"text": _text(body, charset)}, "text")
    if media == SSE_MEDIA_TYPE:  # a stream nobody asked to receive as one: assembled
        return Shaped(assemble(body), "sse")
    if media in _XML_TYPES:
        document = _text(body, charset)
        return Shaped(xml(document) if xml is not None else {"xml": document}, "xml")
    return _json(body, media)


def _json(body: bytes, media: str) -> Shaped:
    try:
        return Shaped(orjson.loads(body), "json")
    except orjson.JSONDecodeError:
        raise BadBody(f"the answer ({media or 'no content type'}) is not JSON") from None


def _media_type(content_type: bytes | None) -> tuple[str, str]:
    if content_type is None:
        return "", "utf-8"
    media, _, rest = content_type.decode("latin-1").partition(";")
    charset = "utf-8"
    for parameter in rest.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    return media.strip().lower(), charset


def _text(body: bytes, charset: str) -> str:
    try:
        return body.decode(charset)
    except (LookupError, UnicodeDecodeError):
        raise BadBody(f"the answer is not text in {charset!r}") from None


def failure_answer(body: bytes) -> Any:
    """What a caller sees of a failing agent's answer (`agent_answer`): a JSON object or
    array of at most `ERROR_JSON_BYTES` as itself, so an error body the agent sent
    arrives as an object; anything else as text, its first `ERROR_EXCERPT_BYTES`."""
    if len(body) <= ERROR_JSON_BYTES and body.lstrip()[:1] in (b"{", b"["):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return body[:ERROR_EXCERPT_BYTES].decode("utf-8", "replace")

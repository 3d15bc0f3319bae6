"""An agent's 2xx body to one result shape: content codings undone within the limit,
then JSON, text, XML or null; anything else is a bad answer."""

from __future__ import annotations

import gzip
import zlib

import pytest

from agent_reach.wire.http_body import (
    BadBody,
    BodyTooLarge,
    decode_content,
    shape_result,
)

LIMIT = 16 * 1024 * 1024
RESULT = b'{"ok": true}'


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("coding", "body"),
    [
        (None, RESULT),
        (b"identity", RESULT),
        (b"gzip", gzip.compress(RESULT, mtime=0)),
        (b"x-gzip", gzip.compress(RESULT, mtime=0)),
        (b"deflate", zlib.compress(RESULT)),
        (b"deflate", raw_deflate(RESULT)),  # what some servers send for "deflate"
        (b"deflate, gzip", gzip.compress(zlib.compress(RESULT), mtime=0)),
        (b"GZIP", gzip.compress(RESULT, mtime=0)),
    ],
)
def test_content_codings_are_undone(coding: bytes | None, body: bytes) -> None:
    assert decode_content(coding, body, LIMIT) == RESULT


def test_a_decompression_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))  # 64 KiB that inflate to 64 MiB
    assert len(bomb) < LIMIT // 100
    with pytest.raises(BodyTooLarge):
        decode_content(b"gzip", bomb, LIMIT)


@pytest.mark.parametrize(
    ("coding", "body"),
    [
        (b"br", b"\x0b\x02\x80ok\x03"),
        (b"gzip", b"not gzip at all"),
        (b"gzip", gzip.compress(RESULT, mtime=0)[:-6]),  # cut short
    ],
)
def test_unknown_corrupt_or_cut_codings_are_bad_answers(coding: bytes, body: bytes) -> None:
    with pytest.raises(BadBody):
        decode_content(coding, body, LIMIT)


@pytest.mark.parametrize(
    ("content_type", "body", "value", "normalized"),
    [
        (b"application/json", RESULT, {"ok": True}, "json"),
        (None, b"[1, 2]", [1, 2], "json"),
        (b"application/problem+json", b'{"a": 1}', {"a": 1}, "json"),
        (b"text/plain; charset=utf-8", "已发货".encode(), {"text": "已发货"}, "text"),
        (b"Text/Plain; charset=gbk", "已发货".encode("gbk"), {"text": "已发货"}, "text"),
        (b"application/xml", b"<a>1</a>", {"xml": "<a>1</a>"}, "xml"),
        (b'text/xml; charset="utf-8"', b"<a/>", {"xml": "<a/>"}, "xml"),
        (b"application/json", b"", None, "empty"),
        (b"text/plain", b"", None, "empty"),
    ],
)
def test_every_2xx_body_gets_one_shape(
    content_type: bytes | None, body: bytes, value: object, normalized: str
) -> None:
    shaped = shape_result(content_type, body)
    assert (shaped.value, shaped.normalized) == (value, normalized)


def test_a_registration_mapping_reads_xml_itself() -> None:
    shaped = shape_result(b"text/xml", b"<qty>3</qty>", xml=lambda doc: {"qty": len(doc)})
    assert (shaped.value, shaped.normalized) == ({"qty": 12}, "xml")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (b"application/json", b"<html>oops</html>"),
        (b"text/html", b"<html>oops</html>"),
        (b"application/octet-stream", b"\x00\x01"),
        (b"text/plain; charset=utf-8", b"\xff\xfe\xfa"),
        (b"text/plain; charset=no-such-charset", b"x"),
    ],
)
def test_anything_else_is_a_bad_answer(content_type: bytes, body: bytes) -> None:
    with pytest.raises(BadBody):
        shape_result(content_type, body)

"""Chunk-size lines made plain for llhttp: extensions with RFC 9112 whitespace, any split."""

from __future__ import annotations

import pytest

from agent_reach.server.edge_chunks import MAX_LINE_BYTES, ChunkLines

BODY = b'5 ; a = 1 ;b\r\nhello\r\n3;c="x ; y"\r\nabc\r\n0 ; z\r\nTrailer: t\r\n\r\n'
PLAIN = b"5\r\nhello\r\n3\r\nabc\r\n0\r\nTrailer: t\r\n\r\n"
NEXT = b"GET / HTTP/1.1\r\n"


def feed_in(pieces: list[bytes]) -> tuple[bytes, bytes | None]:
    lines = ChunkLines()
    out = []
    for n, piece in enumerate(pieces):
        data, rest = lines.feed(piece)
        out.append(data)
        if rest is not None:
            return b"".join(out), rest + b"".join(pieces[n + 1 :])
    return b"".join(out), None


@pytest.mark.parametrize("split", range(len(BODY + NEXT) + 1))
def test_size_lines_lose_their_extensions_wherever_the_reads_split(split: int) -> None:
    stream = BODY + NEXT
    assert feed_in([stream[:split], stream[split:]]) == (PLAIN, NEXT)


def test_a_body_fed_byte_by_byte_ends_where_it_ends() -> None:
    stream = BODY + NEXT
    assert feed_in([bytes([b]) for b in stream]) == (PLAIN, NEXT)


@pytest.mark.parametrize("line", [b"5;@\r\n", b"5;a=1 \r\n", b"5;a b\r\n", b"5;\r\n"])
def test_a_line_outside_the_grammar_goes_on_as_it_came(line: bytes) -> None:
    out, rest = feed_in([line + b"hello\r\n0\r\n\r\n"])
    assert (out, rest) == (line + b"hello\r\n0\r\n\r\n", b"")


def test_a_line_without_a_size_stops_the_following_and_passes_everything_on() -> None:
    data = b"zz\r\nhello\r\n0\r\n\r\nmore"
    assert feed_in([data]) == (data, None)


def test_an_endless_size_line_is_passed_on_once_past_the_bound() -> None:
    line = b"5;" + b"a" * (MAX_LINE_BYTES + 10)
    out, rest = feed_in([line, b"\r\nhello"])
    assert (out, rest) == (line + b"\r\nhello", None)


def test_chunk_data_that_looks_like_a_size_line_is_left_alone() -> None:
    data = b"9\r\n5 ; a=1\r\n\r\n0\r\n\r\n"
    assert feed_in([data]) == (data, b"")

"""Chunk-size lines of a chunked request body, made plain before llhttp reads them.

RFC 9112 §7.1.1 allows optional whitespace (BWS) around the `;` and `=` of a chunk
extension (`5 ; name = "value"`); llhttp refuses it and has no leniency for it. The
edge ignores extensions anyway, so each size line that is valid by the RFC grammar
reaches llhttp as `SIZE CRLF`; any other line goes through as it came, for llhttp to
judge. The framing is followed here only to find the size lines: the chunk sizes are
the same hex digits llhttp reads, so both see the body end at the same byte.
"""

from __future__ import annotations

import re

# A size line longer than this is passed on as it is (llhttp then refuses or reads it).
MAX_LINE_BYTES = 4096
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = rb'"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"'
_VALUE = rb"(?:" + _TOKEN + rb"|" + _QUOTED + rb")"
_EXTENSION = rb"[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*" + _VALUE + rb")?"  # BWS = [ \t]*
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]+)(?:" + _EXTENSION + rb")*\r\n")
_HEX = re.compile(rb"[0-9A-Fa-f]+")


class ChunkLines:
    """Follows one chunked body: `feed` returns the bytes for llhttp and, once the body
    (trailers included) has ended, the bytes after it (else None)."""

    __slots__ = ("_data_left", "_line", "_state")

    def __init__(self) -> None:
        self._state = "size"  # "size" line, chunk "data" (and its CRLF), "trailer" lines, "raw"
        self._line = b""
        self._data_left = 0

    def feed(self, data: bytes) -> tuple[bytes, bytes | None]:
        out: list[bytes] = []
        while data:
            if self._state == "raw":
                out.append(data)
                break
            if self._state == "data":
                take = min(self._data_left, len(data))
                out.append(data[:take])
                data = data[take:]
                self._data_left -= take
                if not self._data_left:
                    self._state = "size"
                continue
            line, data = self._take_line(data)
            if line is None:
                if len(self._line) > MAX_LINE_BYTES:
                    out.append(self._line)
                    self._line, self._state = b"", "raw"
                continue
            if self._state == "trailer":
                out.append(line)
                if line == b"\r\n":
                    return b"".join(out), data
                continue
            out.append(self._size_line(line))
        return b"".join(out), None

    def _take_line(self, data: bytes) -> tuple[bytes | None, bytes]:
        """A whole line (CRLF included) once its end has come, and the bytes after it."""
        joined = self._line + data
        end = joined.find(b"\r\n", max(0, len(self._line) - 1))
        if end < 0:
            self._line = joined
            return None, b""
        self._line = b""
        return joined[: end + 2], joined[end + 2 :]

    def _size_line(self, line: bytes) -> bytes:
        match = _SIZE_LINE.fullmatch(line)
        digits = match[1] if match else (m[0] if (m := _HEX.match(line)) else None)
        if digits is None:
            self._state = "raw"  # llhttp refuses it; nothing more to follow
            return line
        size = int(digits, 16)
        if size == 0:
            self._state = "trailer"
        else:
            self._state, self._data_left = "data", size + 2  # the data, then its CRLF
        return digits + b"\r\n" if match else line

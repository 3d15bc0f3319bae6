"""The answer shapes every Python peer serves, by path: (status, headers, body, delay_s)."""

from __future__ import annotations

import gzip
import json
import zlib

BIG_BYTES = 17 * 1024 * 1024  # over the coordinator's 16 MiB answer limit
TEXT = "done: 已发货"
SLOW_S = 1.5  # longer than the deadline the suite's callers give


def shape(peer: str, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes, float]:
    """The answer to a delivery POSTed to `path`."""
    payload = json.loads(body).get("payload") if body else None
    result = json.dumps({"peer": peer, "echo": payload}).encode()
    as_json = [("content-type", "application/json")]
    table = {
        "/json": (200, as_json, result, 0.0),
        "/empty": (204, [], b"", 0.0),
        "/gzip": (200, [*as_json, ("content-encoding", "gzip")], gzip.compress(result), 0.0),
        "/deflate": (200, [*as_json, ("content-encoding", "deflate")], zlib.compress(result), 0.0),
        "/text": (200, [("content-type", "text/plain; charset=utf-8")], TEXT.encode(), 0.0),
        "/xml": (200, [("content-type", "application/xml")], b"<ok>1</ok>", 0.0),
        "/notjson": (200, as_json, b"<html>oops</html>", 0.0),
        "/big": (200, as_json, b"a" * BIG_BYTES, 0.0),
        "/slow": (200, as_json, result, SLOW_S),
    }
    return table.get(path, (404, as_json, b"{}", 0.0))

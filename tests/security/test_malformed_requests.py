"""S3 and S12: bad keys, oversized and malformed requests, sent as raw bytes over a socket
(httpx would normalize or refuse many of them) to the invoke fast path and to the
control plane. Every answer must be the documented 4xx — never a 2xx, never a 500 —
and no agent may receive any of these requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import pytest
from attack_kit import (
    CAPABILITY_1,
    Headers,
    RawAnswer,
    ReportFactory,
    World,
    exchange,
    request_head,
)

from agent_reach.config import DEFAULT_MAX_BODY_BYTES
from agent_reach.server.limits import MAX_HEADER_BYTES, MAX_HEADERS

CHUNK = 64 * 1024


def chunked(total: int) -> Iterable[bytes]:
    """`total` bytes of a JSON-looking body in chunked encoding, then the last chunk."""
    for n in range(total // CHUNK):
        data = (b'{"payload": "' if n == 0 else b"") + b"a" * CHUNK
        yield f"{len(data):x}\r\n".encode() + data + b"\r\n"
    yield b"0\r\n\r\n"


def nested(depth: int) -> bytes:
    return b'{"capability": "alpha.read", "payload": ' + b"[" * depth + b"]" * depth + b"}"


@dataclass(frozen=True)
class Case:
    """One malformed request and the statuses allowed for it. The body is `body`, or
    `chunked` bytes in chunked encoding, or none at all behind a `declared` length."""

    name: str
    expected: set[int]
    headers: Headers = ()
    body: bytes = b'{"capability": "alpha.read"}'
    chunked: int | None = None
    declared: int | None = None
    query: str = ""


def cases(key: bytes, revoked: bytes) -> list[Case]:
    """The same attacks for both planes; `key` is valid for them, `revoked` was."""
    auth = ((b"authorization", b"Bearer " + key),)
    limit = DEFAULT_MAX_BODY_BYTES
    bodies = [
        Case("declared Content-Length over the limit", {413}, declared=limit + 1),
        Case("chunked body over the limit", {413}, chunked=limit + CHUNK),
        Case("malformed JSON", {400}, body=b'{"capability": '),
        Case("invalid UTF-8", {400, 422}, body=b'{"capability": "\xff\xfe"}'),
        Case("a JSON array", {422}, body=b"[1, 2]"),
        Case("null", {400, 422}, body=b"null"),
        Case("capability of the wrong type", {422}, body=b'{"capability": 5}'),
        Case("capability as a list", {422}, body=b'{"capability": ["alpha.read"]}'),
        Case("NUL in the capability", {422}, body=b'{"capability": "alpha.read\\u0000"}'),
        Case("huge float", {422}, body=b'{"capability": "alpha.read", "max_hop": 1e400}'),
        Case(
            "5000-digit integer",
            {400, 422},
            body=b'{"capability": "a.b", "max_hop": 9' + b"9" * 5000 + b"}",
        ),
        Case("JSON nested 100 000 deep", {400, 422}, body=nested(100_000)),
        Case("unknown fields", {422}, body=b'{"capability": "alpha.read", "admin": true}'),
    ]
    bodies = [replace(c, headers=auth) for c in bodies]
    keys = [
        Case("no key", {401}),
        Case("empty Bearer", {401}, ((b"authorization", b"Bearer "),)),
        Case("Basic credentials", {401}, ((b"authorization", b"Basic " + key),)),
        Case("malformed key", {401}, ((b"authorization", b"Bearer ar_zz_zz"),)),
        Case("revoked key", {401}, ((b"authorization", b"Bearer " + revoked),)),
        Case("key in the query string", {401}, query=f"?api_key={key.decode()}&key={key.decode()}"),
        Case(
            "bytes that are not text in the key",
            {400, 401},
            ((b"authorization", b"Bearer \xff\x00"),),
        ),
        Case("8 KB key", {401}, ((b"authorization", b"Bearer " + b"a" * 8192),)),
        Case("two Authorization headers", {400}, auth + auth),
        Case("a 16 KB header", {431}, (*auth, (b"x-padding", b"p" * MAX_HEADER_BYTES))),
        Case("a 16 KB key", {431}, ((b"authorization", b"Bearer " + b"k" * MAX_HEADER_BYTES),)),
        Case(
            "too many headers",
            {431},
            auth + tuple((b"x-h%d" % n, b"1") for n in range(MAX_HEADERS + 1)),
        ),
    ]
    return bodies + keys


def _send(url: str, path: str, case: Case) -> RawAnswer:
    headers = [*case.headers, (b"content-type", b"application/json")]
    body: Iterable[bytes] = ()
    if case.declared is not None:
        headers.append((b"content-length", b"%d" % case.declared))
    elif case.chunked is not None:
        headers.append((b"transfer-encoding", b"chunked"))
        body = chunked(case.chunked)
    else:
        headers.append((b"content-length", b"%d" % len(case.body)))
        body = [case.body]
    return exchange(url, request_head("POST", path + case.query, headers), body)


def test_malformed_and_oversized_requests_get_documented_4xx_answers(
    world: World, report: ReportFactory
) -> None:
    attack = report("malformed_requests", "S3/S12 malformed and oversized requests")
    admin = world.keys["admin"]
    revoked = world.deployment.mint(admin, "soon-revoked", "a", "caller")
    assert world.call("admin", "DELETE", f"/v1/keys/{revoked['key_id']}").status_code == 204
    delivered = world.deliveries()
    url = world.deployment.first.url
    for plane, path in (("invoke", "/v1/invoke"), ("control plane", "/v1/route")):
        for case in cases(world.keys["caller-a"].encode(), revoked["key"].encode()):
            answer = _send(url, path, case)
            attack.record(
                f"{plane}: {case.name}",
                through=answer.status not in case.expected,
                status=answer.status,
                code=answer.code,
                expected=sorted(case.expected),
                body_bytes_sent=answer.body_bytes_sent,
            )
    attack.record(
        "agents received any of these requests",
        through=world.deliveries() != delivered,
        deliveries=world.deliveries() - delivered,
    )
    still_fine = world.invoke("caller-a", CAPABILITY_1)
    attack.record("the coordinator still serves afterwards", through=still_fine.status_code != 200)
    attack.figures["server_errors"] = sum(1 for c in attack.cases if c.get("status", 0) >= 500)
    attack.assert_nothing_got_through()


@pytest.mark.parametrize("backend", ["memory"])  # stateless; each 500 logs a slow traceback
def test_integers_beyond_64_bits_are_refused_rather_than_crashing(
    world: World, report: ReportFactory
) -> None:
    attack = report("huge_integers", "S12 integers beyond 64 bits")
    huge = b"1" + b"0" * 30
    for case, path, body in (
        ("invoke payload", "/v1/invoke", b'{"capability": "alpha.read", "payload": ' + huge + b"}"),
        ("context document", "/v1/contexts", b'{"document": {"n": ' + huge + b"}}"),
    ):
        answer = world.call(
            "caller-a", "POST", path, content=body, headers={"content-type": "application/json"}
        )
        attack.record(case, through=answer.status_code >= 500, status=answer.status_code)
    attack.assert_nothing_got_through()

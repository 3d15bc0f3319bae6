"""The edge on raw requests where it used to differ from RFC 9110/9112 and from nginx:
Host rules, versions, long targets, 100-continue, an ignored h2c upgrade with a body,
and the 413 a client still sending its body gets to read."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from interop_kit import BODY_LIMIT, Peer

from agent_reach.testing.raw_http import RawClient

UPGRADE = (
    "connection: Upgrade, HTTP2-Settings",
    "upgrade: h2c",
    "http2-settings: AAMAAABkAAQAAP__",
)


@pytest.fixture
def capability(peers: Callable[[str], Peer], capability_at: Callable[[str, int], str]) -> str:
    return capability_at(f"{peers('uvicorn').url}/json", 1)


@pytest.fixture
def raw(coordinator: str) -> Iterator[RawClient]:
    client = RawClient(coordinator)
    yield client
    client.close()


def head(method: str, target: str, *lines: str, version: str = "1.1") -> bytes:
    return "\r\n".join([f"{method} {target} HTTP/{version}", *lines]).encode() + b"\r\n\r\n"


def invoke(capability: str) -> bytes:
    return json.dumps({"capability": capability, "payload": {"n": 7}}).encode()


@pytest.mark.parametrize("hosts", [(), ("host: a", "host: b")], ids=["no-host", "two-hosts"])
def test_http_1_1_needs_exactly_one_host(raw: RawClient, hosts: tuple[str, ...]) -> None:
    raw.send(head("GET", "/healthz", *hosts))
    reply = raw.reply()
    assert (reply.status, reply.code()) == (400, "bad_host")
    assert raw.is_closed()


def test_http_1_0_without_host_is_served(raw: RawClient) -> None:
    raw.send(head("GET", "/healthz", version="1.0"))
    assert raw.reply().status == 200


def test_an_http_2_0_request_line_is_505(raw: RawClient) -> None:
    raw.send(head("GET", "/healthz", "host: localhost", version="2.0"))
    reply = raw.reply()
    assert (reply.status, reply.code()) == (505, "http_version_not_supported")


def test_a_request_target_over_8_kib_is_414_and_8000_octets_are_served(
    coordinator: str,
) -> None:
    short, long = RawClient(coordinator), RawClient(coordinator)
    short.send(head("GET", "/healthz?q=" + "a" * 7990, "host: localhost"))
    assert short.reply().status == 200
    long.send(head("GET", "/healthz?q=" + "a" * 9000, "host: localhost"))
    reply = long.reply()
    assert (reply.status, reply.code()) == (414, "uri_too_long")
    short.close()
    long.close()


def test_no_100_continue_is_sent_to_an_http_1_0_client(raw: RawClient, capability: str) -> None:
    body = invoke(capability)
    lines = ("expect: 100-continue", f"content-length: {len(body)}")
    raw.send(head("POST", "/v1/invoke", *lines, version="1.0"))
    raw.send(body)
    assert raw.reply().status == 200  # the answer, no interim response before it


def test_a_pipelined_request_expecting_100_gets_it_when_its_turn_comes(
    raw: RawClient, capability: str
) -> None:
    body = invoke(capability)
    length = f"content-length: {len(body)}"
    raw.send(head("POST", "/v1/invoke", "host: localhost", length) + body)
    raw.send(head("POST", "/v1/invoke", "host: localhost", length, "expect: 100-continue"))
    assert raw.reply().status == 200
    assert raw.reply().status == 100
    raw.send(body)
    reply = raw.reply()
    assert reply.status == 200
    assert json.loads(reply.body)["result"]["echo"] == {"n": 7}


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_ignored_h2c_upgrade_keeps_the_body_and_the_connection(
    raw: RawClient, capability: str, chunked: bool
) -> None:
    body = invoke(capability)
    framing = ("transfer-encoding: chunked",) if chunked else (f"content-length: {len(body)}",)
    data = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if chunked else body
    raw.send(head("POST", "/v1/invoke", "host: localhost", *UPGRADE, *framing) + data)
    raw.send(head("GET", "/healthz", "host: localhost"))  # pipelined behind it
    reply = raw.reply()
    assert reply.status == 200, reply.body
    assert json.loads(reply.body)["result"]["echo"] == {"n": 7}
    assert raw.reply().status == 200


def test_a_client_still_sending_an_oversized_body_reads_the_413(raw: RawClient) -> None:
    size = 8 * BODY_LIMIT
    raw.send(head("POST", "/v1/invoke", "host: localhost", f"content-length: {size}"))
    raw.send(b"a" * size)  # a reset here is what the client got before the lingering close
    reply = raw.reply()
    assert (reply.status, reply.code()) == (413, "payload_too_large")
    assert raw.is_closed()


@pytest.mark.parametrize("size_line", [b"%x ;ext=1", b"%x\t;ext=1", b"%x  ;ext=1"])
def test_whitespace_before_a_chunk_extension_is_accepted(
    raw: RawClient, capability: str, size_line: bytes
) -> None:
    body = invoke(capability)
    chunk = size_line.replace(b"%x", b"%x" % len(body)) + b"\r\n" + body + b"\r\n0\r\n\r\n"
    raw.send(head("POST", "/v1/invoke", "host: localhost", "transfer-encoding: chunked") + chunk)
    reply = raw.reply()
    assert reply.status == 200, reply.body
    assert json.loads(reply.body)["result"]["echo"] == {"n": 7}


def chunked_invoke(capability: str, size_line: bytes) -> bytes:
    body = invoke(capability)
    chunk = size_line.replace(b"%x", b"%x" % len(body)) + b"\r\n" + body + b"\r\n0\r\n\r\n"
    return head("POST", "/v1/invoke", "host: localhost", "transfer-encoding: chunked") + chunk


# RFC 9112 §7.1.1: chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ). Measured
# against uvicorn 0.54 on the same bytes: on httptools (llhttp) all but the first are 400;
# on h11 the ones with whitespace before ";" are 400, and so is none of the malformed
# lines below (h11 takes anything after ";"). The edge follows the grammar.
BWS_EXTENSIONS = [
    b"%x;ext=1",
    b"%x ;ext=1",
    b"%x; ext=1",
    b"%x;ext =1",
    b"%x;ext= 1",
    b"%x \t;\t ext \t= \t1",
    b'%x ; ext = "a quoted ; value"',
    b"%x;a=1 ; b ;c= 2",
]


@pytest.mark.parametrize("size_line", BWS_EXTENSIONS)
def test_whitespace_around_a_chunk_extensions_semicolon_and_equals_is_accepted(
    raw: RawClient, capability: str, size_line: bytes
) -> None:
    raw.send(chunked_invoke(capability, size_line))
    reply = raw.reply()
    assert reply.status == 200, reply.body
    assert json.loads(reply.body)["result"]["echo"] == {"n": 7}


@pytest.mark.parametrize("size_line", [b"%x;", b"%x;@=1", b"%x;ext=1 ", b"%x;a b"])
def test_a_chunk_extension_outside_the_grammar_is_still_refused(
    raw: RawClient, capability: str, size_line: bytes
) -> None:
    raw.send(chunked_invoke(capability, size_line))
    reply = raw.reply()
    assert (reply.status, reply.code()) == (400, "bad_request")


def test_a_chunked_request_with_extensions_pipelined_after_another_is_read_in_step(
    raw: RawClient, capability: str
) -> None:
    body = invoke(capability)
    first = head("POST", "/v1/invoke", "host: localhost", f"content-length: {len(body)}") + body
    second = chunked_invoke(capability, b"%x ; ext = 1")
    third = head("GET", "/healthz", "host: localhost")
    raw.send(first + second + third)
    assert [raw.reply().status for _ in range(3)] == [200, 200, 200]


def test_a_chunked_body_with_extensions_arriving_byte_by_byte_is_read_whole(
    raw: RawClient, capability: str
) -> None:
    for byte in chunked_invoke(capability, b"%x ; ext = 1"):
        raw.send(bytes([byte]))
    reply = raw.reply()
    assert reply.status == 200, reply.body
    assert json.loads(reply.body)["result"]["echo"] == {"n": 7}


def test_a_chunked_request_with_extensions_split_anywhere_around_its_head_is_read_whole(
    coordinator: str, capability: str
) -> None:
    data = chunked_invoke(capability, b"%x ; ext = 1")
    head_end = data.index(b"\r\n\r\n") + 4
    for split in range(head_end - 6, head_end + 8):
        raw = RawClient(coordinator)
        raw.send(data[:split])
        raw.send(data[split:])
        reply = raw.reply()
        raw.close()
        assert reply.status == 200, (split, reply.body)

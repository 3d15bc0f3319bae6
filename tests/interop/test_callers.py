"""Callers nobody here wrote, against the coordinator's edge: urllib, curl (HTTP/1.1 and
its h2c upgrade), httpx, Node's `http` and the JDK's HttpClient with its defaults; an
over-limit body is answered 413 to every one of them, never a reset."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from interop_kit import BODY_LIMIT, PEERS, Peer, need

RUN_TIMEOUT_S = 120.0  # a safety net for a stuck child; a JVM start takes seconds
OVERSIZED = (BODY_LIMIT + 1024, 8 * 1024 * 1024)  # just over the limit, and 8 MB


@pytest.fixture
def capability(peers: Callable[[str], Peer], capability_at: Callable[[str, int], str]) -> str:
    return capability_at(f"{peers('http.server-1.1').url}/json", 1)


def invoke_body(capability: str) -> bytes:
    return json.dumps({"capability": capability, "payload": {"n": 1}}).encode()


def run(*command: str, stdin: bytes = b"") -> str:
    done = subprocess.run(
        command, input=stdin, capture_output=True, timeout=RUN_TIMEOUT_S, check=True, cwd=PEERS
    )
    return done.stdout.decode()


def urllib_post(url: str, body: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 - a loopback http URL
        url, data=body, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_urllib_invokes_and_reads_the_answer(coordinator: str, capability: str) -> None:
    status, document = urllib_post(f"{coordinator}/v1/invoke", invoke_body(capability))
    assert status == 200
    assert document["result"]["echo"] == {"n": 1}


@pytest.mark.parametrize("size", OVERSIZED)
def test_urllib_reads_the_413_of_every_oversized_body(coordinator: str, size: int) -> None:
    body = b'{"payload": "' + b"a" * size + b'"}'
    outcomes = [urllib_post(f"{coordinator}/v1/invoke", body) for _ in range(10)]
    assert [status for status, _ in outcomes] == [413] * 10
    assert {document["error"]["code"] for _, document in outcomes} == {"payload_too_large"}


@pytest.mark.parametrize("path", ["/v1/invoke", "/v1/agents"])
def test_node_http_reads_the_413_of_an_8_mb_body(coordinator: str, path: str) -> None:
    node = need("node")
    lines = [run(node, "caller.js", coordinator + path, str(OVERSIZED[1])) for _ in range(3)]
    assert all(line.startswith("413 ") for line in lines), lines
    assert json.loads(lines[0][4:])["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize("http2", [False, True], ids=["http1.1", "h2c-upgrade"])
def test_curl_invokes_with_and_without_an_h2c_upgrade(
    coordinator: str, capability: str, http2: bool
) -> None:
    flags = ["--http2"] if http2 else []
    out = run(
        need("curl"), "-sS", *flags, "-H", "content-type: application/json",
        "--data-binary", "@-", "-w", "\n%{http_code}", f"{coordinator}/v1/invoke",
        stdin=invoke_body(capability),
    )  # fmt: skip
    body, status = out.rsplit("\n", 1)
    assert status == "200", body
    assert json.loads(body)["result"]["echo"] == {"n": 1}


def test_curl_sending_expect_100_continue_reads_the_413(coordinator: str) -> None:
    out = run(
        need("curl"), "-sS", "-H", "content-type: application/json", "--data-binary", "@-",
        "-w", "\n%{http_code}", f"{coordinator}/v1/invoke",
        stdin=b'{"payload": "' + b"a" * OVERSIZED[1] + b'"}',
    )  # fmt: skip
    body, status = out.rsplit("\n", 1)
    assert status == "413"
    assert json.loads(body)["error"]["code"] == "payload_too_large"


def test_httpx_invokes(api: httpx.Client, capability: str) -> None:
    response = api.post("/v1/invoke", content=invoke_body(capability))
    assert response.status_code == 200
    assert response.json()["result"]["echo"] == {"n": 1}


def test_the_jdk_http_client_with_its_h2c_upgrade_keeps_its_bodies(
    coordinator: str, peers: Callable[[str], Peer]
) -> None:
    peer = peers("http.server-1.1")
    before = peer.acted()
    out = run(need("java"), "Caller.java", coordinator, "interop.java-caller", f"{peer.url}/json")
    registered, invoked = out.strip().splitlines()
    assert registered.startswith("201 "), registered
    assert invoked.startswith("200 "), invoked
    assert json.loads(invoked[4:])["result"]["echo"] == {"from": "java"}
    assert peer.acted() - before == 1

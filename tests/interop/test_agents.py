"""Every answer shape from every agent peer: what the caller gets, and how many times
the agent acted (two instances of each capability, both at the same peer, so a
re-send to "the next instance" or a parked replay would show in the count)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from interop_kit import Peer

from agent_reach.testing.waiting import wait_until

# The caller's deadline for the `slow` shape (the peers answer after 1.5 s).
SLOW_DEADLINE_MS = 400
TEXT = "done: 已发货"

# shape -> (HTTP status, error code or the normalization, the result when 200)
OK: dict[str, tuple[int, str]] = {
    "json": (200, "json"),
    "chunked": (200, "json"),
    "empty": (200, "empty"),
    "gzip": (200, "json"),
    "deflate": (200, "json"),
    "text": (200, "text"),
    "xml": (200, "xml"),
    "notjson": (502, "agent_bad_answer"),
    "big": (502, "agent_response_too_large"),
    "slow": (504, "agent_timeout"),
}
PEER_SHAPES = {
    "node": list(OK),
    "java": list(OK),
    "aiohttp": list(OK),
    "uvicorn": list(OK),
    "http.server-1.1": [s for s in OK if s != "chunked"],
    # HTTP/1.0 answers carry no length: every body is delimited by the close.
    "http.server-1.0": [s for s in OK if s != "chunked"],
}
RAW_SHAPES = {
    "bare-lf": (502, "agent_bad_answer"),
    "dup-cl": (502, "agent_bad_answer"),
    "cl-te": (502, "agent_bad_answer"),
    "garbage": (502, "agent_bad_answer"),
    "truncated": (502, "agent_error"),  # cut off after sending: outcome unknown, not re-sent
    "close": (200, "json"),
}
CASES = [(peer, shape) for peer, shapes in PEER_SHAPES.items() for shape in shapes]


def invoke(api: httpx.Client, capability: str, request_id: str, **headers: str) -> httpx.Response:
    body = {"capability": capability, "payload": {"order": "A1"}, "request_id": request_id}
    return api.post("/v1/invoke", json=body, headers=headers)


def check(response: httpx.Response, status: int, outcome: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    document: dict[str, Any] = response.json()
    if status == 200:
        assert document["status"] == "ok"
        assert document["normalized"] == outcome
    else:
        assert document["error"]["code"] == outcome
    return document


@pytest.mark.parametrize(("peer_name", "shape"), CASES)
def test_every_agent_peer_answer_shape_reaches_the_caller_and_acts_once(
    peers: Callable[[str], Peer],
    api: httpx.Client,
    capability_at: Callable[[str, int], str],
    peer_name: str,
    shape: str,
) -> None:
    peer = peers(peer_name)
    capability = capability_at(f"{peer.url}/{shape}", 2)
    before = peer.acted()
    headers = {"x-reach-deadline-ms": str(SLOW_DEADLINE_MS)} if shape == "slow" else {}
    status, outcome = OK[shape]
    document = check(invoke(api, capability, f"{capability}-r1", **headers), status, outcome)
    if shape == "empty":
        assert document["result"] is None
    elif shape == "text":
        assert document["result"] == {"text": TEXT}
    elif shape == "xml":
        assert document["result"] == {"xml": "<ok>1</ok>"}
    elif status == 200:
        assert isinstance(document["result"], dict)
        assert document["result"]["peer"]
    if status == 502:  # the same request_id again: the stored answer, not a second run
        assert invoke(api, capability, f"{capability}-r1").json() == document
    # (a timeout gives the id back: the caller's own retry may run it again, by contract)
    assert peer.acted() - before == 1


@pytest.mark.parametrize("shape", list(RAW_SHAPES))
def test_raw_answer_shapes_are_read_or_refused_and_never_re_executed(
    peers: Callable[[str], Peer],
    api: httpx.Client,
    capability_at: Callable[[str, int], str],
    shape: str,
) -> None:
    peer = peers("raw")
    capability = capability_at(f"{peer.url}/{shape}", 2)
    before = peer.acted()
    status, outcome = RAW_SHAPES[shape]
    document = check(invoke(api, capability, f"{capability}-r1"), status, outcome)
    if status != 200:
        assert document["error"]["outcome_unknown"] is True
        assert len(document["error"]["attempts"]) == 1
    if outcome == "agent_bad_answer":  # final: the same request_id gets the stored answer
        assert invoke(api, capability, f"{capability}-r1").json() == document
    assert peer.acted() - before == 1


def test_an_answer_followed_by_a_close_leaves_no_stale_connection_behind(
    peers: Callable[[str], Peer], api: httpx.Client, capability_at: Callable[[str, int], str]
) -> None:
    peer = peers("raw")
    capability = capability_at(f"{peer.url}/idle-close", 1)
    before = peer.stats()
    for n in range(3):
        check(invoke(api, capability, f"{capability}-r{n}"), 200, "json")
        # The agent closes right after its answer; on a busy host its close can come
        # after the next request was written (then the outcome is unknown, and a 502 is
        # right). What is tested is a close that came first: wait for it.
        wait_until(lambda n=n: peer.stats()["closed"] > before["closed"] + n, "the close")
    assert peer.acted() - before["acted"] == 3


def test_a_keep_alive_connection_the_agent_closed_while_idle_is_not_reused(
    peers: Callable[[str], Peer], api: httpx.Client, capability_at: Callable[[str, int], str]
) -> None:
    peer = peers("node-short-idle")  # Node closes idle keep-alive sockets after 100 ms
    capability = capability_at(f"{peer.url}/json", 1)
    before = peer.stats()
    check(invoke(api, capability, f"{capability}-r0"), 200, "json")
    wait_until(lambda: peer.stats()["closed"] > before["closed"], "node to close the idle socket")
    check(invoke(api, capability, f"{capability}-r1"), 200, "json")
    assert peer.acted() - before["acted"] == 2


def test_a_reused_connection_reset_after_the_agent_read_the_request_is_never_re_sent(
    peers: Callable[[str], Peer], api: httpx.Client, capability_at: Callable[[str, int], str]
) -> None:
    # The agent acts on every request, and resets a connection that already carried one
    # instead of answering: the keep-alive race as the coordinator sees it, after the
    # request was written. The second invoke reuses the first's connection (the pool
    # takes the most recent idle one), unless a health probe's connection came back in
    # between; so invoke until one meets the reset. Each acts exactly once either way.
    peer = peers("raw")
    capability = capability_at(f"{peer.url}/reset-reused", 1)
    before = peer.acted()
    for n in range(5):
        response = invoke(api, capability, f"{capability}-r{n}")
        assert peer.acted() - before == n + 1  # once each: never sent again
        if response.status_code != 200:
            break
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert (error["code"], error["outcome_unknown"]) == ("agent_error", True)
    assert len(error["attempts"]) == 1

"""Errors that name what they refer to: the capability nobody offers, the fields a body
lacks, and a failing agent's JSON answer as the object it sent."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.wire.http_body import ERROR_EXCERPT_BYTES, ERROR_JSON_BYTES

AgentFactory = Callable[..., tuple[FakeAgent, str]]


@pytest.mark.parametrize("path", ["/v1/invoke", "/v1/route"])
def test_no_capability_names_the_capability(http: httpx.Client, path: str) -> None:
    answer = http.post(path, json={"capability": "inventory.chek"})

    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "no_capability"
    assert error["capability"] == "inventory.chek"
    assert "'inventory.chek'" in error["message"]
    assert "GET /v1/capabilities" in error["message"]


@pytest.mark.parametrize("path", ["/v1/invoke", "/v1/route"])
def test_a_body_with_neither_capability_nor_text_names_both_fields(
    http: httpx.Client, path: str
) -> None:
    answer = http.post(path, json={"request_id": "no-target-1"})

    assert answer.status_code == 422
    problems = answer.json()["error"]["problems"]
    assert [p["field"] for p in problems] == ["capability", "text"]
    for problem in problems:
        assert "`capability`" in problem["problem"] and "`text`" in problem["problem"]
        assert "neither" in problem["problem"]
        assert not problem["problem"].startswith("Value error")


def _failing(
    fake_agents: AgentFactory, register: Callable[..., httpx.Response], body: bytes
) -> None:
    _, endpoint = fake_agents(status=500, raw_answer=body, headers={"x-reach-retryable": "no"})
    assert register("failing-01", endpoint, "broken.cap").status_code == 201


def test_a_failing_agents_json_answer_arrives_as_the_object_it_sent(
    http: httpx.Client, fake_agents: AgentFactory, register: Callable[..., httpx.Response]
) -> None:
    sent = {"error": {"code": "soap_fault", "fault_code": "Client.UnknownSku"}}
    _failing(
        fake_agents,
        register,
        b'{"error": {"code": "soap_fault", "fault_code": "Client.UnknownSku"}}',
    )

    answer = http.post("/v1/invoke", json={"capability": "broken.cap", "payload": {}})

    assert answer.status_code == 502
    assert answer.json()["error"]["agent_answer"] == sent


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b"<html>boom</html>", "<html>boom</html>"),
        (b"{not json", "{not json"),
        (b'{"big": "' + b"x" * ERROR_JSON_BYTES + b'"}', None),  # too big to keep whole
    ],
    ids=["html", "broken-json", "big-json"],
)
def test_any_other_failing_answer_is_an_excerpt_of_its_text(
    http: httpx.Client,
    fake_agents: AgentFactory,
    register: Callable[..., httpx.Response],
    body: bytes,
    shown: str | None,
) -> None:
    _failing(fake_agents, register, body)

    answer = http.post("/v1/invoke", json={"capability": "broken.cap", "payload": {}})

    excerpt = answer.json()["error"]["agent_answer"]
    assert excerpt == (shown or body[:ERROR_EXCERPT_BYTES].decode())

"""Declared semantics: `safe` and `idempotent`, as a registration (and each skill) says.

Remembered (`degraded`) answers stand in only for a capability declared safe: they are
remembered only from an instance that declared it so, and served only while no
registered instance of it says otherwise. On memory and Redis, real FakeAgents.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec, SkillSpec, TransportSpec
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

POLICY = """
[delivery]
suspend_s = 1.0
"""


@pytest.fixture
def coordinator(settings: Settings, tmp_path) -> Iterator[str]:
    """A coordinator whose suspended requests expire after a second."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with run_coordinator(settings.model_copy(update={"policy_file": policy})) as (url, _):
        yield url


def body(agent_id: str = "stock-1", **extra: Any) -> dict[str, Any]:
    return {
        "id": agent_id,
        "capabilities": ["stock.check", "stock.reserve"],
        "transport": {"endpoint": "http://127.0.0.1:9/invoke"},
        **extra,
    }


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, None, [True]])
@pytest.mark.parametrize("field", ["safe", "idempotent"])
def test_a_declaration_that_is_not_a_boolean_is_422_naming_the_field(
    http: httpx.Client, field: str, value: Any
) -> None:
    answer = http.post("/v1/agents", json=body(**{field: value}))
    assert answer.status_code == 422, answer.text
    assert field in answer.text
    if value is not None:  # a skill's null: as the agent declares
        skill = {"capability": "stock.reserve", field: value}
        answer = http.post("/v1/agents", json=body(skills=[skill]))
        assert answer.status_code == 422, answer.text
        assert f"skills.0.{field}" in answer.text
    assert http.get("/v1/agents").json()["agents"] == []  # nothing stored


def test_the_listing_shows_what_each_capability_declares(http: httpx.Client) -> None:
    skills = [{"capability": "stock.reserve", "safe": False, "idempotent": True}]
    assert http.post("/v1/agents", json=body(safe=True, skills=skills)).status_code == 201
    [listed] = http.get("/v1/agents").json()["agents"]
    assert (listed["safe"], listed["idempotent"]) == (True, False)
    assert listed["semantics"] == {"stock.reserve": {"safe": False, "idempotent": True}}


def test_a_skill_declares_for_its_own_capability_and_the_agent_for_the_rest() -> None:
    spec = AgentSpec(
        id="a-1",
        capabilities=["stock.check", "stock.reserve"],
        transport=TransportSpec(endpoint="http://127.0.0.1:9/invoke"),
        safe=True,
        skills=[SkillSpec(capability="stock.reserve", safe=False, idempotent=True)],
    )
    assert (spec.is_safe("stock.check"), spec.is_idempotent("stock.check")) == (True, False)
    assert (spec.is_safe("stock.reserve"), spec.is_idempotent("stock.reserve")) == (False, True)


def expired(http: httpx.Client, request_id: str, payload: Any) -> dict[str, Any]:
    """Park a request whose only instance is disabled, and its task once it expired."""
    request = {"capability": "stock.check", "request_id": request_id, "payload": payload}
    accepted = http.post("/v1/invoke", json=request).json()
    assert accepted["status"] == "suspended", accepted
    task: dict[str, Any] = wait_until(
        lambda: (t := http.get(f"/v1/tasks/{request_id}").json()).get("http_status") and t,
        "the suspension to expire",
    )
    return task


def answered_then_disabled(
    http: httpx.Client, fake_agents: Any, register: Any, *, safe_then: bool, safe_now: bool
) -> Any:
    """An instance answers {"stock": 3} declared `safe_then`; re-registered as `safe_now`,
    it is disabled (no replay can reach it: the request waits out its time)."""
    agent, endpoint = fake_agents(answer={"stock": 3})
    assert register("stock-1", endpoint, "stock.check", safe=safe_then).status_code == 201
    assert http.post("/v1/invoke", json={"capability": "stock.check", "payload": {"sku": "A"}})
    assert register("stock-1", endpoint, "stock.check", safe=safe_now).status_code == 201
    assert http.post("/v1/agents/stock-1/disable").status_code == 200
    return agent


def test_an_expired_request_of_an_undeclared_capability_ends_with_its_real_error(
    http: httpx.Client, fake_agents: Any, register: Any
) -> None:
    answered_then_disabled(http, fake_agents, register, safe_then=False, safe_now=False)
    task = expired(http, "refund-1", {"sku": "A"})
    assert (task["status"], task["http_status"]) == ("error", 503)
    assert task["answer"]["error"]["code"] == "no_instance"


def test_an_answer_given_while_undeclared_is_never_remembered(
    http: httpx.Client, fake_agents: Any, register: Any
) -> None:
    # declared safe only after it answered: what it answered then is not memory
    answered_then_disabled(http, fake_agents, register, safe_then=False, safe_now=True)
    task = expired(http, "late-1", {"sku": "A"})
    assert (task["status"], task["http_status"]) == ("error", 503)


def test_a_withdrawn_declaration_withdraws_the_remembered_answer(
    http: httpx.Client, fake_agents: Any, register: Any
) -> None:
    answered_then_disabled(http, fake_agents, register, safe_then=True, safe_now=False)
    task = expired(http, "late-2", {"sku": "A"})
    assert (task["status"], task["http_status"]) == ("error", 503)


def test_a_safe_capability_is_answered_from_memory_once_its_time_ran_out(
    http: httpx.Client, fake_agents: Any, register: Any
) -> None:
    answered_then_disabled(http, fake_agents, register, safe_then=True, safe_now=True)
    task = expired(http, "late-3", {"sku": "A"})
    assert (task["status"], task["answer"]["result"]) == ("degraded", {"stock": 3})


def test_the_documented_registration_registers_as_documented(http: httpx.Client) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "delivery.md").read_text("utf-8")
    section = text[text.index("## Declared semantics") :]
    start = section.index("```json\n") + len("```json\n")
    example = json.loads(section[start : section.index("\n```", start)])
    assert http.post("/v1/agents", json=example).status_code == 201
    [listed] = http.get("/v1/agents").json()["agents"]
    assert (listed["safe"], listed["semantics"]) == (
        True,
        {"stock.reserve": {"safe": False, "idempotent": True}},
    )

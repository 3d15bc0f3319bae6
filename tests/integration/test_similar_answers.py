"""A failed text request gets the answer of a similar earlier question, marked degraded.

Real coordinators (memory and Redis), a real FakeAgent that answers and then fails,
the packaged sentence encoder (the `embeddings` extra) for the similarity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

THRESHOLD = 0.8
POLICY = f"[delivery]\nsimilar_answers = {THRESHOLD}\nbackoff_s = [0.01]\n"
TRACKING = {
    "id": "track-1",
    "capabilities": ["logistics.track"],
    "description": "快递 物流 到哪了 送达",
    "examples": ["我的快递到哪了", "快递什么时候送到"],
    "safe": True,  # a lookup: an earlier answer may stand in
}


@pytest.fixture
def coordinator(settings: Settings, tmp_path: Path) -> Iterator[ServerThread]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with ServerThread(create_app(settings.model_copy(update={"policy_file": policy}))) as server:
        yield server


def indexed(server: ServerThread, capability: str, text: str) -> bool:
    app = server.app
    assert isinstance(app, CoordinatorApp) and app.runtime is not None and server.loop
    similar = app.runtime.invoke.parking.similar
    assert similar is not None
    found = asyncio.run_coroutine_threadsafe(similar.find(capability, text), server.loop)
    return found.result() is not None


def test_a_close_question_gets_the_earlier_answer_with_its_similarity_and_origin(
    coordinator: ServerThread, fake_agents
) -> None:
    agent, endpoint = fake_agents(answer={"eta": "明天送达"})
    with httpx.Client(base_url=coordinator.url, timeout=30) as http:
        assert http.post("/v1/agents", json={**TRACKING, "transport": {"endpoint": endpoint}})
        first = http.post("/v1/invoke", json={"text": "我的快递到哪了", "request_id": "orig-1"})
        assert first.status_code == 200, first.text
        assert first.json()["route"]["capability"] == "logistics.track"
        wait_until(
            lambda: indexed(coordinator, "logistics.track", "我的快递到哪了"),
            "the answer to be indexed",
            timeout_s=30,
        )
        agent.status = 500  # from now on the only instance fails every delivery

        close = http.post("/v1/invoke", json={"text": "我的快递到哪里了", "suspend": False})
        unlike = http.post("/v1/invoke", json={"text": "快递什么时候送到", "suspend": False})
        named = http.post("/v1/invoke", json={"capability": "logistics.track", "suspend": False})
        # re-registered without `safe`: the remembered answer no longer stands in
        withdrawn = {**TRACKING, "safe": False, "transport": {"endpoint": endpoint}}
        assert http.post("/v1/agents", json=withdrawn).status_code == 201
        undeclared = http.post("/v1/invoke", json={"text": "我的快递到哪里了", "suspend": False})

    assert close.status_code == 200, close.text
    body = close.json()
    assert (body["status"], body["result"], body["agent_id"]) == (
        "degraded",
        {"eta": "明天送达"},
        None,
    )
    degraded = body["degraded"]
    assert degraded["original_request_id"] == "orig-1"
    assert THRESHOLD <= degraded["similarity"] <= 1.0
    assert [a["outcome"] for a in body["attempts"]] == ["agent_error"]
    assert (
        unlike.json()["error"]["route"]["capability"] == "logistics.track"
    )  # routed there, but ...
    assert unlike.status_code == 502  # ... its question is not close (cosine 0.77): the failure
    assert named.status_code == 502  # no text to compare: the failure itself (the agent's 500)
    assert undeclared.status_code == 502, undeclared.text  # the agent's failure, as it was
    assert len(agent.received) == 5  # each request reached the agent once

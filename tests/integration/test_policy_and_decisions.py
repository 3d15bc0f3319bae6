"""Hot-reloaded policy and the decision log, under a running coordinator."""

from __future__ import annotations

import httpx
import orjson
import pytest

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until


def test_editing_the_policy_file_changes_the_next_decision(tmp_path, fake_agents):
    path = tmp_path / "policy.yaml"
    path.write_text("preset: default\nmargin: 0.15\n", encoding="utf-8")
    _, endpoint = fake_agents()
    settings = Settings(decision_log="off", policy_file=path, policy_reload_s=0.05)
    with run_coordinator(settings) as (url, _), httpx.Client(base_url=url) as http:
        http.post(
            "/v1/agents",
            json={"id": "a-1", "capabilities": ["echo"], "transport": {"endpoint": endpoint}},
        )
        first = http.get("/v1/policy").json()
        assert first["source"] == str(path)
        assert first["policy"]["preset"] == "default"

        path.write_text("preset: dispatch\n", encoding="utf-8")
        second = wait_until(
            lambda: (p := http.get("/v1/policy").json())["version"] != first["version"] and p,
            "the edited policy to be in force",
        )
        assert second["policy"]["preset"] == "dispatch"
        decision = http.post("/v1/route", json={"capability": "echo"}).json()
        assert decision["policy_version"] == second["version"]
        assert decision["weights"] == {
            "match": 0.4,
            "health": 0.3,
            "latency": 0.2,
            "load": 0.1,
            "quality": 0.3,
        }

        path.write_text("preset: dispatch\nmargin: 7\n", encoding="utf-8")
        rejected = wait_until(
            lambda: (p := http.get("/v1/policy").json())["last_error"] and p,
            "the invalid edit to be rejected",
        )
        assert "margin" in rejected["last_error"]
        assert rejected["version"] == second["version"]
        again = http.post("/v1/route", json={"capability": "echo"}).json()
        assert again["policy_version"] == second["version"]
        assert again["agent_id"] == "a-1"


def test_an_invalid_policy_file_stops_startup_with_a_clear_error(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text("preset = 'nonsense'\n", encoding="utf-8")
    with (
        pytest.raises(Exception, match="unknown preset"),
        run_coordinator(Settings(decision_log="off", policy_file=path)),
    ):
        pass


def test_every_decision_is_one_json_line(tmp_path, fake_agents):
    log_path = tmp_path / "decisions" / "routing.jsonl"
    _, endpoint = fake_agents()
    with (
        run_coordinator(Settings(decision_log=str(log_path))) as (url, _),
        httpx.Client(base_url=url) as http,
    ):
        http.post(
            "/v1/agents",
            json={"id": "a-1", "capabilities": ["echo"], "transport": {"endpoint": endpoint}},
        )
        wait_until(  # `unknown` (health factor 0.5) until the registration's probe answers
            lambda: http.get("/v1/agents/a-1").json()["status"] == "healthy", "the first probe"
        )
        http.post("/v1/route", json={"capability": "echo", "request_id": "route-1"})
        invoked = http.post("/v1/invoke", json={"capability": "echo", "request_id": "inv-1"})
        assert invoked.status_code == 200
        http.post("/v1/invoke", json={"capability": "nobody.home", "request_id": "inv-2"})
    lines = [orjson.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines()]
    assert [(r["kind"], r["request_id"], r["rule"]) for r in lines] == [
        ("route", "route-1", "exact"),
        ("invoke", "inv-1", "exact"),
        ("invoke", "inv-2", "no_match"),
    ]
    record = lines[1]
    assert record["trace_id"] == invoked.json()["trace_id"]
    assert record["agent_id"] == "a-1"
    assert len(record["policy_version"]) == 12
    assert record["candidates"][0]["factors"]["health"] == 1.0
    assert isinstance(record["time"], float)

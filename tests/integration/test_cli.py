"""The `agent-reach` command line against a real coordinator and a real agent."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from agent_reach import Agent, AgentRequest, SyncReachClient
from agent_reach.cli import app
from agent_reach.testing.serve_process import ServeProcess
from agent_reach.testing.servers import ServerThread, run_coordinator

WIDE = {"COLUMNS": "200"}  # keep Rich from truncating table cells

LEGACY_YAML = """\
agent:
  id: erp-inventory-01
  display_name: ERP 库存翻译
  capability:
    - inventory.check
    - inventory.reserve
  transport:
    type: http
    endpoint: http://127.0.0.1:9/invoke
  ttl: 30
"""


@pytest.fixture
def coordinator() -> Iterator[str]:
    """A coordinator with `stock-01` serving `inventory.check`."""
    with run_coordinator() as (url, _):
        agent = Agent("stock-01", ["inventory.check"], coordinator_url=url)

        @agent.handler
        async def check(request: AgentRequest) -> dict[str, Any]:
            return {"sku": request.payload["sku"], "answer": "有货（上海仓库存 42）"}

        server = ServerThread(agent.app)
        agent.endpoint_url = f"{server.url}/invoke"
        with server:
            yield url


def run(*args: str, coordinator: str | None = None) -> Result:
    options = ["--coordinator", coordinator] if coordinator else []
    return CliRunner().invoke(app, [*args, *options], env=WIDE)


def test_register_accepts_the_legacy_yaml_form(coordinator: str, tmp_path: Path) -> None:
    file = tmp_path / "erp-inventory.yaml"
    file.write_text(LEGACY_YAML, encoding="utf-8")

    result = run("agents", "register", str(file), coordinator=coordinator)

    assert result.exit_code == 0, result.output
    assert "erp-inventory-01" in result.output
    with SyncReachClient(coordinator) as client:
        views = {v.id: v for v in client.agents()}
    assert views["erp-inventory-01"].capabilities == ["inventory.check", "inventory.reserve"]
    assert views["erp-inventory-01"].display_name == "ERP 库存翻译"
    assert "the lease lasts its ttl, 30 s: without a heartbeat" in result.output


def test_register_accepts_the_json_body(coordinator: str, tmp_path: Path) -> None:
    file = tmp_path / "assistant.json"
    body = {
        "id": "product-assistant-01",
        "display_name": "商品助手",
        "capabilities": ["product.query", "product.detail"],
        "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/invoke"},
        "ttl": 60,
        "domain": "customer-service",
    }
    file.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")

    result = run("agents", "register", str(file), coordinator=coordinator)

    assert result.exit_code == 0, result.output
    with SyncReachClient(coordinator) as client:
        assert client.capabilities()["product.detail"] == ["product-assistant-01"]


def test_agents_list_shows_a_table_of_instances(coordinator: str) -> None:
    result = run("agents", "list", coordinator=coordinator)

    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if "stock-01" in line]
    assert "inventory.check" in row
    assert "healthy" in row


def test_agents_deregister_takes_the_instance_out(coordinator: str) -> None:
    result = run("agents", "deregister", "stock-01", coordinator=coordinator)

    assert result.exit_code == 0, result.output
    with SyncReachClient(coordinator) as client:
        assert client.agents() == []


def test_invoke_prints_the_agent_answer(coordinator: str) -> None:
    result = run(
        "invoke", "inventory.check", "--payload", '{"sku": "AIR2-WHT"}', coordinator=coordinator
    )

    assert result.exit_code == 0, result.output
    assert "stock-01" in result.output
    assert '"sku": "AIR2-WHT"' in result.output
    assert "有货（上海仓库存 42）" in result.output


def test_route_prints_every_candidate_with_factors_rule_and_policy(coordinator: str) -> None:
    with SyncReachClient(coordinator) as client:
        decision = client.route("inventory.check")

    result = run("route", "--capability", "inventory.check", coordinator=coordinator)

    assert result.exit_code == 0, result.output
    for factor in decision.weights:
        assert factor in result.output
    [title] = [line for line in result.output.splitlines() if line.startswith("→ ")]
    assert "inventory.check on stock-01" in title
    assert f"score {decision.candidates[0].score:.3f}" in title
    assert "chosen by rule exact" in result.output
    assert f"policy {decision.policy_version}" in result.output


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["invoke", "no.such.capability"], "no_capability"),
        (["invoke", "inventory.check", "--payload", "{not json"], "invalid_json"),
        (["agents", "deregister", "ghost-01"], "unknown_agent"),
    ],
)
def test_errors_print_their_code_and_exit_1(coordinator: str, args: list[str], code: str) -> None:
    result = run(*args, coordinator=coordinator)

    assert result.exit_code == 1
    assert code in result.output
    assert "Traceback" not in result.output


def test_invalid_registration_file_exits_1_with_the_problem(
    coordinator: str, tmp_path: Path
) -> None:
    file = tmp_path / "broken.yaml"
    file.write_text("agent:\n  id: broken-01\n", encoding="utf-8")

    result = run("agents", "register", str(file), coordinator=coordinator)

    assert result.exit_code == 1
    assert "validation_error" in result.output
    assert "capabilities" in result.output


def test_unreachable_coordinator_exits_1(dead_port: int) -> None:
    result = run("agents", "list", coordinator=f"http://127.0.0.1:{dead_port}")

    assert result.exit_code == 1
    assert "coordinator_unreachable" in result.output


def test_coordinator_url_defaults_to_the_environment(coordinator: str) -> None:
    result = CliRunner().invoke(
        app, ["agents", "list"], env={**WIDE, "AR_COORDINATOR_URL": coordinator}
    )

    assert result.exit_code == 0, result.output
    assert "stock-01" in result.output


def test_python_m_agent_reach_serve_runs_a_coordinator() -> None:
    env = {**os.environ, "AR_REGISTRY_BACKEND": "memory"}
    with ServeProcess(env=env) as server:  # python -m agent_reach serve --port 0
        health = httpx.get(f"{server.url}/healthz")
    assert health.status_code == 200
    assert health.json()["backend"] == "memory"


def test_route_by_text_shows_every_matcher_score(coordinator: str) -> None:
    with SyncReachClient(coordinator) as client:
        decision = client.route(text="please check the inventory")
    assert decision.text is not None and decision.thresholds

    result = run("route", "please check the inventory", coordinator=coordinator)

    assert result.exit_code == 0, result.output
    assert "lexical" in result.output
    assert "inventory.check" in result.output
    out = " ".join(result.output.split())
    for check in decision.thresholds:  # what decided, as the decision states it
        assert " ".join(check.statement.split()) in out
    assert f"best confidence {decision.thresholds[0].value:.3f} ≥" in out
    assert run("route", coordinator=coordinator).exit_code == 1  # text or --capability


def test_deadletters_lists_hop_limited_requests(coordinator: str) -> None:
    httpx.post(
        f"{coordinator}/v1/invoke",
        json={"capability": "inventory.check", "request_id": "loop-7"},
        headers={"x-reach-hop": "0"},
    )

    result = run("deadletters", coordinator=coordinator)

    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if "loop-7" in line]
    assert "hop_limit" in row and "inventory.check" in row


def test_keys_are_created_listed_and_revoked_with_an_admin_key(tmp_path: Path) -> None:
    admin = "a" * 32
    settings_env = {"AR_AUTH": "on", "AR_ADMIN_KEY": admin}
    from agent_reach.config import Settings

    with run_coordinator(Settings(auth="on", admin_key=admin, decision_log="off")) as (url, _):
        created = CliRunner().invoke(
            app,
            [
                "keys",
                "create",
                "--principal",
                "order-bot",
                "--domain",
                "cs",
                "--coordinator",
                url,
                "--api-key",
                admin,
            ],
            env={**WIDE, **settings_env},
        )
        assert created.exit_code == 0, created.output
        key = next(w for w in created.output.split() if w.startswith("ar_"))
        assert httpx.get(f"{url}/v1/agents", headers={"authorization": f"Bearer {key}"}).is_success
        listed = run("keys", "list", "--api-key", admin, coordinator=url)
        assert "order-bot" in listed.output and key not in listed.output
        key_id = key.split("_")[1]
        assert run("keys", "revoke", key_id, "--api-key", admin, coordinator=url).exit_code == 0
        denied = run("keys", "list", "--api-key", key, coordinator=url)
        assert denied.exit_code == 1 and "unauthorized" in denied.output


def test_acl_check_explains_a_decision_from_the_policy_file(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[access.invoke]]\nprincipals = ["domain:cs"]\ncapabilities = ["order.*"]\n\n'
        '[[quotas]]\nprincipals = ["*"]\nrate_per_s = 5\nburst = 20\n',
        encoding="utf-8",
    )

    allowed = run(
        "acl", "check", "order-bot", "order.status", "--domain", "cs", "--policy", str(policy)
    )
    denied = run(
        "acl", "check", "order-bot", "refund.apply", "--domain", "cs", "--policy", str(policy)
    )

    assert allowed.exit_code == 0, allowed.output
    assert "invoke order.status: allowed" in allowed.output
    assert "register order.status: denied" in allowed.output
    assert "quota: 5/s, burst 20" in allowed.output
    assert "invoke refund.apply: denied" in denied.output


def test_a_key_made_with_grants_registers_and_invokes_without_a_policy_file() -> None:
    from agent_reach.config import Settings

    admin = "g" * 32
    with run_coordinator(Settings(auth="on", admin_key=admin, decision_log="off")) as (url, _):
        made = {}
        for principal, role in (("stock-agent", "agent"), ("cs-bot", "caller")):
            result = run(
                "keys", "create", "--principal", principal, "--role", role,
                "-c", "inventory.*", "--api-key", admin, coordinator=url,
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            assert "grants: inventory.*" in result.output
            made[principal] = next(w for w in result.output.split() if w.startswith("ar_"))
        agent = Agent(
            "stock-01", ["inventory.check"], coordinator_url=url, api_key=made["stock-agent"]
        )

        @agent.handler
        async def check(request: AgentRequest) -> dict[str, Any]:
            return {"in_stock": True}

        server = ServerThread(agent.app)
        agent.endpoint_url = f"{server.url}/invoke"
        with server:
            with SyncReachClient(url, api_key=made["cs-bot"]) as client:
                answer = client.invoke("inventory.check", payload={"sku": "X5"})
            assert answer.result == {"in_stock": True}
            listed = run("keys", "list", "--api-key", admin, coordinator=url)
            [row] = [line for line in listed.output.splitlines() if "cs-bot" in line]
            assert "inventory.*" in row


def test_acl_check_names_the_key_grant_and_says_when_no_policy_file_was_loaded() -> None:
    result = run("acl", "check", "cs-bot", "inventory.check", "--grant", "inventory.*")

    assert result.exit_code == 0, result.output
    assert "no policy file loaded" in result.output
    assert "invoke inventory.check: allowed — granted by the key (inventory.*)" in result.output
    assert "register inventory.check: denied" in result.output
    agent = run("acl", "check", "inv", "inventory.check", "--role", "agent", "-g", "inventory.*")
    assert "register inventory.check: allowed — granted by the key" in agent.output
    assert "invoke inventory.check: denied" in agent.output
    watcher = run("acl", "check", "ops", "inventory.check", "--role", "observer")
    assert "invoke inventory.check: denied — an observer key is read-only" in watcher.output

"""docs/security.md's TLS example works as written: its openssl commands make the
certificates, a coordinator with its settings and policy takes the order agent's
registration by certificate alone (its curl command) and a caller's invoke."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from attack_kit import stop_all

from agent_reach.config import Settings
from agent_reach.server.app import create_app
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _blocks(heading: str) -> list[tuple[str, str]]:
    """The fenced blocks (language, text) of one `###` section of the document."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n### ", 1)[0]
    return BLOCK.findall(section)


def _curl(*args: str) -> tuple[int, dict[str, object]]:
    curl = shutil.which("curl")
    assert curl is not None, "curl is missing: scripts/test.sh installs it"
    done = subprocess.run(
        [curl, "-sS", "-w", "\n%{http_code}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    body, status = done.stdout.rsplit("\n", 1)
    return int(status), json.loads(body)


def test_the_documented_openssl_example_gives_a_working_mutual_tls_coordinator(tmp_path):
    [(language, commands), (_, serve)] = _blocks("### TLS in and out")
    assert language == "sh"
    subprocess.run(["sh", "-e", "-c", commands], cwd=tmp_path, check=True, capture_output=True)
    [(toml, policy)] = _blocks("### Client certificates")
    assert toml == "toml"
    (tmp_path / "policy.toml").write_text(policy)
    tomllib.loads(policy)
    # The documented command's settings and flags, on a port of the test's own.
    assert "--tls-cert reach.pem --tls-key reach.key --tls-client-ca ca.pem" in serve
    settings = Settings(
        auth="on",
        decision_log="off",
        policy_file=tmp_path / "policy.toml",
        agent_ca_file=tmp_path / "ca.pem",
        agent_client_cert=tmp_path / "reach.pem",
        agent_client_key=tmp_path / "reach.key",
        tls_cert=tmp_path / "reach.pem",
        tls_key=tmp_path / "reach.key",
        tls_client_ca=tmp_path / "ca.pem",
    )
    for name in re.findall(r"(AR_[A-Z_]+)=", serve):
        assert name.removeprefix("AR_").lower() in Settings.model_fields, name
    agent = FakeAgent(answer={"order": "shipped"})
    servers = [ServerThread(create_app(settings)).start(), ServerThread(agent).start()]
    coordinator, agent_server = servers
    try:
        url = coordinator.url.replace("127.0.0.1", "localhost")  # the name in reach.pem
        registration = {
            "id": "order-1",
            "capabilities": ["order.track"],
            "transport": {"type": "http", "endpoint": f"{agent_server.url}/invoke"},
        }
        (tmp_path / "registration.json").write_text(json.dumps(registration))
        status, answer = _curl(
            "--cacert", str(tmp_path / "ca.pem"),
            "--cert", str(tmp_path / "order.pem"), "--key", str(tmp_path / "order.key"),
            f"{url}/v1/agents", "-H", "content-type: application/json",
            "-d", f"@{tmp_path / 'registration.json'}",
        )  # fmt: skip
        assert status == 201, answer
        status, answer = _curl(
            "--cacert", str(tmp_path / "ca.pem"),
            "--cert", str(tmp_path / "web.pem"), "--key", str(tmp_path / "web.key"),
            f"{url}/v1/invoke", "-H", "content-type: application/json",
            "-d", json.dumps({"capability": "order.track", "payload": {}}),
        )  # fmt: skip
        assert status == 200, answer
        assert answer["result"] == {"order": "shipped"}
        with pytest.raises(AssertionError):  # without a certificate: no answer at all
            _curl("--cacert", str(tmp_path / "ca.pem"), f"{url}/healthz")
    finally:
        stop_all(servers)
    assert len(agent.received) == 1

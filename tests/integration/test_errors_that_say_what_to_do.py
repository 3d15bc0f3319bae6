"""A new user's mistakes get an answer that says what is wrong and what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from agent_reach.cli import app
from agent_reach.config import Settings
from agent_reach.testing.serve_process import ServeProcess
from agent_reach.testing.servers import run_coordinator

ADMIN_KEY = "first-hour-admin-key-0123456789"
WIDE = {"COLUMNS": "200"}


def _user_environment() -> dict[str, str]:
    """This process's environment without any AR_* setting, as a new user's."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AR_")}


def _refused(*args: str, **env: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "agent_reach", "serve", *args]
    with subprocess.Popen(
        command,
        env={**_user_environment(), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        _, stderr = process.communicate(timeout=30)
        return process.returncode, stderr


def test_a_short_admin_key_is_one_line_on_stderr_and_exit_2() -> None:
    status, stderr = _refused(AR_ADMIN_KEY="short")

    assert status == 2
    assert stderr == "AR_ADMIN_KEY must be at least 24 characters\n"


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"AR_PROBE_INTERVAL_S": "nan"}, "AR_PROBE_INTERVAL_S: Input should be a finite number\n"),
        ({"AR_POLICY_FILE": "/no/such/policy.toml"}, "/no/such/policy.toml: No such file"),
        (
            {"AR_REGISTRY_BACKEND": "redis", "AR_REDIS_URL": "redis://:pw@127.0.0.1:1/0"},
            "redis at 127.0.0.1:1/0 (AR_REDIS_URL, prefix 'ar') did not answer",
        ),
    ],
)
def test_other_bad_settings_at_start_are_one_line_too(env: dict[str, str], line: str) -> None:
    status, stderr = _refused("--port", "0", AR_LOG_LEVEL="warning", **env)

    assert status == 2
    assert "Traceback" not in stderr
    refusal = stderr.splitlines()[-1]
    assert refusal.startswith(line.rstrip("\n")), stderr
    assert "pw" not in stderr


def test_serve_says_memory_state_vanishes_and_how_to_keep_it() -> None:
    with ServeProcess(env={**_user_environment(), "AR_AUTH": "off"}) as server:
        assert httpx.get(f"{server.url}/healthz").is_success
    banner = next(line for line in server.stderr.splitlines() if "state_in_memory" in line)
    assert "API keys, registrations, contexts and tasks vanish" in banner
    assert "AR_REGISTRY_BACKEND=redis agent-reach serve" in banner


@pytest.fixture
def secured() -> Iterator[str]:
    settings = Settings(decision_log="off", auth="on", admin_key=SecretStr(ADMIN_KEY))
    with run_coordinator(settings) as (url, _):
        yield url


def test_the_cli_prints_the_servers_problems_field_by_field(secured: str) -> None:
    result = CliRunner().invoke(
        app, ["trace", "deadbeef", "--api-key", ADMIN_KEY, "--coordinator", secured], env=WIDE
    )

    assert result.exit_code == 1
    assert "validation_error: the request does not match the schema" in result.output
    assert "path.trace_id: String should match pattern" in result.output


def test_the_cli_says_how_to_pass_a_key_on_401(secured: str) -> None:
    result = CliRunner().invoke(app, ["agents", "list", "--coordinator", secured], env=WIDE)

    assert result.exit_code == 1
    assert "unauthorized" in result.output
    assert "--api-key" in result.output and "AR_API_KEY" in result.output


def test_an_oversized_deadline_says_it_is_too_large(secured: str) -> None:
    answer = httpx.post(
        f"{secured}/v1/invoke",
        json={"capability": "x"},
        headers={
            "authorization": f"Bearer {ADMIN_KEY}",
            "x-reach-deadline-ms": "99999999999999999999999",
        },
    )
    error = answer.json()["error"]

    assert (answer.status_code, error["code"]) == (400, "invalid_deadline")
    assert error["message"] == (
        "X-Reach-Deadline-Ms is too large (23 digits): at most 999999999999"
    )


def test_a_nan_ttl_is_refused_as_not_finite(secured: str) -> None:
    body = (
        '{"id": "a-1", "capabilities": ["x"], "ttl": NaN,'
        ' "transport": {"endpoint": "http://127.0.0.1:9/"}}'
    )
    answer = httpx.post(
        f"{secured}/v1/agents",
        content=body,
        headers={"authorization": f"Bearer {ADMIN_KEY}", "content-type": "application/json"},
    )

    assert answer.status_code == 422
    assert answer.json()["error"]["problems"] == [
        {"field": "ttl", "problem": "Input should be a finite number"}
    ]

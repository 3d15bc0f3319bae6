"""The deployment files, checked as far as a machine without Docker allows.

Each command and setting in them is run here as the test kit runs it: the coordinators'
environment builds `Settings`, the image's entry point and healthcheck run against a real
coordinator, Redis starts with the compose file's flags, and nginx's config is the file
the multi-coordinator scenario (tests/reliability/test_load_balancer.py) runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from agent_reach.config import Settings
from agent_reach.testing.agent_process import CoordinatorProcess
from agent_reach.testing.balancer import LISTEN_FILE, UPSTREAM_FILE
from agent_reach.testing.ports import refused_port
from agent_reach.testing.redis_server import RedisServer

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
COORDINATOR_PORT = 8500  # the image's AR_PORT, and what nginx and Prometheus reach


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def _coordinators(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in compose["services"].items() if n.startswith("coordinator-")}


def _dockerfile(instruction: str) -> str:
    """The argument of the Dockerfile's (last) `instruction`, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    found = re.findall(rf"^{instruction}\s+(.*)$", text, flags=re.MULTILINE)
    assert found, f"the Dockerfile has no {instruction}"
    return str(found[-1])


def _settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    return Settings()


def test_compose_runs_several_coordinators_on_one_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    compose = _compose()
    coordinators = _coordinators(compose)

    assert len(coordinators) >= 2
    assert {"redis", "nginx", "otel-collector", "prometheus"} <= set(compose["services"])
    node_ids = set()
    for name, service in coordinators.items():
        settings = _settings_from(service["environment"], monkeypatch)
        assert settings.registry_backend == "redis"
        assert settings.redis_url == "redis://redis:6379/0"
        node_ids.add(settings.node_id)
        assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
    assert node_ids == set(coordinators)  # one node id per coordinator: X-Reach-Node


def test_compose_redis_flags_start_a_redis_with_aof_on() -> None:
    command = _compose()["services"]["redis"]["command"]
    assert command[0] == "redis-server"

    with RedisServer(options=tuple(command[1:])) as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        client.close()


def test_nginx_in_compose_runs_the_config_the_balancer_scenario_runs() -> None:
    compose = _compose()
    nginx = compose["services"]["nginx"]
    mounts = dict(volume.removesuffix(":ro").split(":") for volume in nginx["volumes"])
    config_path = next(src for src, dst in mounts.items() if dst == "/etc/nginx/nginx.conf")
    scenario = (ROOT / "tests" / "reliability" / "test_load_balancer.py").read_text("utf-8")

    assert (DEPLOY / config_path).resolve() == (DEPLOY / "nginx" / "nginx.conf").resolve()
    assert 'Path(__file__).parents[2] / "deploy" / "nginx" / "nginx.conf"' in scenario
    assert nginx["command"][-2:] == ["-g", "daemon off;"]  # as the test kit starts it
    config = (DEPLOY / "nginx" / "nginx.conf").read_text(encoding="utf-8")
    assert f"include {UPSTREAM_FILE};" in config and f"include {LISTEN_FILE};" in config
    for name in (UPSTREAM_FILE, LISTEN_FILE):
        assert f"/etc/nginx/{name}" in mounts.values(), name
    upstream = (DEPLOY / "nginx" / UPSTREAM_FILE).read_text(encoding="utf-8")
    servers = re.findall(r"^\s*server\s+([\w.-]+):(\d+)", upstream, flags=re.MULTILINE)
    assert sorted(servers) == sorted(
        (name, str(COORDINATOR_PORT)) for name in _coordinators(compose)
    )


def test_prometheus_scrapes_every_coordinator() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text(encoding="utf-8"))
    [job] = config["scrape_configs"]

    assert job["metrics_path"] == "/metrics"
    assert sorted(job["static_configs"][0]["targets"]) == sorted(
        f"{name}:{COORDINATOR_PORT}" for name in _coordinators(_compose())
    )


def test_image_entry_point_is_the_serve_command_the_test_kit_runs() -> None:
    entry = json.loads(_dockerfile("ENTRYPOINT"))

    assert entry == ["agent-reach", "serve"]
    assert _dockerfile("USER") != "root" and _dockerfile("USER") != "0"
    assert "AR_PORT=8500" in _dockerfile("ENV")
    assert 'pip install ".[otel]"' in _dockerfile("RUN")
    cli = Path(sys.executable).with_name("agent-reach")
    shown = subprocess.run([str(cli), "serve", "--help"], capture_output=True, check=False)
    assert shown.returncode == 0 and b"--port" in shown.stdout


@pytest.mark.redis
def test_image_healthcheck_passes_on_a_coordinator_and_fails_without_one(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    healthcheck = _dockerfile("HEALTHCHECK")
    command = json.loads(healthcheck[healthcheck.index("CMD") + 3 :])
    assert command[0] == "python"
    coordinator = CoordinatorProcess(
        directory=tmp_path, backend="redis", redis_url=redis_url, redis_prefix=redis_prefix
    )
    coordinator.start()
    try:
        up = subprocess.run(
            [sys.executable, *command[1:]],
            env={"AR_PORT": str(coordinator.port)},
            capture_output=True,
            check=False,
        )
    finally:
        coordinator.kill()
    with refused_port() as port:
        down = subprocess.run(
            [sys.executable, *command[1:]],
            env={"AR_PORT": str(port)},
            capture_output=True,
            check=False,
        )

    assert up.returncode == 0, up.stderr
    assert down.returncode != 0


def _manifests() -> list[dict[str, Any]]:
    documents = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return documents


def test_kubernetes_manifests_probe_health_and_keep_coordinators_through_drains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    by_kind = {d["kind"]: d for d in _manifests()}
    assert {"Deployment", "Service", "PodDisruptionBudget", "ConfigMap"} <= set(by_kind)
    deployment = by_kind["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]

    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
    assert by_kind["Service"]["spec"]["selector"] == labels
    assert by_kind["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == labels
    assert by_kind["PodDisruptionBudget"]["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    assert container["args"] == ["--host", "0.0.0.0", "--port", str(COORDINATOR_PORT)]
    env = dict(by_kind["ConfigMap"]["data"])
    env.update({e["name"]: e.get("value", "pod-name-0") for e in container["env"]})
    settings = _settings_from(env, monkeypatch)
    assert settings.registry_backend == "redis" and settings.node_id == "pod-name-0"

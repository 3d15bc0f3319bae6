"""`agent-reach serve --tls-cert --tls-key --tls-client-ca`: HTTPS on the same port,
`--workers` included, and a bad TLS file refused before anything starts."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trustme
from tls_kit import ca_file, client_context, issue

from agent_reach.testing.ports import on_free_ports
from agent_reach.testing.serve_process import ServeProcess
from agent_reach.testing.waiting import wait_until

AGENT_REACH = str(Path(sys.executable).with_name("agent-reach"))
STARTUP_S = 60.0  # interpreters importing the coordinator on a busy 2-core machine


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("serve-pki")
    shop, rogue = trustme.CA(), trustme.CA()
    server = issue(shop, directory, "server", common_name="reach", ips=("127.0.0.1",))
    client = issue(shop, directory, "client", common_name="ops")
    stranger = issue(rogue, directory, "stranger", common_name="ops")
    garbage = directory / "garbage.pem"
    garbage.write_text("not PEM\n")
    return {
        "ca": ca_file(shop, directory, "shop"),
        "cert": server.cert,
        "key": server.key,
        "client_cert": client.cert,
        "client_key": client.key,
        "stranger_cert": stranger.cert,
        "stranger_key": stranger.key,
        "garbage": garbage,
        "missing": directory / "missing.pem",
    }


# One refusal from the flags (read with the coordinator) and one from the outbound
# settings (read by `serve` itself, not once per worker); every message is unit-tested
# in tests/unit/test_tls_contexts.py.
@pytest.mark.parametrize(
    ("flags", "env", "says"),
    [
        (
            ["--tls-cert", "cert", "--tls-key", "key", "--tls-client-ca", "garbage"],
            {},
            "bad_tls_setting: AR_TLS_CLIENT_CA ({garbage}) holds no PEM CA certificate",
        ),
        ([], {"AR_AGENT_CA_FILE": "garbage"}, "AR_AGENT_CA_FILE ({garbage}) holds no PEM CA"),
    ],
)
def test_a_bad_tls_file_is_one_line_and_exit_status_2(files, flags, env, says):
    argv = [str(files[f]) if f in files else f for f in flags]
    environment = {**os.environ, "AR_REGISTRY_BACKEND": "memory"}
    environment.update({name: str(files[value]) for name, value in env.items()})
    done = subprocess.run(
        [AGENT_REACH, "serve", "--port", "0", *argv],
        capture_output=True,
        text=True,
        env=environment,
        timeout=STARTUP_S,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("20")]
    expected = says.format(missing=files["missing"], garbage=files["garbage"])
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_two_workers_serve_mutual_tls_on_one_port(files, redis_url: str, redis_prefix: str):
    env = {
        **os.environ,
        "AR_REGISTRY_BACKEND": "redis",
        "AR_REDIS_URL": redis_url,
        "AR_REDIS_PREFIX": redis_prefix,
        "AR_DECISION_LOG": "off",
    }
    tls = ["--tls-cert", str(files["cert"]), "--tls-key", str(files["key"]),
           "--tls-client-ca", str(files["ca"])]  # fmt: skip
    # Each worker binds the port itself (port 0 would give each its own): picked here,
    # picked again if another process takes it first.
    server = on_free_ports(
        lambda port: ServeProcess(
            "--workers", "2", *tls, port=port, env=env, command=[AGENT_REACH]
        ).start(STARTUP_S)
    )
    url = f"https://127.0.0.1:{server.port}"
    trusted = client_context(files["ca"])
    trusted.load_cert_chain(files["client_cert"], files["client_key"])
    nodes: set[str] = set()

    def both_answer() -> bool:
        # A new connection each time: the kernel spreads them across the workers.
        with contextlib.suppress(httpx.TransportError):
            nodes.add(httpx.get(f"{url}/healthz", verify=trusted, timeout=5).json()["node"])
        return len(nodes) == 2

    try:
        wait_until(both_answer, "both workers to answer over TLS", timeout_s=STARTUP_S)
        stranger = client_context(files["ca"])
        stranger.load_cert_chain(files["stranger_cert"], files["stranger_key"])
        for context in (client_context(files["ca"]), stranger):
            for _ in range(4):  # whichever worker takes it refuses it
                with pytest.raises(httpx.TransportError):
                    httpx.get(f"{url}/healthz", verify=context, timeout=5)
    finally:
        status = server.stop(STARTUP_S)
    assert status == 0, server.stderr
    assert server.stderr.count(url) == 2  # each worker says https

"""docs/security.md's TLS walk-through works as written: its openssl commands make the
certificates, its `serve` command (with the policy of the next section) runs a mutual
TLS coordinator, the order agent's `registration.json` registers by certificate alone
(its curl command), and the web shop's certificate invokes it."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.ports import PortTaken, on_free_ports, port_was_taken
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

REPOSITORY = Path(__file__).resolve().parents[2]
DOC = REPOSITORY / "docs" / "security.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
SERVE_TIMEOUT_S = 30.0  # a hang guard for the coordinator's start


def _blocks(heading: str) -> list[tuple[str, str]]:
    """The fenced blocks (language, text) of one `###` section of the document."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n### ", 1)[0]
    return BLOCK.findall(section)


def _reader_env() -> dict[str, str]:
    """A user's environment (no `AR_*`), with the repository's `.venv` on the PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AR_")}
    env["PATH"] = f"{REPOSITORY / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _serve(folder: Path, command: str, port: int) -> subprocess.Popen[str]:
    """The documented serve command in `folder`, on `port` (AR_PORT: the command names
    none), once it answers a certificate-holding client."""
    log = (folder / "serve.log").open("w")
    process = subprocess.Popen(  # noqa: S602 - the document's own shell command
        command, shell=True, cwd=folder, env={**_reader_env(), "AR_PORT": str(port)},
        stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    tls = ssl.create_default_context(cafile=folder / "ca.pem")
    tls.load_cert_chain(folder / "web.pem", folder / "web.key")
    client = httpx.Client(verify=tls)

    def up() -> bool:
        if process.poll() is not None:
            output = (folder / "serve.log").read_text()
            if port_was_taken(output):
                raise PortTaken(output)
            raise AssertionError(f"serve stopped: {output}")
        try:
            return client.get(f"https://localhost:{port}/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, "the documented coordinator to serve", timeout_s=SERVE_TIMEOUT_S)
    except BaseException:
        _stop(process)
        raise
    finally:
        client.close()
    return process


def _stop(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, 15)
    process.wait(timeout=10)


@pytest.fixture
def agent() -> Iterator[tuple[FakeAgent, ServerThread]]:
    fake = FakeAgent(answer={"order": "shipped"})
    server = ServerThread(fake).start()
    yield fake, server
    server.stop()


def test_the_documented_tls_walk_through_runs_as_written(tmp_path, agent):
    fake, agent_server = agent
    [(language, commands), (_, serve), (json_language, registration), (_, calls)] = _blocks(
        "### TLS in and out"
    )
    assert (language, json_language) == ("sh", "json")
    subprocess.run(["sh", "-e", "-c", commands], cwd=tmp_path, check=True, capture_output=True)
    [(toml, policy)] = _blocks("### Client certificates")
    assert toml == "toml"
    tomllib.loads(policy)
    (tmp_path / "policy.toml").write_text(policy)
    agent_port = agent_server.url.rsplit(":", 1)[1]
    (tmp_path / "registration.json").write_text(registration.replace(":9040", f":{agent_port}"))
    assert json.loads(registration)["id"] == "order-1"
    assert calls.startswith("# run by tests/security/test_tls_docs.py")

    coordinator, port = on_free_ports(lambda port: (_serve(tmp_path, serve, port), port))
    try:
        served = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", calls.replace(":8500", f":{port}")],
            cwd=tmp_path, env=_reader_env(), capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        assert served.returncode == 0, served.stdout + served.stderr
        decoder = json.JSONDecoder()  # curl prints the two answers back to back
        registered, end = decoder.raw_decode(served.stdout)
        invoked, _ = decoder.raw_decode(served.stdout, end)
        assert registered["id"] == "order-1"  # by certificate alone: no key was sent
        assert invoked["result"] == {"order": "shipped"}
        no_certificate = subprocess.run(
            ["curl", "-sS", "--cacert", "ca.pem", f"https://localhost:{port}/healthz"],
            cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert no_certificate.returncode != 0 and no_certificate.stdout == ""  # no answer at all
    finally:
        _stop(coordinator)
    assert len(fake.received) == 1

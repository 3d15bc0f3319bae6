"""The interop suite's kit: agent peer processes and what they report."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

PEERS = Path(__file__).parent / "peers"
BODY_LIMIT = 1 << 20  # the coordinator's default max_body_bytes
# A JVM compiling a source file takes a few seconds on a busy 2-core machine.
STARTUP_TIMEOUT_S = 60.0
INSTALL_HINT = "apt-get install -y nodejs default-jdk-headless curl (scripts/test.sh does)"


@dataclass
class Peer:
    """One agent process: its base URL and what it has acted on so far."""

    name: str
    url: str
    process: subprocess.Popen[str]

    def stats(self) -> dict[str, int]:
        return dict(httpx.get(f"{self.url}/stats", timeout=10).json())

    def acted(self) -> int:
        return self.stats()["acted"]


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.fail(f"{program} is missing: {INSTALL_HINT}")
    return path


def start_peer(name: str, command: list[str]) -> Peer:
    """Start a peer and wait for its `PORT <n>` line."""
    env = {**os.environ, "PYTHONPATH": str(PEERS)}
    process = subprocess.Popen(command, cwd=PEERS, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], STARTUP_TIMEOUT_S)
    line = process.stdout.readline() if ready else ""  # its port first; EOF if it died
    if not line.startswith("PORT "):
        process.kill()
        pytest.fail(f"peer {name} did not start: {line!r}")
    return Peer(name, f"http://127.0.0.1:{int(line.split()[1])}", process)

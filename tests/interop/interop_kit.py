"""The interop suite's kit: agent peer processes and what they report."""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httptools
import httpx
import pytest

PEERS = Path(__file__).parent / "peers"
# A JVM compiling a source file takes a few seconds on a busy 2-core machine.
STARTUP_TIMEOUT_S = 60.0
IO_TIMEOUT_S = 10.0  # a safety net for blocking reads; no test waits for it
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


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def code(self) -> str:
        return str(json.loads(self.body)["error"]["code"])


class RawClient:
    """One connection speaking raw bytes; replies (1xx included) parsed in order."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=IO_TIMEOUT_S)
        self.parser = httptools.HttpResponseParser(self)
        self.replies: deque[Reply] = deque()
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self) -> Reply:
        while not self.replies:
            data = self.sock.recv(65536)
            assert data, "the server closed the connection instead of answering"
            self.parser.feed_data(data)
        return self.replies.popleft()

    def is_closed(self) -> bool:
        """Blocks until the server closes (True) or sends more bytes (False)."""
        try:
            return self.sock.recv(65536) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    def on_message_begin(self) -> None:
        self._headers, self._body = {}, []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode().lower()] = value.decode()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        self.replies.append(Reply(status, self._headers, b"".join(self._body)))

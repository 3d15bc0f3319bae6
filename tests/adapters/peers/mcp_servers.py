"""MCP servers from the official SDKs as child processes: the Python SDK's
(`mcp_tools_server.py`) and the TypeScript SDK's (`tests/interop/peers/mcp_tools_server.mjs`).

Both serve the same tools over streamable HTTP on 127.0.0.1 and append each execution
to a ledger file, so a test counts executions at the server across restarts; each
can be killed and started again on the same port.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_reach.testing.processes import ChildProcess
from agent_reach.testing.waiting import wait_until

HERE = Path(__file__).parent
INTEROP_PEERS = HERE.parent.parent / "interop" / "peers"
STARTUP_S = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


class McpServer(ChildProcess):
    """One MCP server process; `url` is its streamable HTTP endpoint."""

    def __init__(self, kind: str, ledger: Path) -> None:
        super().__init__()
        self.kind = kind
        self.ledger = ledger
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> McpServer:
        if self.kind == "python":
            command = [sys.executable, str(HERE / "mcp_tools_server.py")]
            cwd = HERE
        else:
            node = shutil.which("node")
            if (
                node is None
                or not (INTEROP_PEERS / "node_modules" / "@modelcontextprotocol").is_dir()
            ):
                pytest.fail("node and @modelcontextprotocol/sdk are needed: run scripts/test.sh")
            command, cwd = [node, "mcp_tools_server.mjs"], INTEROP_PEERS
        self.spawn([*command, str(self.port), str(self.ledger)], output=subprocess.DEVNULL, cwd=cwd)
        wait_until(lambda: _accepts(self.port), f"the {self.kind} MCP server to listen", STARTUP_S)
        return self

    def executions(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The arguments of each execution (of `tool`, or of every tool)."""
        if not self.ledger.exists():
            return []
        runs = []
        for line in self.ledger.read_text(encoding="utf-8").splitlines():
            name, _, arguments = line.partition(" ")
            if tool is None or name == tool:
                runs.append({"tool": name, **json.loads(arguments)})
        return runs

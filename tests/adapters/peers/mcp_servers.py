"""MCP servers from the official SDKs as child processes: the Python SDK's
(`mcp_tools_server.py`) and the TypeScript SDK's (`tests/interop/peers/mcp_tools_server.mjs`).

Both serve the same tools over streamable HTTP on 127.0.0.1 and append each execution
to a ledger file, so a test counts executions at the server across restarts; each
can be killed and started again on the same port.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_reach.testing.processes import ChildProcess
from agent_reach.testing.waiting import wait_until

HERE = Path(__file__).parent
INTEROP_PEERS = HERE.parent.parent / "interop" / "peers"
STARTUP_S = 30.0


class McpServer(ChildProcess):
    """One MCP server process; `url` is its streamable HTTP endpoint. The first start
    binds port 0 and reads the port from the server's first line; a restart keeps it."""

    def __init__(self, kind: str, ledger: Path, script: str = "mcp_tools_server.py") -> None:
        super().__init__()
        self.kind = kind
        self.script = script  # the Python server's (a peer in this folder)
        self.ledger = ledger
        self.log = ledger.with_name(f"{ledger.stem}-{kind}-server.log")
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> McpServer:
        if self.kind == "python":
            command = [sys.executable, str(HERE / self.script)]
            cwd = HERE
        else:
            node = shutil.which("node")
            if (
                node is None
                or not (INTEROP_PEERS / "node_modules" / "@modelcontextprotocol").is_dir()
            ):
                pytest.fail("node and @modelcontextprotocol/sdk are needed: run scripts/test.sh")
            command, cwd = [node, "mcp_tools_server.mjs"], INTEROP_PEERS
        with self.log.open("w", encoding="utf-8") as log:
            self.spawn([*command, str(self.port), str(self.ledger)], output=log, cwd=cwd)
        self.port = wait_until(self._listening, f"the {self.kind} MCP server to listen", STARTUP_S)
        return self

    def _listening(self) -> int | None:
        """The port its first line names; `RuntimeError` with its output if it exited."""
        output = self.log.read_text(encoding="utf-8", errors="replace")
        if found := re.search(r"^listening on http://127\.0\.0\.1:(\d+)\n", output, re.MULTILINE):
            return int(found[1])
        if not self.is_running:
            raise RuntimeError(f"the {self.kind} MCP server exited:\n{output[-2000:]}")
        return None

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

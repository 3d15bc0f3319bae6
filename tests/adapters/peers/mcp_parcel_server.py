"""An MCP server as users write it with the official Python SDK's FastMCP (`MCPServer`
since mcp 2): a tool that returns a dict without structured output, so the SDK sends the
dict as JSON text with no structured content, as FastMCP 1.x sends a dict.
`python mcp_parcel_server.py PORT LEDGER`, as `mcp_tools_server.py`: PORT 0 picks a free
one (its first line names it); each execution appends `<tool> <arguments>` to LEDGER.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Literal

import uvicorn
from mcp.server.mcpserver import MCPServer

PORT, LEDGER = int(sys.argv[1]), Path(sys.argv[2])
server = MCPServer("parcel-desk")


@server.tool(
    description=(
        "Ship a parcel: book the delivery of a package by its weight to a city. "
        "寄包裹，寄快递，按重量寄一个包裹到城市"
    ),
    structured_output=False,  # FastMCP 1.x's way with a dict: JSON text, nothing structured
)
def ship_parcel(
    weight_kg: float, destination: Literal["Berlin", "Paris", "上海"]
) -> dict[str, object]:
    arguments = {"weight_kg": weight_kg, "destination": destination}
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(f"ship_parcel {json.dumps(arguments, sort_keys=True)}\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    return {**arguments, "price_eur": round(4.5 + 1.2 * weight_kg, 2), "carrier": "DHL"}


if __name__ == "__main__":
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", PORT))
    sock.listen(128)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])

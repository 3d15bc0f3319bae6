"""An MCP server built with the official Python SDK (`MCPServer`, formerly FastMCP),
served over streamable HTTP: `python mcp_tools_server.py PORT LEDGER` (PORT 0: a free one,
which its first line gives).

Every tool execution appends one line `<tool> <arguments as JSON>` to LEDGER before it
answers, so tests count executions at the server, across restarts. `drop` records its
execution and then kills the process: its answer is lost after the call was received.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Annotated

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

PORT, LEDGER = int(sys.argv[1]), Path(sys.argv[2])
server = MCPServer("python-tools")


def record(tool: str, arguments: dict[str, object]) -> None:
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(f"{tool} {json.dumps(arguments, sort_keys=True)}\n")
        ledger.flush()
        os.fsync(ledger.fileno())


@server.tool(description="Track a parcel: where is my order, delivery status of an order number")
def order_status(order_id: Annotated[str, Field(pattern="ORD-[0-9]{4,}")]) -> dict[str, str]:
    record("order_status", {"order_id": order_id})
    return {"order_id": order_id, "status": "shipped"}


@server.tool(description="Repeat a sentence back, word for word", structured_output=False)
def echo(sentence: str) -> str:
    record("echo", {"sentence": sentence})
    return f"you said: {sentence}"


@server.tool(description="Refund a payment (always refused)")
def refund(payment_id: str) -> str:
    record("refund", {"payment_id": payment_id})
    raise ToolError(f"payment {payment_id} cannot be refunded")


@server.tool(description="Charge a card, then lose the answer")
def charge(amount: int) -> str:
    record("charge", {"amount": amount})
    os._exit(0)  # the call was received and acted on; no answer ever leaves


@server.tool(description="Add the translate tool to this server")
async def grow(ctx: Context) -> str:
    record("grow", {})

    def translate(sentence: str) -> str:
        record("translate", {"sentence": sentence})
        return sentence.upper()

    server.add_tool(
        translate,
        description="Translate a sentence into shouting capitals",
        structured_output=False,
    )
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    # Port 0 picks a free one: the line says which (the test kit reads it) once it listens.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # back on its port at once
    sock.bind(("127.0.0.1", PORT))
    sock.listen(128)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])

"""An MCP server built with the official Python SDK (`MCPServer`, formerly FastMCP),
served over streamable HTTP: `python mcp_tools_server.py PORT LEDGER`.

Every tool execution appends one line `<tool> <arguments as JSON>` to LEDGER before it
answers, so tests count executions at the server, across restarts. `drop` records its
execution and then kills the process: its answer is lost after the call was received.
"""

from __future__ import annotations

import json
import os
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
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=PORT, log_level="warning")

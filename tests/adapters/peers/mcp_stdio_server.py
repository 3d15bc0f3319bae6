"""A stdio MCP server built with the official Python SDK: `python mcp_stdio_server.py LEDGER`.

Every execution appends `<tool> <arguments as JSON>` to LEDGER before it answers;
`charge` records its execution and exits (its answer is lost), `grow` adds a tool and
says the tool list changed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

LEDGER = Path(sys.argv[1])
server = MCPServer("stdio-tools")


def record(tool: str, arguments: dict[str, object]) -> None:
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(f"{tool} {json.dumps(arguments, sort_keys=True)}\n")


@server.tool(description="Repeat a sentence back, word for word", structured_output=False)
def echo(sentence: str) -> str:
    record("echo", {"sentence": sentence})
    return f"you said: {sentence}"


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

    server.add_tool(translate, description="Translate into capitals", structured_output=False)
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    server.run("stdio")

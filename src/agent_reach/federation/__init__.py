"""Federation: MCP servers as agents (`transport: {"type": "mcp"}`).

Each tool of a registered MCP server is a capability (`<agent id>.<tool>` unless the
registration maps it), its description and input schema the capability's card. This
package keeps one MCP session per instance on each coordinator, follows the server's
tool list, and turns tool results into results. It never retries a tool call: the
attempt loop decides, and a call that may have run is never sent again.
"""

"""The A2A and MCP faces' fast path on the edge server: a `POST /a2a`,
`/a2a/message:send` or `/mcp` `tools/call` answered without the framework, byte for
byte as the full stack answers it, or handed to the ASGI app unchanged. `exchange`
collects the request on a connection, `answer` picks the face, `a2a`, `mcp` and
`mcp_session` answer it (`mcp_result` shapes an MCP result as the SDK does), and `wire`
reads the request's head and writes whole answers. Nothing is imported here: the
edge server loads `exchange` (and with it the MCP SDK) only when the fast faces are on.
"""

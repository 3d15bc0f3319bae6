"""The coordinator's faces for other protocols: an A2A agent and an MCP server.

Each face translates its protocol's calls into ordinary invocations (`InvokeService`),
so keys, access rules, quotas, idempotency and routing apply exactly as on
`/v1/invoke`; a face never delivers to an agent by itself.
"""

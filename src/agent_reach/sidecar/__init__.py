"""The sidecar processes: an unchanged HTTP service or a stdio MCP server offered as an agent."""

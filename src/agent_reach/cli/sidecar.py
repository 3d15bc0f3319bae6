"""`agent-reach sidecar`: the agent for an unchanged service next to it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent_reach.cli.common import (
    reporting_errors,
)


@reporting_errors
def sidecar(
    config: Annotated[
        Path,
        typer.Option(metavar="FILE", exists=True, dir_okay=False, help="The sidecar's YAML file."),
    ],
) -> None:
    """Run a sidecar: the agent for an unchanged JSON, XML or SOAP service next to it,
    or for a stdio MCP server (`mcp_stdio` in the file)."""
    # the adapters and the MCP SDK: only when a sidecar runs, not for every command
    from agent_reach.observability.logging import configure_logging
    from agent_reach.sidecar.mcp_bridge import McpSidecarConfig, serve_bridge
    from agent_reach.sidecar.service import Sidecar, SidecarConfig

    configure_logging("info", json=True)
    stdio = McpSidecarConfig.load(config)
    if stdio is not None:
        serve_bridge(stdio)
    else:
        Sidecar(SidecarConfig.load(config)).serve()

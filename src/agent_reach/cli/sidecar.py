"""`agent-reach sidecar`: the agent for an unchanged service next to it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent_reach.adapters.sidecar import Sidecar, SidecarConfig
from agent_reach.cli.common import (
    reporting_errors,
)
from agent_reach.observability.logging import configure_logging


@reporting_errors
def sidecar(
    config: Annotated[
        Path,
        typer.Option(metavar="FILE", exists=True, dir_okay=False, help="The sidecar's YAML file."),
    ],
) -> None:
    """Run a sidecar: the agent for an unchanged JSON, XML or SOAP service next to it."""
    configure_logging("info", json=True)
    Sidecar(SidecarConfig.load(config)).serve()

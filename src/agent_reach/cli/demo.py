"""`agent-reach demo`: the customer-service scenario on loopback."""

from __future__ import annotations

from typing import Annotated

import typer

from agent_reach.cli.common import (
    reporting_errors,
)


@reporting_errors
def demo(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show every answer in full.")
    ] = False,
) -> None:
    """Run the customer-service scenario on loopback: coordinator and agents in-process."""
    from agent_reach.demo import run_demo  # the whole coordinator: only when it runs

    raise typer.Exit(run_demo(verbose=verbose))

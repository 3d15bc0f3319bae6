"""`agent-reach`: run a coordinator, manage agents, invoke and explain routing, run the demo.

Every command that talks to a coordinator takes `--coordinator` (default
`AR_COORDINATOR_URL`, else http://127.0.0.1:8500). Errors print one red line with
their code, then the server's `problems` (field: reason) or how to pass a key, and exit
1; no command ever prints a traceback for them. `serve` refuses a bad setting in one
line and exits 2.

One module per command or group of commands; this one puts them together in the order
`--help` lists them. A command module imports the coordinator (server, faces, runtime)
only inside `serve`, `demo` and `sidecar`, and the SDK's models only when it runs, so
`--help` loads typer and rich alone (tests/unit/test_cli_imports.py pins it).
"""

from __future__ import annotations

from typing import Annotated

import typer

from agent_reach.cli import (
    acl,
    agents,
    demo,
    explain,
    feedback,
    invoke,
    keys,
    observe,
    policy,
    serve,
    sidecar,
    workflows,
)
from agent_reach.cli.common import Command, Group
from agent_reach.cli.serve import GC_THRESHOLDS

__all__ = ["GC_THRESHOLDS", "app"]

app = typer.Typer(
    name="agent-reach",
    help="Agent-Reach: discovery, routing and delivery between agents.",
    no_args_is_help=True,
    add_completion=False,
    cls=Group,
)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version  # reads the installed metadata: only here

        typer.echo(f"agent-reach {version('agent-reach')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Agent-Reach: discovery, routing and delivery between agents."""


app.command(cls=Command)(serve.serve)
app.add_typer(agents.app, name="agents")
app.add_typer(keys.app, name="keys")
app.add_typer(acl.app, name="acl")
app.command(cls=Command)(invoke.invoke)
app.command(cls=Command)(explain.route)
app.command(cls=Command)(feedback.feedback)
app.command(cls=Command)(demo.demo)
app.command(cls=Command)(explain.trace)
app.command(cls=Command)(explain.why)
app.command(cls=Command)(observe.top)
app.command(cls=Command)(observe.deadletters)
app.add_typer(policy.app, name="policy")
app.command(cls=Command)(sidecar.sidecar)
app.add_typer(workflows.app, name="workflow")

"""`agent-reach`: run a coordinator, manage agents, invoke and explain routing, run the demo.

Every command that talks to a coordinator takes `--coordinator` (default
`AR_COORDINATOR_URL`, else http://127.0.0.1:8500). Errors print one red line with
their code, then the server's `problems` (field: reason) or how to pass a key, and exit
1; no command ever prints a traceback for them. `serve` refuses a bad setting in one
line and exits 2.

One module per command or group of commands; this one puts them together in the order
`--help` lists them.
"""

from __future__ import annotations

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

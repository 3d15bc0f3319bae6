"""`agent-reach agents`: register, list, deregister and import agent instances."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    Command,
    CoordinatorUrl,
    commands,
    optional,
    reach_client,
    read_mapping,
    reporting_errors,
)

if TYPE_CHECKING:
    from agent_reach.model.agents import InstanceView

app = commands("Register, list and deregister agent instances.")
_STATUS_STYLES = {"unknown": "cyan", "healthy": "green", "suspect": "yellow", "offline": "red"}


@app.command("register", cls=Command)
@reporting_errors
def register_agent(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="JSON or YAML: the v1 body or the legacy `agent:` form.",
        ),
    ],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Register an agent instance described in FILE."""
    from agent_reach.model.agents import AgentSpec  # the registration's model, on use

    spec = AgentSpec.from_legacy(read_mapping(file))
    with reach_client(coordinator, api_key) as client:
        view = client.register(spec)
    console = Console()
    console.print(f"registered [bold]{view.id}[/] at {escape(spec.transport.endpoint)}")
    console.print(instances_table([view]))
    console.print(
        f"the lease lasts its ttl, {spec.ttl:g} s: without a heartbeat (POST "
        f"/v1/agents/{escape(view.id)}/heartbeat) the instance leaves the pool after that; "
        "an SDK agent heartbeats by itself",
        soft_wrap=True,
        highlight=False,
    )


@app.command("list", cls=Command)
@reporting_errors
def list_agents(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL, api_key: ApiKey = None
) -> None:
    """List instances with status, load, success rate and median latency."""
    with reach_client(coordinator, api_key) as client:
        views = client.agents()
    Console().print(instances_table(views))


@app.command("deregister", cls=Command)
@reporting_errors
def deregister_agent(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The instance's id.")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Take an instance out of the pool at once."""
    with reach_client(coordinator, api_key) as client:
        client.deregister(agent_id)
    Console().print(f"deregistered [bold]{escape(agent_id)}[/]")


@app.command("import-a2a", cls=Command)
@reporting_errors
def import_a2a(
    url: Annotated[
        str, typer.Argument(metavar="URL", help="The A2A agent's base URL or its agent card URL.")
    ],
    agent_id: Annotated[
        str | None,
        typer.Option(
            "--id", metavar="ID", help="Instance id; default: from the URL's host and port."
        ),
    ] = None,
    ttl: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Lease in seconds; an A2A agent does not heartbeat: import it again.",
        ),
    ] = 86_400.0,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Register an A2A agent: the coordinator reads its card; its skills become capabilities."""
    parts = urlsplit(url)
    name = agent_id or re.sub(r"[^A-Za-z0-9._-]+", "-", f"a2a-{parts.netloc}").strip("-")
    body = {"id": name, "ttl": ttl, "transport": {"type": "a2a", "endpoint": url}}
    with reach_client(coordinator, api_key) as client:
        view = client.register(body)
    console = Console()
    console.print(f"imported [bold]{escape(view.id)}[/]: {escape(', '.join(view.capabilities))}")
    console.print(instances_table([view]))


def instances_table(views: list[InstanceView]) -> Table:
    """Instances with capabilities, status, load, success rate and p50 latency."""
    table = Table(title="agents", title_justify="left")
    table.add_column("id", no_wrap=True, style="bold")
    table.add_column("capabilities")
    table.add_column("status", no_wrap=True)
    table.add_column("load", justify="right", no_wrap=True)
    table.add_column("success", justify="right", no_wrap=True)
    table.add_column("p50 ms", justify="right", no_wrap=True)
    for view in views:
        stats = view.stats
        table.add_row(
            view.id,
            ", ".join(view.capabilities),
            f"[{_STATUS_STYLES[view.status]}]{view.status}[/]",
            f"{stats.load:.2f}",
            optional(stats.success_rate, "{:.0%}"),
            optional(stats.latency_ms_p50, "{:.1f}"),
        )
    return table

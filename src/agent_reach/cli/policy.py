"""`agent-reach policy`: show, replace and audit the policy in force."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    Command,
    CoordinatorUrl,
    call,
    commands,
    read_mapping,
    reporting_errors,
)

app = commands("Show, replace and audit the policy in force (at run time).")


@app.command("show", cls=Command)
@reporting_errors
def show_policy(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL, api_key: ApiKey = None
) -> None:
    """The policy in force: version, revision, where it came from, and the policy as JSON."""
    status = orjson.loads(call(coordinator, api_key, "GET", "/v1/policy"))
    console = Console()
    console.print(_policy_line(status), soft_wrap=True, highlight=False)
    console.print_json(orjson.dumps(status["policy"]).decode())


@app.command("set", cls=Command)
@reporting_errors
def set_policy(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="TOML or YAML: the policy file's schema.",
        ),
    ],
    if_match: Annotated[
        str | None,
        typer.Option(
            metavar="VERSION", help="Replace only if this version is still in force (else 409)."
        ),
    ] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Replace the policy on every coordinator with FILE (needs an admin key)."""
    headers = {} if if_match is None else {"if-match": if_match}
    answer = orjson.loads(
        call(coordinator, api_key, "PUT", "/v1/policy", read_mapping(file), headers=headers)
    )
    change = answer["change"]
    Console().print(
        f"policy {change['before'] or '-'} → {change['after']} (revision {change['revision']})",
        soft_wrap=True,
        highlight=False,
    )


@app.command("changes", cls=Command)
@reporting_errors
def policy_changes(
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=1000, help="Newest changes to show.")
    ] = 20,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """The policy's audit log, newest first: who, when, versions before and after (admin)."""
    answer = orjson.loads(call(coordinator, api_key, "GET", f"/v1/policy/changes?limit={limit}"))
    table = Table(title="policy changes", title_justify="left")
    for column in ("revision", "time", "by", "source", "before", "after"):
        table.add_column(column, no_wrap=True)
    for change in answer["changes"]:
        table.add_row(
            str(change["revision"]),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(change["at"])),
            escape(change["by"]),
            change["source"],
            change["before"] or "-",
            change["after"],
        )
    Console().print(table)


def _policy_line(status: dict[str, Any]) -> str:
    by = f" by {status['changed_by']}" if status.get("changed_by") else ""
    line = (
        f"policy {status['version']} (revision {status['revision']}, source {status['source']}{by})"
    )
    if status.get("last_error"):
        line += f"; last rejected edit: {status['last_error']}"
    return line

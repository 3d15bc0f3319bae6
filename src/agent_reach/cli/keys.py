"""`agent-reach keys`: create, list and revoke API keys."""

from __future__ import annotations

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
    reporting_errors,
)

app = commands("Create, list and revoke API keys (needs an admin key).")


@app.command("create", cls=Command)
@reporting_errors
def create_key(
    principal: Annotated[
        str, typer.Option(metavar="NAME", help="Who the key is for, e.g. order-bot.")
    ],
    domain: Annotated[
        str | None,
        typer.Option(metavar="DOMAIN", help="Optional domain the policy's domain rules match."),
    ] = None,
    role: Annotated[
        str, typer.Option(metavar="ROLE", help="caller, agent, observer or admin.")
    ] = "caller",
    capability: Annotated[
        list[str] | None,
        typer.Option(
            "--capability",
            "-c",
            metavar="PATTERN",
            help="A capability pattern the key grants (repeatable): an agent key may "
            "register it, a caller key may invoke and route to it.",
        ),
    ] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Create an API key; it is printed once and never stored in plaintext."""
    body: dict[str, Any] = {"principal": principal, "role": role, "capabilities": capability or []}
    if domain is not None:
        body["domain"] = domain
    created = orjson.loads(call(coordinator, api_key, "POST", "/v1/keys", body))
    console = Console()
    where = f", domain {escape(created['domain'])}" if created["domain"] else ""
    grants = ", ".join(created["capabilities"]) or "none"
    console.print(
        f"key for [bold]{escape(created['principal'])}[/] ({created['role']}{where}, "
        f"grants: {escape(grants)}), id {created['key_id']} — shown once, keep it:",
        soft_wrap=True,
    )
    console.print(created["key"], soft_wrap=True, highlight=False)


@app.command("list", cls=Command)
@reporting_errors
def list_keys(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL, api_key: ApiKey = None
) -> None:
    """Key ids with their principals (never the keys)."""
    table = Table(title="API keys", title_justify="left")
    for column in ("key id", "principal", "domain", "role", "grants", "revoked"):
        table.add_column(column, no_wrap=column != "grants")
    for key in orjson.loads(call(coordinator, api_key, "GET", "/v1/keys"))["keys"]:
        table.add_row(
            key["key_id"],
            escape(key["principal"]),
            escape(key["domain"] or "-"),
            key["role"],
            escape(", ".join(key["capabilities"]) or "-"),
            "[red]yes[/]" if key["revoked"] else "no",
        )
    Console().print(table)


@app.command("revoke", cls=Command)
@reporting_errors
def revoke_key(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id (keys list).")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Revoke a key: every coordinator refuses it within a second."""
    call(coordinator, api_key, "DELETE", f"/v1/keys/{key_id}")
    Console().print(f"revoked [bold]{escape(key_id)}[/]")

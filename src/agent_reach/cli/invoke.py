"""`agent-reach invoke`: send one request and print its answer."""

from __future__ import annotations

from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.markup import escape

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    CoordinatorUrl,
    reporting_errors,
)
from agent_reach.errors import (
    InvalidRequest,
)
from agent_reach.sdk.client import SyncReachClient


@reporting_errors
def invoke(
    capability: Annotated[
        str | None,
        typer.Argument(metavar="CAPABILITY", help="Capability tag, e.g. inventory.check."),
    ] = None,
    text: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT", help="The user's words: routed by meaning without CAPABILITY."
        ),
    ] = None,
    payload: Annotated[str, typer.Option(metavar="JSON", help="The payload as JSON.")] = "null",
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Send a request to the best live instance of CAPABILITY, or of the capability
    that fits --text, and print its answer."""
    if capability is None and text is None:
        raise InvalidRequest("give CAPABILITY or --text (or both)", code="invalid_arguments")
    try:
        body = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"--payload is not valid JSON: {exc}", code="invalid_json") from None
    with SyncReachClient(coordinator, api_key=api_key) as client:
        answer = client.invoke(capability, text=text, payload=body)
    console = Console()
    console.print(
        f"[bold]{answer.status}[/] from [bold cyan]{answer.agent_id}[/] "
        f"for {escape(answer.route.capability or '-')} "
        f"(request {answer.request_id}, trace {answer.trace_id})",
        soft_wrap=True,
    )
    console.print_json(orjson.dumps(answer.result).decode())

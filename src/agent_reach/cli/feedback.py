"""`agent-reach feedback`: tell the router which capability should have served a text."""

from __future__ import annotations

import time
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.markup import escape

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    CoordinatorUrl,
    call,
    reporting_errors,
)


@reporting_errors
def feedback(
    request_id: Annotated[
        str,
        typer.Argument(metavar="REQUEST_ID", help="One of your earlier text requests."),
    ],
    capability: Annotated[
        str,
        typer.Argument(metavar="CAPABILITY", help="The capability that should have served it."),
    ],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Correct the route of REQUEST_ID: the router learns its text for CAPABILITY at once."""
    body = {"request_id": request_id, "capability": capability}
    learned = orjson.loads(call(coordinator, api_key, "POST", "/v1/feedback", body))["learned"]
    until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(learned["expires_at"]))
    Console().print(
        f"learned example {learned['id']}: {escape(learned['text'])!r} → "
        f"[bold]{escape(learned['capability'])}[/] (until {until})",
        soft_wrap=True,
        highlight=False,
    )

"""`agent-reach feedback`: tell the router which capability should have served a text,
or rate the answer of an earlier request."""

from __future__ import annotations

import time
from enum import StrEnum
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
from agent_reach.errors import InvalidRequest


class Rating(StrEnum):
    """What `--rating` takes."""

    good = "good"
    bad = "bad"


@reporting_errors
def feedback(
    request_id: Annotated[
        str,
        typer.Argument(metavar="REQUEST_ID", help="One of your earlier text requests."),
    ],
    capability: Annotated[
        str | None,
        typer.Argument(metavar="CAPABILITY", help="The capability that should have served it."),
    ] = None,
    rating: Annotated[
        Rating | None,
        typer.Option(
            metavar="good|bad", help="Rate its answer instead: counts for the agent that gave it."
        ),
    ] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Correct the route of REQUEST_ID: the router learns its text for CAPABILITY at once.
    With --rating, rate the answer instead (the instance's quality factor)."""
    if (capability is None) == (rating is None):
        raise InvalidRequest("give a CAPABILITY or --rating good|bad", code="invalid_arguments")
    if rating is not None:
        rating_body = {"request_id": request_id, "rating": rating.value}
        answer = call(coordinator, api_key, "POST", "/v1/feedback", rating_body)
        rated = orjson.loads(answer)["rated"]
        Console().print(
            f"rated {escape(rated['request_id'])} [bold]{rating.value}[/] for "
            f"{escape(str(rated['agent_id']))}",
            soft_wrap=True,
            highlight=False,
        )
        return
    body = {"request_id": request_id, "capability": capability}
    learned = orjson.loads(call(coordinator, api_key, "POST", "/v1/feedback", body))["learned"]
    until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(learned["expires_at"]))
    Console().print(
        f"learned example {learned['id']}: {escape(learned['text'])!r} → "
        f"[bold]{escape(learned['capability'])}[/] (until {until})",
        soft_wrap=True,
        highlight=False,
    )

"""`agent-reach route`, `trace` and `why`: explain routing decisions, traces and requests."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from rich.tree import Tree

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    CoordinatorUrl,
    call,
    reach_client,
    reporting_errors,
    status_text,
)
from agent_reach.cli.route_view import decision_view
from agent_reach.cli.text import kept, show
from agent_reach.cli.why_view import why_report
from agent_reach.errors import InvalidRequest, NotFound


@reporting_errors
def route(
    text: Annotated[
        str | None, typer.Argument(metavar="TEXT", help="User text to route by meaning.")
    ] = None,
    capability: Annotated[
        str | None, typer.Option(metavar="TAG", help="Capability tag to route.")
    ] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Explain the routing decision for TEXT or a --capability; nothing is invoked."""
    if (text is None) == (capability is None):
        raise InvalidRequest("give TEXT or --capability (one of them)", code="invalid_arguments")
    with reach_client(coordinator, api_key) as client:
        decision = client.route(capability, text=text)
    show(Console(), decision_view(decision))


@reporting_errors
def trace(
    trace_id: Annotated[
        str, typer.Argument(metavar="TRACE_ID", help="The trace's id: 32 hex digits.")
    ],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Print a trace's hops as a tree with timings: route, attempts, nested calls."""
    document = orjson.loads(call(coordinator, api_key, "GET", f"/v1/traces/{trace_id}"))
    show(Console(), trace_tree(document))


@reporting_errors
def why(
    request_id: Annotated[
        str,
        typer.Argument(
            metavar="REQUEST_ID",
            help="The request's id (in its answer); a trace id shows that trace's requests.",
        ),
    ],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Walk one request: routing, registry, context, delivery; name the first wrong step.

    Given a trace id, say so and walk each request of that trace.
    """
    console = Console()
    try:
        show(console, why_report(_walk(coordinator, api_key, request_id)))
        return
    except NotFound as exc:
        in_trace = exc.details.get("request_ids")
        if not in_trace:
            raise
    console.print(
        f"{escape(request_id)} is a trace id; its requests: {escape(', '.join(in_trace))}",
        soft_wrap=True,
        highlight=False,
    )
    for number, each in enumerate(in_trace, 1):
        console.print()
        console.rule(f"request {number} of {len(in_trace)}: {escape(each)}", align="left")
        show(console, why_report(_walk(coordinator, api_key, each)))


def _walk(coordinator: str, api_key: str | None, request_id: str) -> dict[str, Any]:
    path = f"/v1/requests/{quote(request_id, safe='')}/why"
    walked: dict[str, Any] = orjson.loads(call(coordinator, api_key, "GET", path))
    return walked


def trace_tree(document: dict[str, Any]) -> Tree:
    """The spans of a `GET /v1/traces/{id}` answer as a tree, children in start order."""
    summary = document["summary"]
    title = kept(f"trace {document['trace_id']}  ")
    title.stylize("bold", 0, len("trace"))
    title.append_text(status_text(summary["status"], summary["is_error"]))
    title.append_text(kept(f"  {summary['duration_ms']:.2f} ms"))
    tree = Tree(title)
    spans = document["spans"]
    ids = {s["span_id"] for s in spans}
    nodes: dict[str | None, Tree] = {}
    for span in spans:  # start order, so a parent always comes before its children
        parent = span["parent_id"] if span["parent_id"] in ids else None
        nodes[span["span_id"]] = nodes.get(parent, tree).add(_span_label(span))
    return tree


def _span_label(span: dict[str, Any]) -> Text:
    label = kept("")
    label.append(f"{span['kind']:<8}", style="dim")
    label.append(span["name"] or "-")
    if span["agent_id"]:
        label.append(f" → {span['agent_id']}", style="cyan")
    if span["kind"] == "attempt":
        label.append(f"  attempt {span['attempt']}")
        if span["note"]:
            label.append(f" ({span['note']})", style="yellow")
    elif span["kind"] == "route" and span["note"]:
        label.append(f"  rule {span['note']}", style="dim")
    label.append("  ")
    label.append_text(status_text(span["status"], span["is_error"]))
    label.append_text(kept(f"  +{span['offset_ms']:.2f} ms  {span['duration_ms']:.2f} ms", "dim"))
    return label

"""`agent-reach route`, `trace` and `why`: explain routing decisions, traces and requests."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    CoordinatorUrl,
    call,
    optional,
    reporting_errors,
    status_text,
)
from agent_reach.errors import (
    InvalidRequest,
)
from agent_reach.model.decisions import RouteDecision, TextMatch
from agent_reach.sdk.client import SyncReachClient
from agent_reach.troubleshooting.report import why_report


@reporting_errors
def route(
    text: Annotated[
        str | None, typer.Argument(metavar="TEXT", help="User text to route by meaning.")
    ] = None,
    capability: Annotated[str | None, typer.Option(help="Capability tag to route.")] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Explain the routing decision for TEXT or a --capability; nothing is invoked."""
    if (text is None) == (capability is None):
        raise InvalidRequest("give TEXT or --capability (one of them)", code="invalid_arguments")
    with SyncReachClient(coordinator, api_key=api_key) as client:
        decision = client.route(capability, text=text)
    Console().print(decision_table(decision))


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
    Console().print(trace_tree(document))


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
    """Walk one request: routing, registry, context, delivery; name the first wrong step."""
    path = f"/v1/requests/{quote(request_id, safe='')}/why"
    Console().print(why_report(orjson.loads(call(coordinator, api_key, "GET", path))))


def decision_table(decision: RouteDecision) -> Table:
    """Every candidate with each factor and its score; the chosen one highlighted."""
    weights = decision.weights
    factors = list(weights) + sorted(
        {name for c in decision.candidates for name in c.factors} - set(weights)
    )
    chosen = decision.agent_id or "none"
    caption = f"rule [bold]{decision.rule}[/] · policy {decision.policy_version}"
    if decision.refused_by is not None:
        caption += f" (refused by {decision.refused_by})"
    if decision.margin is not None:
        caption += f" · margin {decision.margin:.3f}"
    if decision.text is not None:
        caption += "\n" + _text_explained(decision.text, decision.margin)
    table = Table(
        title=f"route decision: {chosen}",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    table.add_column("", no_wrap=True)
    table.add_column("capability", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("matchers", no_wrap=True)
    for name in factors:
        weight = weights.get(name)
        header = name if weight is None else f"{name}\n×{weight:.2f}"
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    for candidate in decision.candidates:
        is_chosen = (candidate.capability, candidate.agent_id) == (
            decision.capability,
            decision.agent_id,
        )
        table.add_row(
            "→" if is_chosen else "",
            candidate.capability,
            candidate.agent_id,
            " ".join(f"{name} {score:.2f}" for name, score in candidate.match.items()),
            *(optional(candidate.factors.get(name), "{:.3f}") for name in factors),
            f"{candidate.score:.3f}",
            style="bold green" if is_chosen else None,
        )
    return table


def _text_explained(text: TextMatch, margin: float | None) -> str:
    """How a text was matched: matchers, calibration, thresholds, what was learned, params."""
    gap = "-" if margin is None else f"{margin:.3f}"
    lines = [
        f"matchers {' + '.join(text.matchers) or 'none'}"
        + (f" (pending: {', '.join(text.pending)})" if text.pending else "")
        + (" · calibrated on the catalog" if text.calibrated else " · not calibrated (few cards)"),
        f"thresholds: match ≥ {text.min_confidence:g}, gap to the next capability {gap}"
        f" ≥ {text.margin:g} (calibrated confidences, the match column)",
    ]
    if text.learned:
        lines.append(f"learned example {text.learned['id']} → {text.learned['capability']}")
    if text.not_mine:
        lines.append(f"said not mine (421) before: {', '.join(text.not_mine)}")
    if text.params is not None:
        lines.append(f"params {orjson.dumps(text.params).decode()}")
    return "\n".join(lines)


def trace_tree(document: dict[str, Any]) -> Tree:
    """The spans of a `GET /v1/traces/{id}` answer as a tree, children in start order."""
    summary = document["summary"]
    tree = Tree(
        Text.assemble(
            ("trace ", "bold"),
            document["trace_id"],
            "  ",
            status_text(summary["status"], summary["is_error"]),
            f"  {summary['duration_ms']:.2f} ms",
        )
    )
    spans = document["spans"]
    ids = {s["span_id"] for s in spans}
    nodes: dict[str | None, Tree] = {}
    for span in spans:  # start order, so a parent always comes before its children
        parent = span["parent_id"] if span["parent_id"] in ids else None
        nodes[span["span_id"]] = nodes.get(parent, tree).add(_span_label(span))
    return tree


def _span_label(span: dict[str, Any]) -> Text:
    label = Text.assemble((f"{span['kind']:<8}", "dim"), span["name"] or "-")
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
    label.append(f"  +{span['offset_ms']:.2f} ms  {span['duration_ms']:.2f} ms", style="dim")
    return label

"""`agent-reach workflow`: run workflows and show or cancel their runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    Command,
    CoordinatorUrl,
    call,
    commands,
    read_mapping,
    reporting_errors,
    status_text,
)
from agent_reach.errors import (
    InvalidRequest,
)

app = commands("Run workflows (DAGs of capability steps) and show their runs.")
# What a saved definition has beyond what a run takes inline.
_DEFINITION_ONLY = ("name", "description", "inputs")


@app.command("run", cls=Command)
@reporting_errors
def run_workflow(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="The workflow as YAML or JSON.", exists=True)
    ],
    input_json: Annotated[
        str, typer.Option("--input", metavar="JSON", help="The run's input as JSON.")
    ] = "{}",
    run_async: Annotated[
        bool, typer.Option("--async", help="Print the run id and return.")
    ] = False,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Run the workflow in FILE and print its steps as a tree with timings."""
    document = read_mapping(file)
    if isinstance(document.get("workflow"), dict):
        document = document["workflow"]  # the `workflow: {...}` file form
    try:
        given = orjson.loads(input_json)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"--input is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(given, dict):
        raise InvalidRequest("--input must be a JSON object", code="invalid_input")
    inputs = document.get("inputs") or {}
    defaults = {n: s.get("default") for n, s in inputs.items() if isinstance(s, dict)}
    body = {k: v for k, v in document.items() if k not in _DEFINITION_ONLY}
    body["input"] = {**{k: v for k, v in defaults.items() if v is not None}, **given}
    body["mode"] = "async" if run_async else "sync"
    view = orjson.loads(call(coordinator, api_key, "POST", "/v1/workflows/run", body))
    Console().print(workflow_tree(view))


@app.command("show", cls=Command)
@reporting_errors
def show_workflow(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id.")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Print one of your runs: its steps as a tree (by dependency) with their timings."""
    view = orjson.loads(call(coordinator, api_key, "GET", f"/v1/workflows/{run_id}"))
    Console().print(workflow_tree(view))


@app.command("cancel", cls=Command)
@reporting_errors
def cancel_workflow(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id.")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Cancel one of your runs: no step starts after this; steps in flight finish."""
    view = orjson.loads(call(coordinator, api_key, "POST", f"/v1/workflows/{run_id}/cancel"))
    Console().print(f"run {view['run_id']} cancelled (it was {view['status']})")


def workflow_tree(view: dict[str, Any]) -> Tree:
    """A run's steps under the run, each under the last of its dependencies to end."""
    steps = view["steps"]
    ended = [s["ended_ms"] for s in steps if s.get("ended_ms") is not None]
    tree = Tree(
        Text.assemble(
            ("run ", "bold"),
            view["run_id"],
            f"  {view.get('intent') or view.get('name') or ''}  ",
            status_text(view["status"], view["status"] == "error"),
            f"  {max(ended, default=0.0):.1f} ms",
        )
    )
    by_id = {s["id"]: s for s in steps}
    nodes: dict[str, Tree] = {}
    for step in sorted(steps, key=lambda s: (s.get("started_ms") is None, s.get("started_ms"))):
        parents = [d for d in step.get("depends_on") or [] if d in nodes]
        parent = max(parents, key=lambda d: by_id[d].get("ended_ms") or 0.0, default=None)
        nodes[step["id"]] = (nodes[parent] if parent else tree).add(_step_label(step))
    return tree


def _step_label(step: dict[str, Any]) -> Text:
    label = Text.assemble((f"{step['id']:<10}", "bold"), step.get("capability") or "-")
    if step.get("agent_id"):
        label.append(f" → {step['agent_id']}", style="cyan")
    label.append("  ")
    status = step["status"]
    label.append_text(status_text(status, status in ("failed", "skipped", "parked")))
    if step.get("fallback_used"):
        label.append(f" (fallback {step['fallback_used']})", style="yellow")
    started, ended = step.get("started_ms"), step.get("ended_ms")
    if started is not None and ended is not None:
        label.append(f"  +{started:.1f} ms  {ended - started:.1f} ms", style="dim")
    if step.get("reason"):
        label.append(f"  {step['reason']}", style="dim")
    return label

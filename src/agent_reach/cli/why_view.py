"""The walk of `agent-reach why` as the terminal shows it: four steps in order, the first
wrong one marked (the walk itself: troubleshooting/walk.py)."""

from __future__ import annotations

from typing import Any

import orjson
from rich.console import Group
from rich.table import Table
from rich.text import Text

from agent_reach.cli.text import kept

_VERDICT_STYLES = {
    "ok": "green",
    "suspect": "yellow",
    "unreachable": "bold red",
    "failed": "bold red",
    "not_reached": "dim",
}


def why_report(document: dict[str, Any]) -> Group:
    """A header, one table row per step, and the details that explain each verdict."""
    node = document.get("node")
    header = kept(f"request {document['request_id']}", style="bold")
    header.append_text(kept(f" · trace {document['trace_id']}"))
    header.append_text(
        kept(
            f"\nHTTP {document['http_status']} · {document['duration_ms']:.1f} ms"
            + (f" · answered by {node}" if node else "")
        )
    )
    steps = Table(title_justify="left", show_lines=False)
    steps.add_column("step", no_wrap=True)
    steps.add_column("verdict", no_wrap=True)
    steps.add_column("finding")
    for step in document["steps"]:
        mark = "→ " if step["step"] == document["first_wrong_step"] else "  "
        verdict = step["verdict"]
        steps.add_row(
            mark + step["step"],
            Text(verdict, style=_VERDICT_STYLES.get(verdict, "")),
            kept(step["finding"]),
        )
    details = [kept(line) for step in document["steps"] for line in _details(step)]
    chain = [kept(line) for line in chain_lines(document)]
    summary = kept(document["summary"], style="bold")
    return Group(header, *chain, steps, *details, summary)


def chain_lines(document: dict[str, Any]) -> list[str]:
    """A delegated request's chain (caller → agent → …) and the calls handed on under it."""
    lines = []
    delegation = document.get("delegation")
    if delegation:
        path = " → ".join(
            [
                delegation["on_behalf_of"],
                *(f"{h['instance']} ({h['agent']})" for h in delegation["via"]),
            ]
        )
        lines.append(f"delegated: {path}, on behalf of {delegation['on_behalf_of']}")
    for hop in document.get("handed_on") or []:
        answered = ", ".join(
            f"{a['agent_id']} {a['outcome']}"
            + (f" cost {a['cost']:g}" if a["cost"] is not None else "")
            for a in hop["attempts"]
        )
        lines.append(
            f"  handed on: {' → '.join([hop['on_behalf_of'], *hop['via']])} → {hop['capability']} "
            f"({hop['request_id']}): {hop['status']}" + (f" [{answered}]" if answered else "")
        )
    return lines


def _details(step: dict[str, Any]) -> list[str]:
    name = step["step"]
    if name == "routing" and step.get("decision"):
        said = [f"  routing: {t['statement']}" for t in step["decision"].get("thresholds") or []]
        return said + [
            f"  routing: {c['capability']} {c['agent_id']} score {c['score']:.3f} "
            + " ".join(f"{k} {v:.2f}" for k, v in c["factors"].items())
            for c in step["decision"].get("candidates", [])
        ]
    if name == "routing" and step.get("traced"):
        traced = step["traced"]
        return [
            f"  routing (its trace's route span): {traced['capability']} → "
            f"{traced['agent_id']}, rule {traced['rule']}; the decision's factors were not kept"
        ]
    if name == "registry":
        return [_instance_line(i) for i in step.get("instances", [])]
    if name == "context":
        return [
            f"  context read: {', '.join(f'{k} ({v} B)' for k, v in r['sizes'].items())}"
            + (f" = {orjson.dumps(r['values']).decode()}" if "values" in r else "")
            for r in step.get("reads", [])
        ]
    if name == "delivery":
        return [
            f"  attempt {a['number']}: {a['agent_id']} {a['outcome']} in {a['duration_ms']:.1f} ms"
            + (f" ({a['error']})" if a.get("error") else "")
            for a in step.get("attempts", [])
        ] + [
            f"  waiting for: {i['agent_id']} ({i.get('status', '?')})"
            + (f", last error {i['last_error']}" if i.get("last_error") else "")
            for i in step.get("instances", [])
        ]
    return []


def _instance_line(instance: dict[str, Any]) -> str:
    state = instance.get("at_the_time")
    if state is None:
        return f"  registry: {instance['agent_id']} ({instance['role']}): no history kept"
    rate = state["success_rate"]
    return (
        f"  registry: {instance['agent_id']} ({instance['role']}): {state['health']}, "
        f"lease {state['lease_left_s']:.1f} s left, {state['in_flight']} in flight, "
        f"{state['calls']} calls" + ("" if rate is None else f", {rate:.0%} ok")
    )

"""The demo's shipment question as a workflow, and its step timeline in 80 columns.

"商品 A 什么时候发货" takes the order, the shipping policy and, once the order names
its parcel, the parcel's track: order and policy run side by side, the track after the
order, with the FAQ as the workflow's fallback (the original system's flow).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from agent_reach.model.workflows import RunView, StepState
from agent_reach.sdk.client import ReachClient
from agent_reach.sdk.orchestrator import Orchestrator

QUESTION = "商品 A 什么时候发货"
ORDER_ID = "A1001"
SHIPMENT_WORKFLOW = {
    "intent": "shipment_query",
    "steps": [
        {"id": "order", "action": "order.query", "param": {"order_id": "{{input.order_id}}"}},
        {"id": "policy", "action": "product.faq", "param": {"text": "发货后的发票"}},
        {
            "id": "track",
            "action": "logistics.track",
            "depends_on": ["order"],
            "param": {"tracking_no": "{{steps.order.result.tracking_no}}"},
        },
    ],
    "fallback": "product.faq",
}
BAR_COLUMNS = 20  # the timeline's bar; with the labels each line stays within 80 columns


async def play_shipment(console: Console, client: ReachClient) -> bool:
    """Run the shipment workflow, print its timeline; True when every step was served."""
    console.rule("the shipment question as a workflow")
    run = await Orchestrator(client).run(SHIPMENT_WORKFLOW, {"order_id": ORDER_ID})
    for line in timeline(run):
        console.print(line, highlight=False)
    for step in run.steps:
        answer = step.result.get("answer") if isinstance(step.result, dict) else None
        if answer:
            console.print(f"  {step.id}: {escape(str(answer))}", highlight=False)
    return run.status == "ok"


def timeline(run: RunView) -> list[str]:
    """One line per step: id, capability, agent, a bar on the run's time scale, times."""
    total_ms = max((s.ended_ms or 0.0 for s in run.steps), default=0.0) or 1.0
    lines = [f"{QUESTION}  (order {ORDER_ID})  {run.status} in {total_ms:.1f} ms"]
    for step in run.steps:
        lines.append(
            f"  {step.id:<7}{(step.capability or '-'):<16}{(step.agent_id or '-'):<16}"
            f"{_bar(step, total_ms)} {_times(step)}"
        )
    return lines


def _bar(step: StepState, total_ms: float) -> str:
    if step.started_ms is None or step.ended_ms is None:
        return "|" + " " * BAR_COLUMNS + "|"
    start = round(step.started_ms / total_ms * BAR_COLUMNS)
    end = max(start + 1, round(step.ended_ms / total_ms * BAR_COLUMNS))
    return "|" + " " * start + "█" * (end - start) + " " * (BAR_COLUMNS - end) + "|"


def _times(step: StepState) -> str:
    if step.started_ms is None or step.ended_ms is None:
        return step.status
    return f"{step.started_ms:.1f}-{step.ended_ms:.1f} ms {step.status}"

"""`agent-reach invoke`: send one request and print its answer.

Every field of `POST /v1/invoke` is an option (docs/api.md): the request id, the
context, the budget, the hop limit, the timeout class, the mode, whether to suspend,
what a duplicate request id does; and the caller's deadline (`X-Reach-Deadline-Ms`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.markup import escape

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    CoordinatorUrl,
    call,
    reach_client,
    reporting_errors,
)
from agent_reach.errors import (
    InvalidRequest,
)

if TYPE_CHECKING:
    from agent_reach.model.invocations import InvokeResult, TaskView

WAIT_S = 35.0  # the SDK's own default: an answer, or a 202's task, is awaited this long
ANSWER_GRACE_S = 5.0  # past the caller's deadline: the coordinator's 504 still comes back


class Mode(StrEnum):
    """`mode` of the request: `async` prints the task instead of waiting for it."""

    sync = "sync"
    async_ = "async"
    fanout = "fanout"  # the answer is a workflow run's, with its `parts`


class OnDuplicate(StrEnum):
    """What a request id already in progress does: wait for its answer, or 409."""

    wait = "wait"
    reject = "reject"


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
    request_id: Annotated[
        str | None,
        typer.Option(
            metavar="ID", help="Your id for the request: sent again, it is answered once."
        ),
    ] = None,
    context_id: Annotated[
        str | None,
        typer.Option(metavar="ID", help="A context the agent reads (POST /v1/contexts)."),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            metavar="UNITS",
            help="Cost units the request and every delegation it leads to may spend.",
        ),
    ] = None,
    max_hop: Annotated[
        int | None,
        typer.Option(metavar="N", min=0, max=64, help="Hops the request may take (default 5)."),
    ] = None,
    timeout_class: Annotated[
        str | None,
        typer.Option(
            metavar="CLASS",
            help="query, reasoning, long or a class of the policy (default: the agent's).",
        ),
    ] = None,
    mode: Annotated[
        Mode,
        typer.Option(
            metavar="MODE",
            help="sync, async (print the task at once) or fanout: a text asking several "
            "things runs as a parallel workflow.",
        ),
    ] = Mode.sync,
    suspend: Annotated[
        bool,
        typer.Option(
            "--suspend/--no-suspend",
            help="No instance can take it now: park it as a task, or fail at once (503).",
        ),
    ] = True,
    on_duplicate: Annotated[
        OnDuplicate,
        typer.Option(
            metavar="WHAT",
            help="The request id is in progress: wait for its answer, or reject (409).",
        ),
    ] = OnDuplicate.wait,
    deadline_ms: Annotated[
        int | None,
        typer.Option(
            metavar="MS",
            min=1,
            help="Your own deadline in milliseconds (X-Reach-Deadline-Ms): the coordinator "
            "answers 504 deadline_exceeded rather than take longer.",
        ),
    ] = None,
    wait: Annotated[
        float,
        typer.Option(
            metavar="SECONDS", min=0, help="How long to wait for an answer that comes as a task."
        ),
    ] = WAIT_S,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Send a request to CAPABILITY or to the capability that fits --text; print the answer."""
    if capability is None and text is None:
        raise InvalidRequest("give CAPABILITY or --text (or both)", code="invalid_arguments")
    try:
        body = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"--payload is not valid JSON: {exc}", code="invalid_json") from None
    fields: dict[str, Any] = {
        "capability": capability,
        "text": text,
        "payload": body,
        "request_id": request_id,
        "context_id": context_id,
        "budget": budget,
        "max_hop": max_hop,
        "timeout_class": timeout_class,
        "mode": mode.value,
        "suspend": suspend,
        "on_duplicate": on_duplicate.value,
    }
    sent = {k: v for k, v in fields.items() if v is not None or k == "payload"}
    headers = {} if deadline_ms is None else {"x-reach-deadline-ms": str(deadline_ms)}
    # the coordinator answers within the deadline it was given, else its class's budget
    waited = WAIT_S if deadline_ms is None else deadline_ms / 1000 + ANSWER_GRACE_S
    answer = orjson.loads(
        call(coordinator, api_key, "POST", "/v1/invoke", sent, headers=headers, timeout_s=waited)
    )
    console = Console()
    if mode is Mode.fanout and "parts" in answer:  # a workflow run's answer: as it came
        console.print_json(orjson.dumps(answer).decode())
        return
    from pydantic import TypeAdapter  # the answer's models, on use

    from agent_reach.model.invocations import InvokeResult, TaskView

    if "task_id" in answer:  # 202: async, the long class, or parked while no instance can
        task = TaskView.model_validate(answer)
        if mode is Mode.async_:
            _print_task(console, task)
            return
        with reach_client(coordinator, api_key) as client:
            _print_answer(console, client.wait_task(task.task_id, wait))
        return
    _print_answer(console, TypeAdapter(InvokeResult).validate_python(answer))


def _print_answer(console: Console, answer: InvokeResult) -> None:
    console.print(
        f"[bold]{answer.status}[/] from [bold cyan]{answer.agent_id}[/] "
        f"for {escape(answer.route.capability or '-')} "
        f"(request {escape(answer.request_id)}, trace {answer.trace_id})",
        soft_wrap=True,
    )
    for attempt in answer.attempts:
        if attempt.cost is not None:
            console.print(
                f"cost {attempt.cost:g} reported by {escape(attempt.agent_id)}",
                soft_wrap=True,
                highlight=False,
            )
    console.print_json(orjson.dumps(answer.result).decode())


def _print_task(console: Console, task: TaskView) -> None:
    console.print(
        f"[bold]{task.status}[/]: task {escape(task.task_id)} "
        f"(request {escape(task.request_id)}, trace {task.trace_id}); "
        f"its answer: GET {escape(task.poll or '/v1/tasks/' + task.task_id)}",
        soft_wrap=True,
        highlight=False,
    )

"""Workflows from Python: `Orchestrator` (async) and `SyncOrchestrator` over a client.

    reply = await orchestrator.run("shipment-query", {"order_no": "888"})
    reply = await orchestrator.run({"intent": "shipment_query", "steps": [...]})
    reply = await orchestrator.run(customer_service.task_query, {  # the original call
        "intent": "shipment_query", "context_id": ctx, "steps": [...], "fallback": "kb.query"})

A name runs the workflow saved under it with `input`; a definition (a mapping with
`steps`) runs as it is, with `input` as its input. When the second argument itself
holds `steps`, it is the definition (the original system's call) and the first names it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from agent_reach.model.workflows import RunView
from agent_reach.sdk.client import ReachClient, SyncReachClient, _Call

DEFAULT_WAIT_S = 330.0  # a run's default deadline (300 s) and some room for the answer
POLL_FIRST_S = 0.05
POLL_MAX_S = 1.0


def _run_call(
    workflow: Any, given: Mapping[str, Any] | None, options: dict[str, Any]
) -> _Call[RunView]:
    given = dict(given or {})
    if not isinstance(workflow, Mapping) and "steps" in given:
        definition = {"intent": str(getattr(workflow, "__name__", workflow)), **given}
        return _Call("POST", "/v1/workflows/run", RunView.model_validate, {**definition, **options})
    if isinstance(workflow, Mapping):
        body = {**workflow, **options}
        if given:
            body["input"] = given
        return _Call("POST", "/v1/workflows/run", RunView.model_validate, body)
    body = {"input": given, **options}
    return _Call("POST", f"/v1/workflows/{workflow}/run", RunView.model_validate, body)


def _get_call(run_id: str) -> _Call[RunView]:
    return _Call("GET", f"/v1/workflows/{run_id}", RunView.model_validate)


def _cancel_call(run_id: str) -> _Call[RunView]:
    return _Call("POST", f"/v1/workflows/{run_id}/cancel", RunView.model_validate)


class Orchestrator:
    """Runs workflows through a `ReachClient` (its connections, key and hop budget)."""

    def __init__(self, client: ReachClient) -> None:
        self.client = client

    async def run(
        self,
        workflow: str | Mapping[str, Any] | Any,
        input: Mapping[str, Any] | None = None,
        *,
        wait_s: float | None = DEFAULT_WAIT_S,
        **options: Any,
    ) -> RunView:
        """Run a workflow and return it once it ended (`ok`, `partial`, `error`).

        `options` are the run's other fields (`request_id`, `context_id`, `deadline_s`,
        `max_hop`, `mode`). A run that is parked (or asynchronous) is polled up to
        `wait_s`; if it has not ended by then, the view as it stands is returned
        (`status` says `parked` or `running`): poll it later with `get`.
        """
        view = await self.client._send(_run_call(workflow, input, options))
        deadline = None if wait_s is None else time.monotonic() + wait_s
        pause = POLL_FIRST_S
        while not view.is_final and options.get("mode") != "async":
            if deadline is not None and time.monotonic() + pause > deadline:
                break
            await asyncio.sleep(pause)
            pause = min(POLL_MAX_S, pause * 2)
            view = await self.get(view.run_id)
        return view

    async def get(self, run_id: str) -> RunView:
        """One of the caller's runs as it stands."""
        return await self.client._send(_get_call(run_id))

    async def cancel(self, run_id: str) -> RunView:
        """Cancel one of the caller's runs: no step starts after this returns; steps in
        flight finish. The view as it stood (poll `get` for the `cancelled` end);
        `Conflict` (code `run_ended`) once the run has ended."""
        return await self.client._send(_cancel_call(run_id))

    async def save(self, definition: Mapping[str, Any]) -> dict[str, Any]:
        """Save a named workflow (`name`, `inputs`, `steps`, ...) for `run(name, input)`."""
        return await self.client._send(_save_call(definition))


class SyncOrchestrator:
    """Blocking twin of `Orchestrator`, over a `SyncReachClient`."""

    def __init__(self, client: SyncReachClient) -> None:
        self.client = client

    def run(
        self,
        workflow: str | Mapping[str, Any] | Any,
        input: Mapping[str, Any] | None = None,
        *,
        wait_s: float | None = DEFAULT_WAIT_S,
        **options: Any,
    ) -> RunView:
        """`Orchestrator.run`, blocking."""
        view = self.client._send(_run_call(workflow, input, options))
        deadline = None if wait_s is None else time.monotonic() + wait_s
        pause = POLL_FIRST_S
        while not view.is_final and options.get("mode") != "async":
            if deadline is not None and time.monotonic() + pause > deadline:
                break
            time.sleep(pause)
            pause = min(POLL_MAX_S, pause * 2)
            view = self.get(view.run_id)
        return view

    def get(self, run_id: str) -> RunView:
        return self.client._send(_get_call(run_id))

    def cancel(self, run_id: str) -> RunView:
        return self.client._send(_cancel_call(run_id))

    def save(self, definition: Mapping[str, Any]) -> dict[str, Any]:
        return self.client._send(_save_call(definition))


def _save_call(definition: Mapping[str, Any]) -> _Call[dict[str, Any]]:
    return _Call("POST", "/v1/workflows", dict, dict(definition))

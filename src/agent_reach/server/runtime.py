"""Everything one running coordinator holds, opened and closed in one place."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from starlette.requests import Request

from agent_reach.backends.bundle import Backends
from agent_reach.backends.selection import open_backends
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.invoke.invoker import Invoker
from agent_reach.invoke.transports import Transports, open_transports
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.registry.service import Registry
from agent_reach.routing.affinity import AffinityTable
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.policy_source import PolicySource
from agent_reach.routing.service import RoutingService


@dataclass(slots=True)
class Runtime:
    """The coordinator's parts, wired together; the app's lifespan owns it."""

    settings: Settings
    clock: Clock
    node_id: str
    backends: Backends
    registry: Registry
    transports: Transports
    routing: RoutingService
    invoker: Invoker
    policy: PolicySource


@asynccontextmanager
async def open_runtime(
    settings: Settings, clock: Clock, policy: PolicySource
) -> AsyncIterator[Runtime]:
    """Open backends and clients, start the registry; close all of it on exit."""
    node_id = uuid.uuid4().hex[:12]
    decision_log = DecisionLog(settings.decision_log, clock)
    backends = await open_backends(settings, clock)
    transports = open_transports()
    registry = Registry(
        backends.registry, clock, node_id=node_id, resync_s=settings.registry_resync_s
    )
    routing = RoutingService(
        registry.index,
        policy,
        clock,
        AffinityTable(),
        MatchingPipeline(registry.index, clock, settings),
        decision_log,
    )
    runtime = Runtime(
        settings=settings,
        clock=clock,
        node_id=node_id,
        backends=backends,
        registry=registry,
        transports=transports,
        routing=routing,
        invoker=Invoker(routing, registry.index, transports, clock),
        policy=policy,
    )
    await registry.start()
    policy_watch = asyncio.create_task(policy.watch(settings.policy_reload_s), name="policy-watch")
    try:
        yield runtime
    finally:
        policy_watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await policy_watch
        await registry.stop()
        await transports.aclose()
        await backends.aclose()
        decision_log.close()


def runtime_of(request: Request) -> Runtime:
    """The runtime of the app serving `request`."""
    runtime: Runtime = request.app.state.runtime
    return runtime

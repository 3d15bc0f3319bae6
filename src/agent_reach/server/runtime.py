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
from agent_reach.context.service import ContextService
from agent_reach.invoke.answers import AnswerMemory
from agent_reach.invoke.attempts import AttemptLoop
from agent_reach.invoke.budget import RetryBudget
from agent_reach.invoke.deadletters import DeadLetters
from agent_reach.invoke.idempotency import IdempotencyGuard
from agent_reach.invoke.service import InvokeService
from agent_reach.invoke.tasks import TaskBoard
from agent_reach.invoke.transports import Transports, open_transports
from agent_reach.learning.service import LearningService
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.otel import OtlpExport
from agent_reach.observability.trace_store import TraceStore
from agent_reach.observability.tracing import Tracer
from agent_reach.orchestration.board import RunBoard
from agent_reach.orchestration.fanout import Fanout
from agent_reach.orchestration.running import RunExecutor
from agent_reach.orchestration.service import Orchestrator
from agent_reach.orchestration.steps import StepRunner
from agent_reach.registry.index import Instance
from agent_reach.registry.monitor import HealthMonitor
from agent_reach.registry.service import Registry
from agent_reach.routing.affinity import AffinityTable
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.policy_source import PolicySource
from agent_reach.routing.service import RoutingService
from agent_reach.security.service import SecurityService, open_security


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
    invoke: InvokeService
    health: HealthMonitor
    tasks: TaskBoard
    dead_letters: DeadLetters
    policy: PolicySource
    metrics: Metrics
    tracer: Tracer
    contexts: ContextService
    security: SecurityService
    orchestrator: Orchestrator
    learning: LearningService


@asynccontextmanager
async def open_runtime(
    settings: Settings, clock: Clock, policy: PolicySource
) -> AsyncIterator[Runtime]:
    """Open backends and clients, start the background loops; close all of it on exit."""
    node_id = uuid.uuid4().hex[:12]
    metrics = Metrics()
    export = (
        OtlpExport(settings.otlp_endpoint, clock, service_name="agent-reach", node_id=node_id)
        if settings.otlp_endpoint
        else None
    )
    tracer = Tracer(TraceStore(settings.trace_store_size, clock), clock, export)
    backends = await open_backends(settings, clock)
    security = await open_security(settings, backends, policy, clock, metrics)
    transports = open_transports(security.guard.dial_address)
    decision_log = DecisionLog(settings.decision_log, clock)
    registry = Registry(
        backends.registry, clock, node_id=node_id, resync_s=settings.registry_resync_s
    )

    async def probe(instance: Instance) -> bool:
        spec = instance.spec.transport
        return await transports.get(spec.type).probe(spec, timeout_s=settings.probe_timeout_s)

    health = HealthMonitor(registry, probe, metrics, interval_s=settings.probe_interval_s)
    learning = LearningService(backends.learning, registry.index, policy, clock, metrics)
    routing = RoutingService(
        registry.index,
        policy,
        clock,
        AffinityTable(),
        MatchingPipeline(registry.index, clock, settings, learning.snapshot),
        decision_log,
        tracer=tracer,
        metrics=metrics,
        record_text=learning.record_text,
    )
    budget = RetryBudget()
    tasks = TaskBoard(
        backends.tasks,
        backends.queues,
        registry,
        clock,
        metrics,
        node_id,
        settings.task_ttl_s,
        settings.task_stale_s,
    )
    dead_letters = DeadLetters(backends.journal, clock, metrics)
    answers = AnswerMemory(backends.answers, settings.answer_max_bytes)
    contexts = await ContextService.open(backends.contexts, clock, settings)
    invoke = InvokeService(
        routing=routing,
        attempts=AttemptLoop(registry.index, transports, health, budget, clock, metrics, tracer),
        guard=IdempotencyGuard(backends.idempotency, clock),
        tasks=tasks,
        dead_letters=dead_letters,
        answers=answers,
        health=health,
        budget=budget,
        clock=clock,
        metrics=metrics,
        tracer=tracer,
        security=security,
        contexts=contexts,
        learning=learning,
    )
    orchestrator = _orchestration(settings, node_id, backends, registry, invoke, policy)
    runtime = Runtime(
        settings=settings,
        clock=clock,
        node_id=node_id,
        backends=backends,
        registry=registry,
        transports=transports,
        routing=routing,
        invoke=invoke,
        health=health,
        tasks=tasks,
        dead_letters=dead_letters,
        policy=policy,
        metrics=metrics,
        tracer=tracer,
        contexts=contexts,
        security=security,
        orchestrator=orchestrator,
        learning=learning,
    )
    await registry.start()
    routing.matching.prepare(policy())  # the sentence encoder loads while agents register
    loops = [
        asyncio.create_task(policy.watch(settings.policy_reload_s), name="policy-watch"),
        asyncio.create_task(health.run(), name="health-monitor"),
        asyncio.create_task(tasks.run(invoke.run_task, invoke.expire_task), name="task-board"),
        asyncio.create_task(answers.run(), name="answer-memory"),
        asyncio.create_task(decision_log.run(), name="decision-log"),
        asyncio.create_task(contexts.sweeper.run(), name="context-sweeper"),
        asyncio.create_task(orchestrator.board.run(), name="run-board"),
        asyncio.create_task(learning.run(), name="learned-examples"),
        asyncio.create_task(routing.matching.watch(policy), name="matcher-refit"),
    ]
    try:
        yield runtime
    finally:
        for loop in loops:
            loop.cancel()
        for loop in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        await registry.stop()
        await routing.matching.aclose()
        await transports.aclose()
        await backends.aclose()
        await decision_log.aclose()
        if export is not None:
            await asyncio.to_thread(export.close)


def _orchestration(
    settings: Settings,
    node_id: str,
    backends: Backends,
    registry: Registry,
    invoke: InvokeService,
    policy: PolicySource,
) -> Orchestrator:
    """Workflows on top of the invoke path; text fan-out handed back to the invoke path."""
    clock, metrics, tracer = invoke.clock, invoke.metrics, invoke.tracer
    steps = StepRunner(invoke, invoke.tasks, clock, tracer, metrics)
    executor = RunExecutor(steps, invoke.contexts, policy, clock, tracer, metrics)
    board = RunBoard(
        backends.runs,
        backends.queues,
        registry,
        executor,
        clock,
        metrics,
        tracer,
        node_id,
        settings.task_ttl_s,
        settings.task_stale_s,
    )
    orchestrator = Orchestrator(board, backends.workflows, invoke.contexts, policy, clock)
    invoke.fanout = Fanout(invoke, invoke.routing, orchestrator).answer
    return orchestrator


def runtime_of(request: Request) -> Runtime:
    """The runtime of the app serving `request`."""
    runtime: Runtime = request.app.state.runtime
    return runtime

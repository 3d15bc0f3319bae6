"""Everything one running coordinator holds, opened and closed in one place."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from starlette.requests import Request

from agent_reach.backends.bundle import Backends
from agent_reach.backends.selection import open_backends
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.context.service import ContextService
from agent_reach.errors import StoreUnavailable
from agent_reach.identity.tls import delivery_context
from agent_reach.invoke.admission import Admission
from agent_reach.invoke.answer_memory import AnswerMemory
from agent_reach.invoke.attempts import AttemptLoop
from agent_reach.invoke.budget import RetryBudget
from agent_reach.invoke.claim import ClaimStage
from agent_reach.invoke.deadletters import DeadLetters
from agent_reach.invoke.dispatch import Dispatcher
from agent_reach.invoke.finish import Finisher
from agent_reach.invoke.gate import AccessGate
from agent_reach.invoke.idempotency import IdempotencyGuard
from agent_reach.invoke.intent_delivery import intent_asker
from agent_reach.invoke.negotiation import open_negotiation
from agent_reach.invoke.parking import Parking
from agent_reach.invoke.planning import PlanStage
from agent_reach.invoke.route import RouteStage
from agent_reach.invoke.service import InvokeService
from agent_reach.invoke.similar_answers import SimilarAnswers
from agent_reach.invoke.spending import MeshSpending
from agent_reach.invoke.tasks import TaskBoard
from agent_reach.invoke.transports import Transports
from agent_reach.learning.service import LearningService
from agent_reach.liveness import CoordinatorLiveness
from agent_reach.mesh.quality import QualityLedger
from agent_reach.mesh.service import Mesh, open_mesh
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.events import EventFeed
from agent_reach.observability.loop_lag import LoopLagMonitor
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.otel import OtlpExport
from agent_reach.observability.trace_store import TraceStore
from agent_reach.observability.tracing import Tracer
from agent_reach.orchestration.board import RunBoard
from agent_reach.orchestration.fanout import Fanout
from agent_reach.orchestration.running import RunExecutor
from agent_reach.orchestration.service import Orchestrator
from agent_reach.orchestration.steps import StepRunner
from agent_reach.policy.source import PolicySource
from agent_reach.registry.fleet_load import FleetLoad
from agent_reach.registry.history import InstanceHistory
from agent_reach.registry.index import Instance
from agent_reach.registry.monitor import HealthMonitor
from agent_reach.registry.scale import FleetWatcher
from agent_reach.registry.service import Registry
from agent_reach.registry.webhook import ScaleWebhook
from agent_reach.routing.affinity import AffinityTable
from agent_reach.routing.intent_parser import IntentParser
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.service import RoutingService
from agent_reach.security.service import SecurityService, open_security
from agent_reach.server.transports import follow_tool_lists, open_transports
from agent_reach.troubleshooting.journal import RequestJournal
from agent_reach.troubleshooting.shared import SharedJournal


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
    gate: AccessGate  # may this caller use this capability: the invoke path's answer, everywhere
    history: InstanceHistory
    journal: RequestJournal
    orchestrator: Orchestrator
    learning: LearningService
    events: EventFeed
    mesh: Mesh
    quality: QualityLedger


@asynccontextmanager
async def open_runtime(
    settings: Settings, clock: Clock, policy: PolicySource
) -> AsyncIterator[Runtime]:
    """Open backends and clients, start the background loops; close all of it on exit."""
    node_id = settings.node_id or uuid.uuid4().hex[:12]
    tls = delivery_context(settings)  # a bad AR_AGENT_* file fails before anything opens
    metrics = Metrics()
    export = (
        OtlpExport(settings.otlp_endpoint, clock, service_name="agent-reach", node_id=node_id)
        if settings.otlp_endpoint
        else None
    )
    tracer = Tracer(TraceStore(settings.trace_store_size, clock, node_id), clock, export)
    backends = await open_backends(settings, clock)
    try:
        await policy.attach(backends.policy)
    except BaseException:
        await backends.aclose()
        raise
    registry = Registry(
        backends.registry,
        clock,
        node_id=node_id,
        resync_s=settings.registry_resync_s,
        shared=backends.is_shared,
    )
    # The quality ledger observes the mesh (bounced chains), negotiation (declined
    # offers), the attempts (their outcomes) and the finish (who served an answer).
    quality = QualityLedger(backends.quality, registry.index, policy, clock)
    mesh = open_mesh(settings, backends, registry.index, policy, clock, quality)
    security = await open_security(settings, backends, policy, clock, metrics, mesh)
    transports = open_transports(security.guard.dial_address, tls)
    decision_log = DecisionLog(settings.decision_log, clock)

    follow_tool_lists(transports, registry)  # an MCP server's new tools are new capabilities

    async def probe(instance: Instance) -> bool:
        spec = instance.spec.transport
        return await transports.get(spec.type).probe(spec, timeout_s=settings.probe_timeout_s)

    health = HealthMonitor(registry, probe, metrics, interval_s=settings.probe_interval_s)
    learning = LearningService(backends.learning, registry.index, policy, clock, metrics)
    # The intent parser asks its agent through the invoke path built below, which routes
    # with it (routing -> parser -> invoke -> routing): the loop closes at call time.
    intent = IntentParser(intent_asker(lambda: steps_path), clock)
    routing = RoutingService(
        registry.index,
        policy,
        clock,
        AffinityTable(),
        MatchingPipeline(
            registry.index,
            clock,
            settings,
            learning.snapshot,
            embeddings=backends.embeddings,
            metrics=metrics,
        ),
        decision_log,
        tracer=tracer,
        metrics=metrics,
        record_text=learning.record_text,
        catch_up=registry.catch_up if registry.shared else None,
        intent=intent,
    )
    budget = RetryBudget()
    liveness = CoordinatorLiveness(backends.liveness, node_id, settings.liveness_ttl_s, clock)
    with contextlib.suppress(StoreUnavailable):  # the beat loop tries again
        await liveness.beat()
    tasks = TaskBoard(
        backends.tasks,
        backends.queues,
        registry,
        clock,
        metrics,
        node_id,
        settings.task_ttl_s,
        settings.task_stale_s,
        liveness=liveness,
    )
    dead_letters = DeadLetters(backends.journal, clock, metrics)
    answers = AnswerMemory(backends.answers, settings.answer_max_bytes, registry.index)
    contexts = await ContextService.open(backends.contexts, clock, settings)
    similar = SimilarAnswers(policy, metrics)
    history = InstanceHistory(registry.index, clock)
    shared = SharedJournal(backends.why, history) if backends.why is not None else None
    journal = RequestJournal(clock, node_id=node_id, shared=shared)
    negotiation = open_negotiation(
        registry.index, security.guard, tls, backends.mesh, policy, clock, metrics, quality
    )
    attempts = AttemptLoop(
        registry.index, transports, health, budget, clock, metrics, tracer, quality
    )
    guard = IdempotencyGuard(backends.idempotency, clock, liveness)
    gate = AccessGate(security, contexts, clock)
    # The invoke path without fan-out: workflow steps and fan-out's own parts run on it.
    steps_path = InvokeService(
        security=security,
        admission=Admission(settings.max_in_flight, policy, answers, metrics),
        gate=gate,
        claim=ClaimStage(guard),
        route=RouteStage(routing, gate, decision_log),
        plan=PlanStage(registry.index),
        dispatch=Dispatcher(
            attempts,
            routing,
            gate,
            contexts,
            metrics,
            learning,
            spending=MeshSpending(mesh, clock),
            negotiation=negotiation,
        ),
        finish=Finisher(
            routing=routing,
            guard=guard,
            answers=answers,
            similar=similar,
            clock=clock,
            metrics=metrics,
            tracer=tracer,
            journal=journal,
            quality=quality,
        ),
        parking=Parking(
            index=registry.index,
            tasks=tasks,
            health=health,
            answers=answers,
            similar=similar,
            switch=mesh.switch,
            clock=clock,
            metrics=metrics,
            tracer=tracer,
        ),
        tasks=tasks,
        dead_letters=dead_letters,
        budget=budget,
        policy=policy,
        clock=clock,
        metrics=metrics,
        tracer=tracer,
    )
    orchestrator = _orchestration(
        settings, node_id, backends, registry, steps_path, contexts, policy, liveness
    )
    invoke = steps_path.with_fanout(Fanout(steps_path, routing, orchestrator).answer)
    events = EventFeed(clock)
    webhook_client = httpx.AsyncClient() if settings.scale_webhook else None
    fleet = FleetWatcher(
        registry.index,
        clock,
        events,
        policy,
        backends.idempotency,
        _scale_webhook(settings, webhook_client),
        interval_s=settings.scale_check_s,
    )
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
        gate=gate,
        history=history,
        journal=journal,
        orchestrator=orchestrator,
        learning=learning,
        events=events,
        mesh=mesh,
        quality=quality,
    )
    await registry.start()
    await mesh.switch.start()
    await quality.start()
    routing.matching.prepare(policy())  # the sentence encoder loads while agents register
    loops = [
        asyncio.create_task(policy.watch(settings.policy_reload_s), name="policy-watch"),
        asyncio.create_task(health.run(), name="health-monitor"),
        asyncio.create_task(tasks.run(invoke.run_task, invoke.expire_task), name="task-board"),
        asyncio.create_task(answers.run(), name="answer-memory"),
        asyncio.create_task(decision_log.run(), name="decision-log"),
        asyncio.create_task(contexts.sweeper.run(), name="context-sweeper"),
        asyncio.create_task(history.run(), name="instance-history"),
        asyncio.create_task(similar.run(), name="similar-answers"),
        asyncio.create_task(LoopLagMonitor(clock, metrics).run(), name="loop-lag"),
        asyncio.create_task(orchestrator.board.run(), name="run-board"),
        asyncio.create_task(learning.run(), name="learned-examples"),
        asyncio.create_task(routing.matching.watch(policy), name="matcher-refit"),
        asyncio.create_task(fleet.run(), name="fleet-watcher"),
        asyncio.create_task(liveness.run(), name="coordinator-liveness"),
    ]
    if shared is not None:
        loops.append(asyncio.create_task(shared.run(), name="shared-journal"))
    if backends.is_shared:  # alone, a coordinator's own counts are the fleet's
        fleet_load = FleetLoad(registry.index, backends.fleet_load, node_id)
        loops.append(asyncio.create_task(fleet_load.run(), name="fleet-load"))
    try:
        yield runtime
    finally:
        for loop in loops:
            loop.cancel()
        for loop in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        await mesh.switch.stop()
        await quality.stop()
        await registry.stop()
        await routing.matching.aclose()
        await transports.aclose()
        await negotiation.aclose()
        await security.aclose()
        await backends.aclose()
        await decision_log.aclose()
        if webhook_client is not None:
            await webhook_client.aclose()
        if export is not None:
            await asyncio.to_thread(export.close)


def _scale_webhook(settings: Settings, client: httpx.AsyncClient | None) -> ScaleWebhook | None:
    if settings.scale_webhook is None or client is None:
        return None
    secret = settings.scale_webhook_secret
    return ScaleWebhook(
        settings.scale_webhook,
        None if secret is None else secret.get_secret_value().encode(),
        client,
    )


def _orchestration(
    settings: Settings,
    node_id: str,
    backends: Backends,
    registry: Registry,
    invoke: InvokeService,
    contexts: ContextService,
    policy: PolicySource,
    liveness: CoordinatorLiveness,
) -> Orchestrator:
    """Workflows on top of the invoke path (their steps run on `invoke`)."""
    clock, metrics, tracer = invoke.clock, invoke.metrics, invoke.tracer
    steps = StepRunner(invoke, invoke.tasks, clock, tracer, metrics)
    executor = RunExecutor(steps, contexts, policy, clock, tracer, metrics)
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
        liveness=liveness,
    )
    return Orchestrator(board, backends.workflows, contexts, policy, clock, invoke.gate.authorize)


def runtime_of(request: Request) -> Runtime:
    """The runtime of the app serving `request`."""
    runtime: Runtime = request.app.state.runtime
    return runtime

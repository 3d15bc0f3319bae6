"""The bundle of stores one coordinator uses, and who closes them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent_reach.backends.protocols import (
    A2AStore,
    AnswerCache,
    ContextStore,
    EmbeddingStore,
    FleetLoadStore,
    IdempotencyStore,
    JournalStore,
    KeySetStore,
    KeyStore,
    LearningStore,
    LivenessStore,
    MeshStore,
    PolicyStore,
    QualityStore,
    QueueStore,
    QuotaStore,
    RegistryStore,
    RunStore,
    TaskStore,
    WhyStore,
    WorkflowStore,
)


@dataclass(slots=True)
class Backends:
    """Every store of one backend; `is_shared` when other coordinators see the same state."""

    name: str
    registry: RegistryStore
    idempotency: IdempotencyStore
    tasks: TaskStore
    queues: QueueStore
    journal: JournalStore
    answers: AnswerCache
    keys: KeyStore
    keysets: KeySetStore
    quotas: QuotaStore
    contexts: ContextStore
    fleet_load: FleetLoadStore
    runs: RunStore
    workflows: WorkflowStore
    learning: LearningStore
    policy: PolicyStore
    mesh: MeshStore
    quality: QualityStore
    a2a: A2AStore
    liveness: LivenessStore
    is_shared: bool = False
    # card-text vectors of a remote encoder; None: each coordinator keeps its own in memory
    embeddings: EmbeddingStore | None = None
    why: WhyStore | None = None  # shared backends only: alone, the coordinator's journal is all
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def aclose(self) -> None:
        """Close pools and connections; safe to call twice."""
        closers, self.closers = self.closers, []
        for close in reversed(closers):
            await close()

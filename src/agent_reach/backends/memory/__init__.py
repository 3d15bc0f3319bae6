"""The embedded default: every store in this process's memory, state dies with it."""

from __future__ import annotations

from agent_reach.backends.bundle import Backends
from agent_reach.backends.memory.a2a import MemoryA2AStore
from agent_reach.backends.memory.contexts import MemoryContextStore
from agent_reach.backends.memory.embeddings import MemoryEmbeddingStore
from agent_reach.backends.memory.fleet_load import MemoryFleetLoadStore
from agent_reach.backends.memory.idempotency import MemoryIdempotencyStore
from agent_reach.backends.memory.journal import MemoryJournalStore
from agent_reach.backends.memory.keys import MemoryKeyStore
from agent_reach.backends.memory.learning import MemoryLearningStore
from agent_reach.backends.memory.liveness import MemoryLivenessStore
from agent_reach.backends.memory.mesh import MemoryMeshStore
from agent_reach.backends.memory.policy import MemoryPolicyStore
from agent_reach.backends.memory.quality import MemoryQualityStore
from agent_reach.backends.memory.queues import MemoryQueueStore
from agent_reach.backends.memory.quotas import MemoryQuotaStore
from agent_reach.backends.memory.registry import MemoryRegistryStore
from agent_reach.backends.memory.runs import MemoryRunStore, MemoryWorkflowStore
from agent_reach.backends.memory.tasks import (
    MemoryAnswerCache,
    MemoryKeySetStore,
    MemoryTaskStore,
)
from agent_reach.clock import Clock
from agent_reach.config import Settings


async def open_memory(settings: Settings, clock: Clock) -> Backends:
    """Fresh in-memory stores."""
    return Backends(
        name="memory",
        registry=MemoryRegistryStore(clock),
        idempotency=MemoryIdempotencyStore(clock, settings.idempotency_memory_bytes),
        tasks=MemoryTaskStore(clock),
        queues=MemoryQueueStore(clock),
        journal=MemoryJournalStore(),
        answers=MemoryAnswerCache(clock, settings.answer_memory_bytes),
        keys=MemoryKeyStore(),
        keysets=MemoryKeySetStore(clock),
        quotas=MemoryQuotaStore(clock),
        contexts=MemoryContextStore(clock),
        fleet_load=MemoryFleetLoadStore(clock),
        runs=MemoryRunStore(clock),
        workflows=MemoryWorkflowStore(),
        learning=MemoryLearningStore(clock),
        policy=MemoryPolicyStore(),
        mesh=MemoryMeshStore(clock),
        quality=MemoryQualityStore(clock),
        embeddings=MemoryEmbeddingStore(),
        a2a=MemoryA2AStore(clock),
        liveness=MemoryLivenessStore(clock),
    )

"""Negotiation: before a delivery, the best candidates are asked for an offer.

For a capability with instances that registered `negotiate: {"endpoint", "timeout_ms"}`,
the coordinator asks up to `[delegation] offers` of them — the best-scored first — at
once, each within its own `timeout_ms` and the request's deadline:
`POST {"capability", "text", "params", "deadline_ms", "budget_left"}` (never the
payload, the context or the delegation token), answered `{"accept", "eta_ms",
"confidence", "cost"}`. An offer executes nothing, so asking several is safe; the
delivery then goes to one instance, once, chosen by

    combined = score × confidence
               − LATE_PENALTY × min(1, (eta_ms − deadline_ms) / deadline_ms)
               − COST_PENALTY × cost / budget_left

(`confidence` 1 when not given; the eta term only when `eta_ms` passes the deadline
left, the cost term only with a budget). An offer whose cost passes the budget left is refused
(`over_budget`). Instances that do not negotiate take part with their score as it is;
those that declined, did not answer in time, failed to answer, were over budget, or
negotiate but were beyond the `offers` asked, get no delivery (the attempt loop skips
every candidate whose `offer` does not stand). When nobody is left, the generic agents
take the request; without a live one it is 503 `all_declined` with the offers.

Every offer's outcome is counted (`agent_reach_offers_total{outcome}`) and shown on its
candidate in the decision; declines and missed offers go to the quality ledger when
one is given (`ledger`).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson
from prometheus_client import Counter
from pydantic import ValidationError

from agent_reach.backends.protocols import MeshStore
from agent_reach.clock import Clock
from agent_reach.errors import AllDeclined
from agent_reach.mesh.service import BUDGET_TTL_S, OutcomeLedger
from agent_reach.model.agents import AgentSpec
from agent_reach.model.decisions import Candidate, RouteDecision
from agent_reach.model.offers import Negotiated, OfferAnswer, OfferOutcome
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import Instance, RegistryIndex
from agent_reach.security.endpoints import EndpointGuard
from agent_reach.wire import pool
from agent_reach.wire.urls import check_http_url

if TYPE_CHECKING:
    from agent_reach.invoke.plan import DeliveryPlan
    from agent_reach.invoke.tasks import TaskEntry

LATE_PENALTY = 0.5  # an offer that would miss the whole deadline loses half a score
COST_PENALTY = 0.25  # an offer that would spend all the budget left loses a quarter
OFFER_MAX_BYTES = 64 * 1024  # an offer is four numbers
OFFER_CONNECTIONS = 64  # per agent origin: offers are few and short
_HEADERS = (("content-type", "application/json"), ("accept", "application/json"))


async def check_negotiate(spec: AgentSpec, guard: EndpointGuard) -> None:
    """A registration's offer endpoint: an http(s) URL on an allowed network, as every
    other endpoint (checked again at every dial)."""
    if spec.negotiate is None:
        return
    field = "negotiate.endpoint"
    check_http_url(spec.negotiate.endpoint, field)
    await guard.check_url(spec.negotiate.endpoint, field)


def combined_score(
    score: float, offer: OfferOutcome, deadline_ms: int, budget_left: float | None
) -> float:
    """The score an accepted offer is ranked by (the module's formula)."""
    combined = score * (1.0 if offer.confidence is None else offer.confidence)
    if offer.eta_ms is not None and offer.eta_ms > deadline_ms:
        combined -= LATE_PENALTY * min(1.0, (offer.eta_ms - deadline_ms) / max(deadline_ms, 1))
    if budget_left is not None and offer.cost:
        combined -= COST_PENALTY * (offer.cost / budget_left if budget_left > 0 else 1.0)
    return round(combined, 6)


class Negotiation:
    """Asks a negotiated capability's best candidates for offers and picks by them."""

    def __init__(
        self,
        index: RegistryIndex,
        client: pool.HttpPool,
        store: MeshStore,
        policy: Callable[[], Policy],
        clock: Clock,
        metrics: Metrics,
        ledger: OutcomeLedger | None = None,
    ) -> None:
        self._index = index
        self._client = client
        self._store = store
        self._policy = policy
        self._clock = clock
        self._negotiated: tuple[int, frozenset[str]] = (-1, frozenset())
        self.offers = Counter(
            "agent_reach_offers",
            "Offers asked before a delivery, by outcome",
            ["outcome"],
            registry=metrics.registry,
        )
        self._ledger = ledger  # the quality ledger: a declined or missed offer is an outcome

    def applies(self, decision: RouteDecision) -> bool:
        """Whether the decision's capability has an instance that negotiates (cheap: the
        set is rebuilt only when a registration changed)."""
        capability = decision.capability
        if capability is None or decision.rule == "generic":
            return False
        version, negotiated = self._negotiated
        if version != self._index.version:
            negotiated = frozenset(
                tag
                for instance in self._index.by_id.values()
                if instance.spec.negotiate is not None
                for tag in instance.spec.capabilities
            )
            self._negotiated = (self._index.version, negotiated)
        return capability in negotiated

    async def negotiate(self, task: TaskEntry, plan: DeliveryPlan) -> None:
        """Ask for offers and rewrite `plan.decision`: each candidate's `offer`, the
        instances that may get the delivery first by combined score, the choice.
        Raises `AllDeclined` when nobody may and no generic agent is live.

        A caller's request id that may already have reached an instance goes back there
        first, as it would unasked (`invoke/idempotency.py`): no offers then, or a
        decline would send a request that may have acted to another instance."""
        if plan.owned is not None and plan.owned.sent_to:
            return
        decision = plan.decision
        capability = decision.capability or ""
        own = [c for c in decision.candidates if c.capability == capability]
        own.sort(key=lambda c: c.agent_id != decision.agent_id)  # the router's pick first
        negotiating = [
            (c, i)
            for c in own
            if (i := self._index.by_id.get(c.agent_id)) is not None and i.spec.negotiate
        ]
        asked = negotiating[: self._policy().delegation.offers]
        left_s = max(0.0, plan.deadline - self._clock.monotonic())
        deadline_ms = int(left_s * 1000)
        budget_left = await self._budget_left(task)
        body = orjson.dumps(
            {
                "capability": capability,
                "text": plan.delivery.text,
                "params": plan.delivery.params,
                "deadline_ms": deadline_ms,
                "budget_left": budget_left,
            }
        )
        traceparent = plan.trace.child_traceparent()[1]
        outcomes = await asyncio.gather(
            *(self._ask(instance, body, left_s, traceparent) for _, instance in asked)
        )
        for (candidate, _), offer in zip(asked, outcomes, strict=True):
            if offer.stands and budget_left is not None and (offer.cost or 0.0) > budget_left:
                offer.outcome = "over_budget"
            if offer.stands:
                offer.combined = combined_score(candidate.score, offer, deadline_ms, budget_left)
            candidate.offer = offer
            self._count(candidate.agent_id, offer)
        for candidate, _ in negotiating[len(asked) :]:
            candidate.offer = OfferOutcome("not_asked")
        # Best first; among equals the router's order (the sort is stable).
        takers = sorted((c for c in own if c.offer is None or c.offer.stands), key=_combined)
        turned_down = [c for c in own if c.offer is not None and not c.offer.stands]
        decision.candidates = [
            *takers,
            *turned_down,
            *(c for c in decision.candidates if c.capability != capability),
        ]
        negotiated = Negotiated(
            [c.agent_id for c, _ in asked],
            deadline_ms,
            budget_left,
            [c.agent_id for c in turned_down if c.offer and c.offer.outcome != "not_asked"],
        )
        decision.negotiation = negotiated
        if takers:
            decision.agent_id = takers[0].agent_id
            return
        decision.agent_id = None
        now = self._clock.monotonic()
        if any(i.is_live(now) for i in self._index.generic):
            negotiated.fallback = "generic"
            return
        raise AllDeclined(
            f"every candidate of {capability!r} turned the request down (declined, no offer "
            "in time, or over budget) and no generic agent is live",
            offers=[{"agent_id": c.agent_id, "offer": c.offer} for c in turned_down],
        )

    async def _ask(
        self, instance: Instance, body: bytes, left_s: float, traceparent: str
    ) -> OfferOutcome:
        """One instance's offer, within its `timeout_ms` and the request's deadline."""
        negotiate = instance.spec.negotiate
        assert negotiate is not None  # only negotiating instances are asked
        timeout_s = min(negotiate.timeout_ms / 1000, left_s)
        started = self._clock.monotonic()
        if timeout_s <= 0:
            return OfferOutcome("timeout", elapsed_ms=0.0)
        try:
            response = await self._client.request(
                "POST",
                negotiate.endpoint,
                headers=(*_HEADERS, ("traceparent", traceparent)),
                body=body,
                timeout_s=timeout_s,
            )
        except (pool.RequestTimeout, pool.ConnectTimedOut):
            return OfferOutcome("timeout", elapsed_ms=self._elapsed_ms(started))
        except (pool.PoolError, ValueError) as exc:
            return OfferOutcome("error", elapsed_ms=self._elapsed_ms(started), error=str(exc))
        elapsed_ms = self._elapsed_ms(started)
        if not 200 <= response.status < 300:
            return OfferOutcome(
                "error",
                elapsed_ms=elapsed_ms,
                error=f"the offer endpoint answered {response.status}",
            )
        try:
            answer = OfferAnswer.model_validate_json(response.body)
        except ValidationError as exc:
            return OfferOutcome(
                "error", elapsed_ms=elapsed_ms, error=f"not an offer: {exc.errors()[0]['msg']}"
            )
        return OfferOutcome(
            "accepted" if answer.accept else "declined",
            accept=answer.accept,
            eta_ms=answer.eta_ms,
            confidence=answer.confidence,
            cost=answer.cost,
            elapsed_ms=elapsed_ms,
        )

    async def _budget_left(self, task: TaskEntry) -> float | None:
        """Cost units left in the chain's budget (the root request's `budget`); None
        without a budget. Read without spending (a spend of 0)."""
        chain = task.principal.chain
        limit = chain.budget if chain is not None else task.request.budget
        if limit is None:
            return None
        root = chain.root if chain is not None else task.task_id
        spent = await self._store.spend(root, 0.0, limit, BUDGET_TTL_S)
        return 0.0 if spent is None else max(0.0, limit - spent)

    def _count(self, agent_id: str, offer: OfferOutcome) -> None:
        self.offers.labels(offer.outcome).inc()
        if self._ledger is not None and offer.outcome in ("declined", "timeout"):
            self._ledger.record(agent_id, "declined")

    def _elapsed_ms(self, started: float) -> float:
        return round((self._clock.monotonic() - started) * 1000, 3)

    async def aclose(self) -> None:
        await self._client.aclose()


def _combined(candidate: Candidate) -> float:
    """The sort key of a candidate that may get the delivery: its combined score, negated."""
    offer = candidate.offer
    return -(candidate.score if offer is None or offer.combined is None else offer.combined)


def open_negotiation(
    index: RegistryIndex,
    guard: EndpointGuard,
    ssl_context: ssl.SSLContext | None,
    store: MeshStore,
    policy: Callable[[], Policy],
    clock: Clock,
    metrics: Metrics,
    ledger: OutcomeLedger | None = None,
) -> Negotiation:
    """A coordinator's negotiation, over a small pooled client of its own: the same
    dial-time endpoint guard and TLS context (`identity.tls.delivery_context`) as
    deliveries."""
    client = pool.HttpPool(
        max_connections_per_origin=OFFER_CONNECTIONS,
        max_response_bytes=OFFER_MAX_BYTES,
        resolve=guard.dial_address,
        ssl_context=ssl_context,
    )
    return Negotiation(index, client, store, policy, clock, metrics, ledger)

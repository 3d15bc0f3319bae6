"""The routing service: turn a request into matched capabilities, then into a decision."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from agent_reach.clock import Clock
from agent_reach.model.decisions import RouteDecision, TextMatch
from agent_reach.model.invocations import RouteRequest
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.tracing import Tracer
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.adaptation import WeightLearner
from agent_reach.routing.affinity import AffinityTable
from agent_reach.routing.intent_parser import IntentParser
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.params import extract_params, missing_properties, schema_of
from agent_reach.routing.ranking import CandidateRanking
from agent_reach.routing.router import CapabilityMatch, decide, exact_match

# (request_id, principal, text, chosen capability): remembered so the caller can correct it
TextRecorder = Callable[[str, str, str, str | None], Awaitable[None]]
Allowed = Callable[[str], bool]  # may the caller invoke this capability

MAX_EXACT_CACHED = 100_000  # one small list per registered capability tag
_COLD: frozenset[str] = frozenset()  # no context: no instance is warm for it


class RoutingService:
    """Routes over the live registry index with the policy in force at each call."""

    def __init__(
        self,
        index: RegistryIndex,
        policy: Callable[[], Policy],
        clock: Clock,
        affinity: AffinityTable,
        matching: MatchingPipeline,
        decision_log: DecisionLog,
        *,
        tracer: Tracer,
        metrics: Metrics,
        record_text: TextRecorder | None = None,
        catch_up: Callable[[], Awaitable[None]] | None = None,
        intent: IntentParser | None = None,
    ) -> None:
        self.index = index
        self.policy = policy
        self.clock = clock
        self.affinity = affinity
        self.matching = matching
        self.ranking = CandidateRanking(index, matching)  # `top_k`, `find_tools`
        self.decision_log = decision_log
        self.tracer = tracer
        self.metrics = metrics
        self.record_text = record_text
        self.catch_up = catch_up  # on a shared store: re-read the registry (Registry.catch_up)
        self.adaptation = WeightLearner()
        self._exact: dict[str, list[CapabilityMatch]] = {}
        self._route_seconds = metrics.route_seconds.labels()  # the histogram has no labels
        self.intent = intent  # asks an agent about unsure texts (routing/intent_parser.py)

    def _exact_match(self, capability: str) -> list[CapabilityMatch]:
        """The one-element match list of a named capability, made once per registered tag."""
        matches = self._exact.get(capability)
        if matches is None:
            matches = exact_match(capability)
            if capability in self.index.by_capability and len(self._exact) < MAX_EXACT_CACHED:
                self._exact[capability] = matches
        return matches

    async def route(
        self,
        request: RouteRequest,
        *,
        request_id: str,
        trace_id: str,
        kind: Literal["route", "invoke"] = "route",
        parent_span_id: str | None = None,
        principal: str | None = None,
        allowed: Allowed | None = None,
    ) -> RouteDecision:
        """The explained decision for one request, logged and traced; nothing is invoked.

        `principal` (who asked) is kept with the decision and its span, so each caller
        can be shown its own. A text request is remembered for the policy's
        `learning.correctable_s`, so that `principal` (and nobody else) may correct it
        by `POST /v1/feedback`. Given `allowed`, a text is routed among the capabilities
        it allows only: no other is weighed, listed as a candidate or named in `text`.
        """
        if request.capability:
            await self.caught_up(request.capability)
            return self.route_named(
                request,
                request_id=request_id,
                trace_id=trace_id,
                kind=kind,
                parent_span_id=parent_span_id,
                principal=principal,
            )
        started = self.clock.monotonic()
        policy = self.policy()
        matched = await self.matching.match(request.text or "", policy)
        matches, text = matched.matches, matched.text
        if allowed is not None:
            matches = [m for m in matches if allowed(m.capability)]
            text = _visible(text, allowed)
        note = None
        if self.intent is not None:
            matches, note = await self.intent.refine(
                request.text or "",
                matches,
                policy,
                trace_id=trace_id,
                parent_span_id=parent_span_id,
            )
            if allowed is not None:  # the parser may pick one no matcher had
                matches = [m for m in matches if allowed(m.capability)]
        decision = self._decide(request, matches, policy, text, allowed)
        if note is not None:
            decision.intent = note
        if text is not None and request.text is not None:
            if decision.capability is not None:
                text.params = await self.params_of(decision.capability, request.text)
            if self.record_text is not None and policy.learning.correctable_s > 0:
                await self.record_text(
                    request_id, principal or "", request.text, decision.capability
                )
        self._record(
            decision, request, started, kind, request_id, trace_id, parent_span_id, principal
        )
        self.metrics.recent.decision(
            self.clock.wall(), matches[0].confidence if matches else 0.0, decision.margin
        )
        return decision

    async def caught_up(self, capability: str) -> None:
        """Before a named capability is refused here for want of instances: on a shared
        store, the registry read again (another coordinator may have just stored one)."""
        if self.catch_up is not None and not self.index.by_capability.get(capability):
            await self.catch_up()

    def route_named(
        self,
        request: RouteRequest,
        *,
        request_id: str,
        trace_id: str,
        kind: Literal["route", "invoke"] = "route",
        parent_span_id: str | None = None,
        principal: str | None = None,
    ) -> RouteDecision:
        """`route` for a request that names its capability: nothing to wait for."""
        assert request.capability  # text goes through `route`
        started = self.clock.monotonic()
        matches = self._exact_match(request.capability)
        decision = self._decide(request, matches, self.policy(), None)
        self._record(
            decision, request, started, kind, request_id, trace_id, parent_span_id, principal
        )
        return decision

    def _decide(
        self,
        request: RouteRequest,
        matches: list[CapabilityMatch],
        policy: Policy,
        text: TextMatch | None,
        allowed: Allowed | None = None,
    ) -> RouteDecision:
        now = self.clock.monotonic()
        warm = (
            _COLD
            if request.context_id is None
            else self.affinity.warm_agents(request.context_id, now)
        )
        return decide(
            matches,
            self.index,
            policy,
            now=now,
            warm_agents=warm,
            from_text=request.capability is None,
            text=text,
            weights_of=(
                (lambda tag: self.adaptation.weights(tag, policy))
                if policy.adaptation.enabled
                else None
            ),
            allowed=allowed,
        )

    def _record(
        self,
        decision: RouteDecision,
        request: RouteRequest,
        started: float,
        kind: Literal["route", "invoke"],
        request_id: str,
        trace_id: str,
        parent_span_id: str | None,
        principal: str | None,
    ) -> None:
        """The decision logged, timed and traced."""
        self.decision_log.record(
            decision,
            kind=kind,
            request_id=request_id,
            trace_id=trace_id,
            principal=principal,
            text=request.text,
        )
        self._route_seconds.observe(self.clock.monotonic() - started)
        self.tracer.record(
            "route",
            decision.capability or request.capability or "",
            trace_id=trace_id,
            parent_id=parent_span_id,
            started=started,
            status="ok" if decision.agent_id else decision.rule,
            agent_id=decision.agent_id,
            note=decision.rule,
            principal=principal,
            text=request.text,
        )

    async def params_of(self, capability: str, text: str) -> dict[str, Any] | None:
        """What the capability's `input_schema` pulls out of the text (None without one);
        with the LLM matcher configured, it is asked for the properties still missing."""
        schema = schema_of(self.index, capability)
        if schema is None:
            return None
        params = extract_params(schema, text)
        missing = missing_properties(schema, params)
        llm = self.matching.llm()
        if missing and llm is not None:
            params |= await llm.fill_params(text, missing)
        return params


def _visible(text: TextMatch, allowed: Allowed) -> TextMatch:
    """`text` without the capabilities `allowed` refuses (a copy: the pipeline's may be
    shared): the learned example naming one, and the ones that answered 421."""
    learned = text.learned
    if learned is not None and not allowed(learned["capability"]):
        learned = None
    not_mine = [c for c in text.not_mine if allowed(c)]
    if learned is text.learned and len(not_mine) == len(text.not_mine):
        return text
    return dataclasses.replace(text, learned=learned, not_mine=not_mine)

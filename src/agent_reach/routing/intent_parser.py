"""An agent as the intent parser: asked for unsure texts, within a rate budget.

With `intent_parser = "intent.parse"` in the policy, a text whose best match is below
`intent_escalation.below` is delivered to that capability's agent through the normal
delivery path (timeouts, retries, idempotency, the same trace), with the candidate
capabilities in the payload: ``{"text", "candidates": [{"capability", "confidence"}]}``.
It answers ``{"capability": <tag or null>, "confidence": <0..1>}``; its pick then
carries that confidence. Beyond the budget (a token bucket per coordinator) the
matchers' decision stands, and the decision's `intent` says so; so does a failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_reach.clock import Clock
from agent_reach.policy.policy import Policy
from agent_reach.routing.router import CapabilityMatch

# (capability, payload, trace_id, parent span id) -> the agent's result; raises on failure.
AskAgent = Callable[[str, dict[str, Any], str, str | None], Awaitable[Any]]


class IntentParser:
    """Decides whether to ask, asks, and folds the answer into the matches."""

    def __init__(self, ask: AskAgent, clock: Clock) -> None:
        self.ask = ask
        self.clock = clock
        self._tokens = 0.0
        self._at: float | None = None

    async def refine(
        self,
        text: str,
        matches: list[CapabilityMatch],
        policy: Policy,
        *,
        trace_id: str,
        parent_span_id: str | None,
    ) -> tuple[list[CapabilityMatch], dict[str, Any] | None]:
        """The matches to route by, and what the escalation did (None: not asked)."""
        parser = policy.intent_parser
        best = max((m.confidence for m in matches), default=0.0)
        if parser is None or best >= policy.intent_escalation.below:
            return matches, None
        note: dict[str, Any] = {"capability": parser}
        if not self._take(policy):
            return matches, {**note, "outcome": "over_budget"}
        payload = {
            "text": text,
            "candidates": [
                {"capability": m.capability, "confidence": m.confidence}
                for m in matches
                if m.capability != parser
            ],
        }
        try:
            answer = await self.ask(parser, payload, trace_id, parent_span_id)
        except Exception as exc:  # any failure of the parser leaves the matchers' decision
            return matches, {**note, "outcome": "failed", "error": getattr(exc, "code", "error")}
        picked = _pick(answer)
        if picked is None:
            return matches, {**note, "outcome": "no_opinion"}
        tag, confidence = picked
        return _fold(matches, tag, confidence), {**note, "outcome": "answered", "picked": tag}

    def _take(self, policy: Policy) -> bool:
        """One token from this coordinator's bucket; False when the budget is spent."""
        budget = policy.intent_escalation
        now = self.clock.monotonic()
        if self._at is None:
            self._tokens = float(budget.burst)
        else:
            self._tokens = min(budget.burst, self._tokens + (now - self._at) * budget.rate_per_s)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


def _pick(answer: Any) -> tuple[str, float] | None:
    if not isinstance(answer, dict):
        return None
    tag, confidence = answer.get("capability"), answer.get("confidence")
    if not isinstance(tag, str) or isinstance(confidence, bool):
        return None
    if not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        return None
    return tag, float(confidence)


def _fold(matches: list[CapabilityMatch], tag: str, confidence: float) -> list[CapabilityMatch]:
    """The parser's pick at its confidence (added when no matcher had it), best first."""
    folded = [m for m in matches if m.capability != tag]
    earlier = next((m for m in matches if m.capability == tag), None)
    scores = {**(earlier.scores if earlier else {}), "intent_parser": confidence}
    folded.append(CapabilityMatch(tag, confidence, scores))
    return sorted(folded, key=lambda m: m.confidence, reverse=True)

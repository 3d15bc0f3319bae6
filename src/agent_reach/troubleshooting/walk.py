"""The troubleshooting walk of one request, in the original operators' order.

1. routing — was it routed, to whom, why (every candidate and factor);
2. registry — were the chosen and the rejected instances healthy, leased, and how
   their call windows looked at that time;
3. context — what of the context the agent read (fields and sizes; values only for
   principals who may read them);
4. delivery — the attempts, and the agent's answer or error; for a suspended request,
   why no instance took it.

A suspended answer (202) carries no decision and no attempts: the walk reads them from
the request's spans in the trace store (the route span: capability, instance, rule;
one attempt span each), when this coordinator still has them.

Each step gets a verdict: `ok`, `suspect` (looks wrong), `unreachable` (the registry
held the chosen instance, but no attempt could reach it), `failed`, or `not_reached`;
the walk names the first step that is `suspect`, `unreachable` or `failed`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal, Protocol

import orjson

from agent_reach.model.keys import Principal
from agent_reach.registry.history import InstanceSnapshot
from agent_reach.security import ownership
from agent_reach.troubleshooting.journal import ContextRead, JournalEntry

Verdict = Literal["ok", "suspect", "unreachable", "failed", "not_reached"]
WRONG = ("suspect", "unreachable", "failed")  # the verdicts `first_wrong_step` looks for
UNREACHABLE = "agent_unreachable"  # an attempt's outcome when nothing answered at its endpoint
STEPS = ("routing", "registry", "context", "delivery")
LOW_SUCCESS = 0.5  # a call window below this success rate looks wrong
# Errors raised before the router was asked: the walk stops at routing.
_BEFORE_ROUTING = {
    "forbidden": "the caller may not invoke this capability",
    "quota_exceeded": "the caller's quota was used up",
    "hop_limit": "the hop budget was spent before routing",
    "in_progress": "the same request_id was still running",
    "idempotency_key_reused": "the request_id was used before with another body",
    "overloaded": "admission control refused it at once: a limit of requests in flight",
}


class History(Protocol):
    """Instance states in the past: this coordinator's history, or one recorded with the
    answer by the coordinator that served it."""

    def at(self, agent_id: str, wall_time: float) -> InstanceSnapshot | None: ...


def may_walk(principal: Principal, entry: JournalEntry) -> bool:
    """An observability record: its own principal, observers and admins see it; a
    delegated call's, also the agents of its chain (a call at or below their hop)."""
    if ownership.may_see(principal, entry.principal):
        return True
    via = entry.delegation["via"] if entry.delegation is not None else ()
    return any(hop["agent"] == principal.name for hop in via)


def may_read_values(principal: Principal, entry: JournalEntry) -> bool:
    """Context values and results are content, not observability: owner and admins."""
    return ownership.may_use(principal, entry.principal)


def request_spans(trace: dict[str, Any] | None, request_id: str) -> list[dict[str, Any]]:
    """The route and attempt spans of `request_id` in a `TraceStore.get` document, in
    start order: the children of the invoke spans noted with its id."""
    if trace is None:
        return []
    spans = trace["spans"]
    invokes = {s["span_id"] for s in spans if s["kind"] == "invoke" and s["note"] == request_id}
    return [s for s in spans if s["parent_id"] in invokes and s["kind"] in ("route", "attempt")]


def walk(
    entry: JournalEntry,
    history: History,
    principal: Principal,
    spans: list[dict[str, Any]] | None = None,
    trace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The four steps of `entry`, with the first one that looks wrong; the instances'
    states come from the history recorded with the entry when it has one. `spans` (from
    `request_spans`) stand in for the decision and attempts an answer does not carry;
    `trace` (as the principal may see it) gives the calls agents handed on under it."""
    if entry.recorded is not None:
        history = entry.recorded
    body = entry.body()
    error = body.get("error") if isinstance(body.get("error"), dict) else None
    route = body.get("route") if isinstance(body.get("route"), dict) else None
    if route is None and error is not None and isinstance(error.get("route"), dict):
        route = error["route"]
    if route is None and error is None and spans:
        route = _route_of(spans)
        body.setdefault("attempts", _attempts_of(spans))
    show_values = may_read_values(principal, entry)
    steps = [
        _routing(route, error, body),
        _registry(route, entry, history, (error or body).get("attempts") or []),
        _context(route, body, error, entry, history, show_values),
        _delivery(body, error, show_values),
    ]
    reached = True
    for step in steps:  # a step after one that stopped the request was never reached
        if not reached:
            step["verdict"], step["finding"] = "not_reached", "the request stopped earlier"
        elif step.pop("stops", False):
            reached = False
    first = next((s["step"] for s in steps if s["verdict"] in WRONG), None)
    return {
        "request_id": entry.request_id,
        "trace_id": entry.trace_id,
        "node": entry.node or None,
        "time": entry.time,
        "duration_ms": entry.duration_ms,
        "http_status": entry.answer.status,
        "status": body.get("status", "error" if error else None),
        "first_wrong_step": first,
        "summary": _summary(steps, first),
        "values_shown": show_values,
        "delegation": entry.delegation,
        "handed_on": handed_on(trace, entry.request_id),
        "steps": steps,
    }


def handed_on(trace: dict[str, Any] | None, request_id: str) -> list[dict[str, Any]]:
    """The delegated calls made under `request_id` (at any depth), in start order: who
    handed each on, on whose behalf, and how each hop answered and what it cost."""
    if trace is None:
        return []
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in trace["spans"]:
        children.setdefault(span["parent_id"], []).append(span)
    pending = [
        s["span_id"] for s in trace["spans"] if s["kind"] == "invoke" and s["note"] == request_id
    ]
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    while pending:
        span_id = pending.pop()
        if span_id in seen:
            continue
        seen.add(span_id)
        for child in children.get(span_id, ()):
            pending.append(child["span_id"])
            if child["kind"] == "invoke" and "on_behalf_of" in child:
                found.append(child)
    found.sort(key=lambda s: s["offset_ms"])
    return [
        {
            "request_id": s["note"],
            "capability": s["name"],
            "on_behalf_of": s["on_behalf_of"],
            "via": s["via"],
            "status": s["status"],
            "duration_ms": s["duration_ms"],
            "attempts": [
                {"agent_id": a["agent_id"], "outcome": a["status"], "cost": a.get("cost")}
                for a in children.get(s["span_id"], ())
                if a["kind"] == "attempt"
            ],
        }
        for s in found
    ]


def _route_of(spans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The decision as its route span kept it: capability, instance and rule (the walk
    shows it as `traced`, the step's `decision` staying null)."""
    span = next((s for s in spans if s["kind"] == "route"), None)
    if span is None:
        return None
    capability, agent_id = span["name"], span["agent_id"]
    candidates = [] if agent_id is None else [{"capability": capability, "agent_id": agent_id}]
    return {
        "capability": capability,
        "agent_id": agent_id,
        "rule": span["note"],
        "candidates": candidates,
        "from_trace": True,
    }


def _attempts_of(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each attempt as its span kept it: number, instance, outcome and duration."""
    return [
        {
            "number": s["attempt"],
            "agent_id": s["agent_id"],
            "outcome": s["status"],
            "duration_ms": s["duration_ms"],
        }
        for s in spans
        if s["kind"] == "attempt"
    ]


def _routing(
    route: dict[str, Any] | None, error: dict[str, Any] | None, body: dict[str, Any]
) -> dict[str, Any]:
    step: dict[str, Any] = {"step": "routing", "decision": route}
    if route is not None and route.get("from_trace"):  # no decision kept: what its span says
        step["decision"] = None
        step["traced"] = {k: route[k] for k in ("capability", "agent_id", "rule")}
    degraded = body.get("degraded")
    if route is None and isinstance(degraded, dict):
        finding = f"not routed: a remembered answer at once ({degraded.get('reason')})"
        return {**step, "verdict": "suspect", "finding": finding, "stops": True}
    if route is None and error is None and body.get("status") in ("queued", "suspended"):
        finding = "routed; the decision is not kept with a task, nor is its trace here"
        return {**step, "verdict": "ok", "finding": finding}
    if route is None:
        code = (error or {}).get("code", "unknown")
        why = _BEFORE_ROUTING.get(code, "the request stopped before it was routed")
        message = (error or {}).get("message", "")
        return {**step, "verdict": "failed", "finding": f"{why} ({code}: {message})", "stops": True}
    candidates = route.get("candidates") or []
    rule = route.get("rule")
    if route.get("agent_id") is None:
        reasons = {
            "no_instance": "no live instance of the capability",
            "margin": "the text fit several capabilities too equally to choose",
            "no_match": "the text fit no capability well enough",
        }
        finding = f"not routed: {reasons.get(str(rule), rule)} ({len(candidates)} candidates)"
        return {**step, "verdict": "failed", "finding": finding, "stops": rule != "no_instance"}
    chosen = f"{route['agent_id']} for {route.get('capability')}"
    if rule == "generic":
        finding = f"the router refused to guess ({route.get('refused_by')}); generic {chosen}"
        return {**step, "verdict": "suspect", "finding": finding}
    finding = f"routed to {chosen} by rule {rule}, among {len(candidates)} candidates"
    if route.get("from_trace"):
        finding = f"routed to {chosen} by rule {rule} (as its trace shows)"
    return {**step, "verdict": "ok", "finding": finding}


def _registry(
    route: dict[str, Any] | None,
    entry: JournalEntry,
    history: History,
    attempts: list[dict[str, Any]],
) -> dict[str, Any]:
    step: dict[str, Any] = {"step": "registry", "instances": []}
    if route is None:
        return {**step, "verdict": "not_reached", "finding": "no instance was considered"}
    chosen = route.get("agent_id")
    candidates = route.get("candidates") or []
    instances = []
    for candidate in candidates:
        agent_id = candidate.get("agent_id")
        snapshot = history.at(agent_id, entry.time)
        instances.append(
            {
                "agent_id": agent_id,
                "capability": candidate.get("capability"),
                "role": "chosen" if agent_id == chosen else "rejected",
                "health_factor": (candidate.get("factors") or {}).get("health"),
                "at_the_time": _snapshot(snapshot, entry.time),
            }
        )
    step["instances"] = instances
    if chosen is None:
        verdict: Verdict = "failed" if route.get("rule") == "no_instance" else "ok"
        return {**step, "verdict": verdict, "finding": "no instance was live to take it"}
    mine = next((i for i in instances if i["role"] == "chosen"), None)
    problems = _instance_problems(mine)
    if problems:
        return {**step, "verdict": "suspect", "finding": f"{chosen}: " + "; ".join(problems)}
    state = mine.get("at_the_time") if mine else None
    health = "healthy" if state is None else f"health {state['health']}"
    tried = [a for a in attempts if isinstance(a, dict) and a.get("agent_id") == chosen]
    if tried and all(a.get("outcome") == UNREACHABLE for a in tried):
        last = tried[-1].get("error")
        known = "" if state is None else f" ({health})"  # no state kept: none claimed
        finding = (
            f"{chosen} was leased{known} but unreachable: {_attempts(len(tried))} "
            f"found nothing answering at its endpoint" + (f" ({last})" if last else "")
        )
        return {**step, "verdict": "unreachable", "finding": finding}
    return {**step, "verdict": "ok", "finding": f"{chosen} was leased, {health}"}


def _instance_problems(instance: dict[str, Any] | None) -> list[str]:
    if instance is None:
        return []
    problems = []
    health = instance.get("health_factor")
    state = instance.get("at_the_time")
    if health is not None and health < 1 and not _not_probed_yet(state):
        problems.append(f"suspect when chosen (health factor {health:.2f})")
    if state is not None and not state["sampled_after"]:  # a later sample shows its own outcome
        if state["lease_left_s"] <= 0:
            problems.append("its lease had run out")
        rate = state.get("success_rate")
        if rate is not None and rate < LOW_SUCCESS:
            problems.append(f"success rate {rate:.0%} over its last {state['calls']} calls")
    return problems


def _not_probed_yet(state: dict[str, Any] | None) -> bool:
    """The health factor is as low for an instance no probe has answered yet (`unknown`,
    just registered) as for a suspect one; its recorded state tells them apart. Only a
    new instance has no sample before the request: a first one `healthy` since means it
    was not yet probed then."""
    if state is None:
        return False
    return state["health"] in (("unknown", "healthy") if state["sampled_after"] else ("unknown",))


def _context(
    route: dict[str, Any] | None,
    body: dict[str, Any],
    error: dict[str, Any] | None,
    entry: JournalEntry,
    history: History,
    show_values: bool,
) -> dict[str, Any]:
    step: dict[str, Any] = {"step": "context", "context_id": entry.context_id, "reads": []}
    if entry.context_id is None:
        return {**step, "verdict": "ok", "finding": "the request carried no context"}
    if error is not None and error.get("code") == "unknown_context":
        finding = "the context was missing or expired when the request was delivered"
        return {**step, "verdict": "failed", "finding": finding, "stops": True}
    step["reads"] = [_read(r, show_values) for r in entry.reads]
    agent_id = body.get("agent_id") or (route or {}).get("agent_id")
    snapshot = history.at(agent_id, entry.time) if agent_id else None
    fields = snapshot.context_fields if snapshot else ()
    step["agent_fields"] = list(fields)
    if agent_id is None:
        return {**step, "verdict": "not_reached", "finding": "no agent was given the context"}
    if snapshot is not None and not fields:
        finding = f"{agent_id} declares no context_fields, so it was given no context"
        return {**step, "verdict": "suspect", "finding": finding}
    if not entry.reads:
        finding = f"{agent_id} did not read its context projection"
        return {**step, "verdict": "suspect", "finding": finding}
    seen = {name for read in entry.reads for name in read.sizes}
    missing = [f for f in fields if f.split(".")[0] not in seen]
    if missing:
        finding = f"the agent read the context, but {', '.join(missing)} were not in it"
        return {**step, "verdict": "suspect", "finding": finding}
    return {**step, "verdict": "ok", "finding": f"the agent read {', '.join(sorted(seen))}"}


def _read(read: ContextRead, show_values: bool) -> dict[str, Any]:
    shown: dict[str, Any] = {"time": read.time, "granted": list(read.granted), "sizes": read.sizes}
    if show_values and read.document is not None:
        shown["values"] = orjson.loads(read.document)
    return shown


def _delivery(
    body: dict[str, Any], error: dict[str, Any] | None, show_values: bool
) -> dict[str, Any]:
    attempts = (error or body).get("attempts") or []
    step: dict[str, Any] = {"step": "delivery", "attempts": attempts}
    if error is None:
        status = body.get("status")
        if show_values:
            step["result"] = body.get("result")
        if status == "fallback":
            failed = [a for a in attempts if a.get("outcome") != "ok"]
            finding = f"answered by {body.get('agent_id')} after {len(failed)} failed"
            return {**step, "verdict": "suspect", "finding": finding}
        if status == "suspended":
            return _suspended(step, body)
        if status == "queued":
            return {**step, "verdict": "ok", "finding": "queued: the answer comes as a task"}
        if status == "degraded":
            return {**step, "verdict": "suspect", "finding": "a remembered answer (degraded)"}
        return {**step, "verdict": "ok", "finding": f"{body.get('agent_id')} answered"}
    step["error"] = {k: error.get(k) for k in ("code", "message", "http_status") if k in error}
    if not attempts:
        finding = f"nothing was delivered ({error.get('code')})"
        return {**step, "verdict": "failed", "finding": finding}
    last = attempts[-1]
    finding = f"{_attempts(len(attempts))}; the last, to {last.get('agent_id')}, "
    finding += f"ended {error['code']}"
    if last.get("error"):
        finding += f": {last['error']}"
    return {**step, "verdict": "failed", "finding": finding}


def _suspended(step: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """Every attempt failed, or none could be made: the request waits for an instance."""
    attempts = step["attempts"]
    instances = [i for i in body.get("instances") or [] if isinstance(i, dict)]
    step["instances"] = instances
    if attempts:
        outcomes = ", ".join(f"{a.get('agent_id')} {a.get('outcome')}" for a in attempts)
        finding = f"{_attempts(len(attempts))} failed ({outcomes}), so it was suspended"
    elif "attempts" in body:
        finding = "no instance could be tried, so it was suspended"
    else:  # neither the answer nor a trace here kept them
        finding = "suspended (its attempts are in its trace, not on this coordinator)"
    off = [i for i in instances if isinstance(i.get("disabled"), dict)]
    if off:  # nothing else will bring it back: an admin has to enable it
        finding += "; " + ", ".join(
            f"{i['agent_id']} is disabled (kill switch) by {i['disabled'].get('by')}" for i in off
        )
    finding += ": replayed once an instance answers its probe"
    until, since = body.get("suspended_until"), body.get("created_at")
    if isinstance(until, int | float) and isinstance(since, int | float):
        finding += f", for up to {until - since:.0f} s"
    return {**step, "verdict": "failed", "finding": finding}


def _attempts(count: int) -> str:
    return f"{count} attempt" + ("" if count == 1 else "s")


def _snapshot(snapshot: InstanceSnapshot | None, at: float) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    state = asdict(snapshot)
    state["lease_left_s"] = round(snapshot.lease_until - at, 1)
    state["sampled_after"] = snapshot.time > at  # no sample before the request: the next one
    state["context_fields"] = list(snapshot.context_fields)
    return state


def _summary(steps: list[dict[str, Any]], first: str | None) -> str:
    if first is None:
        return "every step looks right"
    step = next(s for s in steps if s["step"] == first)
    return f"first wrong step: {first} — {step['finding']}"

"""A routing decision as `agent-reach route` prints it: what decided, then one block per
candidate (capability, instance, confidence, each factor × its weight, and the rule's
verdict on it). Lines, not table columns: a block fits 80 columns whatever the names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from agent_reach.cli.text import kept

if TYPE_CHECKING:
    from agent_reach.model.decisions import Candidate, RouteDecision

INDENT = 4  # a block's lines under its title; a wrapped line keeps it
# What each rule means for the whole decision.
RULES = {
    "exact": "the capability was given: its best-scored live instance",
    "best": "the text's best-scored capability, confident enough and far enough ahead",
    "learned": "a learned example matched the text exactly",
    "margin": "refused: the text fit several capabilities too equally to choose",
    "no_match": "refused: the text fit no capability well enough",
    "generic": "the router would not guess, so the generic agent takes it",
    "no_instance": "no live instance of the capability",
}


def decision_view(decision: RouteDecision) -> Group:
    """The decision's header and its candidates' blocks, best first."""
    chosen = next((c for c in decision.candidates if _is_chosen(c, decision)), None)
    parts: list[RenderableType] = [_header(decision), *_text_lines(decision)]
    if not decision.candidates:
        none = "no capability matched the text" if decision.text else "no live instance of it"
        parts.append(Text(f"no candidate: {none}"))
    for number, candidate in enumerate(decision.candidates, 1):
        parts.append(Text(""))
        parts.extend(_block(number, candidate, decision, chosen))
    return Group(*parts)


def _header(decision: RouteDecision) -> Text:
    target = f"{decision.capability} → {decision.agent_id}" if decision.agent_id else "no instance"
    header = kept("route: ", style="bold")
    header.append_text(kept(target, style="bold green" if decision.agent_id else "bold red"))
    refused = "" if decision.refused_by is None else f" (refused by {decision.refused_by})"
    header.append_text(kept(f"\nrule {decision.rule}{refused} · policy {decision.policy_version}"))
    header.append_text(kept(f"\n{RULES.get(decision.rule, decision.rule)}", style="dim"))
    return header


def _text_lines(decision: RouteDecision) -> list[Text]:
    """How a text was matched: matchers, calibration, each threshold with the comparison
    that held (the decision's own statements), what was learned, the params."""
    text = decision.text
    if text is None:
        return []
    matchers = " + ".join(text.matchers) or "none"
    if text.pending:
        matchers += f" (pending: {', '.join(text.pending)})"
    calibration = (
        "confidences calibrated on the catalog"
        if text.calibrated
        else "not calibrated (few cards): confidences are raw scores"
    )
    lines = [f"matchers {matchers} · {calibration}"]
    lines.extend(check.statement for check in decision.thresholds)
    if text.learned:
        lines.append(
            f"learned example {text.learned['id']} → {text.learned['capability']}: "
            "no threshold applies"
        )
    if text.not_mine:
        lines.append(f"said not mine (421) before: {', '.join(text.not_mine)}")
    if text.params is not None:
        lines.append(f"params {orjson.dumps(text.params).decode()}")
    return [kept(line) for line in lines]


def _block(
    number: int, candidate: Candidate, decision: RouteDecision, chosen: Candidate | None
) -> list[RenderableType]:
    is_chosen = candidate is chosen
    title = kept("→ " if is_chosen else "  ", style="bold green")
    title.append(f"{number}. ", style="dim")
    title.append(candidate.capability, style="bold green" if is_chosen else "bold")
    title.append(" on ")
    title.append(candidate.agent_id, style="cyan")
    title.append_text(kept(f"  score {candidate.score:.3f}"))
    body: list[Text] = []
    confidence = candidate.factors.get("match")
    if confidence is not None:
        line = f"confidence {confidence:.3f}"
        if decision.text is not None:
            line += " calibrated" if decision.text.calibrated else " (raw: not calibrated)"
        if candidate.match:
            scores = ", ".join(f"{name} {score:.2f}" for name, score in candidate.match.items())
            line += f" · matchers: {scores}"
        body.append(kept(line))
    body.extend(_factor_lines(candidate, decision.weights))
    body.append(kept(_verdict(candidate, decision, chosen), style="dim"))
    return [title, *(Padding(line, (0, 0, 0, INDENT), expand=False) for line in body)]


def _factor_lines(candidate: Candidate, weights: dict[str, float]) -> list[Text]:
    """Each factor × its weight, their sum over the weights' total (the score of an
    instance of weight 1, in [0, 1]), then what scaled it."""
    names = [n for n in [*weights, *sorted(set(candidate.factors) - set(weights))]]
    names = [n for n in names if n in candidate.factors]
    width = max(len(name) for name in [*names, "sum"])
    lines: list[Text] = []
    total = 0.0
    weight_sum = sum(weights.values())
    for name in names:
        value = candidate.factors[name]
        weight = weights.get(name)
        if weight is None:
            lines.append(kept(f"{name:<{width}}  {value:.3f}  (not weighted)"))
            continue
        total += value * weight
        line = f"{name:<{width}}  {value:.3f} × {weight:.2f} = {value * weight:.3f}"
        if name == "quality":  # the outcome counts behind it (mesh/quality.py)
            counts = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in candidate.outcomes.items())
            line += f"  ({counts or 'no outcome yet: the prior'})"
        lines.append(kept(line))
    mean = total / weight_sum if weight_sum > 0 else 0.0
    summed = f"{'sum':<{width}}  {total:.3f} ÷ {weight_sum:.2f} (the weights' total) = {mean:.3f}"
    if mean > 0 and abs(mean - candidate.score) > 0.0005:
        summed += (
            f" × {candidate.score / mean:.2f} = {candidate.score:.3f} (the instance's weight, "
            "a full queue, or no probe answered yet)"
        )
    lines.append(kept(summed))
    return lines


def _verdict(candidate: Candidate, decision: RouteDecision, chosen: Candidate | None) -> str:
    """Why this candidate was or was not taken."""
    refused = decision.refused_by or decision.rule
    if candidate is chosen:
        if decision.rule == "generic":
            return f"chosen: the generic agent, as the router refused ({refused})"
        return f"chosen by rule {decision.rule}"
    if refused in ("no_match", "margin"):
        check = next(
            (c for c in decision.thresholds if c.reached and not c.passed), None
        )  # the comparison that refused, as the decision states it
        if check is not None:
            return f"not chosen: {check.statement}"
        return f"not chosen: rule {refused}"
    if chosen is None:
        return f"not chosen: rule {decision.rule} chose no instance"
    if candidate.capability == chosen.capability:
        return f"not chosen: another instance of {chosen.capability} was preferred"
    return f"not chosen: {chosen.capability} was preferred (rule {decision.rule})"


def _is_chosen(candidate: Candidate, decision: RouteDecision) -> bool:
    return (candidate.capability, candidate.agent_id) == (decision.capability, decision.agent_id)

"""Planning: a submitted workflow checked and turned into a DAG, before anything runs.

Refusals (422 `WorkflowRefused`, nothing executed): a duplicate step id, a dependency
on no step, a cycle (named), more steps than the policy allows, and a template that
cannot be read or names a step the step does not depend on, directly or not.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agent_reach.errors import WorkflowRefused
from agent_reach.model.workflows import StepSpec, WorkflowBody, WorkflowPolicy
from agent_reach.orchestration.templates import Scope, TemplateError, references


@dataclass(frozen=True, slots=True)
class Plan:
    """A checked workflow: steps by id in submission order, and each step's ancestors."""

    body: WorkflowBody
    steps: dict[str, StepSpec]
    ancestors: dict[str, frozenset[str]]

    @property
    def order(self) -> list[str]:
        return list(self.steps)


def with_ids(body: WorkflowBody) -> WorkflowBody:
    """The body with every step id filled in: a step without one is its index ("0", "1")."""
    if all(step.id is not None for step in body.steps):
        return body
    steps = [
        step if step.id is not None else step.model_copy(update={"id": str(i)})
        for i, step in enumerate(body.steps)
    ]
    return body.model_copy(update={"steps": steps})


def plan(
    body: WorkflowBody,
    policy: WorkflowPolicy,
    given_input: Mapping[str, Any],
    *,
    declared_inputs: Collection[str] | None = None,
) -> Plan:
    """The DAG of `body`, or `WorkflowRefused` saying what is wrong with it.

    `{{input...}}` templates must name a value of `given_input`, or, for a definition
    saved to be run later, one of its `declared_inputs`.
    """
    body = with_ids(body)
    if len(body.steps) > policy.max_steps:
        raise WorkflowRefused(
            f"{len(body.steps)} steps: the policy allows at most {policy.max_steps}",
            code="too_many_steps",
            limit=policy.max_steps,
        )
    steps: dict[str, StepSpec] = {}
    for step in body.steps:
        step_id = str(step.id)
        if step_id in steps:
            raise WorkflowRefused(
                f"two steps have the id {step_id!r}", code="duplicate_step", step=step_id
            )
        steps[step_id] = step
    for step_id, step in steps.items():
        for needed in step.depends_on:
            if needed not in steps:
                raise WorkflowRefused(
                    f"step {step_id!r} depends on {needed!r}, which is no step of this workflow",
                    code="unknown_dependency",
                    step=step_id,
                    depends_on=needed,
                )
    cycle = find_cycle({s: step.depends_on for s, step in steps.items()})
    if cycle:
        raise WorkflowRefused(
            f"the steps depend on each other in a cycle: {' -> '.join(cycle)}",
            code="workflow_cycle",
            cycle=cycle,
        )
    ancestors = _ancestors(steps)
    for step_id, step in steps.items():
        _check_templates(step_id, step, ancestors[step_id], given_input, declared_inputs)
    if body.aggregate is not None and body.aggregate.merge is not None:
        for merged in body.aggregate.merge:
            if merged not in steps:
                raise WorkflowRefused(
                    f"aggregate.merge names {merged!r}, which is no step of this workflow",
                    code="unknown_dependency",
                    depends_on=merged,
                )
    return Plan(body, steps, ancestors)


def find_cycle(depends_on: Mapping[str, Iterable[str]]) -> list[str]:
    """One cycle as a path that returns to its start (`[a, b, a]`), or [] for a DAG."""
    done: set[str] = set()
    for start in depends_on:
        if start in done:
            continue
        path = [start]
        stack: list[Iterator[str]] = [iter(depends_on[start])]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                done.add(path.pop())
            elif child in path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                path.append(child)
                stack.append(iter(depends_on[child]))
    return []


def _ancestors(steps: Mapping[str, StepSpec]) -> dict[str, frozenset[str]]:
    """Every step each step depends on, directly or not (the graph has no cycle)."""
    found: dict[str, frozenset[str]] = {}

    def of(step_id: str) -> frozenset[str]:
        known = found.get(step_id)
        if known is None:
            direct = steps[step_id].depends_on
            known = frozenset(direct).union(*(of(d) for d in direct))
            found[step_id] = known
        return known

    for step_id in _topological(steps):
        of(step_id)
    return found


def _topological(steps: Mapping[str, StepSpec]) -> list[str]:
    """Step ids with every step after the steps it depends on (keeps recursion shallow)."""
    order: list[str] = []
    placed: set[str] = set()
    remaining = dict(steps)
    while remaining:
        ready = [s for s, spec in remaining.items() if placed.issuperset(spec.depends_on)]
        for step_id in ready:
            order.append(step_id)
            placed.add(step_id)
            del remaining[step_id]
    return order


def _check_templates(
    step_id: str,
    step: StepSpec,
    ancestors: frozenset[str],
    given_input: Mapping[str, Any],
    declared_inputs: Collection[str] | None,
) -> None:
    scope = Scope(steps={}, context=None, input=given_input)
    try:
        for reference in references([step.param, step.text]):
            if reference.source == "steps" and reference.step not in ancestors:
                raise TemplateError(
                    f"{reference.text} names step {reference.step!r}, "
                    f"which step {step_id!r} does not depend on"
                )
            if reference.source != "input":
                continue
            if declared_inputs is None:
                scope.lookup(reference)
            elif not reference.path or reference.path[0] not in declared_inputs:
                raise TemplateError(f"{reference.text} names no declared input")
    except TemplateError as exc:
        raise WorkflowRefused(str(exc), code="bad_template", step=step_id) from None

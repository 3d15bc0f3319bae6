"""The DAG planner, templates and merge aggregation: plain data, no I/O."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_reach.errors import WorkflowRefused
from agent_reach.model.workflows import WorkflowBody, WorkflowPolicy
from agent_reach.orchestration.aggregation import merge
from agent_reach.orchestration.planning import find_cycle, plan
from agent_reach.orchestration.templates import Scope, TemplateError, resolve

POLICY = WorkflowPolicy()


def body(*steps: dict[str, object]) -> WorkflowBody:
    return WorkflowBody.model_validate({"steps": list(steps)})


@st.composite
def dags(draw: st.DrawFn) -> dict[str, list[str]]:
    """Random DAGs: each node depends only on nodes before it."""
    size = draw(st.integers(1, 12))
    nodes = [f"s{i}" for i in range(size)]
    return {
        node: draw(st.lists(st.sampled_from(nodes[:i]), unique=True)) if i else []
        for i, node in enumerate(nodes)
    }


@given(dags())
def test_a_dag_has_no_cycle(graph: dict[str, list[str]]) -> None:
    assert find_cycle(graph) == []


@given(dags(), st.data())
def test_a_back_edge_makes_a_cycle_that_is_found_and_real(
    graph: dict[str, list[str]], data: st.DataObject
) -> None:
    nodes = list(graph)
    late = data.draw(st.sampled_from(nodes))
    early = data.draw(st.sampled_from(nodes[: nodes.index(late) + 1]))
    graph[early] = [*graph[early], late]
    # a path late -> ... -> early exists when early is late or late reaches early
    cycle = find_cycle(graph)
    reaches = _reaches(graph, late, early)
    assert bool(cycle) == reaches
    if cycle:
        assert cycle[0] == cycle[-1]
        assert all(b in graph[a] for a, b in itertools.pairwise(cycle))


def _reaches(graph: dict[str, list[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return False


def test_step_ids_default_to_their_index_and_ancestors_are_transitive() -> None:
    dag = plan(
        body(
            {"action": "a.x"},
            {"action": "b.x", "depends_on": ["0"]},
            {"action": "c.x", "depends_on": ["1"], "param": "{{steps.0.result}}"},
        ),
        POLICY,
        {},
    )
    assert dag.order == ["0", "1", "2"]
    assert dag.ancestors["2"] == {"0", "1"}


def test_an_input_template_must_name_a_given_or_declared_input() -> None:
    step = {"action": "a.x", "param": {"n": "{{input.order.no}}"}}
    plan(body(step), POLICY, {"order": {"no": 1}})
    plan(body(step), POLICY, {}, declared_inputs=["order"])
    with pytest.raises(WorkflowRefused) as refused:
        plan(body(step), POLICY, {}, declared_inputs=["other"])
    assert refused.value.code == "bad_template"


def test_templates_keep_the_type_of_a_whole_value_and_interpolate_text() -> None:
    scope = Scope({"a": {"n": 2, "items": [{"sku": "A-1"}]}}, {"user": "u"}, {"k": None})
    value = {
        "n": "{{steps.a.result.n}}",
        "sku": "{{ steps.a.result.items.0.sku }}",
        "text": "n={{steps.a.result.n}}, items={{steps.a.result.items}}, k={{input.k}}",
        "plain": ["no template", 3, {"who": "{{context.user}}"}],
    }
    assert resolve(value, scope) == {
        "n": 2,
        "sku": "A-1",
        "text": 'n=2, items=[{"sku":"A-1"}], k=null',
        "plain": ["no template", 3, {"who": "u"}],
    }
    with pytest.raises(TemplateError):
        resolve("{{steps.a.result.items.5}}", scope)
    with pytest.raises(TemplateError):
        resolve("{{context.missing}}", scope)


def test_merge_prefers_the_earlier_step_and_lists_each_conflict_once() -> None:
    merged, conflicts = merge(
        {
            "crm": {"name": "ACME", "paid": {"q3": 100}, "tags": ["a"]},
            "finance": {"paid": {"q3": 120, "q4": 5}, "tags": ["b"]},
            "projects": {"paid": {"q3": 90}, "name": "ACME"},
            "unlisted": {"name": "other"},
        },
        ["crm", "finance", "projects", "missing"],
    )
    assert merged == {"name": "ACME", "paid": {"q3": 100, "q4": 5}, "tags": ["a"]}
    assert conflicts == [
        {
            "field": "paid.q3",
            "values": {"crm": 100, "finance": 120, "projects": 90},
            "winner": "crm",
        },
        {"field": "tags", "values": {"crm": ["a"], "finance": ["b"]}, "winner": "crm"},
    ]

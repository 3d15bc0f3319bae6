"""Workflows against real FakeAgents, on memory and Redis: the `POST /v1/workflows/run` contract."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

FINAL = {"X-Reach-Retryable": "false"}  # an agent failure the agent made final: no parking

POLICY = """
[timeout_classes.query]
timeout_s = 2.0

[timeout_classes.slow]
timeout_s = 2.0

[timeout_classes.long]
timeout_s = 2.0
asynchronous = true

[delivery]
backoff_s = [0.05]
suspend_s = 2.0

[workflows]
max_steps = 6
max_parallel = 4
"""


@pytest.fixture
def coordinator(settings: Settings, tmp_path) -> Iterator[str]:
    """A coordinator with 2 s timeouts, a 2 s parking window and a 6-step limit."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    fast = settings.model_copy(update={"policy_file": policy, "probe_interval_s": 0.2})
    with run_coordinator(fast) as (url, _):
        yield url


Agents = Callable[..., FakeAgent]


@pytest.fixture
def agents(fake_agents, register) -> Agents:
    """`agents("order.query", answer={...})`: a FakeAgent registered for one capability."""
    count = Counter[str]()

    def start(capability: str, **knobs: Any) -> FakeAgent:
        count[capability] += 1
        agent, endpoint = fake_agents(name=capability, **knobs)
        answer = register(f"{capability}-{count[capability]}", endpoint, capability)
        assert answer.status_code == 201, answer.text
        return agent

    return start


def run(http: httpx.Client, *steps: dict[str, Any], **body: Any) -> httpx.Response:
    return http.post("/v1/workflows/run", json={"steps": list(steps), **body})


def steps_of(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["id"]: step for step in answer["steps"]}


def poll(http: httpx.Client, run_id: str, *statuses: str) -> dict[str, Any]:
    return wait_until(
        lambda: (r := http.get(f"/v1/workflows/{run_id}").json())["status"] in statuses and r,
        f"run {run_id} to be {statuses}",
    )


def test_the_original_shape_runs_its_steps_in_parallel_and_maps_results_by_index(http, agents):
    order = agents("order.query", answer={"status": "shipped"}, delay_s=0.2)
    kb = agents("kb.article.query", answer={"articles": ["policy"]}, delay_s=0.2)
    answer = run(
        http,
        {"action": "order.query", "param": {"order_no": "888"}},
        {"action": "kb.article.query", "param": {"keyword": "shipment_policy", "limit": 3}},
        intent="shipment_query",
        fallback="kb.article.query",
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "ok"
    assert body["result"] == {"0": {"status": "shipped"}, "1": {"articles": ["policy"]}}
    first, second = body["steps"]
    assert (first["capability"], second["capability"]) == ("order.query", "kb.article.query")
    # Both were sent before either answered: they ran side by side.
    assert max(first["started_ms"], second["started_ms"]) < min(
        first["ended_ms"], second["ended_ms"]
    )
    assert order.received[0].body["request_id"] == f"{body['run_id']}:0"
    assert order.received[0].body["payload"] == {"order_no": "888"}
    assert kb.received[0].body["request_id"] == f"{body['run_id']}:1"


def test_templates_are_typed_when_whole_and_text_inside_strings(http, agents):
    agents("order.query", answer={"order": {"sku": "A-1", "qty": 2, "tags": ["x"]}})
    kb = agents("kb.article.query")
    answer = run(
        http,
        {"id": "order", "action": "order.query"},
        {
            "id": "kb",
            "action": "kb.article.query",
            "depends_on": ["order"],
            "param": {
                "sku": "{{steps.order.result.order.sku}}",
                "qty": "{{steps.order.result.order.qty}}",
                "tag": "{{ steps.order.result.order.tags.0 }}",
                "note": "qty={{steps.order.result.order.qty}} for {{input.user}}",
                "who": "{{input.user}}",
            },
        },
        input={"user": "u-1"},
    )

    assert answer.json()["status"] == "ok", answer.text
    assert kb.received[0].body["payload"] == {
        "sku": "A-1",
        "qty": 2,
        "tag": "x",
        "note": "qty=2 for u-1",
        "who": "u-1",
    }


def test_a_context_template_reads_the_runs_context(http, agents):
    kb = agents("kb.article.query")
    context = http.post("/v1/contexts", json={"document": {"user": {"tier": "gold"}}})
    assert context.status_code == 201, context.text
    answer = run(
        http,
        {"action": "kb.article.query", "param": {"tier": "{{context.user.tier}}"}},
        context_id=context.json()["context_id"],
    )

    assert answer.json()["status"] == "ok", answer.text
    assert kb.received[0].body["payload"] == {"tier": "gold"}


@pytest.mark.parametrize(
    ("steps", "code", "detail"),
    [
        (
            [
                {"id": "a", "action": "order.query", "depends_on": ["c"]},
                {"id": "b", "action": "order.query", "depends_on": ["a"]},
                {"id": "c", "action": "order.query", "depends_on": ["b"]},
            ],
            "workflow_cycle",
            ("cycle", ["a", "c", "b", "a"]),
        ),
        (
            [{"id": "a", "action": "order.query", "depends_on": ["nope"]}],
            "unknown_dependency",
            ("depends_on", "nope"),
        ),
        (
            [{"id": "a", "action": "order.query"}, {"id": "a", "action": "order.query"}],
            "duplicate_step",
            ("step", "a"),
        ),
        ([{"action": "order.query"}] * 7, "too_many_steps", ("limit", 6)),
        (
            [
                {"id": "a", "action": "order.query"},
                {"id": "b", "action": "order.query", "param": {"x": "{{steps.a.result.y}}"}},
            ],
            "bad_template",
            ("step", "b"),
        ),
        (
            [{"id": "a", "action": "order.query", "param": "{{steps.a.result}}"}],
            "bad_template",
            ("step", "a"),
        ),
        (
            [{"id": "a", "action": "order.query", "param": "{{input.missing}}"}],
            "bad_template",
            ("step", "a"),
        ),
        (
            [{"id": "a", "action": "order.query", "param": "{{secrets.key}}"}],
            "bad_template",
            ("step", "a"),
        ),
    ],
    ids=["cycle", "unknown", "duplicate", "too-many", "not-a-dependency", "self", "input", "form"],
)
def test_a_refused_workflow_is_422_and_nothing_runs(http, agents, steps, code, detail):
    order = agents("order.query")
    answer = run(http, *steps)

    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert error[detail[0]] == detail[1]
    assert order.received == []
    assert http.get("/v1/workflows").json()["runs"] == []


def test_a_failed_step_takes_its_fallback_then_the_workflows(http, agents):
    broken = agents("order.query", status=500, headers=FINAL)
    agents("order.cache", status=500, headers=FINAL)
    kb = agents("kb.article.query", answer={"articles": []})
    answer = run(
        http,
        {"id": "order", "action": "order.query", "fallback": "order.cache", "param": {"n": 1}},
        fallback="kb.article.query",
    ).json()

    step = steps_of(answer)["order"]
    assert answer["status"] == "ok"
    assert step["status"] == "fallback"
    assert step["fallback_used"] == "kb.article.query"
    assert step["tried"] == {
        "order.query": "agent_error",
        "order.cache": "agent_error",
        "kb.article.query": "ok",
    }
    assert len(broken.received) == 1
    assert kb.received[0].body["request_id"] == f"{answer['run_id']}:order:wf-fallback"
    assert kb.received[0].body["payload"] == {"n": 1}


def test_dependants_of_a_failed_step_are_skipped_with_the_reason(http, agents):
    agents("order.query", status=500, headers=FINAL)
    kb = agents("kb.article.query")
    answer = run(
        http,
        {"id": "order", "action": "order.query"},
        {"id": "kb", "action": "kb.article.query", "depends_on": ["order"]},
        {"id": "after", "action": "kb.article.query", "depends_on": ["kb"]},
        {"id": "free", "action": "kb.article.query"},
    ).json()

    steps = steps_of(answer)
    assert answer["status"] == "error"
    assert steps["order"]["status"] == "failed"
    assert steps["order"]["error"]["code"] == "agent_error"
    assert steps["kb"]["status"] == "skipped"
    assert steps["kb"]["reason"] == "depends on 'order', which failed"
    assert steps["after"]["reason"] == "depends on 'kb', which was skipped"
    assert steps["free"]["status"] == "ok"
    assert answer["result"] == {"free": steps["free"]["result"]}
    assert [r.body["request_id"] for r in kb.received] == [f"{answer['run_id']}:free"]


def test_an_optional_step_that_fails_leaves_the_run_partial(http, agents):
    agents("order.query", answer={"ok": True})
    agents("kb.article.query", status=503)  # optional: it fails instead of parking
    answer = run(
        http,
        {"id": "order", "action": "order.query"},
        {"id": "kb", "action": "kb.article.query", "optional": True},
    ).json()

    assert answer["status"] == "partial"
    assert steps_of(answer)["kb"]["status"] == "failed"
    assert answer["result"] == {"order": {"ok": True}}


def test_a_repeated_request_id_never_executes_a_finished_step_again(http, agents):
    order = agents("order.query", answer={"n": 1})
    kb = agents("kb.article.query", answer={"n": 2})
    steps = (
        {"id": "order", "action": "order.query"},
        {"id": "kb", "action": "kb.article.query", "depends_on": ["order"]},
    )
    first = run(http, *steps, request_id="wf-repeat-1")
    again = run(http, *steps, request_id="wf-repeat-1")
    changed = run(http, steps[0], request_id="wf-repeat-1")

    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert first.json()["run_id"] == "wf-repeat-1"
    assert changed.status_code == 422
    assert changed.json()["error"]["code"] == "idempotency_key_reused"
    assert (len(order.received), len(kb.received)) == (1, 1)


def test_merge_aggregation_prefers_earlier_steps_and_lists_conflicts(http, agents):
    agents("crm.query", answer={"customer": {"name": "ACME", "paid": 100}, "owner": "li"})
    agents("finance.query", answer={"customer": {"paid": 120, "due": 0}, "ledger": "Q3"})
    answer = run(
        http,
        {"id": "crm", "action": "crm.query"},
        {"id": "finance", "action": "finance.query"},
        aggregate={"merge": ["finance", "crm"]},
    ).json()

    assert answer["status"] == "ok"
    assert answer["result"] == {
        "customer": {"paid": 120, "due": 0, "name": "ACME"},
        "ledger": "Q3",
        "owner": "li",
    }
    assert answer["conflicts"] == [
        {"field": "customer.paid", "values": {"finance": 120, "crm": 100}, "winner": "finance"}
    ]


def test_a_summarizer_capability_gets_every_result_and_gives_the_runs(http, agents):
    agents("crm.query", answer={"paid": 100})
    agents("finance.query", answer={"paid": 120})
    summary = agents("summary.write", answer={"text": "paid 120"})
    answer = run(
        http,
        {"id": "crm", "action": "crm.query"},
        {"id": "finance", "action": "finance.query"},
        intent="quarterly_payments",
        aggregate={"capability": "summary.write"},
    ).json()

    assert answer["status"] == "ok"
    assert answer["result"] == {"text": "paid 120"}
    assert summary.received[0].body["payload"] == {
        "intent": "quarterly_payments",
        "results": {"crm": {"paid": 100}, "finance": {"paid": 120}},
    }
    assert steps_of(answer)["_aggregate"]["status"] == "ok"


def test_an_async_run_answers_202_and_its_poll_gives_the_end(http, agents):
    agents("order.query", answer={"n": 1}, delay_s=0.2)
    accepted = run(http, {"action": "order.query"}, mode="async")

    assert accepted.status_code == 202
    body = accepted.json()
    assert body["poll"] == f"/v1/workflows/{body['run_id']}"
    done = poll(http, body["run_id"], "ok", "error")
    assert done["status"] == "ok"
    assert done["result"] == {"0": {"n": 1}}


def test_a_step_of_an_asynchronous_class_waits_for_its_task(http, agents):
    agents("report.build", answer={"pages": 3}, delay_s=0.1)
    answer = run(http, {"action": "report.build", "timeout_class": "long"})

    assert answer.json()["status"] == "ok", answer.text
    assert answer.json()["result"] == {"0": {"pages": 3}}


def test_a_step_with_no_live_instance_parks_the_run_until_one_works(http, agents):
    order = agents("order.query", status=503)
    agents("kb.article.query", answer={"kb": 1})
    accepted = run(
        http,
        {"id": "order", "action": "order.query"},
        {"id": "kb", "action": "kb.article.query"},
        {"id": "after", "action": "kb.article.query", "depends_on": ["order"]},
    )

    assert accepted.status_code == 202, accepted.text
    parked = accepted.json()
    assert parked["status"] == "parked"
    assert steps_of(parked)["order"]["status"] == "parked"
    assert steps_of(parked)["kb"]["status"] == "ok"
    assert steps_of(parked)["after"]["status"] == "pending"
    order.status = 200
    done = poll(http, parked["run_id"], "ok", "error")
    assert done["status"] == "ok"
    assert [s["status"] for s in done["steps"]] == ["ok", "ok", "ok"]
    served = Counter(r.body["request_id"] for r in order.received if r.body)
    assert served[f"{parked['run_id']}:order"] >= 2  # refused while 503, served once after


def test_a_parked_run_whose_window_runs_out_ends_as_error_with_its_steps(http, agents):
    agents("order.query", status=503)
    agents("kb.article.query", answer={"kb": 1})
    accepted = run(
        http,
        {"id": "order", "action": "order.query"},
        {"id": "kb", "action": "kb.article.query"},
        mode="async",
    ).json()

    done = poll(http, accepted["run_id"], "ok", "error", "partial")
    assert done["status"] == "error"
    assert steps_of(done)["order"]["status"] == "failed"
    assert "parking ran out" in steps_of(done)["order"]["reason"]
    assert done["result"] == {"kb": {"kb": 1}}


def test_the_hop_budget_applies_to_every_step(http, agents):
    order = agents("order.query")
    kb = agents("kb.article.query")
    answer = http.post(
        "/v1/workflows/run",
        json={"steps": [{"action": "order.query"}, {"action": "kb.article.query"}]},
        headers={"X-Reach-Hop": "3"},
    )

    assert answer.json()["status"] == "ok", answer.text
    assert order.received[0].body["hop"] == kb.received[0].body["hop"] == 2
    spent = run(http, {"action": "order.query"}, max_hop=0).json()
    assert steps_of(spent)["0"]["error"]["code"] == "hop_limit"
    assert len(order.received) == 1


def test_named_workflows_are_saved_as_yaml_and_run_with_their_inputs(http, agents):
    order = agents("order.query", answer={"status": "shipped"})
    agents("kb.article.query", answer={"articles": ["policy"]})
    saved = http.post(
        "/v1/workflows",
        content=b"""
workflow:
  name: shipment-query
  intent: shipment_query
  inputs: [order_no]
  steps:
    - {id: order, action: order.query, param: {order_no: "{{input.order_no}}"}}
    - {id: kb, action: kb.article.query, param: {keyword: shipment_policy, limit: 3}}
  fallback: kb.article.query
""",
        headers={"Content-Type": "application/yaml"},
    )
    assert saved.status_code == 201, saved.text
    assert saved.json() == {
        "name": "shipment-query",
        "inputs": {"order_no": {"required": True}},
        "steps": 2,
    }

    answer = http.post("/v1/workflows/shipment-query/run", json={"input": {"order_no": "888"}})
    missing = http.post("/v1/workflows/shipment-query/run", json={"input": {}})
    unknown = http.post("/v1/workflows/nothing/run", json={"input": {}})

    assert answer.status_code == 200, answer.text
    assert answer.json()["name"] == "shipment-query"
    assert order.received[0].body["payload"] == {"order_no": "888"}
    assert missing.status_code == 422
    assert missing.json()["error"] == {
        "code": "missing_input",
        "message": "workflow 'shipment-query' needs the input order_no",
        "missing": ["order_no"],
    }
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "unknown_workflow"


def test_bad_definitions_and_unknown_runs_are_clear_4xx(http, agents):
    not_yaml = http.post(
        "/v1/workflows", content=b"{: [", headers={"Content-Type": "application/yaml"}
    )
    cyclic = http.post(
        "/v1/workflows",
        json={
            "name": "loop",
            "steps": [{"id": "a", "action": "x.y", "depends_on": ["a"]}],
        },
    )
    no_action = run(http, {"id": "a"})

    assert not_yaml.status_code == 400
    assert cyclic.status_code == 422
    assert cyclic.json()["error"]["cycle"] == ["a", "a"]
    assert no_action.status_code == 422
    assert no_action.json()["error"]["code"] == "validation_error"
    unknown = http.get("/v1/workflows/no-such-run")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "unknown_run"


def test_a_run_is_one_span_with_a_child_per_step_and_counted_in_metrics(http, agents):
    agents("order.query")
    agents("kb.article.query")
    answer = run(
        http,
        {"id": "order", "action": "order.query"},
        {"id": "kb", "action": "kb.article.query", "depends_on": ["order"]},
        intent="shipment_query",
    ).json()

    spans = http.get(f"/v1/traces/{answer['trace_id']}").json()["spans"]
    (root,) = [s for s in spans if s["kind"] == "workflow"]
    steps = [s for s in spans if s["kind"] == "step"]
    assert (root["name"], root["status"]) == ("shipment_query", "ok")
    assert sorted(s["name"] for s in steps) == ["kb", "order"]
    assert all(s["parent_id"] == root["span_id"] for s in steps)
    invokes = [s for s in spans if s["kind"] == "invoke"]
    assert sorted(s["parent_id"] for s in invokes) == sorted(s["span_id"] for s in steps)
    metrics = http.get("/metrics").text
    assert 'agent_reach_workflow_runs_total{status="ok"} 1.0' in metrics
    assert 'agent_reach_workflow_steps_total{status="ok"} 2.0' in metrics


def test_recent_runs_list_each_run_with_its_step_graph(http, agents):
    agents("order.query")
    answer = run(
        http,
        {"id": "a", "action": "order.query"},
        {"id": "b", "action": "order.query", "depends_on": ["a"]},
    ).json()

    (listed,) = http.get("/v1/workflows").json()["runs"]
    assert listed["run_id"] == answer["run_id"]
    assert [(s["id"], s["depends_on"], s["status"]) for s in listed["steps"]] == [
        ("a", [], "ok"),
        ("b", ["a"], "ok"),
    ]
    assert "result" not in listed


def test_the_run_has_one_deadline_that_every_step_shares(http, agents):
    agents("order.query", delay_s=0.4)
    kb = agents("kb.article.query")
    answer = run(
        http,
        {"id": "slow", "action": "order.query"},
        {"id": "after", "action": "kb.article.query", "depends_on": ["slow"]},
        deadline_s=0.2,
    ).json()

    steps = steps_of(answer)
    assert answer["status"] == "error"
    assert steps["slow"]["status"] == "failed"  # the agent may have acted: not parked
    assert steps["slow"]["error"]["code"] == "agent_timeout"
    assert steps["after"]["status"] == "skipped"
    assert kb.received == []


MALFORMED_WORKFLOWS = [  # body -> its own status, code and the field its problem names
    (b"{", 400, "invalid_json", None),
    (b"[]", 422, "validation_error", ""),
    (b'{"steps": []}', 422, "validation_error", "steps"),
    (
        b'{"steps": [{"action": "order.query"}], "input": {"n": 123456789012345678901234}}',
        422, "validation_error", "input",
    ),
    (
        b'{"steps": [{"action": "order.query", "param": 123456789012345678901234}]}',
        422, "validation_error", "steps.0.param",
    ),
    (b'{"steps": [{"action": "order.query", "text": "both"}]}', 422, "validation_error", "steps.0"),
    (b'{"steps": [{"id": "_x", "action": "order.query"}]}', 422, "validation_error", "steps.0.id"),
    (
        b'{"steps": [{"action": "order.query"}],'
        b' "aggregate": {"merge": ["0"], "capability": "a.b"}}',
        422, "validation_error", "aggregate",
    ),
    (
        b'{"steps": [{"action": "order.query"}], "request_id": "' + b"r" * 65 + b'"}',
        422, "validation_error", "request_id",
    ),
    (b'{"steps": [{"action": "order.query"}], "mode": "later"}', 422, "validation_error", "mode"),
]  # fmt: skip


def test_malformed_workflow_bodies_are_4xx_never_a_server_error(http, agents):
    order = agents("order.query")
    for body, status, code, field in MALFORMED_WORKFLOWS:
        answer = http.post(
            "/v1/workflows/run", content=body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == status, (body, answer.text)
        error = answer.json()["error"]
        assert error["code"] == code, (body, error)
        if field is not None:
            assert [p["field"] for p in error["problems"]] == [field], (body, error)
    too_long = http.get("/v1/workflows/" + "x" * 70)
    assert too_long.status_code == 422, too_long.text
    assert too_long.json()["error"]["code"] == "validation_error"
    assert [p["field"] for p in too_long.json()["error"]["problems"]] == ["path.run_id"]
    assert order.received == []

"""The context API through a real coordinator on both backends, and real agents using it.

The invoke path does not hand out context blocks yet, so the end-to-end tests take the
block from `ContextService.delivery_context` on the coordinator's own event loop and
post the delivery to a real SDK agent themselves; everything after that (the agent's
fetch with its token, its writes) goes over HTTP as in production.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest
from pydantic import SecretStr

from agent_reach import Agent, AgentRequest, ReachError, Settings
from agent_reach.context.service import ContextService
from agent_reach.model.agents import AgentSpec
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

T = TypeVar("T")
CALL_TIMEOUT_S = 10.0
DOCUMENT = {
    "product": {"sku": "X5PRO-BLU-256", "name": "手机", "color": "蓝"},
    "user": {"intent": "还有货吗", "phone": "13800000000"},
    "order": {"id": "A-1029384", "status": "已发货"},
}
SEGMENT_ITEMS = 2
SEGMENT_BYTES = 1024
MAX_SEGMENTS = 3
MAX_BYTES = 4096
MAX_FIELDS = 40
BIG = "x" * MAX_BYTES  # over the document limit, and over a segment's bytes as one item
WIDE = {str(n): n for n in range(MAX_FIELDS)}  # with the document's own fields, too many
ADMIN_KEY = "context-test-admin-key-0123456789"


@dataclass
class Coordinator:
    """A running coordinator: its URL, its app, and a way into its event loop."""

    url: str
    app: CoordinatorApp
    server: ServerThread

    @property
    def contexts(self) -> ContextService:
        assert self.app.runtime is not None
        return self.app.runtime.contexts

    def run(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run a coroutine on the coordinator's loop (where its store clients live)."""
        assert self.server.loop is not None
        future = asyncio.run_coroutine_threadsafe(call(), self.server.loop)
        return future.result(CALL_TIMEOUT_S)

    def spec(self, agent_id: str) -> AgentSpec:
        """The spec the coordinator holds for a registered agent."""
        assert self.app.runtime is not None
        return self.app.runtime.registry.index.by_id[agent_id].spec


@contextmanager
def running(settings: Settings) -> Iterator[Coordinator]:
    app = create_app(settings)
    with ServerThread(app) as server:
        yield Coordinator(server.url, app, server)


@pytest.fixture
def reach(settings: Settings) -> Iterator[Coordinator]:
    limited = settings.model_copy(
        update={
            "context_segment_items": SEGMENT_ITEMS,
            "context_segment_bytes": SEGMENT_BYTES,
            "context_max_segments": MAX_SEGMENTS,
            "context_max_bytes": MAX_BYTES,
            "context_max_fields": MAX_FIELDS,
        }
    )
    with running(limited) as coordinator:
        yield coordinator


@pytest.fixture
def api(reach: Coordinator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=reach.url, timeout=CALL_TIMEOUT_S) as client:
        yield client


def create(api: httpx.Client, document: dict[str, Any] | None = None) -> str:
    answer = api.post("/v1/contexts", json={"document": DOCUMENT if document is None else document})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["context_id"])


def document(api: httpx.Client, context_id: str, **params: str) -> Any:
    answer = api.get(f"/v1/contexts/{context_id}", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()["document"]


def error(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


def test_a_context_is_created_read_whole_and_read_as_a_projection(api: httpx.Client) -> None:
    created = api.post("/v1/contexts", json={"document": DOCUMENT, "ttl_s": 60})

    assert created.status_code == 201
    body = created.json()
    assert (body["version"], body["expires_in_s"]) == (1, 60)
    assert created.headers["location"] == f"/v1/contexts/{body['context_id']}"
    assert created.headers["etag"] == '"1"'
    assert document(api, body["context_id"]) == DOCUMENT
    assert document(api, body["context_id"], fields="product.name,user.intent,user.age") == {
        "product": {"name": "手机"},
        "user": {"intent": "还有货吗"},
    }


def test_an_empty_create_makes_an_empty_context_with_the_default_ttl(api: httpx.Client) -> None:
    created = api.post("/v1/contexts")

    assert created.status_code == 201
    assert created.json()["expires_in_s"] == 1800  # AR_TTL_DEFAULT
    assert document(api, created.json()["context_id"]) == {}


def test_patch_merges_in_both_body_forms_and_returns_the_new_version(api: httpx.Client) -> None:
    context_id = create(api)

    as_json = api.patch(
        f"/v1/contexts/{context_id}", json={"merge": {"user": {"phone": None}, "step": 1}}
    )
    as_merge_patch = api.patch(
        f"/v1/contexts/{context_id}",
        content=b'{"order": null, "product": {"color": "\xe9\xbb\x91"}}',
        headers={"content-type": "application/merge-patch+json"},
    )

    assert (as_json.status_code, as_json.json()["version"]) == (200, 2)
    assert (as_merge_patch.json()["version"], as_merge_patch.headers["etag"]) == (3, '"3"')
    assert document(api, context_id) == {
        "product": {"sku": "X5PRO-BLU-256", "name": "手机", "color": "黑"},
        "user": {"intent": "还有货吗"},
        "step": 1,
    }


def test_a_write_at_a_stale_version_is_409_and_changes_nothing(api: httpx.Client) -> None:
    context_id = create(api)
    first = api.patch(
        f"/v1/contexts/{context_id}", json={"merge": {"step": 1}}, headers={"if-match": '"1"'}
    )

    stale_merge = api.patch(
        f"/v1/contexts/{context_id}", json={"merge": {"step": 99}}, headers={"if-match": "1"}
    )
    stale_append = api.patch(
        f"/v1/contexts/{context_id}",
        json={"append": {"list": "turns", "items": ["x"]}},
        headers={"if-match": 'W/"1"'},
    )

    assert first.status_code == 200
    for stale in (stale_merge, stale_append):
        assert error(stale) == (409, "version_conflict")
        assert stale.json()["error"]["version"] == 2
    assert document(api, context_id) == {**DOCUMENT, "step": 1}


def test_appends_roll_over_segments_until_the_limit_then_413_changes_nothing(
    api: httpx.Client,
) -> None:
    context_id = create(api)
    url = f"/v1/contexts/{context_id}"
    items = [{"role": "user", "text": f"第{n}句"} for n in range(SEGMENT_ITEMS * MAX_SEGMENTS)]

    for item in items:
        assert api.patch(url, json={"append": {"list": "turns", "items": [item]}}).is_success
    refused = api.patch(url, json={"append": {"list": "turns", "items": ["one too many"]}})

    assert error(refused) == (413, "too_many_segments")
    read = api.get(url, params={"fields": "turns"}).json()
    assert read["document"] == {"turns": items}
    assert read["version"] == 1 + len(items)


@pytest.mark.parametrize(
    ("method", "body", "expected"),
    [
        ("post", {"document": {"notes": BIG}}, (413, "context_too_large")),
        ("patch", {"merge": {"notes": BIG}}, (413, "context_too_large")),
        ("patch", {"merge": {"wide": WIDE}}, (422, "too_many_fields")),
        ("patch", {"append": {"list": "turns", "items": [BIG]}}, (413, "context_too_large")),
        ("patch", {"merge": {}, "append": {"list": "t", "items": [1]}}, (422, "validation_error")),
        ("patch", {"merge": ["not", "an", "object"]}, (422, "validation_error")),
        ("patch", {"append": {"list": "turns", "items": []}}, (422, "validation_error")),
        ("patch", {"append": {"list": "a.b", "items": [1]}}, (422, "invalid_list_name")),
        ("patch", {"append": {"list": "product", "items": [1]}}, (422, "not_a_list")),
        ("patch", {}, (422, "validation_error")),
        ("post", {"ttl_s": -1}, (422, "validation_error")),
        ("post", {"document": [1, 2]}, (422, "validation_error")),
    ],
)
def test_limits_and_malformed_bodies_get_a_clear_error_and_change_nothing(
    api: httpx.Client, method: str, body: dict[str, Any], expected: tuple[int, str]
) -> None:
    context_id = create(api)
    path = "/v1/contexts" if method == "post" else f"/v1/contexts/{context_id}"

    answer = api.request(method.upper(), path, json=body)

    assert error(answer) == expected
    read = api.get(f"/v1/contexts/{context_id}").json()
    assert (read["version"], read["document"]) == (1, DOCUMENT)


@pytest.mark.parametrize(
    ("content", "headers", "expected"),
    [
        (b"{nope", {}, (400, "invalid_json")),
        (b"{nope", {"content-type": "application/merge-patch+json"}, (400, "invalid_json")),
        (b"[1]", {"content-type": "application/merge-patch+json"}, (422, "invalid_patch")),
        (b'{"merge": {}}', {"if-match": "version-one"}, (400, "invalid_if_match")),
    ],
)
def test_unreadable_patches_are_refused(
    api: httpx.Client, content: bytes, headers: dict[str, str], expected: tuple[int, str]
) -> None:
    context_id = create(api)

    answer = api.patch(f"/v1/contexts/{context_id}", content=content, headers=headers)

    assert error(answer) == expected


def test_a_bad_projection_is_422(api: httpx.Client) -> None:
    context_id = create(api)

    assert error(api.get(f"/v1/contexts/{context_id}", params={"fields": "a..b"})) == (
        422,
        "invalid_projection",
    )


def test_a_deleted_or_unknown_context_is_404_unknown_context(api: httpx.Client) -> None:
    context_id = create(api)

    assert api.delete(f"/v1/contexts/{context_id}").status_code == 204

    for answer in (
        api.get(f"/v1/contexts/{context_id}"),
        api.patch(f"/v1/contexts/{context_id}", json={"merge": {"a": 1}}),
        api.delete(f"/v1/contexts/{context_id}"),
        api.get("/v1/contexts/ctx-never-created"),
    ):
        assert error(answer) == (404, "unknown_context")


# --- tokens and agents ----------------------------------------------------------------------


def spec(*fields: str) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "id": "reader-01",
            "capabilities": ["product.query"],
            "transport": {"endpoint": "http://127.0.0.1:9/invoke"},
            "context_fields": list(fields),
        }
    )


def block_for(reach: Coordinator, context_id: str, agent: AgentSpec, request_id: str) -> Any:
    return reach.run(
        lambda: reach.contexts.delivery_context(context_id, agent, request_id=request_id)
    )


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_a_token_reads_only_its_fields_of_only_its_context(
    reach: Coordinator, api: httpx.Client
) -> None:
    context_id, other_id = create(api), create(api)
    block = block_for(reach, context_id, spec("product", "user.intent"), "req-1")
    token = block["token"]

    own = api.get(block["url"], headers=bearer(token))
    asked_for_more = api.get(block["url"], params={"fields": "user,order"}, headers=bearer(token))
    by_header = api.get(block["url"], headers={"x-reach-context-token": token})
    other = api.get(f"/v1/contexts/{other_id}", headers=bearer(token))
    missing = api.get("/v1/contexts/ctx-never-created", headers=bearer(token))
    forged = api.get(block["url"], headers=bearer(token[:-1] + ("A" if token[-1] != "A" else "B")))

    assert block["id"] == context_id
    assert block["url"] == f"/v1/contexts/{context_id}"
    assert own.json()["document"] == {
        "product": DOCUMENT["product"],
        "user": {"intent": "还有货吗"},
    }
    assert asked_for_more.json()["document"] == {"user": {"intent": "还有货吗"}}
    assert by_header.json()["document"] == own.json()["document"]
    # Another context, a missing one and a forged token look exactly alike: no oracle.
    assert other.status_code == missing.status_code == forged.status_code == 404
    assert other.content == missing.content == forged.content


def test_a_token_writes_only_its_fields_and_cannot_delete(
    reach: Coordinator, api: httpx.Client
) -> None:
    context_id = create(api)
    token = block_for(reach, context_id, spec("product", "turns"), "req-1")["token"]
    url = f"/v1/contexts/{context_id}"

    inside = api.patch(url, json={"merge": {"product": {"color": "黑"}}}, headers=bearer(token))
    appended = api.patch(
        url, json={"append": {"list": "turns", "items": ["hi"]}}, headers=bearer(token)
    )
    outside = api.patch(url, json={"merge": {"user": {"intent": "退货"}}}, headers=bearer(token))
    sneaky = api.patch(
        url,
        json={"merge": {"product": {"color": "白"}, "order": None}},
        headers=bearer(token),
    )

    assert (inside.status_code, appended.status_code) == (200, 200)
    assert error(outside) == (422, "field_not_writable")
    assert error(sneaky) == (422, "field_not_writable")
    assert api.get(url).json()["document"] == {
        **DOCUMENT,
        "product": {**DOCUMENT["product"], "color": "黑"},
        "turns": ["hi"],
    }


def test_an_agent_without_context_fields_gets_no_block_and_unknown_contexts_are_refused(
    reach: Coordinator, api: httpx.Client
) -> None:
    assert block_for(reach, create(api), spec(), "req-1") is None
    with pytest.raises(ReachError) as caught:
        block_for(reach, "ctx-never-created", spec("product"), "req-2")
    assert caught.value.code == "unknown_context"


def test_a_delivery_refers_to_its_context_until_released(
    reach: Coordinator, api: httpx.Client
) -> None:
    context_id = create(api)

    block_for(reach, context_id, spec("product"), "req-1")
    referenced = reach.contexts.references.context_ids()
    reach.run(lambda: reach.contexts.release("req-1"))

    assert referenced == {context_id}
    assert reach.contexts.references.context_ids() == set()


@pytest.fixture
def product_agent(reach: Coordinator) -> Iterator[tuple[Agent, str, list[Any]]]:
    """A registered SDK agent reading `product`; each handler run's outcome is recorded."""
    agent = Agent(
        "product-assistant-01",
        ["product.query"],
        coordinator_url=reach.url,
        context_fields=["product"],
    )
    outcomes: list[Any] = []

    @agent.handler
    async def answer(request: AgentRequest) -> dict[str, Any]:
        try:
            seen = await request.context_data()
            again = await request.context_data()
            version = request.context_version
            written = None
            if request.payload.get("patch") is not None:
                written = await request.update_context(request.payload["patch"], if_version=version)
            cached = request.context is None or again is seen  # the second call fetched nothing
            outcome = {"seen": seen, "cached": cached, "version": version, "written": written}
        except ReachError as exc:
            outcome = {"error": exc.code}
        outcomes.append(outcome)
        return outcome

    server = ServerThread(agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    with server:
        wait_until(lambda: agent.is_registered, "the agent to register")
        yield agent, f"{server.url}/invoke", outcomes


def deliver(endpoint: str, request_id: str, block: Any, payload: Any) -> Any:
    delivery = {
        "request_id": request_id,
        "capability": "product.query",
        "payload": payload,
        "context": block,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "hop": 4,
    }
    answer = httpx.post(endpoint, json=delivery, timeout=CALL_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_sdk_agent_reads_its_projection_and_writes_its_field(
    reach: Coordinator, api: httpx.Client, product_agent: tuple[Agent, str, list[Any]]
) -> None:
    agent, endpoint, _ = product_agent
    context_id = create(api)
    registered = reach.spec(agent.id)
    block = block_for(reach, context_id, registered, "req-1")

    outcome = deliver(endpoint, "req-1", block, {"patch": {"product": {"in_stock": True}}})

    assert registered.context_fields == ["product"]
    assert outcome == {
        "seen": {"product": DOCUMENT["product"]},
        "cached": True,
        "version": 1,
        "written": 2,
    }
    assert document(api, context_id)["product"] == {**DOCUMENT["product"], "in_stock": True}


def test_an_sdk_agent_gets_nothing_outside_its_projection(
    reach: Coordinator, api: httpx.Client, product_agent: tuple[Agent, str, list[Any]]
) -> None:
    agent, endpoint, _ = product_agent
    context_id, other_id = create(api), create(api, {"product": {"sku": "OTHER"}, "secret": 1})
    block = block_for(reach, context_id, reach.spec(agent.id), "req-1")

    other_field = deliver(endpoint, "req-1", block, {"patch": {"user": {"intent": "退货"}}})
    other_context = deliver(
        endpoint, "req-2", {**block, "url": f"/v1/contexts/{other_id}"}, {"patch": None}
    )
    no_context = deliver(endpoint, "req-3", None, {"patch": None})

    assert other_field == {"error": "field_not_writable"}
    assert other_context == {"error": "unknown_context"}
    assert no_context == {"seen": {}, "cached": True, "version": None, "written": None}
    assert document(api, context_id) == DOCUMENT
    assert document(api, other_id) == {"product": {"sku": "OTHER"}, "secret": 1}


def test_with_api_keys_on_callers_need_a_key_and_a_token_opens_only_its_projection(
    settings: Settings,
) -> None:
    secured = settings.model_copy(update={"auth": "on", "admin_key": SecretStr(ADMIN_KEY)})
    keyed = bearer(ADMIN_KEY)
    with running(secured) as reach, httpx.Client(base_url=reach.url) as api:
        refused = api.post("/v1/contexts", json={"document": DOCUMENT})
        created = api.post("/v1/contexts", json={"document": DOCUMENT}, headers=keyed)
        block = block_for(reach, created.json()["context_id"], spec("product"), "req-1")
        token = bearer(block["token"])

        assert error(refused) == (401, "unauthorized")
        assert error(api.get(block["url"])) == (401, "unauthorized")
        assert api.get(block["url"], headers=token).json()["document"] == {
            "product": DOCUMENT["product"]
        }
        assert error(api.delete(block["url"], headers=token)) == (401, "unauthorized")
        assert api.get(block["url"], headers=keyed).json()["document"] == DOCUMENT


def test_an_invoke_with_a_context_id_hands_the_agent_its_projection(
    reach: Coordinator, api: httpx.Client, product_agent: tuple[Agent, str, list[Any]]
) -> None:
    _, _, outcomes = product_agent
    context_id = create(api)

    answer = api.post(
        "/v1/invoke",
        json={
            "capability": "product.query",
            "context_id": context_id,
            "payload": {"patch": {"product": {"checked": True}}},
        },
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["seen"] == {"product": DOCUMENT["product"]}
    assert outcomes[-1]["cached"] is True and outcomes[-1]["written"] == 2
    assert document(api, context_id)["product"]["checked"] is True
    assert reach.app.runtime is not None
    assert reach.app.runtime.contexts.references.context_ids() == set()  # released after
    unknown = api.post(
        "/v1/invoke", json={"capability": "product.query", "context_id": "ctx-" + "0" * 32}
    )
    assert error(unknown) == (404, "unknown_context")

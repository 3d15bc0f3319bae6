"""One rule for every `/v1` body (docs/api.md, "Request bodies"): JSON with or without
`Content-Type`, 415 `unsupported_media_type` naming the header for any other type.

Every endpoint that takes a body is sent the same body three ways, security on: with
`Content-Type: application/json`, without the header, and as curl's `-d` declares it
(form-encoded). The first two must be answered alike (and never with the framework's
"valid dictionary" complaint); the third is 415 on every one of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.server.app import create_app
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

ADMIN_KEY = "json-bodies-admin-key-0123456789"
FORM = "application/x-www-form-urlencoded"
# (method, path as the API document names it) -> a body it accepts
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/agents"): {"id": "ct-echo-01", "capabilities": ["ct.echo"]},
    ("POST", "/v1/route"): {"capability": "ct.echo"},
    ("POST", "/v1/invoke"): {"capability": "ct.echo", "payload": {"n": 1}},
    ("POST", "/v1/contexts"): {"document": {"order": "A1001"}},
    ("PATCH", "/v1/contexts/{context_id}"): {"merge": {"order": "A1002"}},
    ("POST", "/v1/keys"): {"principal": "ct-caller", "role": "caller"},
    ("PUT", "/v1/policy"): {},
    ("POST", "/v1/workflows/run"): {"steps": [{"action": "ct.echo", "param": {"n": 2}}]},
    ("POST", "/v1/workflows"): {"name": "ct-flow", "steps": [{"action": "ct.echo"}]},
    ("POST", "/v1/workflows/{name}/run"): {"input": {}},
    ("POST", "/v1/feedback"): {"request_id": "never-sent", "capability": "ct.echo"},
}


def _endpoints_with_a_body() -> set[tuple[str, str]]:
    document = create_app(Settings(decision_log="off")).api.openapi()
    found = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation and path.startswith("/v1/")
    }
    return found | {("PATCH", "/v1/contexts/{context_id}")}  # reads its body itself


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    settings = Settings(decision_log="off", admin_key=SecretStr(ADMIN_KEY))
    with (
        ServerThread(FakeAgent(name="ct-echo-01")) as agent,
        run_coordinator(settings) as (url, _),
        httpx.Client(
            base_url=url, timeout=10, headers={"authorization": f"Bearer {ADMIN_KEY}"}
        ) as http,
    ):
        transport = {"type": "http", "endpoint": f"{agent.url}/invoke"}
        BODIES[("POST", "/v1/agents")]["transport"] = transport
        # what the other endpoints work on, whichever runs first
        assert http.post("/v1/agents", json=BODIES[("POST", "/v1/agents")]).status_code == 201
        assert http.post("/v1/workflows", json=BODIES[("POST", "/v1/workflows")]).is_success
        context = http.post("/v1/contexts", json={}).json()["context_id"]
        yield http, {"context_id": context, "name": "ct-flow"}


def test_the_table_covers_every_endpoint_that_takes_a_body() -> None:
    assert set(BODIES) == _endpoints_with_a_body()


def _send(
    http: httpx.Client, endpoint: tuple[str, str], ids: dict[str, str], content_type: str | None
) -> httpx.Response:
    method, path = endpoint
    headers = {} if content_type is None else {"content-type": content_type}
    body = orjson.dumps(BODIES[endpoint])
    return http.request(method, path.format(**ids), content=body, headers=headers)


def _outcome(response: httpx.Response) -> tuple[int, str | None]:
    error = response.json().get("error") if response.status_code >= 400 else None
    return response.status_code, None if error is None else error["code"]


@pytest.mark.parametrize("endpoint", sorted(BODIES), ids=lambda e: f"{e[0]} {e[1]}")
def test_a_body_without_content_type_is_read_as_json(
    api: tuple[httpx.Client, dict[str, str]], endpoint: tuple[str, str]
) -> None:
    http, ids = api

    declared = _send(http, endpoint, ids, "application/json")
    bare = _send(http, endpoint, ids, None)

    assert _outcome(bare) == _outcome(declared), bare.text
    assert "valid dictionary" not in bare.text
    assert bare.status_code < 300 or endpoint == ("POST", "/v1/feedback"), bare.text


@pytest.mark.parametrize("endpoint", sorted(BODIES), ids=lambda e: f"{e[0]} {e[1]}")
@pytest.mark.parametrize("content_type", [FORM, "text/plain"])
def test_a_body_declared_as_anything_else_is_415_naming_the_header(
    api: tuple[httpx.Client, dict[str, str]], endpoint: tuple[str, str], content_type: str
) -> None:
    http, ids = api

    refused = _send(http, endpoint, ids, content_type)

    assert refused.status_code == 415, refused.text
    error = refused.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert "Content-Type: application/json" in error["message"]
    assert error["content_type"] == content_type


def test_json_variants_and_yaml_where_it_is_taken_pass(
    api: tuple[httpx.Client, dict[str, str]],
) -> None:
    http, ids = api
    patch = http.patch(
        f"/v1/contexts/{ids['context_id']}",
        content=b'{"step": 3}',
        headers={"content-type": "application/merge-patch+json"},
    )
    yaml = http.post(
        "/v1/workflows",
        content=b"name: ct-yaml\nsteps: [{action: ct.echo}]\n",
        headers={"content-type": "application/yaml"},
    )
    charset = http.post(
        "/v1/route",
        content=b'{"capability": "ct.echo"}',
        headers={"content-type": "Application/JSON; charset=utf-8"},
    )

    assert (patch.status_code, yaml.status_code, charset.status_code) == (200, 201, 200)
    yaml_elsewhere = http.post(
        "/v1/route", content=b"capability: x", headers={"content-type": "application/yaml"}
    )
    assert yaml_elsewhere.status_code == 415

"""/mcp as an OAuth protected resource, and refusals an MCP client can show.

The official `mcp` client given a wrong key used to show only "Server returned an error
response": a refusal on /mcp is now a JSON-RPC error at the refusal's HTTP status.
The full OAuth flow against a real IdP is in tests/identity.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

ADMIN = "mcp-authorization-admin-key-0123456789"
ISSUER = "https://idp.example.com/realms/shop"  # never fetched: metadata only names it


@pytest.fixture
def secured() -> Iterator[str]:
    with run_coordinator(Settings(auth="on", admin_key=ADMIN, decision_log="off")) as (url, _):
        yield url


@pytest.fixture
def with_oauth() -> Iterator[str]:
    settings = Settings(
        auth="on",
        admin_key=ADMIN,
        decision_log="off",
        oidc_issuer=ISSUER,
        oidc_audience="agent-reach",
    )
    with run_coordinator(settings) as (url, _):
        yield url


async def _list_tools(url: str, key: str) -> None:
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        await client.list_tools()


@pytest.mark.parametrize("key", ["ar_0123456789abcdef_" + "x" * 43, "not-a-key-at-all"])
async def test_the_mcp_client_shows_why_its_key_was_refused(secured: str, key: str) -> None:
    with pytest.raises(BaseException) as caught:
        await _list_tools(secured, key)
    shown = _mcp_error(caught.value)
    assert "unauthorized (HTTP 401)" in str(shown)
    assert "valid API key" in str(shown)


def _mcp_error(raised: BaseException) -> MCPError:
    """The MCPError the client raised, out of the task groups that wrap it."""
    if isinstance(raised, MCPError):
        return raised
    assert isinstance(raised, BaseExceptionGroup), repr(raised)
    return _mcp_error(raised.exceptions[0])


def _post(url: str, body: bytes, **headers: str) -> tuple[int, dict[str, str], dict[str, object]]:
    request = urllib.request.Request(  # noqa: S310 -- a loopback http URL
        url,
        data=body,
        method="POST",
        headers={"content-type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, dict(answer.headers), json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_a_refusal_is_a_json_rpc_error_with_the_request_id_and_the_rest_code(
    secured: str,
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).encode()
    status, headers, document = _post(secured + "/mcp", body)
    assert status == 401
    assert headers["www-authenticate"] == 'Bearer realm="agent-reach"'
    assert document["id"] == 7
    error = document["error"]
    assert isinstance(error, dict) and error["code"] == -32001
    assert error["data"]["code"] == "unauthorized" and error["data"]["status"] == 401
    status, _, document = _post(secured + "/mcp", b"{not json", authorization="Bearer nope")
    assert (status, document["id"]) == (401, None)


def test_without_oauth_the_metadata_says_how_to_turn_it_on(secured: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(secured + "/.well-known/oauth-protected-resource/mcp", timeout=10)  # noqa: S310
    assert caught.value.code == 404
    assert json.loads(caught.value.read())["error"]["code"] == "oauth_not_configured"


def test_the_protected_resource_metadata_names_the_resource_and_its_issuer(
    with_oauth: str,
) -> None:
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        with urllib.request.urlopen(with_oauth + path, timeout=10) as answer:  # noqa: S310
            metadata = json.loads(answer.read())
        assert metadata["resource"] == with_oauth + "/mcp"
        assert metadata["authorization_servers"] == [ISSUER]
        assert metadata["bearer_methods_supported"] == ["header"]
    body = json.dumps({"jsonrpc": "2.0", "id": "a", "method": "tools/list"}).encode()
    status, headers, _ = _post(with_oauth + "/mcp", body)
    assert status == 401
    assert headers["www-authenticate"] == (
        'Bearer realm="agent-reach", resource_metadata='
        f'"{with_oauth}/.well-known/oauth-protected-resource/mcp"'
    )
    # An API key still opens /mcp when OAuth is on.
    status, _, document = _post(with_oauth + "/mcp", body, authorization=f"Bearer {ADMIN}")
    assert status != 401, document

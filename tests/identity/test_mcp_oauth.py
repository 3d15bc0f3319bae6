"""The official `mcp` client's OAuth flow against the real IdP, then a tool call (issue 28).

The client finds the protected resource metadata from the coordinator's 401, the IdP's
metadata from there, registers itself (dynamic registration), runs authorization code +
PKCE with the resource indicator, and calls a tool with the access token. The login and
consent pages are driven over HTTP, as a person's browser would follow them.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import httpx2
import jwt
import pytest
from idp_kit import TestIdP
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError
from reach_kit import OTHER_AUDIENCE, Reach

IdpFactory = Callable[..., TestIdP]
ReachFactory = Callable[..., Reach]
REDIRECT_URI = "http://127.0.0.1:9/callback"  # never reached: the test reads the redirect
MAX_REDIRECTS = 10


class MemoryStorage:
    """The client's token and registration store (the SDK's `TokenStorage`)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """Follows the IdP's redirects (login, consent) with its cookies until the client's
    redirect URI, and hands the code back to the MCP client."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    async def open(self, url: str) -> None:
        self.opened.append(url)

    async def callback(self) -> AuthorizationCodeResult:
        url = self.opened[-1]
        async with httpx.AsyncClient() as http:
            for _ in range(MAX_REDIRECTS):
                answer = await http.get(url)
                assert answer.status_code in (302, 303), answer.text
                url = urljoin(url, answer.headers["location"])
                if url.startswith(REDIRECT_URI):
                    break
        query = {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}
        assert "code" in query, query
        return AuthorizationCodeResult(code=query["code"], state=query["state"], iss=query["iss"])


@pytest.fixture
def world(open_reach: ReachFactory, start_idp: IdpFactory) -> tuple[Reach, TestIdP]:
    """An IdP whose signed-in account is caller `alice` of domain a (which may invoke
    alpha.*), issuing for any loopback resource, and a coordinator trusting it with agent
    X registered."""
    issuer = start_idp(
        resource_prefixes=["http://127.0.0.1:"],
        account="alice",
        account_claims={"reach_role": "caller", "reach_domain": "a"},
    )
    reach = open_reach(issuer)
    _, endpoint = reach.start_agent("x")
    agent_key = reach.mint("agent-x", "agents", "agent")
    assert reach.register(agent_key, "x-1", endpoint, "alpha.read").status_code == 201
    return reach, issuer


async def test_the_mcp_client_completes_oauth_with_the_idp_and_calls_a_tool(
    world: tuple[Reach, TestIdP],
):
    reach, issuer = world
    browser, storage = Browser(), MemoryStorage()
    oauth = OAuthClientProvider(
        server_url=f"{reach.url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="identity-test",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )

    async with (
        httpx2.AsyncClient(auth=oauth) as http,
        Client(streamable_http_client(f"{reach.url}/mcp", http_client=http)) as client,
    ):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        called = await client.call_tool("alpha.read", {"payload": {"sku": "X5"}})

    assert tools == {"alpha.read"}
    assert not called.is_error, called
    assert called.structured_content == {"agent": "x", "echo": {"sku": "X5"}}
    # it registered itself, signed alice in, and holds a token for this resource only
    assert storage.client_info is not None and storage.client_info.client_id
    assert len(browser.opened) == 1 and browser.opened[0].startswith(f"{issuer.issuer}/auth")
    assert storage.tokens is not None
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert (claims["sub"], claims["aud"], claims["iss"]) == (
        "alice",
        f"{reach.url}/mcp",
        issuer.issuer,
    )
    # a token for the MCP resource is not one for the REST API (its audience is another)
    refused = reach.call(storage.tokens.access_token, "GET", "/v1/agents")
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "token_audience")


async def test_api_keys_keep_working_on_mcp_beside_oauth(world: tuple[Reach, TestIdP]):
    reach, _ = world
    key = reach.mint("caller-a", "a", "caller")
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}) as http,
        Client(streamable_http_client(f"{reach.url}/mcp", http_client=http)) as client,
    ):
        called = await client.call_tool("alpha.read", {"payload": {"n": 1}})
    assert not called.is_error, called


@pytest.mark.parametrize("resource", ["another coordinator's /mcp", "another service"])
async def test_a_token_issued_for_another_resource_is_refused_on_mcp(
    world: tuple[Reach, TestIdP], resource: str
):
    reach, issuer = world
    indicator = (
        "http://127.0.0.1:9/mcp" if resource.startswith("another coordinator") else OTHER_AUDIENCE
    )
    token = issuer.token({"reach_role": "caller", "reach_domain": "a"}, resource=indicator)
    with pytest.raises(BaseException) as caught:
        async with (
            httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(f"{reach.url}/mcp", http_client=http)) as client,
        ):
            await client.list_tools()
    assert "token_audience (HTTP 401)" in str(_mcp_error(caught.value))


def _mcp_error(raised: BaseException) -> MCPError:
    """The MCPError the client raised, out of the task groups that wrap it."""
    if isinstance(raised, MCPError):
        return raised
    assert isinstance(raised, BaseExceptionGroup), repr(raised)
    return _mcp_error(raised.exceptions[0])

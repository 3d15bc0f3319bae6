"""The Python SDK with IdP tokens alone: an agent registers, heartbeats and serves, a caller
invokes, and a token the coordinator finds expired is replaced once, at once."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from idp_kit import TestIdP
from reach_kit import AUDIENCE, Reach

from agent_reach import (
    Agent,
    AgentRequest,
    ClientCredentials,
    ReachClient,
    SyncReachClient,
)
from agent_reach.errors import Unauthorized
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

AGENT_TTL_S = 3  # heartbeats every second
TOKEN_TTL_S = 2  # renewed every 1.6 s: the lease outlives several tokens


def test_an_agent_registers_heartbeats_and_serves_with_idp_tokens_alone(reach: Reach, idp: TestIdP):
    agent_client = idp.register({"reach_role": "agent"}, client_id="agent-x", ttl_s=TOKEN_TTL_S)
    credentials = ClientCredentials(
        agent_client.client_id,
        agent_client.client_secret,
        issuer=idp.issuer,
        resource=AUDIENCE,
        scope="reach.register",
    )
    tokens: list[str] = []

    async def token() -> str:
        tokens.append(await credentials.atoken())
        return tokens[-1]

    agent = Agent(
        "x-sdk", ["alpha.read"], coordinator_url=reach.url, ttl=AGENT_TTL_S, token_provider=token
    )

    @agent.handler
    async def read(request: AgentRequest) -> dict[str, object]:
        return {"read": request.payload}

    caller_client = idp.register(
        {"reach_role": "caller", "reach_domain": "a"}, client_id="caller-a"
    )
    caller = ClientCredentials(
        caller_client.client_id, caller_client.client_secret, token_url=f"{idp.issuer}/token"
    )
    server = ServerThread(agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    with server, SyncReachClient(reach.url, token_provider=caller) as client:
        assert agent.is_registered
        started = time.monotonic()
        # Three tokens in turn (each lives 2 s): the lease (3 s) was renewed with them.
        wait_until(lambda: len(set(tokens)) >= 3, "the agent to renew its token twice")
        assert time.monotonic() - started > AGENT_TTL_S
        view = reach.admin("GET", "/v1/agents/x-sdk").json()
        assert view["status"] == "healthy"

        result = client.invoke("alpha.read", payload={"sku": "X5"})

    assert result.result == {"read": {"sku": "X5"}}
    assert reach.admin("GET", "/v1/agents/x-sdk").status_code == 404  # deregistered


async def test_an_expired_token_is_replaced_once_and_the_call_goes_through(
    reach: Reach, idp: TestIdP
):
    expired = idp.sign(idp.claims(AUDIENCE, sub="caller-a", reach_role="caller", exp=1_000_000))
    fresh = idp.token({"reach_role": "caller", "reach_domain": "a"}, sub="caller-a")
    handed = [expired, fresh]
    calls: list[str] = []

    def token() -> str:
        calls.append(handed[min(len(calls), 1)])
        return calls[-1]

    async with ReachClient(reach.url, token_provider=token) as client:
        assert await client.agents() == []

    assert calls == [expired, fresh]


def test_a_blocking_client_replaces_an_expired_token_too(reach: Reach, idp: TestIdP):
    expired = idp.sign(idp.claims(AUDIENCE, sub="caller-a", reach_role="caller", exp=1_000_000))
    fresh = idp.token({"reach_role": "caller", "reach_domain": "a"}, sub="caller-a")
    calls: list[str] = []

    def token() -> str:
        calls.append(expired if not calls else fresh)
        return calls[-1]

    with SyncReachClient(reach.url, token_provider=token) as client:
        assert client.agents() == []

    assert calls == [expired, fresh]


def test_a_token_refused_for_another_reason_is_not_retried(reach: Reach, idp: TestIdP):
    other = idp.token({"reach_role": "caller"}, resource="https://other.test/api")
    calls: list[str] = []

    def token() -> str:
        calls.append(other)
        return other

    with (
        SyncReachClient(reach.url, token_provider=token) as client,
        pytest.raises(Unauthorized) as refused,
    ):
        client.agents()

    assert refused.value.code == "token_audience"
    assert calls == [other]


def test_an_agent_whose_idp_is_down_at_start_registers_once_it_is_back(
    open_reach: Callable[..., Reach], start_idp: Callable[..., TestIdP]
):
    issuer = start_idp()
    reach = open_reach(issuer)
    client = issuer.register({"reach_role": "agent"}, client_id="agent-x")
    issuer.stop()
    credentials = ClientCredentials(client.client_id, client.client_secret, issuer=issuer.issuer)
    agent = Agent("x-late", ["alpha.read"], coordinator_url=reach.url, token_provider=credentials)
    agent.handler(lambda request: None)
    server = ServerThread(agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    with server:
        assert not agent.is_registered  # no token yet: it keeps trying in the background
        issuer.start()  # back on the same port, with the same clients
        # its registration backs off up to 5 s between tries
        wait_until(lambda: agent.is_registered, "the agent to register", timeout_s=20)
        assert reach.admin("GET", "/v1/agents/x-late").status_code == 200

"""The SDK's token providers against the real IdP: `ClientCredentials` finds the token
endpoint, fetches, keeps and renews tokens; the clients take a provider instead of a key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import jwt
import pytest
from idp_kit import TestIdP
from reach_kit import AUDIENCE

from agent_reach import ClientCredentials, ReachClient, SyncReachClient, TokenUnavailable
from agent_reach.testing.waiting import wait_until


def _claims(idp: TestIdP, token: str) -> dict[str, object]:
    """The token's claims once its signature checks out against the IdP's published keys."""
    key = jwt.PyJWKClient(f"{idp.issuer}/jwks").get_signing_key_from_jwt(token)
    return dict(jwt.decode(token, key, algorithms=["RS256"], audience=AUDIENCE))


def test_client_credentials_from_the_issuer_fetch_a_real_token_and_keep_it(idp: TestIdP):
    client = idp.register({"reach_role": "agent", "reach_capabilities": ["alpha.*"]})
    credentials = ClientCredentials(
        client.client_id, client.client_secret, issuer=idp.issuer, scope="reach.register"
    )

    token = credentials.token()

    claims = _claims(idp, token)
    assert claims["sub"] == client.client_id
    assert claims["reach_role"] == "agent"
    assert claims["reach_capabilities"] == ["alpha.*"]
    assert claims["scope"] == "reach.register"
    assert credentials.token_url == f"{idp.issuer}/token"  # found by discovery
    assert credentials.token() == token  # kept: no second fetch (a fetch has a new jti)


def test_a_token_is_renewed_before_it_expires_and_at_once_when_expired(idp: TestIdP):
    lifetime_s = 3
    client = idp.register({"reach_role": "caller"}, ttl_s=lifetime_s)
    credentials = ClientCredentials(
        client.client_id, client.client_secret, token_url=f"{idp.issuer}/token"
    )
    fetched = time.monotonic()
    first = credentials.token()

    second = wait_until(lambda: (t := credentials.token()) != first and t, "a renewed token")
    assert time.monotonic() - fetched < lifetime_s  # at 80 % of its life, before it ran out

    credentials.expire(second)  # what a 401 token_expired does
    assert credentials.token() not in (first, second)


async def test_concurrent_callers_share_one_fetch(idp: TestIdP):
    client = idp.register({"reach_role": "caller"})
    credentials = ClientCredentials(client.client_id, client.client_secret, issuer=idp.issuer)

    tokens = await asyncio.gather(*(credentials.atoken() for _ in range(10)))

    assert len(set(tokens)) == 1  # every fetch would carry its own jti
    assert await credentials.atoken() == tokens[0]


def test_client_secret_post_and_the_resource_indicator(idp: TestIdP):
    client = idp.register({"reach_role": "caller"}, auth_method="client_secret_post")
    credentials = ClientCredentials(
        client.client_id,
        client.client_secret,
        token_url=f"{idp.issuer}/token",
        auth_method="client_secret_post",
        resource="https://other.test/api",
    )

    claims = jwt.decode(credentials.token(), options={"verify_signature": False})

    assert claims["aud"] == "https://other.test/api"


def test_a_refused_client_is_token_unavailable_with_the_idps_error(idp: TestIdP):
    client = idp.register({"reach_role": "caller"})
    credentials = ClientCredentials(client.client_id, "not-the-secret", issuer=idp.issuer)

    with pytest.raises(TokenUnavailable, match="invalid_client"):
        credentials.token()


def test_an_unreachable_issuer_is_token_unavailable_not_a_hang(idp: TestIdP):
    credentials = ClientCredentials(
        "someone", "secret", issuer=f"{idp.issuer}/no-such-tenant", timeout_s=2
    )

    with pytest.raises(TokenUnavailable, match="token_endpoint"):
        credentials.token()


async def test_an_idp_that_is_down_is_token_unavailable_not_a_coordinator_outage(
    start_idp: Callable[..., TestIdP],
):
    stopped = start_idp()
    client = stopped.register({"reach_role": "caller"})
    stopped.stop()
    credentials = ClientCredentials(client.client_id, client.client_secret, issuer=stopped.issuer)

    with pytest.raises(TokenUnavailable, match="could not reach the IdP"):
        credentials.token()
    with pytest.raises(TokenUnavailable, match="could not reach the IdP"):
        await credentials.atoken()


async def test_the_clients_take_a_key_or_a_token_provider_not_both():
    with pytest.raises(ValueError, match="not both"):
        ReachClient("http://127.0.0.1:9", api_key="k", token_provider=lambda: "t")
    with pytest.raises(ValueError, match="exactly one"):
        ClientCredentials("id", "secret")


def test_a_blocking_client_refuses_an_async_token_callable():
    async def token() -> str:
        return "t"

    with (
        SyncReachClient("http://127.0.0.1:9", token_provider=token) as client,
        pytest.raises(TypeError, match="not async"),
    ):
        client.agents()

"""Token attacks, each its own test, 0 accepted (issue 28).

Every forged or misused token is tried where it would pay off: reading the registry,
invoking a capability (the agent's ledger must stay empty), minting an API key and
replacing the policy. Tokens are forged with npm `jose` (`idp/forge.mjs`) or issued by
the real IdP and then misused; each attack runs on memory and Redis, and where keys
change, on every coordinator sharing the state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from idp_kit import IdpClient, TestIdP, forge, new_key, public_jwk, public_pem
from reach_kit import AUDIENCE, OTHER_AUDIENCE, POLICY, Reach

from agent_reach.testing.fake_agent import FakeAgent

IdpFactory = Callable[..., TestIdP]
ReachFactory = Callable[..., Reach]
ADMIN_CLAIMS = {"reach_role": "admin", "reach_domain": "a"}


@dataclass
class Target:
    """A coordinator with agent X (`alpha.read`, registered with an API key) in place."""

    reach: Reach
    agent: FakeAgent

    def attempts(self, token: str, *, at: str | None = None) -> dict[str, int]:
        """What the token got for each thing worth stealing (each must be 4xx)."""
        reach = self.reach
        return {
            "read": reach.call(token, "GET", "/v1/agents", at=at).status_code,
            "invoke": reach.invoke(token, "alpha.read", at=at).status_code,
            "mint a key": reach.call(
                token, "POST", "/v1/keys", at=at, json={"principal": "p", "role": "admin"}
            ).status_code,
            "replace the policy": reach.call(
                token, "PUT", "/v1/policy", at=at, json={"margin": 0.3}
            ).status_code,
        }

    def assert_refused(self, token: str, code: str, *, everywhere: bool = True) -> None:
        """Refused with `code` wherever tried, nothing delivered, nothing changed."""
        urls = [self.reach.url, self.reach.second()] if everywhere else [self.reach.url]
        for url in urls:
            accepted = {w: s for w, s in self.attempts(token, at=url).items() if s < 400}
            assert accepted == {}, f"accepted at {url}: {accepted}"
            refusal = self.reach.call(token, "GET", "/v1/agents", at=url).json()["error"]
            assert refusal["code"] == code, refusal
        assert self.agent.received == []
        keys = self.reach.admin("GET", "/v1/keys").json()["keys"]
        assert [k["principal"] for k in keys if k["principal"] == "p"] == []


def _target(reach: Reach) -> Target:
    agent, endpoint = reach.start_agent("x")
    key = reach.mint("agent-x", "agents", "agent")
    assert reach.register(key, "x-1", endpoint, "alpha.read").status_code == 201
    return Target(reach, agent)


@pytest.fixture
def target(reach: Reach) -> Target:
    """The shared IdP's coordinator with agent X."""
    return _target(reach)


@pytest.fixture
def rotating(open_reach: ReachFactory, start_idp: IdpFactory) -> Iterator[tuple[Target, TestIdP]]:
    """A private IdP with keys k1 and k2 (signing with k1), and a coordinator trusting it
    that refetches the key set for every unknown kid (no rate limit)."""
    issuer = start_idp(keys=[new_key("k1"), new_key("k2", "ES256")], sign_kid="k1")
    yield _target(open_reach(issuer, oidc_jwks_refresh_s=0)), issuer


def test_alg_none_is_refused(target: Target, idp: TestIdP):
    claims = idp.claims(AUDIENCE, **ADMIN_CLAIMS)
    for header in ({"kid": idp.signing_key()["kid"]}, {}):
        target.assert_refused(forge(claims, alg="none", header=header), "token_signature")


@pytest.mark.parametrize("secret", ["pem", "jwk"])
def test_hs256_signed_with_the_issuers_public_key_is_refused(
    target: Target, idp: TestIdP, secret: str
):
    key = idp.signing_key()
    published = next(k for k in idp.jwks()["keys"] if k["kid"] == key["kid"])
    assert public_jwk(key).items() <= published.items()  # what anyone can read
    hmac_key = public_pem(key) if secret == "pem" else json.dumps(published).encode()
    token = forge(
        idp.claims(AUDIENCE, **ADMIN_CLAIMS),
        alg="HS256",
        secret=hmac_key,
        header={"kid": key["kid"], "typ": "at+jwt"},
    )
    target.assert_refused(token, "token_signature")


def test_an_expired_token_is_refused(target: Target, idp: TestIdP):
    now = int(time.time())
    token = idp.sign(idp.claims(AUDIENCE, iat=now - 7200, exp=now - 3600, **ADMIN_CLAIMS))
    target.assert_refused(token, "token_expired")


def test_a_token_not_yet_valid_is_refused(target: Target, idp: TestIdP):
    later = int(time.time()) + 3600
    token = idp.sign(idp.claims(AUDIENCE, nbf=later, exp=later + 600, **ADMIN_CLAIMS))
    target.assert_refused(token, "token_not_yet_valid")


def test_a_token_for_another_audience_is_refused(target: Target, idp: TestIdP):
    issued = idp.token(ADMIN_CLAIMS, resource=OTHER_AUDIENCE)  # real, for another service
    target.assert_refused(issued, "token_audience")
    forged = idp.sign(idp.claims([OTHER_AUDIENCE, "https://reach.test"], **ADMIN_CLAIMS))
    target.assert_refused(forged, "token_audience")


def test_a_token_naming_another_issuer_is_refused(target: Target, idp: TestIdP):
    for issuer in ("https://evil.example", idp.issuer + "/", idp.issuer.upper()):
        token = idp.sign(idp.claims(AUDIENCE, iss=issuer, **ADMIN_CLAIMS))
        target.assert_refused(token, "token_issuer")


def test_a_token_of_a_second_idp_the_coordinator_does_not_trust_is_refused(
    target: Target, idp: TestIdP, start_idp: IdpFactory
):
    second = start_idp(keys=[new_key(idp.signing_key()["kid"])])  # even the same kid
    issued = second.token(ADMIN_CLAIMS)  # real, audience ours, issuer its own
    target.assert_refused(issued, "token_issuer")
    # its key signing a token that claims the trusted issuer
    posing = second.sign(idp.claims(AUDIENCE, **ADMIN_CLAIMS))
    target.assert_refused(posing, "token_signature")


def test_a_key_removed_from_the_jwks_is_refused_after_refresh(
    rotating: tuple[Target, TestIdP],
):
    target, issuer = rotating
    signed_by_k1 = issuer.token(ADMIN_CLAIMS | {"reach_role": "caller"})
    assert target.reach.call(signed_by_k1, "GET", "/v1/agents").status_code == 200

    issuer.restart(keys=[k for k in issuer.keys if k["kid"] == "k2"], sign_kid="k2")
    assert [k["kid"] for k in issuer.jwks()["keys"]] == ["k2"]
    # a kid the coordinator has not seen makes it refetch the set
    probe = issuer.sign(issuer.claims(), jwk=new_key("probe"))
    assert target.reach.refusal(probe).code == "token_signature"

    target.assert_refused(signed_by_k1, "token_signature")
    signed_by_k2 = issuer.token(client=_client_of(issuer))
    assert target.reach.call(signed_by_k2, "GET", "/v1/agents").status_code == 200


def test_a_token_replayed_after_its_key_rotated_out_is_refused(
    rotating: tuple[Target, TestIdP],
):
    target, issuer = rotating
    old = issuer.token(ADMIN_CLAIMS | {"reach_role": "caller"})
    assert target.reach.call(old, "GET", "/v1/agents").status_code == 200

    issuer.restart(keys=[new_key("k3")], sign_kid="k3")  # k1 and k2 gone, k3 in
    new = issuer.token(client=_client_of(issuer))
    assert target.reach.call(new, "GET", "/v1/agents").status_code == 200  # refetched

    target.assert_refused(old, "token_signature")


def test_an_admin_role_claim_is_refused_when_the_issuer_may_mint_callers_only(
    open_reach: ReachFactory, idp: TestIdP
):
    policy = (
        POLICY
        + f'\n[[identity.issuers]]\nissuer = "{idp.issuer}"\nroles = ["caller"]\n'
        + '\n[[identity.mappings]]\ngroup = "admins"\nrole = "admin"\n'
    )
    target = _target(open_reach(idp, policy=policy))
    target.assert_refused(idp.token(ADMIN_CLAIMS), "role_not_allowed")
    # nor through a group the policy maps to admin
    by_group = idp.token({"groups": ["admins"], "reach_domain": "a"})
    target.assert_refused(by_group, "role_not_allowed")
    # a caller of the same issuer still gets in
    caller = idp.token({"reach_role": "caller", "reach_domain": "a"})
    assert target.reach.invoke(caller, "alpha.read").status_code == 200


def _client_of(issuer: TestIdP) -> IdpClient:
    """The first client registered with `issuer` (it survives restarts)."""
    first = issuer.clients[0]
    return IdpClient(first["client_id"], first["client_secret"])

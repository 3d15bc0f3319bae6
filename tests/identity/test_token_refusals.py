"""Each refusal of a bearer token has its own code and an RFC 6750 challenge a plain HTTP
client reads (urllib here); an IdP that is down or frozen leaves the keys already held
working, and an unknown kid is a 401 within the fetch timeout, never a 500 or a hang."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from idp_kit import TestIdP, new_key
from reach_kit import OTHER_AUDIENCE, POLICY, Reach

from agent_reach.clock import ManualClock

FETCH_TIMEOUT_S = 1.0
JWKS_TTL_S = 60.0
IdpFactory = Callable[..., TestIdP]
ReachFactory = Callable[..., Reach]


def _assert_refused(reach: Reach, token: str, code: str) -> None:
    refusal = reach.refusal(token)
    assert (refusal.status, refusal.code) == (401, code), refusal
    assert refusal.challenge is not None
    assert refusal.challenge.startswith("Bearer ")
    assert 'error="invalid_token"' in refusal.challenge
    assert 'error_description="' in refusal.challenge


def test_an_expired_token_is_token_expired(reach: Reach, idp: TestIdP):
    _assert_refused(reach, idp.sign(idp.claims(exp=int(time.time()) - 120)), "token_expired")


def test_the_invoke_fast_path_refuses_with_the_same_code_and_challenge(reach: Reach, idp: TestIdP):
    expired = idp.sign(idp.claims(exp=int(time.time()) - 120))
    body = {"capability": "alpha.read", "payload": {}}
    refusal = reach.refusal(expired, "/v1/invoke", body)
    assert (refusal.status, refusal.code) == (401, "token_expired")
    assert refusal.challenge == (
        'Bearer realm="agent-reach", error="invalid_token", '
        'error_description="the token has expired"'
    )
    other = reach.refusal(
        idp.token({"reach_role": "caller"}, resource=OTHER_AUDIENCE), "/v1/invoke", body
    )
    assert (other.status, other.code) == (401, "token_audience")
    assert other.challenge is not None and 'error="invalid_token"' in other.challenge


@pytest.mark.parametrize("claim", ["nbf", "iat"])
def test_a_token_from_the_future_is_token_not_yet_valid(reach: Reach, idp: TestIdP, claim: str):
    later = int(time.time()) + 600
    token = idp.sign(idp.claims(**{claim: later, "exp": later + 600}))
    _assert_refused(reach, token, "token_not_yet_valid")


def test_a_token_for_another_service_is_token_audience(reach: Reach, idp: TestIdP):
    token = idp.token({"reach_role": "caller"}, resource=OTHER_AUDIENCE)  # issued, for them
    _assert_refused(reach, token, "token_audience")


def test_a_token_of_an_issuer_not_trusted_is_token_issuer(reach: Reach, start_idp: IdpFactory):
    stranger = start_idp()
    _assert_refused(reach, stranger.token({"reach_role": "caller"}), "token_issuer")


def test_a_bad_signature_or_an_unknown_kid_is_token_signature(reach: Reach, idp: TestIdP):
    token = idp.token({"reach_role": "caller"})
    head, body, signature = token.split(".")
    flipped = signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")
    _assert_refused(reach, f"{head}.{body}.{flipped}", "token_signature")
    stranger_key = new_key("not-a-key-of-the-idp")
    _assert_refused(reach, idp.sign(idp.claims(), jwk=stranger_key), "token_signature")


def test_a_token_that_is_no_jwt_is_token_malformed(reach: Reach):
    _assert_refused(reach, "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln", "token_malformed")
    # no JWT shape at all: taken for an API key, and refused as one
    refusal = reach.refusal("eyJub3QiOiJhIGp3dA")
    assert (refusal.status, refusal.code) == (401, "unauthorized")
    assert refusal.challenge == 'Bearer realm="agent-reach"'


def test_claims_naming_no_principal_are_token_malformed(reach: Reach, idp: TestIdP):
    _assert_refused(reach, idp.sign(idp.claims(sub=None)), "token_malformed")
    _assert_refused(reach, idp.sign(idp.claims(sub="has spaces/and slashes")), "token_malformed")
    _assert_refused(reach, idp.sign(idp.claims(iss=None)), "token_malformed")
    _assert_refused(reach, idp.sign(idp.claims(exp=None)), "token_malformed")  # no expiry
    _assert_refused(reach, idp.sign(idp.claims(exp="tomorrow")), "token_malformed")


def test_a_role_the_policy_does_not_allow_the_issuer_is_403(open_reach: ReachFactory, idp: TestIdP):
    policy = POLICY + f'\n[[identity.issuers]]\nissuer = "{idp.issuer}"\nroles = ["caller"]\n'
    reach = open_reach(idp, policy=policy)
    refused = reach.call(idp.token({"reach_role": "agent"}), "GET", "/v1/agents")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "role_not_allowed")


def _down_rig(
    open_reach: ReachFactory, start_idp: IdpFactory
) -> tuple[Reach, TestIdP, ManualClock, str]:
    """A coordinator (manual clock) that has fetched the keys of its own IdP, and a token
    of that IdP it accepted."""
    clock = ManualClock(time.time() - 1_700_000_000.0)
    issuer = start_idp()
    reach = open_reach(
        issuer, clock=clock, oidc_jwks_ttl_s=JWKS_TTL_S, oidc_timeout_s=FETCH_TIMEOUT_S
    )
    token = issuer.token({"reach_role": "caller"})
    assert reach.call(token, "GET", "/v1/agents").status_code == 200
    return reach, issuer, clock, token


def _assert_unknown_kid_is_a_prompt_401(reach: Reach, issuer: TestIdP) -> None:
    unknown = issuer.sign(issuer.claims(), jwk=new_key("rotated-in-while-down"))
    started = time.monotonic()
    refusal = reach.refusal(unknown)
    elapsed = time.monotonic() - started
    assert (refusal.status, refusal.code) == (401, "token_signature")
    assert elapsed < FETCH_TIMEOUT_S + 2.0  # the fetch timeout, not a hang


def test_an_idp_that_is_down_leaves_the_held_keys_working(
    open_reach: ReachFactory, start_idp: IdpFactory
):
    reach, issuer, clock, token = _down_rig(open_reach, start_idp)
    issuer.stop()
    clock.advance(JWKS_TTL_S * 2)  # the held set is stale; its refresh fails

    for _ in range(3):
        assert reach.call(token, "GET", "/v1/agents").status_code == 200
    # a token issued since (signed with the same key) is accepted too, on every coordinator
    fresh = issuer.sign(issuer.claims(reach_role="caller", sub="later-caller"))
    for url in (reach.url, reach.second()):
        assert reach.call(fresh, "GET", "/v1/agents", at=url).status_code == 200
    _assert_unknown_kid_is_a_prompt_401(reach, issuer)


def test_a_frozen_idp_makes_an_unknown_kid_wait_the_fetch_timeout_only(
    open_reach: ReachFactory, start_idp: IdpFactory
):
    reach, issuer, clock, token = _down_rig(open_reach, start_idp)
    issuer.pause()  # accepts connections, answers nothing
    try:
        _assert_unknown_kid_is_a_prompt_401(reach, issuer)
        clock.advance(JWKS_TTL_S * 2)
        assert reach.call(token, "GET", "/v1/agents").status_code == 200
    finally:
        issuer.resume()

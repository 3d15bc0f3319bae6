"""The OIDC verifier against a real HTTP issuer on loopback (discovery + JWKS served by
the standard library), tokens signed by PyJWT, time on a manual clock.

The end-to-end tests with a certified IdP (node-oidc-provider) are in tests/identity.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from agent_reach.backends.memory.tasks import MemoryKeySetStore
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.errors import Forbidden, Unauthorized
from agent_reach.identity.jwks import KeySets
from agent_reach.identity.oidc import OidcVerifier
from agent_reach.policy.policy import Policy

AUDIENCE = "agent-reach"
START = 1_700_001_000.0  # ManualClock(1000).wall()


class Issuer:
    """An IdP's discovery document and key set over HTTP; counts the JWKS fetches."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}  # kid -> private key
        self.jwks_hits = 0
        self.up = True
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not issuer.up:
                    self.send_response(503)
                    self.end_headers()
                    return
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                elif self.path == "/jwks":
                    issuer.jwks_hits += 1
                    body = {"keys": [issuer.public_jwk(kid) for kid in issuer.keys]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def add_rsa(self, kid: str) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def add_ec(self, kid: str) -> None:
        self.keys[kid] = ec.generate_private_key(ec.SECP256R1())

    def public_jwk(self, kid: str) -> dict[str, Any]:
        key = self.keys[kid]
        if isinstance(key, rsa.RSAPrivateKey):
            jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
            return {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}
        return {**ECAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid, "use": "sig"}

    def token(self, kid: str, **claims: Any) -> str:
        key = self.keys[kid]
        alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
        body = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "shop-frontend",
            "iat": START,
            "exp": START + 300,
            "reach_role": "caller",
            "reach_capabilities": ["order.*"],
            **claims,
        }
        return jwt.encode({k: v for k, v in body.items() if v is not None}, key, alg, {"kid": kid})

    def public_pem(self, kid: str) -> bytes:
        return (
            self.keys[kid]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    served = Issuer()
    served.add_rsa("k1")
    yield served
    served.close()


class Setup:
    def __init__(self, issuer: Issuer, policy: Policy | None = None) -> None:
        self.clock = ManualClock(1_000.0)  # wall() is START + 1000
        self.store = MemoryKeySetStore(self.clock)
        self.policy = policy or Policy()
        self.settings = Settings(oidc_issuer=issuer.url, oidc_audience=AUDIENCE)
        self.verifiers: list[OidcVerifier] = []

    def verifier(self) -> OidcVerifier:
        keysets = KeySets(
            self.settings.oidc_issuer,
            self.store,
            self.clock,
            ttl_s=self.settings.oidc_jwks_ttl_s,
            refresh_s=self.settings.oidc_jwks_refresh_s,
            timeout_s=1.0,
        )
        verifier = OidcVerifier(self.settings, keysets, lambda: self.policy, self.clock)
        self.verifiers.append(verifier)
        return verifier

    async def aclose(self) -> None:
        for verifier in self.verifiers:
            await verifier.keysets.aclose()


@pytest.fixture
async def setup(issuer: Issuer) -> Any:
    made = Setup(issuer)
    yield made
    await made.aclose()


def _named(issuer: Issuer, sub: str) -> str:
    """A principal of an issuer no rule names: in its namespace, `<host:port>:<sub>`."""
    return issuer.url.removeprefix("http://") + ":" + sub


async def refusal(verifier: OidcVerifier, token: str, resource: str | None = None) -> str:
    with pytest.raises((Unauthorized, Forbidden)) as caught:
        await verifier.verify(token, resource)
    return caught.value.code


async def test_a_valid_token_is_a_principal_with_its_claims(issuer: Issuer, setup: Setup) -> None:
    issuer.add_ec("k2")
    verifier = setup.verifier()
    principal = await verifier.verify(issuer.token("k1", reach_domain="shop"))
    assert (principal.name, principal.role, principal.domain) == (
        _named(issuer, "shop-frontend"),
        "caller",
        "shop",
    )
    assert principal.capabilities == ("order.*",)
    assert (await verifier.verify(issuer.token("k2", sub="es-agent"))).name == _named(
        issuer, "es-agent"
    )
    assert verifier.kept(issuer.token("k1", reach_domain="shop")) == principal


@pytest.mark.parametrize(
    ("claims", "code"),
    [
        ({"exp": START - 31}, "token_expired"),
        ({"nbf": START + 31}, "token_not_yet_valid"),
        ({"iat": START + 31}, "token_not_yet_valid"),
        ({"aud": "another-service"}, "token_audience"),
        ({"aud": ["another-service", "a-third"]}, "token_audience"),
        ({"exp": None}, "token_malformed"),
        ({"exp": "tomorrow"}, "token_malformed"),
        ({"sub": None}, "token_malformed"),
        ({"sub": "a/b"}, "token_malformed"),
        ({"reach_capabilities": ["order.*", "NOT A PATTERN"]}, "token_malformed"),
        ({"reach_role": "root"}, "role_not_allowed"),
        ({"reach_role": None}, "role_not_allowed"),
    ],
)
async def test_each_bad_claim_has_its_code(
    issuer: Issuer, setup: Setup, claims: dict[str, Any], code: str
) -> None:
    assert await refusal(setup.verifier(), issuer.token("k1", **claims)) == code


async def test_the_leeway_accepts_small_skew(issuer: Issuer, setup: Setup) -> None:
    verifier = setup.verifier()
    assert await verifier.verify(issuer.token("k1", exp=START - 29, nbf=START + 29))


async def test_a_kept_token_expires_on_the_clock(issuer: Issuer, setup: Setup) -> None:
    verifier = setup.verifier()
    token = issuer.token("k1")
    await verifier.verify(token)
    setup.clock.advance(300 + 30)
    assert verifier.kept(token) is None
    assert await refusal(verifier, token) == "token_expired"


def _unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}."


async def test_forged_signatures_are_refused(issuer: Issuer, setup: Setup) -> None:
    verifier = setup.verifier()
    claims = jwt.decode(issuer.token("k1"), options={"verify_signature": False})
    none = _unsigned({"alg": "none", "kid": "k1", "typ": "JWT"}, claims)
    assert await refusal(verifier, none) == "token_signature"
    # HS256 keyed with the issuer's public key: PyJWT refuses to sign with a PEM, so the
    # forgery is made by hand with the standard library's HMAC.
    import hashlib
    import hmac

    head = _unsigned({"alg": "HS256", "kid": "k1", "typ": "JWT"}, claims).rstrip(".")
    mac = hmac.new(issuer.public_pem("k1"), head.encode(), hashlib.sha256).digest()
    hs256 = head + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    assert await refusal(verifier, hs256) == "token_signature"
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    wrong_key = jwt.encode(claims, other, "RS256", {"kid": "k1"})
    assert await refusal(verifier, wrong_key) == "token_signature"
    assert await refusal(verifier, "eyJhbGciOi.not-base64.x") == "token_malformed"


async def test_an_untrusted_issuer_is_refused_before_any_fetch(
    issuer: Issuer, setup: Setup
) -> None:
    stranger = Issuer()
    try:
        stranger.add_rsa("k1")
        assert await refusal(setup.verifier(), stranger.token("k1")) == "token_issuer"
        assert stranger.jwks_hits == 0
    finally:
        stranger.close()


async def test_an_unknown_kid_refetches_at_most_once_per_interval(
    issuer: Issuer, setup: Setup
) -> None:
    verifier = setup.verifier()
    await verifier.verify(issuer.token("k1"))
    assert issuer.jwks_hits == 1
    header = {"alg": "RS256", "kid": "made-up", "typ": "JWT"}
    claims = jwt.decode(issuer.token("k1"), options={"verify_signature": False})
    for _ in range(5):  # the signature does not matter: the kid is looked up first
        assert await refusal(verifier, _unsigned(header, claims) + "c2ln") == "token_signature"
    assert issuer.jwks_hits == 2  # one refetch for the first unknown kid, none after
    setup.clock.advance(setup.settings.oidc_jwks_refresh_s)
    assert await refusal(verifier, _unsigned(header, claims) + "c2ln") == "token_signature"
    assert issuer.jwks_hits == 3


async def test_a_rotated_key_verifies_after_one_refetch(issuer: Issuer, setup: Setup) -> None:
    verifier = setup.verifier()
    await verifier.verify(issuer.token("k1"))
    issuer.add_rsa("k2")
    assert (await verifier.verify(issuer.token("k2"))).name == _named(issuer, "shop-frontend")


async def test_a_key_removed_from_the_set_is_refused_after_refresh(
    issuer: Issuer, setup: Setup
) -> None:
    verifier = setup.verifier()
    old = issuer.token("k1")
    await verifier.verify(old)
    issuer.add_rsa("k2")
    del issuer.keys["k1"]
    await verifier.verify(issuer.token("k2"))  # the unknown kid refetches the set
    assert verifier.kept(old) is None  # what was verified under the old set is dropped
    assert await refusal(verifier, old) == "token_signature"


async def test_the_idp_down_leaves_held_keys_working(issuer: Issuer, setup: Setup) -> None:
    verifier = setup.verifier()
    await verifier.verify(issuer.token("k1"))
    issuer.up = False
    setup.clock.advance(setup.settings.oidc_jwks_ttl_s + 1)  # stale: a refetch is tried
    token = issuer.token("k1", iat=setup.clock.wall(), exp=setup.clock.wall() + 60)
    assert (await verifier.verify(token)).name == _named(issuer, "shop-frontend")
    header = {"alg": "RS256", "kid": "k9", "typ": "JWT"}
    claims = jwt.decode(token, options={"verify_signature": False})
    assert await refusal(verifier, _unsigned(header, claims) + "c2ln") == "token_signature"


async def test_an_idp_that_never_answered_refuses_with_401(setup: Setup) -> None:
    setup.settings = Settings(oidc_issuer="http://127.0.0.1:9", oidc_audience=AUDIENCE)
    verifier = setup.verifier()
    claims = {"iss": "http://127.0.0.1:9", "aud": AUDIENCE, "sub": "x", "exp": START + 60}
    token = _unsigned({"alg": "RS256", "kid": "k1", "typ": "JWT"}, claims) + "c2ln"
    assert await refusal(verifier, token) == "token_signature"


async def test_coordinators_share_one_fetch_through_the_store(issuer: Issuer, setup: Setup) -> None:
    await setup.verifier().verify(issuer.token("k1"))
    await setup.verifier().verify(issuer.token("k1"))
    assert issuer.jwks_hits == 1


async def test_the_resource_audience_is_accepted_only_where_offered(
    issuer: Issuer, setup: Setup
) -> None:
    verifier = setup.verifier()
    token = issuer.token("k1", aud="http://127.0.0.1:8500/mcp")
    assert await verifier.verify(token, "http://127.0.0.1:8500/mcp")
    assert await refusal(verifier, token) == "token_audience"


async def test_the_policy_bounds_an_issuers_roles(issuer: Issuer, setup: Setup) -> None:
    setup.policy = Policy.model_validate(
        {"identity": {"issuers": [{"issuer": issuer.url, "roles": ["caller"]}]}}
    )
    verifier = setup.verifier()
    assert await refusal(verifier, issuer.token("k1", reach_role="admin")) == "role_not_allowed"
    assert (await verifier.verify(issuer.token("k1"))).role == "caller"


async def test_groups_and_scopes_map_to_roles_and_grants(issuer: Issuer, setup: Setup) -> None:
    setup.policy = Policy.model_validate(
        {
            "identity": {
                "issuers": [{"issuer": issuer.url, "roles": ["caller", "agent"]}],
                "mappings": [
                    {"group": "logistics", "role": "agent", "capabilities": ["logistics.*"]},
                    {"scope": "reach:orders", "capabilities": ["order.track"], "domain": "shop"},
                ],
            }
        }
    )
    verifier = setup.verifier()
    agent = await verifier.verify(
        issuer.token("k1", reach_role=None, reach_capabilities=None, groups=["logistics"])
    )
    assert (agent.role, agent.capabilities) == ("agent", ("logistics.*",))
    caller = await verifier.verify(issuer.token("k1", scope="openid reach:orders"))
    assert (caller.role, caller.capabilities, caller.domain) == (
        "caller",
        ("order.*", "order.track"),
        "shop",
    )
    nothing = issuer.token("k1", reach_role=None, groups=["marketing"])
    assert await refusal(verifier, nothing) == "role_not_allowed"


async def test_an_issuers_prefix_keeps_its_principals_apart_from_key_principals(
    issuer: Issuer, setup: Setup
) -> None:
    setup.policy = Policy.model_validate(
        {"identity": {"issuers": [{"issuer": issuer.url, "principal_prefix": "kc:"}]}}
    )
    principal = await setup.verifier().verify(issuer.token("k1", sub="admin"))
    assert principal.name == "kc:admin"


async def test_without_a_rule_an_issuers_token_may_not_be_admin(
    issuer: Issuer, setup: Setup
) -> None:
    verifier = setup.verifier()
    with pytest.raises(Forbidden) as refused:
        await verifier.verify(issuer.token("k1", reach_role="admin"))
    assert refused.value.code == "role_not_allowed"
    assert "[[identity.issuers]]" in str(refused.value)
    setup.policy = Policy.model_validate(
        {"identity": {"issuers": [{"issuer": issuer.url, "roles": ["caller", "admin"]}]}}
    )
    assert (await verifier.verify(issuer.token("k1", reach_role="admin"))).role == "admin"


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        (None, "{host}:admin"),  # no rule: the issuer's namespace
        ({"roles": ["caller"]}, "{host}:admin"),  # a rule without a prefix: the same
        ({"principal_prefix": ""}, "admin"),  # an explicit "": the claim as it is
    ],
)
async def test_principals_are_namespaced_per_issuer_unless_a_rule_says_otherwise(
    issuer: Issuer, setup: Setup, rule: dict[str, Any] | None, named: str
) -> None:
    if rule is not None:
        setup.policy = Policy.model_validate(
            {"identity": {"issuers": [{"issuer": issuer.url, **rule}]}}
        )
    principal = await setup.verifier().verify(issuer.token("k1", sub="admin"))
    assert principal.name == named.format(host=issuer.url.removeprefix("http://"))


async def test_an_empty_subject_is_no_principal_even_with_a_prefix(
    issuer: Issuer, setup: Setup
) -> None:
    assert await refusal(setup.verifier(), issuer.token("k1", sub="")) == "token_malformed"

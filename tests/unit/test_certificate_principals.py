"""identity/certificates.py: a verified client certificate's names, and the policy's
mapping of one of them to a principal, on plain data."""

from __future__ import annotations

from agent_reach.identity.certificates import (
    PeerCertificate,
    certificate_principal,
    peer_of,
)
from agent_reach.model.identity import CertificateMapping, IdentityPolicy
from agent_reach.model.keys import Principal

# The shape `ssl.SSLObject.getpeercert()` returns for a verified certificate.
ORDER_AGENT_CERT = {
    "subject": ((("organizationName", "shop"),), (("commonName", "order-agent"),)),
    "issuer": ((("commonName", "shop CA"),),),
    "subjectAltName": (
        ("URI", "spiffe://shop/agents/order"),
        ("DNS", "order.shop.internal"),
        ("email", "order@shop.example"),
        ("IP Address", "10.0.0.7"),
    ),
}


def _policy(*mappings: dict[str, object]) -> IdentityPolicy:
    return IdentityPolicy(certificates=[CertificateMapping.model_validate(m) for m in mappings])


def test_names_come_from_the_subject_and_the_subject_alt_names():
    peer = PeerCertificate.from_dict(ORDER_AGENT_CERT)
    assert peer == PeerCertificate(
        common_name="order-agent",
        dns=("order.shop.internal",),
        uris=("spiffe://shop/agents/order",),
        emails=("order@shop.example",),
    )
    assert peer.names("any") == (
        "order-agent",
        "order.shop.internal",
        "spiffe://shop/agents/order",
        "order@shop.example",
    )
    assert PeerCertificate.from_dict({}) == PeerCertificate()


def test_a_spiffe_uri_maps_to_an_agent_principal_with_its_grants():
    policy = _policy(
        {
            "match": "spiffe://shop/agents/order",
            "field": "uri",
            "principal": "order-agent",
            "role": "agent",
            "domain": "shop",
            "capabilities": ["order.*"],
        }
    )
    principal = certificate_principal(policy, PeerCertificate.from_dict(ORDER_AGENT_CERT))
    assert principal == Principal("cert:order-agent", "order-agent", "shop", "agent", ("order.*",))


def test_the_first_matching_mapping_wins_and_a_trailing_star_is_a_prefix():
    policy = _policy(
        {"match": "spiffe://shop/agents/*", "principal": "any-agent", "role": "agent"},
        {"match": "spiffe://shop/agents/order", "principal": "order", "role": "admin"},
    )
    principal = certificate_principal(policy, PeerCertificate(uris=("spiffe://shop/agents/x",)))
    assert principal is not None and principal.name == "any-agent"
    principal = certificate_principal(policy, PeerCertificate(uris=("spiffe://shop/agents/order",)))
    assert principal is not None and principal.role == "agent"


def test_a_mapping_looks_only_at_its_own_field():
    policy = _policy({"match": "order-agent", "field": "dns", "principal": "p", "role": "caller"})
    # The CN says order-agent, but the mapping asks the DNS names.
    assert certificate_principal(policy, PeerCertificate(common_name="order-agent")) is None
    assert certificate_principal(policy, PeerCertificate(dns=("order-agent",))) is not None
    cn_policy = _policy({"match": "order-agent", "field": "cn", "principal": "p", "role": "caller"})
    assert certificate_principal(cn_policy, PeerCertificate(dns=("order-agent",))) is None


def test_no_match_is_none_and_matching_is_exact_without_a_star():
    policy = _policy({"match": "spiffe://shop/agents/order", "principal": "p", "role": "agent"})
    for peer in (
        PeerCertificate(),
        PeerCertificate(uris=("spiffe://shop/agents/order/evil",)),
        PeerCertificate(uris=("spiffe://shop/agents/orde",)),
        PeerCertificate(uris=("SPIFFE://shop/agents/order",)),
    ):
        assert certificate_principal(policy, peer) is None
    assert certificate_principal(IdentityPolicy(), PeerCertificate(common_name="x")) is None


def test_the_peer_is_read_from_the_scopes_tls_extension():
    peer = PeerCertificate(common_name="c")
    assert peer_of({"type": "http"}) is None
    assert peer_of({"extensions": {}}) is None
    assert peer_of({"extensions": {"tls": {"tls_version": "TLSv1.3", "peer": None}}}) is None
    assert peer_of({"extensions": {"tls": {"peer": peer}}}) is peer

"""Client certificates as principals: the names a verified certificate carries, and the
policy's `[[identity.certificates]]` mapping one of them to a principal.

Only a certificate the TLS handshake verified against `AR_TLS_CLIENT_CA` ever gets
here (the edge server reads it once per connection and puts it in the ASGI scope under
``extensions["tls"]["peer"]``); this module decides nothing about trust, only who a
trusted certificate stands for. Pure functions on plain data.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_reach.model.identity import CertificateMapping, IdentityPolicy
from agent_reach.model.keys import Principal

KEY_ID_PREFIX = "cert:"  # a certificate principal's key id: "cert:<principal>"


@dataclass(frozen=True, slots=True)
class PeerCertificate:
    """The names of a verified client certificate: its subject's common name and its
    subjectAltName entries by kind (DNS names, URIs such as SPIFFE IDs, emails)."""

    common_name: str | None = None
    dns: tuple[str, ...] = ()
    uris: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, cert: dict[str, Any]) -> PeerCertificate:
        """From `ssl.SSLObject.getpeercert()`'s dict (subject as RDN tuples,
        subjectAltName as (kind, value) pairs)."""
        names = [
            value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"
        ]
        sans: list[tuple[str, str]] = list(cert.get("subjectAltName", ()))
        return cls(
            common_name=names[0] if names else None,
            dns=_of(sans, "DNS"),
            uris=_of(sans, "URI"),
            emails=_of(sans, "email"),
        )

    def names(self, field: str) -> tuple[str, ...]:
        """The names of one kind (`cn`, `dns`, `uri`, `email`), or of all (`any`)."""
        cn = () if self.common_name is None else (self.common_name,)
        by_field = {"cn": cn, "dns": self.dns, "uri": self.uris, "email": self.emails}
        if field == "any":
            return (*cn, *self.dns, *self.uris, *self.emails)
        return by_field[field]


def tls_extension(ssl_object: ssl.SSLObject | ssl.SSLSocket) -> dict[str, Any]:
    """What the ASGI scope carries about a TLS connection (`extensions["tls"]`): the
    version, the client certificate's subject and, when one was verified, its names."""
    cert = ssl_object.getpeercert()  # None without a certificate, {} when not verified
    subject = None
    peer = None
    if cert:
        peer = PeerCertificate.from_dict(cert)
        subject = ",".join(
            f"{key}={value}" for rdn in reversed(cert.get("subject", ())) for key, value in rdn
        )
    return {"tls_version": ssl_object.version(), "client_cert_name": subject, "peer": peer}


def peer_of(scope: Mapping[str, Any]) -> PeerCertificate | None:
    """The verified client certificate of the request's connection, if any."""
    tls = scope.get("extensions", {}).get("tls")
    if tls is None:
        return None
    peer: PeerCertificate | None = tls.get("peer")
    return peer


def certificate_principal(policy: IdentityPolicy, peer: PeerCertificate) -> Principal | None:
    """The principal of the first mapping one of the certificate's names matches;
    None when no mapping does (the request then needs another credential)."""
    for mapping in policy.certificates:
        if any(_matches(mapping, name) for name in peer.names(mapping.field)):
            return Principal(
                key_id=KEY_ID_PREFIX + mapping.principal,
                name=mapping.principal,
                domain=mapping.domain,
                role=mapping.role,
                capabilities=tuple(mapping.capabilities),
            )
    return None


def _matches(mapping: CertificateMapping, name: str) -> bool:
    """Exact, or a prefix when the pattern ends with `*`."""
    pattern = mapping.match
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def _of(sans: Iterable[tuple[str, str]], kind: str) -> tuple[str, ...]:
    return tuple(value for key, value in sans if key == kind)

"""A real OpenID provider for the identity tests, and the attacker's token forge.

`TestIdP` runs node-oidc-provider (`idp/server.mjs`) on 127.0.0.1: tokens come from its
real token endpoint (client credentials, JWT access tokens for a resource indicator),
its keys can be rotated by restarting it on the same port, and it can be stopped to
take its JWKS endpoint down. `forge` makes the tokens no IdP would issue (`idp/forge.mjs`,
npm `jose`). Imported by the tests and their conftest (pytest puts this directory on
`sys.path`).
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import secrets
import select
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from agent_reach.testing.processes import ChildProcess

IDP_DIR = Path(__file__).parent / "idp"
READY_TIMEOUT_S = 20.0
FORGE_TIMEOUT_S = 20.0
NPM_MISSING = (
    "the identity tests need node and tests/identity/idp/node_modules: run "
    "`(cd tests/identity/idp && npm install)` (scripts/test.sh does)"
)
Alg = Literal["RS256", "ES256"]
_PUBLIC_MEMBERS = {"RSA": ("kty", "n", "e"), "EC": ("kty", "crv", "x", "y")}


def node() -> str:
    """The node binary; fails the test with what to install when it or the packages are missing."""
    binary = shutil.which("node")
    if binary is None or not (IDP_DIR / "node_modules" / "oidc-provider").is_dir():
        raise RuntimeError(NPM_MISSING)
    return binary


def new_key(kid: str | None = None, alg: Alg = "RS256") -> dict[str, Any]:
    """A fresh private signing key as a JWK (RSA 2048 or P-256)."""
    if alg == "RS256":
        jwk = json.loads(RSAAlgorithm.to_jwk(rsa.generate_private_key(65537, 2048)))
    else:
        jwk = json.loads(ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1())))
    jwk.pop("key_ops", None)
    jwk.update(kid=kid or f"{alg.lower()}-{secrets.token_hex(4)}", alg=alg, use="sig")
    return dict(jwk)


def public_jwk(jwk: dict[str, Any]) -> dict[str, Any]:
    """The public half of a private JWK, as a JWKS endpoint publishes it."""
    public = {name: jwk[name] for name in _PUBLIC_MEMBERS[jwk["kty"]]}
    return {**public, "kid": jwk["kid"], "alg": jwk["alg"], "use": "sig"}


def public_pem(jwk: dict[str, Any]) -> bytes:
    """The public key of a JWK as PEM (SubjectPublicKeyInfo): what an HS256 forger uses."""
    algorithm = RSAAlgorithm if jwk["kty"] == "RSA" else ECAlgorithm
    key = algorithm.from_jwk(json.dumps(public_jwk(jwk)))
    return bytes(
        key.public_bytes(  # type: ignore[union-attr]
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


class _Forger:
    """One `forge.mjs` process for the whole run (a node start costs more than a token)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def forge(self, spec: dict[str, Any]) -> str:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = subprocess.Popen(
                    [node(), str(IDP_DIR / "forge.mjs")],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                atexit.register(self._process.kill)
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(json.dumps(spec).encode() + b"\n")
            self._process.stdin.flush()
            if not select.select([self._process.stdout], [], [], FORGE_TIMEOUT_S)[0]:
                raise RuntimeError("forge.mjs did not answer")
            line = self._process.stdout.readline().decode().strip()
        if not line or line.startswith("ERROR "):
            raise RuntimeError(f"forge.mjs could not forge: {line or 'it exited'}")
        return line


_FORGER = _Forger()


def forge(
    payload: dict[str, Any],
    *,
    alg: str,
    jwk: dict[str, Any] | None = None,
    secret: bytes | None = None,
    header: dict[str, Any] | None = None,
) -> str:
    """A compact JWT made by `jose`: signed with `jwk` (a private JWK) or the HMAC
    `secret`, or unsecured (`alg="none"`); `header` adds protected header fields (kid, typ)."""
    spec: dict[str, Any] = {"payload": payload, "alg": alg, "header": header or {}}
    if jwk is not None:
        spec["jwk"] = jwk
    if secret is not None:
        spec["secret_b64"] = base64.b64encode(secret).decode()
    return _FORGER.forge(spec)


@dataclass(frozen=True)
class IdpClient:
    """A registered client-credentials client: what an agent or a caller is configured with."""

    client_id: str
    client_secret: str


@dataclass
class TestIdP(ChildProcess):
    """node-oidc-provider on 127.0.0.1.

    `resources` are the audiences (RFC 8707 resource indicators) it issues tokens for, the
    first by default; `scopes` the resource scopes a client may ask for. `account_claims`
    are the claims of the account an authorization-code login signs in (sub `account`).
    """

    __test__ = False  # not a test class, whatever its name

    resources: list[str]
    scopes: list[str] = field(default_factory=list)
    keys: list[dict[str, Any]] = field(default_factory=lambda: [new_key("key-1")])
    sign_kid: str | None = None
    resource_prefixes: list[str] = field(default_factory=list)
    account: str = "alice"
    account_claims: dict[str, Any] = field(default_factory=dict)
    log_path: Path | None = None
    port: int = 0
    admin_secret: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    clients: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        ChildProcess.__init__(self)
        self._http = httpx.Client(timeout=10)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TestIdP:
        """Start it and wait until it listens (on `port`, or a free one the first time)."""
        config = {
            "port": self.port,
            "jwks": {"keys": self.keys},
            "sign_kid": self.sign_kid,
            "sign_alg": self._sign_alg(),
            "resources": self.resources,
            "resource_prefixes": self.resource_prefixes,
            "scopes": self.scopes,
            "clients": self.clients,
            "account": {"sub": self.account, "claims": self.account_claims},
            "admin_secret": self.admin_secret,
        }
        log = subprocess.DEVNULL if self.log_path is None else self.log_path.open("ab")
        self._process = subprocess.Popen(
            [node(), str(IDP_DIR / "server.mjs")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "IDP_CONFIG": json.dumps(config)},
        )
        if log is not subprocess.DEVNULL:
            log.close()  # type: ignore[union-attr]
        self.port = self._ready_port()
        return self

    def restart(
        self, *, keys: list[dict[str, Any]] | None = None, sign_kid: str | None = None
    ) -> TestIdP:
        """Stop and start again on the same port with the same clients; `keys` replaces
        the signing keys (a rotation), `sign_kid` picks the one access tokens are signed with."""
        self.stop()
        if keys is not None:
            self.keys = keys
            self.sign_kid = sign_kid
        elif sign_kid is not None:
            self.sign_kid = sign_kid
        return self.start()

    def close(self) -> None:
        self.stop()
        self._http.close()

    def jwks(self) -> dict[str, Any]:
        """The JWKS the IdP publishes now (fetched from it)."""
        return dict(self._http.get(self._discovery()["jwks_uri"]).json())

    def register(
        self,
        claims: dict[str, Any],
        *,
        client_id: str | None = None,
        scope: str | None = None,
        ttl_s: int | None = None,
        auth_method: str = "client_secret_basic",
    ) -> IdpClient:
        """A new client-credentials client (named `client_id`: its tokens' `sub`, else a
        random id) whose access tokens carry `claims`; registered dynamically as an
        administrator, it survives restarts (re-registering an id replaces the client)."""
        metadata: dict[str, Any] = {
            "grant_types": ["client_credentials"],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": auth_method,
            "reach_claims": claims,
        }
        if scope is not None:
            metadata["scope"] = scope
        if ttl_s is not None:
            metadata["reach_ttl"] = ttl_s
        headers = {"x-idp-admin": self.admin_secret}
        if client_id is not None:
            headers["x-idp-client-id"] = client_id
        answer = self._http.post(
            self._discovery()["registration_endpoint"], json=metadata, headers=headers
        )
        assert answer.status_code == 201, answer.text
        created = answer.json()
        client = IdpClient(created["client_id"], created["client_secret"])
        self.clients = [c for c in self.clients if c["client_id"] != client.client_id]
        self.clients.append({**metadata, **asdict(client)})
        return client

    def token_answer(
        self, client: IdpClient, *, scope: str | None = None, resource: str | None = None
    ) -> httpx.Response:
        """The token endpoint's answer to a client-credentials request."""
        form = {"grant_type": "client_credentials"}
        if scope is not None:
            form["scope"] = scope
        if resource is not None:
            form["resource"] = resource
        return self._http.post(
            self.token_endpoint, data=form, auth=(client.client_id, client.client_secret)
        )

    def token(
        self,
        claims: dict[str, Any] | None = None,
        *,
        sub: str | None = None,
        client: IdpClient | None = None,
        scope: str | None = None,
        resource: str | None = None,
        ttl_s: int | None = None,
    ) -> str:
        """A real access token: of `client`, or of a new client `sub` (else a random id)
        whose tokens carry `claims`."""
        if client is None:
            client = self.register(claims or {}, client_id=sub, scope=scope, ttl_s=ttl_s)
        answer = self.token_answer(client, scope=scope, resource=resource)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])

    @property
    def token_endpoint(self) -> str:
        return str(self._discovery()["token_endpoint"])

    def signing_key(self) -> dict[str, Any]:
        """The private JWK access tokens are signed with now."""
        if self.sign_kid is not None:
            return next(k for k in self.keys if k["kid"] == self.sign_kid)
        return self.keys[0]

    def claims(self, audience: str | None = None, **overrides: Any) -> dict[str, Any]:
        """The claims of an access token of this IdP valid for the next 10 minutes, for
        forging variations of it; `overrides` set (or, with None, drop) claims."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience or self.resources[0],
            "sub": "forged-client",
            "client_id": "forged-client",
            "iat": now,
            "exp": now + 600,
            "jti": secrets.token_urlsafe(12),
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def sign(self, payload: dict[str, Any], *, jwk: dict[str, Any] | None = None) -> str:
        """`payload` signed with this IdP's own signing key (or `jwk`), as its tokens are."""
        key = jwk or self.signing_key()
        return forge(payload, alg=key["alg"], jwk=key, header={"kid": key["kid"], "typ": "at+jwt"})

    def _sign_alg(self) -> str:
        if self.sign_kid is not None:
            return str(next(k["alg"] for k in self.keys if k["kid"] == self.sign_kid))
        return str(self.keys[0]["alg"])

    def _discovery(self) -> dict[str, Any]:
        return dict(self._http.get(f"{self.issuer}/.well-known/openid-configuration").json())

    def _ready_port(self) -> int:
        """The port from the `READY <port>` line; fails with the exit status if it dies first."""
        process = self._process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if select.select([process.stdout], [], [], 0.1)[0]:
                line = process.stdout.readline().decode()
                if line.startswith("READY "):
                    return int(line.split()[1])
                if not line:
                    break
        self.kill()
        raise RuntimeError(f"the test IdP did not start (exit {process.poll()}); see its log")

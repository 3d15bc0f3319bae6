"""The identity rig: a real IdP (node-oidc-provider) on loopback, more on demand, and
secured coordinators on both backends that trust the first one's tokens."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from idp_kit import TestIdP
from reach_kit import AUDIENCE, OTHER_AUDIENCE, POLICY, SCOPES, Reach

IdpFactory = Callable[..., TestIdP]


@pytest.fixture(scope="session")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestIdP]:
    """The IdP the coordinators trust, shared by the session: tests only register clients
    with it. A test that rotates its keys or stops it starts its own (`start_idp`)."""
    log = tmp_path_factory.mktemp("idp") / "idp.log"
    server = TestIdP(resources=[AUDIENCE, OTHER_AUDIENCE], scopes=SCOPES, log_path=log).start()
    yield server
    server.close()


@pytest.fixture
def start_idp(tmp_path: Path) -> Iterator[IdpFactory]:
    """`start_idp(**fields)`: a private TestIdP (same audiences and scopes by default),
    stopped at teardown."""
    started: list[TestIdP] = []

    def start(**fields: Any) -> TestIdP:
        fields = {"resources": [AUDIENCE, OTHER_AUDIENCE], "scopes": SCOPES, **fields}
        server = TestIdP(log_path=tmp_path / f"idp-{len(started)}.log", **fields)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.close()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def redis_options(request: pytest.FixtureRequest, backend: str) -> dict[str, str]:
    """The Redis URL and a test-private key prefix on Redis; nothing on memory."""
    if backend == "memory":
        return {}
    return {
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_prefix": request.getfixturevalue("redis_prefix"),
    }


@pytest.fixture
def admin_key() -> str:
    return secrets.token_urlsafe(32)


@pytest.fixture
def open_reach(
    backend: str, admin_key: str, redis_options: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., Reach]]:
    """`open_reach(*issuers, policy=POLICY, **settings)`: secured coordinator(s) on
    `backend` trusting the issuers' tokens for `AUDIENCE`; closed at teardown."""
    opened: list[Reach] = []

    def open_one(*issuers: TestIdP, policy: str = POLICY, **settings: Any) -> Reach:
        policy_file = tmp_path / f"policy-{len(opened)}.toml"
        policy_file.write_text(policy, encoding="utf-8")
        reach = Reach(
            backend,
            admin_key,
            issuers=[i.issuer for i in issuers],
            policy_file=policy_file,
            decision_log=str(tmp_path / "decisions.log"),
            **redis_options,
            **settings,
        )
        opened.append(reach)
        return reach

    yield open_one
    for reach in opened:
        reach.close()


@pytest.fixture
def reach(open_reach: Callable[..., Reach], idp: TestIdP) -> Reach:
    """A secured coordinator trusting `idp`, with the identity tests' policy."""
    return open_reach(idp)

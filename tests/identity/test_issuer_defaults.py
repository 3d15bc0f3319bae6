"""What an issuer's tokens get when no `[[identity.issuers]]` rule names it (issue 41):
never admin, principals in the issuer's namespace, a warning at start; and a key set
that cannot be fetched is reported as what went wrong. Real IdP tokens (node-oidc-provider),
forged ones for the issuers that cannot answer (npm `jose`), on memory and Redis."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from idp_kit import TestIdP, forge, new_key
from reach_kit import AUDIENCE, Reach
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from structlog.testing import capture_logs

from agent_reach.identity.tls import server_context
from agent_reach.testing.servers import ServerThread, stop_all

ReachFactory = Callable[..., Reach]
ALLOW_ADMIN = """
[[identity.issuers]]
issuer = "{issuer}"
roles = ["caller", "agent", "observer", "admin"]
principal_prefix = ""
"""


def _who(reach: Reach, token: str) -> Any:
    answer = reach.call(token, "GET", "/v1/keys/self")
    return answer.json() if answer.status_code == 200 else answer.json()["error"]


def test_without_a_rule_an_admin_token_mints_nothing_and_a_rule_allows_it(
    open_reach: ReachFactory, idp: TestIdP, tmp_path: Path
) -> None:
    token = idp.token({"reach_role": "admin"}, sub="root-bot")
    bare = open_reach(idp, policy="")
    refused = _who(bare, token)
    assert refused["code"] == "role_not_allowed"
    assert "[[identity.issuers]]" in refused["message"]
    minted = bare.call(token, "POST", "/v1/keys", json={"principal": "p", "role": "admin"})
    assert minted.status_code == 403
    assert [k for k in bare.admin("GET", "/v1/keys").json()["keys"] if k["principal"] == "p"] == []

    ruled = open_reach(idp, policy=ALLOW_ADMIN.format(issuer=idp.issuer))
    assert _who(ruled, token)["role"] == "admin"
    minted = ruled.call(token, "POST", "/v1/keys", json={"principal": "p", "role": "caller"})
    assert minted.status_code == 201, minted.text


def test_without_a_rule_a_subject_named_like_a_key_principal_owns_nothing_of_it(
    open_reach: ReachFactory, idp: TestIdP
) -> None:
    reach = open_reach(idp, policy="")
    _, endpoint = reach.start_agent()
    key = reach.mint("agent-x", "agents", "agent", "alpha.*")
    assert reach.register(key, "x-1", endpoint, "alpha.read").status_code == 201
    namesake = idp.token({"reach_role": "agent"}, sub="agent-x")

    assert _who(reach, namesake)["principal"] == f"127.0.0.1:{idp.port}:agent-x"
    assert reach.call(namesake, "DELETE", "/v1/agents/x-1").status_code == 403
    assert reach.call(namesake, "POST", "/v1/agents/x-1/heartbeat").status_code == 403

    # An explicit empty prefix keeps the claim as it is: the namesake is the principal.
    reach.set_policy(identity={"issuers": [{"issuer": idp.issuer, "principal_prefix": ""}]})
    assert _who(reach, namesake)["principal"] == "agent-x"
    assert reach.call(namesake, "POST", "/v1/agents/x-1/heartbeat").status_code == 200


def test_each_issuer_without_a_rule_is_a_warning_at_start(
    open_reach: ReachFactory, idp: TestIdP, start_idp: Callable[..., TestIdP]
) -> None:
    partner = start_idp()
    policy = f'[[identity.issuers]]\nissuer = "{partner.issuer}"\nroles = ["caller"]\n'
    with capture_logs() as logged:
        reach = open_reach(idp, partner, policy=policy)
    warned = [e for e in logged if e["event"] == "issuer_without_rule"]
    assert [e["issuer"] for e in warned] == [idp.issuer]
    assert warned[0]["principal_prefix"] == f"127.0.0.1:{idp.port}:"
    status = reach.admin("GET", "/v1/policy").json()["identity"]["issuers"]
    assert [(s["issuer"], s["rule"]) for s in status] == [
        (idp.issuer, None),
        (partner.issuer, partner.issuer),
    ]


# -- key sets that cannot be fetched -----------------------------------------------------


@dataclass
class Unreachable:
    """An issuer URL whose discovery fetch fails in one way, and the words for it."""

    issuer: str
    reason: str


def _answering(status: int, body: bytes, media_type: str) -> Starlette:
    async def answer(request: Request) -> Response:
        return Response(body, status, media_type=media_type)

    return Starlette(routes=[Route("/{path:path}", answer)])


@pytest.fixture
def unreachable(tmp_path: Path) -> Iterator[list[Unreachable]]:
    """Issuers that cannot be read: refused, silent, not JSON, HTTP 503, and an https
    one whose certificate (a trustme CA's) the coordinator does not trust."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "idp.pem"))
    tls = server_context(tmp_path / "idp.pem", tmp_path / "idp.pem")
    html = ServerThread(_answering(200, b"<html>sign in</html>", "text/html")).start()
    down = ServerThread(_answering(503, b"{}", "application/json")).start()
    https = ServerThread(_answering(200, b"{}", "application/json"), ssl_context=tls).start()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts (the kernel's backlog) and never answers
    yield [
        Unreachable(f"http://127.0.0.1:{closed.getsockname()[1]}", "connection refused"),
        Unreachable(f"http://127.0.0.1:{silent.getsockname()[1]}", "timed out after 0.5 s"),
        Unreachable(html.url, "not JSON"),
        Unreachable(down.url, "answered HTTP 503"),
        Unreachable(https.url, "TLS certificate is not trusted"),
    ]
    for sock in (closed, silent):
        sock.close()
    stop_all([html, down, https])


def test_a_key_set_that_cannot_be_fetched_is_reported_as_what_went_wrong(
    open_reach: ReachFactory, unreachable: list[Unreachable]
) -> None:
    with capture_logs() as logged:
        reach = open_reach(*unreachable, policy="", oidc_timeout_s=0.5)
        key = new_key("k1")
        for issuer in unreachable:
            claims = {"iss": issuer.issuer, "aud": AUDIENCE, "sub": "x", "exp": 2**31}
            token = forge(claims, alg="RS256", jwk=key, header={"kid": "k1"})
            answer = reach.call(token, "GET", "/v1/agents")
            assert answer.status_code == 401
            error = answer.json()["error"]
            assert error["code"] == "token_signature"
            assert issuer.reason in error["message"], (issuer.issuer, error["message"])
    reasons = {e["issuer"]: e["reason"] for e in logged if e["event"] == "jwks_unavailable"}
    status = {
        s["issuer"]: s["fetch_error"]
        for s in reach.admin("GET", "/v1/policy").json()["identity"]["issuers"]
    }
    for issuer in unreachable:
        assert issuer.reason in reasons[issuer.issuer]
        assert issuer.reason in status[issuer.issuer]


@pytest.mark.parametrize(
    ("section", "rules", "named"),
    [
        ("identity", {"issuers": [{"issuer": "*", "roles": ["caller", "superuser"]}]}, "superuser"),
        ("identity", {"issuers": [{"issuer": "*", "default_role": "root"}]}, "root"),
        ("identity", {"mappings": [{"group": "ops", "role": "operator"}]}, "operator"),
        (
            "identity",
            {"certificates": [{"match": "spiffe://x", "principal": "p", "role": "god"}]},
            "god",
        ),
        (
            "access",
            {"invoke": [{"principals": ["role:callers"], "capabilities": ["alpha.*"]}]},
            "callers",
        ),
    ],
)
def test_a_rule_naming_a_role_that_is_not_one_is_refused_and_nothing_applied(
    reach: Reach, section: str, rules: dict[str, Any], named: str
) -> None:
    before = reach.admin("GET", "/v1/policy").json()
    refused = reach.admin("PUT", "/v1/policy", json={**before["policy"], section: rules})
    assert refused.status_code == 422, refused.text
    problems = refused.json()["error"]["problems"]
    assert any(f"{named!r} is not a role" in p["problem"] for p in problems), problems
    for url in (reach.url, reach.second()):
        after = reach.call(reach.admin_key, "GET", "/v1/policy", at=url).json()
        assert (after["version"], after["revision"]) == (before["version"], before["revision"])

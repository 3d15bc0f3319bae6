"""Secured coordinators that trust IdP tokens, and what the identity tests do with them.

Every coordinator here runs with keys on (an admin key) and `AR_OIDC_ISSUER` naming
the test IdP(s), tokens for `AUDIENCE`. Agents are `FakeAgent`s on 127.0.0.1.
Imported by the tests and their conftest (pytest puts this directory on `sys.path`).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from pydantic import SecretStr

from agent_reach.clock import SYSTEM_CLOCK, Clock
from agent_reach.config import Settings
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, stop_all
from agent_reach.testing.waiting import wait_until

AUDIENCE = "https://reach.test/api"  # the coordinators' AR_OIDC_AUDIENCE
OTHER_AUDIENCE = "https://other.test/api"  # another service the IdP issues tokens for
SCOPES = ["reach.invoke", "reach.register", "reach.read"]
POLICY_RELOAD_S = 0.05  # a PUT /v1/policy reaches the other coordinator at once
QUOTA_CALLER = "quota-caller"
QUOTA_BURST = 3
# The rules token principals are held to, as key principals are (tests/security's cast):
# callers by domain, agents by name, a quota by name.
POLICY = f"""
[[access.invoke]]
principals = ["domain:a"]
capabilities = ["alpha.*"]

[[access.invoke]]
principals = ["domain:b"]
capabilities = ["beta.*"]

[[access.register]]
principals = ["name:agent-x"]
capabilities = ["alpha.*"]

[[access.register]]
principals = ["name:agent-y"]
capabilities = ["beta.*"]

[[quotas]]
principals = ["name:{QUOTA_CALLER}"]
capabilities = ["alpha.*"]
rate_per_s = 0.001
burst = {QUOTA_BURST}

# The IdP's subjects are the cast's names, as the keys' principals are (the tests compare
# a token with a key of the same name): no per-issuer namespace, and admin allowed.
[[identity.issuers]]
issuer = "*"
principal_prefix = ""
"""


def bearer(credential: str | None) -> dict[str, str]:
    return {} if credential is None else {"authorization": f"Bearer {credential}"}


def registration(agent_id: str, endpoint: str, *capabilities: str) -> dict[str, Any]:
    """A registration body for `POST /v1/agents`."""
    return {
        "id": agent_id,
        "capabilities": list(capabilities),
        "transport": {"type": "http", "endpoint": endpoint},
        "ttl": 60,
    }


@dataclass(frozen=True)
class Refusal:
    """A refused request as urllib (a plain HTTP client) reads it."""

    status: int
    code: str | None
    challenge: str | None


class Reach:
    """Secured coordinators on one backend trusting the given issuers. Memory state lives
    in one process, so there `second()` is the first coordinator again."""

    def __init__(
        self,
        backend: str,
        admin_key: str,
        *,
        issuers: list[str],
        clock: Clock = SYSTEM_CLOCK,
        **settings: Any,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.admin_key = admin_key
        self._settings = {
            "auth": "on",
            "oidc_issuer": ",".join(issuers),  # as AR_OIDC_ISSUER is written
            "oidc_audience": [AUDIENCE],
            "registry_backend": backend,
            "policy_reload_s": POLICY_RELOAD_S,
            **settings,
        }
        self.servers: list[ServerThread] = []
        self.apps: list[CoordinatorApp] = []
        self.agents: list[ServerThread] = []
        self.http = httpx.Client(timeout=10)
        self._start()

    @property
    def url(self) -> str:
        return self.servers[0].url

    def second(self) -> str:
        """The URL of another coordinator on the same state (Redis), or the only one."""
        if self.backend == "memory":
            return self.url
        if len(self.servers) < 2:
            self._start()
        return self.servers[1].url

    def call(
        self, credential: str | None, method: str, path: str, *, at: str | None = None, **kw: Any
    ) -> httpx.Response:
        """One request with `credential` (an API key or a token; None: anonymous)."""
        headers = {**bearer(credential), **kw.pop("headers", {})}
        return self.http.request(method, (at or self.url) + path, headers=headers, **kw)

    def admin(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self.call(self.admin_key, method, path, **kw)

    def invoke(self, credential: str | None, capability: str, **kw: Any) -> httpx.Response:
        """Invoke `capability`, failing at once rather than suspending."""
        body = {"capability": capability, "payload": {"n": 1}, "suspend": False}
        return self.call(credential, "POST", "/v1/invoke", json=body, **kw)

    def start_agent(self, name: str = "fake") -> tuple[FakeAgent, str]:
        """A FakeAgent on 127.0.0.1 (stopped at `close`) and its endpoint."""
        agent = FakeAgent(name=name)
        server = ServerThread(agent).start()
        self.agents.append(server)
        return agent, f"{server.url}/invoke"

    def register(
        self, credential: str, agent_id: str, endpoint: str, *capabilities: str
    ) -> httpx.Response:
        """Register; once accepted, wait until every running coordinator routes to it."""
        answer = self.call(
            credential, "POST", "/v1/agents", json=registration(agent_id, endpoint, *capabilities)
        )
        if answer.status_code == 201:
            for app in self.apps:
                wait_until(
                    lambda a=app: agent_id in a.runtime.registry.index.by_id,  # type: ignore[union-attr]
                    f"{agent_id} to be known everywhere",
                )
        return answer

    def mint(self, principal: str, domain: str, role: str, *capabilities: str) -> str:
        """A new API key through the admin API."""
        body = {
            "principal": principal,
            "domain": domain,
            "role": role,
            "capabilities": list(capabilities),
        }
        answer = self.admin("POST", "/v1/keys", json=body)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["key"])

    def set_policy(self, **sections: Any) -> None:
        """Replace sections of the policy in force (`PUT /v1/policy` as the admin)."""
        current = self.admin("GET", "/v1/policy").json()["policy"]
        answer = self.admin("PUT", "/v1/policy", json={**current, **sections})
        assert answer.status_code == 200, answer.text

    def refusal(
        self, credential: str | None, path: str = "/v1/agents", body: Any = None
    ) -> Refusal:
        """A GET (a POST of `body` when given) with `credential` as urllib sees it (it must
        be refused)."""
        request = urllib.request.Request(  # noqa: S310 -- a loopback http URL
            self.url + path,
            data=None if body is None else orjson.dumps(body),
            headers={**bearer(credential), "content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
                raise AssertionError(f"accepted with {answer.status}")
        except urllib.error.HTTPError as error:
            body = error.read()
            code = orjson.loads(body).get("error", {}).get("code") if body else None
            return Refusal(error.code, code, error.headers.get("www-authenticate"))

    def close(self) -> None:
        self.http.close()
        for server in [*self.agents, *self.servers]:
            server.server.should_exit = True
        stop_all([*self.agents, *self.servers])

    def _start(self) -> None:
        settings = Settings(admin_key=SecretStr(self.admin_key), **self._settings)
        app = create_app(settings, self.clock)
        self.servers.append(ServerThread(app).start())
        self.apps.append(app)

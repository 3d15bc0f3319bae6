"""What the attack scenarios share: the policy, the cast, secured deployments, reports.

Every coordinator here runs with keys on (`auth="on"` and an admin key) and an endpoint
policy that allows only 127.77.0.0/16 so 127.0.0.1 — the
coordinator itself, Redis, a guard listener — counts as internal.

Imported by the scenarios and their conftest (pytest puts this directory on `sys.path`).
"""

from __future__ import annotations

import asyncio
import http.client
import select
import socket
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import orjson

from agent_reach.config import Settings
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.server.runtime import Runtime
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, stop_all
from agent_reach.testing.waiting import wait_until

T = TypeVar("T")
ALLOWED_NETWORK = "127.77.0.0/16"
CAPABILITY_1 = "alpha.read"  # caller A may invoke it, agent X may register it
CAPABILITY_2 = "beta.read"  # caller B may invoke it, agent Y may register it
RAW_TIMEOUT_S = 5.0  # a server waiting for a body that never comes shows up as this timeout
QUOTA_CALLER = "quota-caller"
METRICS_TOKEN = "scrape-" + "t" * 40  # AR_METRICS_TOKEN: opens /metrics and nothing else
QUOTA_BURST = 10  # issue 6: "quota 10/min burst 10"
QUOTA_RATE_PER_S = QUOTA_BURST / 60
POLICY = f"""
[[access.invoke]]
principals = ["domain:a"]
capabilities = ["alpha.*"]

[[access.invoke]]
principals = ["domain:b"]
capabilities = ["beta.*"]

[[access.invoke]]
principals = ["name:agent-x"]  # agent X's nested calls
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
rate_per_s = {QUOTA_RATE_PER_S!r}
burst = {QUOTA_BURST}
"""
Headers = Sequence[tuple[bytes, bytes]]
# Who holds a key in every scenario: name -> (domain, role); "admin" is AR_ADMIN_KEY.
CAST = {
    "caller-a": ("a", "caller"),
    "caller-b": ("b", "caller"),
    "agent-x": ("agents", "agent"),
    "agent-y": ("agents", "agent"),
    "observer": ("ops", "observer"),
}


@dataclass
class AttackReport:
    """What one scenario tried on one backend, and what got through (must stay 0)."""

    name: str
    scenario: str
    backend: str
    tried: int = 0
    got_through: int = 0
    figures: dict[str, Any] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    checked: bool = False  # assert_nothing_got_through ran: the `report` fixture insists

    def record(self, case: str, *, through: bool, **details: Any) -> None:
        """One attempt; `through` when it achieved anything it should not have."""
        self.tried += 1
        self.got_through += through
        self.cases.append({"case": case, "got_through": through, **details})

    def assert_nothing_got_through(self) -> None:
        self.checked = True
        breaches = [c for c in self.cases if c["got_through"]]
        assert not breaches, f"{len(breaches)} attack(s) got through:\n" + "\n".join(
            orjson.dumps(b, default=str).decode() for b in breaches
        )

    def summary(self) -> str:
        extra = "".join(
            f", {k} {v}" for k, v in self.figures.items() if isinstance(v, int | float | str)
        )
        return (
            f"{self.scenario} [{self.backend}]: tried {self.tried}, "
            f"got through {self.got_through}{extra}"
        )

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.name}-{self.backend}.json"
        document = {
            "scenario": self.scenario,
            "backend": self.backend,
            "tried": self.tried,
            "got_through": self.got_through,
            **self.figures,
            "cases": self.cases,
        }
        path.write_bytes(
            orjson.dumps(
                document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str
            )
        )
        return path


@dataclass
class RawAnswer:
    """An answer to bytes sent over a bare socket."""

    status: int
    body: bytes
    body_bytes_sent: int

    @property
    def code(self) -> str | None:
        """The error code of an Agent-Reach error body, else None."""
        try:
            document = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None
        error = document.get("error") if isinstance(document, dict) else None
        return str(error["code"]) if isinstance(error, dict) else None


def request_head(method: str, target: bytes | str, headers: Headers = ()) -> bytes:
    """A request line and headers exactly as given: nothing normalized or checked."""
    raw = target.encode() if isinstance(target, str) else target
    lines = [method.encode() + b" " + raw + b" HTTP/1.1", b"host: localhost"]
    lines += [b"connection: close", *(name + b": " + value for name, value in headers)]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def exchange(url: str, head: bytes, body: Iterable[bytes] = ()) -> RawAnswer:
    """Send `head`, then `body` piece by piece until the server answers; read the answer."""
    parts = urlsplit(url)
    sent = 0
    with socket.create_connection((parts.hostname, parts.port), RAW_TIMEOUT_S) as sock:
        sock.sendall(head)
        for piece in body:
            if select.select([sock], [], [], 0)[0]:
                break  # it answered already: stop, as a client honouring an early 413 would
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        response = http.client.HTTPResponse(sock, method=head.split(b" ", 1)[0].decode())
        response.begin()
        return RawAnswer(response.status, response.read(), sent)


def bearer(key: str | None) -> dict[str, str | bytes]:
    """The Authorization header for `key` (none for an anonymous call)."""
    return {} if key is None else {"authorization": f"Bearer {key}"}


def registration(agent_id: str, endpoint: str, *capabilities: str, **extra: Any) -> dict[str, Any]:
    """A registration body for `POST /v1/agents`."""
    return {
        "id": agent_id,
        "capabilities": list(capabilities),
        "transport": {"type": "http", "endpoint": endpoint},
        "ttl": 60,
        **extra,
    }


@dataclass
class Coordinator:
    """One in-process coordinator: its server thread (and event loop) and its app."""

    server: ServerThread
    app: CoordinatorApp

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def runtime(self) -> Runtime:
        assert self.app.runtime is not None, "the coordinator is not running"
        return self.app.runtime

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the coordinator's own event loop and wait for its result."""
        assert self.server.loop is not None, "the coordinator is not running"
        return asyncio.run_coroutine_threadsafe(coroutine, self.server.loop).result()


class Deployment:
    """Secured coordinators sharing one backend. Memory state lives in one process, so
    there `second()` is the first coordinator again."""

    def __init__(self, backend: str, settings: Callable[[], Settings]) -> None:
        self.backend = backend
        self._settings = settings
        self.coordinators: list[Coordinator] = []
        self.http = httpx.Client(timeout=10)
        self.start_coordinator()

    @property
    def first(self) -> Coordinator:
        return self.coordinators[0]

    def start_coordinator(self) -> Coordinator:
        app = create_app(self._settings())
        self.coordinators.append(Coordinator(ServerThread(app).start(), app))
        return self.coordinators[-1]

    def second(self) -> Coordinator:
        """Another coordinator on the same state (Redis), or the only one (memory)."""
        if self.backend == "memory":
            return self.first
        if len(self.coordinators) < 2:
            self.start_coordinator()
        return self.coordinators[1]

    def both(self) -> list[Coordinator]:
        """The first and the second coordinator, each once (one on memory)."""
        second = self.second()
        return [self.first] if second is self.first else [self.first, second]

    def call(
        self,
        key: str | None,
        method: str,
        path: str,
        *,
        at: Coordinator | None = None,
        headers: dict[str, str | bytes] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """One request as the holder of `key` (None: anonymous) to `at` (default: first);
        `headers` values may be bytes, sent as they are (UTF-8 included)."""
        url = (at or self.first).url + path
        return self.http.request(method, url, headers={**bearer(key), **(headers or {})}, **kwargs)

    def mint(self, admin_key: str, principal: str, domain: str, role: str) -> dict[str, str]:
        """A new key through the admin API: ``{"key", "key_id", ...}``."""
        body = {"principal": principal, "domain": domain, "role": role}
        answer = self.call(admin_key, "POST", "/v1/keys", json=body)
        assert answer.status_code == 201, answer.text
        created: dict[str, str] = answer.json()
        return created

    def register(self, key: str, body: dict[str, Any]) -> httpx.Response:
        """Register on the first coordinator; once accepted, wait until every running
        coordinator routes to it (on Redis the others learn it from the store)."""
        answer = self.call(key, "POST", "/v1/agents", json=body)
        if answer.status_code == 201:
            for coordinator in self.coordinators:
                wait_until(
                    lambda c=coordinator: body["id"] in c.runtime.registry.index.by_id,
                    f"{body['id']} to be known at {coordinator.url}",
                )
        return answer

    def close(self) -> None:
        self.http.close()
        stop_all([c.server for c in self.coordinators])


@dataclass
class RunningAgent:
    """A FakeAgent serving on its own 127.77.0.x address."""

    agent: FakeAgent
    server: ServerThread

    @property
    def endpoint(self) -> str:
        return f"{self.server.url}/invoke"


AgentFactory = Callable[..., RunningAgent]
ReportFactory = Callable[[str, str], AttackReport]


@dataclass
class World:
    """The cast with their keys, and agents X (`alpha.read`) and Y (`beta.read`) registered
    by agent-x and agent-y as instances `x-1` and `y-1`."""

    deployment: Deployment
    keys: dict[str, str]  # principal -> key; "admin" is the bootstrap key, "scraper" the
    # metrics token
    x: RunningAgent
    y: RunningAgent

    def call(self, principal: str | None, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A request as `principal` (None: anonymous)."""
        key = None if principal is None else self.keys[principal]
        return self.deployment.call(key, method, path, **kwargs)

    def invoke(self, principal: str | None, capability: str, **kwargs: Any) -> httpx.Response:
        """Invoke as `principal`, failing at once rather than suspending."""
        body = {"capability": capability, "payload": {"from": principal}, "suspend": False}
        return self.call(principal, "POST", "/v1/invoke", json=body, **kwargs)

    def deliveries(self) -> int:
        """Requests agents X and Y have received so far."""
        return len(self.x.agent.received) + len(self.y.agent.received)

    def stored(self, agent_id: str) -> dict[str, Any] | None:
        """The instance as the backend holds it, owner included; None when absent."""
        coordinator = self.deployment.first
        for item in coordinator.run(coordinator.runtime.registry.store.load()):
            spec = item.record.spec
            if spec.id == agent_id:
                return {
                    "owner": item.record.owner,
                    "endpoint": spec.transport.endpoint,
                    "capabilities": spec.capabilities,
                    "display_name": spec.display_name,
                    "generic": spec.generic,
                }
        return None

    def instance(self, agent_id: str) -> dict[str, Any] | None:
        """The registry's view of an instance (admin's eyes), None when not registered."""
        answer = self.call("admin", "GET", f"/v1/agents/{agent_id}")
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, answer.text
        view: dict[str, Any] = answer.json()
        return view

"""S7-S9: the endpoint guard. The policy allows only 127.77.0.0/16, so every other address
here, 127.0.0.1 included, is internal.

Two oracles besides the status: guard listeners on 127.0.0.1 and ::1 that must accept
no connection, and a spy in each coordinator that records every connect its thread
attempts (the event loop's `create_connection`/`sock_connect` and `socket.connect`).
Connects to the coordinator's own Redis are the only ones not counted.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from attack_kit import (
    ALLOWED_NETWORK,
    AgentFactory,
    AttackReport,
    Coordinator,
    Deployment,
    ReportFactory,
    World,
    registration,
)

REFUSED = "endpoint_not_allowed"  # every bad endpoint: a forbidden address or a malformed URL


class GuardListener:
    """A listening socket nothing may connect to; `connections()` counts those that did."""

    def __init__(self, family: socket.AddressFamily, host: str) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.sock.setblocking(False)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0

    def connections(self) -> int:
        """Connections ever made to it (the kernel queues them even if nobody accepts)."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return self.accepted
            conn.close()
            self.accepted += 1

    def close(self) -> None:
        self.sock.close()


class ConnectSpy:
    """Every outbound connect attempted on the coordinators' threads, with its address."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, ignored: set[tuple[str, int]]) -> None:
        self.monkeypatch = monkeypatch
        self.ignored = ignored
        self.attempts: list[tuple[str, int]] = []
        self.threads: set[threading.Thread] = set()
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex

        def connect(sock: socket.socket, address: Any) -> None:
            self._note(address)
            real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            self._note(address)
            return real_connect_ex(sock, address)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)

    def watch(self, coordinator: Coordinator) -> None:
        """Also record the connects of this coordinator's event loop."""
        loop = coordinator.server.loop
        assert loop is not None
        self.threads.add(coordinator.server.thread)
        real_create = loop.create_connection
        real_sock_connect = loop.sock_connect

        async def create_connection(
            factory: Any, host: Any = None, port: Any = None, **kw: Any
        ) -> Any:
            self._note((host, port))
            return await real_create(factory, host, port, **kw)

        async def sock_connect(sock: socket.socket, address: Any) -> None:
            self._note(address)
            await real_sock_connect(sock, address)

        self.monkeypatch.setattr(loop, "create_connection", create_connection)
        self.monkeypatch.setattr(loop, "sock_connect", sock_connect)

    def forbidden(self) -> list[tuple[str, int]]:
        """Attempts to anything outside the allowed network, Redis excepted."""
        network = ipaddress.ip_network(ALLOWED_NETWORK)
        return [
            (host, port)
            for host, port in self.attempts
            if (host, port) not in self.ignored and not _inside(host, network)
        ]

    def _note(self, address: Any) -> None:
        if threading.current_thread() in self.threads and isinstance(address, tuple):
            self.attempts.append((str(address[0]), int(address[1] or 0)))


def _inside(host: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        return ipaddress.ip_address(host) in network
    except ValueError:
        return False  # a name: whatever it resolves to was not checked here


@pytest.fixture
def guards() -> Iterator[tuple[GuardListener, GuardListener]]:
    pair = (GuardListener(socket.AF_INET, "127.0.0.1"), GuardListener(socket.AF_INET6, "::1"))
    yield pair
    for guard in pair:
        guard.close()


@pytest.fixture
def spy(
    monkeypatch: pytest.MonkeyPatch, world: World, request: pytest.FixtureRequest, backend: str
) -> ConnectSpy:
    """Spies on both coordinators (one on memory); Redis connects are not counted."""
    ignored: set[tuple[str, int]] = set()
    if backend == "redis":
        parts = urlsplit(request.getfixturevalue("redis_url"))
        ignored.add((str(parts.hostname), int(parts.port or 6379)))
    watching = ConnectSpy(monkeypatch, ignored)
    for coordinator in world.deployment.both():
        watching.watch(coordinator)
    return watching


def _registration_cases(
    deployment: Deployment, v4: int, v6: int
) -> list[tuple[str, dict[str, str], str]]:
    """(case, transport, the error code expected) for every forbidden endpoint."""
    good = "http://127.77.0.11:9/invoke"
    hosts = {
        "127.0.0.1 (internal)": f"127.0.0.1:{v4}",
        "the coordinator itself": urlsplit(deployment.first.url).netloc,
        "Redis's port": "127.0.0.1:6379",
        "[::1]": f"[::1]:{v6}",
        "[::ffff:127.0.0.1]": f"[::ffff:127.0.0.1]:{v4}",
        "[::ffff:7f00:1]": f"[::ffff:7f00:1]:{v4}",
        "2130706433": f"2130706433:{v4}",
        "0x7f000001": f"0x7f000001:{v4}",
        "0177.0.0.1": f"0177.0.0.1:{v4}",
        "127.1": f"127.1:{v4}",
        "127.0.1": f"127.0.1:{v4}",
        "0x7f.0.0.1": f"0x7f.0.0.1:{v4}",
        "127.000.000.001": f"127.000.000.001:{v4}",
        "trailing dot 127.0.0.1.": f"127.0.0.1.:{v4}",
        "localhost": f"localhost:{v4}",
        "LOCALHOST.": f"LOCALHOST.:{v4}",
        "full-width digits": f"１２７.０.０.１:{v4}",
        "circled digits": f"①②⑦.0.0.1:{v4}",
        "0.0.0.0": f"0.0.0.0:{v4}",
        "0": f"0:{v4}",
        "169.254.169.254 (metadata)": "169.254.169.254",
        "[fd00:ec2::254] (metadata)": "[fd00:ec2::254]",
        "100.100.100.200 (metadata)": "100.100.100.200",
        "[fe80::1] (link-local)": "[fe80::1]",
        "10.0.0.1": "10.0.0.1",
        "192.168.1.1": "192.168.1.1",
        "172.16.0.1": "172.16.0.1",
    }
    cases = [(name, {"endpoint": f"http://{host}/invoke"}, REFUSED) for name, host in hosts.items()]
    cases += [
        (
            "health endpoint at 127.0.0.1",
            {"endpoint": good, "health_endpoint": f"http://127.0.0.1:{v4}/"},
            REFUSED,
        ),
        ("upper-case scheme", {"endpoint": f"HTTP://127.0.0.1:{v4}/"}, REFUSED),
        ("fragment hides the host", {"endpoint": f"http://127.0.0.1:{v4}#@127.77.0.11/"}, REFUSED),
    ]
    malformed = {
        "file: scheme": "file:///etc/passwd",
        "gopher: scheme": f"gopher://127.0.0.1:{v4}/_PING",
        "ftp: scheme": "ftp://127.77.0.11/",
        "no scheme": f"127.0.0.1:{v4}/invoke",
        "userinfo": "http://user:pass@127.77.0.11/",
        "userinfo pointing inward": f"http://127.77.0.11@127.0.0.1:{v4}/",
        "backslash before @": f"http://127.0.0.1:{v4}\\@127.77.0.11/",
        "CR/LF header injection": "http://127.77.0.11/\r\nHost: 127.0.0.1",
        "space in the host": "http://127.77.0.11 .127.0.0.1/",
        "tab in the URL": "http://127.77.0.11/\tx",
        "port out of range": "http://127.77.0.11:99999/",
    }
    cases += [(name, {"endpoint": url}, REFUSED) for name, url in malformed.items()]
    return cases


def test_endpoints_outside_the_allowed_networks_are_refused_before_any_connection(
    world: World,
    spy: ConnectSpy,
    guards: tuple[GuardListener, GuardListener],
    report: ReportFactory,
) -> None:
    attack = report("ssrf_registration", "S7 SSRF at registration")
    v4, v6 = guards
    for n, (case, transport, code) in enumerate(
        _registration_cases(world.deployment, v4.port, v6.port)
    ):
        body = registration(f"ssrf-{n}", "-", "alpha.ssrf")
        body["transport"] = {"type": "http", **transport}
        answer = world.call("agent-x", "POST", "/v1/agents", json=body)
        error = answer.json().get("error", {}) if answer.status_code >= 400 else {}
        registered = world.stored(f"ssrf-{n}") is not None
        attack.record(
            case,
            through=answer.status_code != 422 or error.get("code") != code or registered,
            status=answer.status_code,
            code=error.get("code"),
            registered=registered,
        )
    _record_connections(attack, spy, guards)
    attack.assert_nothing_got_through()


class Rebinder:
    """A resolver that answers each scripted host from its script, one answer per call
    (the last answer repeats), and every other host truthfully."""

    def __init__(
        self, real: Callable[[str], Awaitable[list[str]]], script: dict[str, list[list[str]]]
    ) -> None:
        self.real = real
        self.script = script
        self.calls: list[tuple[str, list[str]]] = []

    async def __call__(self, host: str) -> list[str]:
        answers = self.script.get(host)
        if answers is None:
            return await self.real(host)
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        self.calls.append((host, answer))
        return answer


def test_dns_rebinding_is_caught_at_dial_time(
    world: World,
    spy: ConnectSpy,
    guards: tuple[GuardListener, GuardListener],
    report: ReportFactory,
) -> None:
    attack = report("ssrf_rebinding", "S8 DNS rebinding")
    deployment = world.deployment
    first, second = deployment.first, deployment.second()
    pinned = "127.77.0.11"
    rebinder = Rebinder(
        first.runtime.security.guard.resolve,
        {
            "rebind.test": [[pinned], ["127.0.0.1"]],
            "mixed.test": [[pinned], ["127.0.0.1", pinned]],
        },
    )
    for coordinator in (first, second):
        coordinator.runtime.security.guard.resolve = rebinder  # type: ignore[method-assign]
    for host in ("rebind.test", "mixed.test"):
        capability = f"alpha.{host.split('.')[0]}"
        endpoint = f"http://{host}:{guards[0].port}/invoke"
        body = registration(host, endpoint, capability)
        registered = deployment.register(world.keys["agent-x"], body)
        assert registered.status_code == 201, registered.text  # the first answer is allowed
        answer = world.deployment.call(
            world.keys["caller-a"],
            "POST",
            "/v1/invoke",
            json={"capability": capability, "suspend": False},
            at=second,
        )
        attack.record(
            f"{host}: allowed at registration, internal at dial time",
            through=answer.status_code < 500,
            status=answer.status_code,
            code=answer.json()["error"]["code"] if answer.status_code >= 400 else None,
        )
    attack.figures["resolver_answers"] = len(rebinder.calls)
    _record_connections(attack, spy, guards)
    attack.assert_nothing_got_through()


def test_redirects_from_agents_are_not_followed(
    world: World,
    spy: ConnectSpy,
    guards: tuple[GuardListener, GuardListener],
    start_agent: AgentFactory,
    report: ReportFactory,
) -> None:
    attack = report("ssrf_redirect", "S9 redirect to internal")
    target = f"http://127.0.0.1:{guards[0].port}/v1/keys"
    redirector = start_agent(headers={"location": target})
    body = registration("redirector", redirector.endpoint, "alpha.redirect")
    assert world.deployment.register(world.keys["agent-x"], body).status_code == 201
    for status in (301, 302, 303, 307, 308):
        redirector.agent.status = status
        answer = world.deployment.call(
            world.keys["caller-a"],
            "POST",
            "/v1/invoke",
            json={"capability": "alpha.redirect", "suspend": False},
            at=world.deployment.second(),
        )
        attack.record(
            f"agent answers {status} Location: {target}",
            through=answer.status_code != 502,
            status=answer.status_code,
            code=answer.json().get("error", {}).get("code"),
        )
    assert spy.attempts, "the spy saw not even the agent's connection: it is not hooked in"
    _record_connections(attack, spy, guards)
    attack.assert_nothing_got_through()


def _record_connections(
    attack: AttackReport, spy: ConnectSpy, guards: tuple[GuardListener, GuardListener]
) -> None:
    """The oracles: forbidden connects seen by the spy, connections the guards received."""
    forbidden = spy.forbidden()
    received = sum(guard.connections() for guard in guards)
    attack.record(
        "connect attempts outside the allowed network", through=bool(forbidden), seen=forbidden
    )
    attack.record(
        "connections received by the guard listeners", through=received > 0, seen=received
    )
    attack.figures["connect_attempts"] = len(forbidden)
    attack.figures["guard_connections"] = received

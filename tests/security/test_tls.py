"""TLS in and out: an HTTPS coordinator (mutual where a client CA is set), client
certificates as principals, and deliveries to https agents verified against
AR_AGENT_CA_FILE and shown AR_AGENT_CLIENT_CERT.

Every peer is real: the coordinator's own edge server, agents on uvicorn, on Python's
http.server and on nginx; callers are httpx, urllib and curl. Executions are counted
at the agent.
"""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import trustme
from attack_kit import Coordinator, ReportFactory, registration, stop_all
from pydantic import SecretStr
from tls_kit import (
    Leaf,
    ca_file,
    client_context,
    issue,
    nginx_agent,
    nginx_binary,
    server_context,
    stdlib_agent,
)

from agent_reach.config import Settings
from agent_reach.identity.certificates import PeerCertificate
from agent_reach.sdk.agent import Agent, AgentRequest
from agent_reach.sdk.client import SyncReachClient
from agent_reach.server import edge
from agent_reach.server.app import create_app
from agent_reach.server.edge import EdgeConfig
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

ORDER_AGENT = "spiffe://shop/agents/order"
POLICY = f"""
[[identity.certificates]]
match = "{ORDER_AGENT}"
field = "uri"
principal = "order-agent"
role = "agent"
domain = "shop"
capabilities = ["order.*"]

[[identity.certificates]]
match = "spiffe://shop/callers/*"
field = "uri"
principal = "web-shop"
role = "caller"
domain = "shop"
capabilities = ["order.*"]
"""


@dataclass(frozen=True)
class Pki:
    """Three CAs: `shop` issues the coordinator's and the clients' certificates, `agents`
    the agents' server certificates, `rogue` look-alikes of both."""

    shop_ca: Path
    agents_ca: Path
    coordinator: Leaf  # the coordinator's server certificate (127.0.0.1, localhost)
    coordinator_client: Leaf  # what the coordinator shows agents (CN coordinator)
    order_agent: Leaf  # spiffe://shop/agents/order
    web_caller: Leaf  # spiffe://shop/callers/web
    stranger: Leaf  # spiffe://shop/agents/stranger: valid, mapped by no rule
    rogue_order_agent: Leaf  # the order agent's names, from the rogue CA
    agent: Leaf  # an agent's server certificate from the agents CA
    rogue_agent: Leaf  # an agent's server certificate from the rogue CA


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    shop, agents, rogue = trustme.CA(), trustme.CA(), trustme.CA()
    local = {"ips": ("127.0.0.1",), "dns": ("localhost",)}
    return Pki(
        shop_ca=ca_file(shop, directory, "shop"),
        agents_ca=ca_file(agents, directory, "agents"),
        coordinator=issue(shop, directory, "coordinator", common_name="reach", **local),
        coordinator_client=issue(shop, directory, "coordinator-client", common_name="coordinator"),
        order_agent=issue(shop, directory, "order", common_name="order", uris=(ORDER_AGENT,)),
        web_caller=issue(
            shop, directory, "web", common_name="web", uris=("spiffe://shop/callers/web",)
        ),
        stranger=issue(
            shop, directory, "stranger", common_name="x", uris=("spiffe://shop/agents/stranger",)
        ),
        rogue_order_agent=issue(
            rogue, directory, "rogue-order", common_name="order", uris=(ORDER_AGENT,)
        ),
        agent=issue(agents, directory, "agent", common_name="agent", **local),
        rogue_agent=issue(rogue, directory, "rogue-agent", common_name="agent", **local),
    )


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture
def start_coordinator(
    backend: str, redis_options: dict[str, str], admin_key: str, policy_file: Path
) -> Iterator[Any]:
    """`start_coordinator(**settings)`: a secured coordinator on `backend` (each call
    another one on the same state)."""
    running: list[Coordinator] = []

    def start(**options: Any) -> Coordinator:
        settings = Settings(
            auth="on",
            admin_key=SecretStr(admin_key),
            policy_file=policy_file,
            decision_log="off",
            registry_backend=backend,
            **redis_options,
            **options,
        )
        app = create_app(settings)
        running.append(Coordinator(ServerThread(app).start(), app))
        return running[-1]

    yield start
    stop_all([c.server for c in running])


@pytest.fixture
def agents() -> Iterator[Any]:
    """`agents(ssl_context)`: a FakeAgent on 127.0.0.1 over HTTPS (or HTTP with None)."""
    running: list[ServerThread] = []

    def start(context: ssl.SSLContext | None = None) -> tuple[FakeAgent, ServerThread]:
        server = ServerThread(FakeAgent(), ssl_context=context).start()
        running.append(server)
        return server.app, server

    yield start
    stop_all(running)


def _client(pki: Pki, leaf: Leaf | None = None, **options: Any) -> httpx.Client:
    return httpx.Client(verify=client_context(pki.shop_ca, leaf), timeout=10, **options)


def _invoke(capability: str, **extra: Any) -> dict[str, Any]:
    return {"capability": capability, "payload": {"n": 1}, "suspend": False, **extra}


def _mint(http: httpx.Client, url: str, admin_key: str, principal: str, role: str) -> str:
    body = {"principal": principal, "domain": "shop", "role": role, "capabilities": ["order.*"]}
    answer = http.post(f"{url}/v1/keys", json=body, headers=_bearer(admin_key))
    assert answer.status_code == 201, answer.text
    key: str = answer.json()["key"]
    return key


def _last_attempt(answer: httpx.Response) -> str:
    """How the last delivery attempt ended, and why when it failed at the handshake."""
    document = answer.json()
    attempt = (document.get("error") or document)["attempts"][-1]
    verify_failed = "CERTIFICATE_VERIFY_FAILED" in (attempt["error"] or "")
    return str(attempt["outcome"]) + (" (certificate verify failed)" if verify_failed else "")


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.mark.parametrize("backend", ["memory"])
def test_an_https_coordinator_answers_httpx_urllib_and_curl(
    pki: Pki, start_coordinator: Any, agents: Any, admin_key: str
):
    coordinator = start_coordinator(tls_cert=pki.coordinator.cert, tls_key=pki.coordinator.key)
    url = coordinator.url
    assert url.startswith("https://")
    fake, agent = agents()
    with _client(pki) as http:
        key = _mint(http, url, admin_key, "agent-1", "agent")
        body = registration("order-1", f"{agent.url}/invoke", "order.get")
        assert http.post(f"{url}/v1/agents", json=body, headers=_bearer(key)).status_code == 201
        answer = http.post(
            f"{url}/v1/invoke", json=_invoke("order.get"), headers=_bearer(admin_key)
        )
        assert answer.status_code == 200, answer.text
    # urllib, trusting the CA file
    context = ssl.create_default_context(cafile=str(pki.shop_ca))
    with urllib.request.urlopen(f"{url}/healthz", context=context, timeout=10) as health:  # noqa: S310
        assert health.status == 200
    # curl, on the invoke fast path
    curl = shutil.which("curl")
    assert curl is not None, "curl is missing: scripts/test.sh installs it"
    done = subprocess.run(
        [curl, "-sS", "--cacert", str(pki.shop_ca), "-H", f"authorization: Bearer {admin_key}",
         "-H", "content-type: application/json", "--data", orjson.dumps(_invoke("order.get")),
         "-w", "\n%{http_code}", f"{url}/v1/invoke"],
        capture_output=True, check=False, timeout=20,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().rsplit("\n", 1)[1] == "200"
    # Plain HTTP to the HTTPS port gets no HTTP answer, and delivers nothing.
    with pytest.raises(httpx.TransportError):
        httpx.post(url.replace("https://", "http://") + "/v1/invoke", json=_invoke("order.get"))
    assert len(fake.received) == 2


def test_a_spiffe_certificate_registers_and_heartbeats_with_no_api_key(
    pki: Pki, start_coordinator: Any, agents: Any, backend: str, admin_key: str
):
    mutual = {
        "tls_cert": pki.coordinator.cert,
        "tls_key": pki.coordinator.key,
        "tls_client_ca": pki.shop_ca,
    }
    first = start_coordinator(**mutual)
    second = start_coordinator(**mutual) if backend == "redis" else first
    fake, agent = agents()
    with _client(pki, pki.order_agent) as order, _client(pki, pki.web_caller) as web:
        body = registration("order-1", f"{agent.url}/invoke", "order.get")
        answer = order.post(f"{first.url}/v1/agents", json=body)
        assert answer.status_code == 201, answer.text
        wait_until(lambda: "order-1" in second.runtime.registry.index.by_id, "order-1 at second")
        beat = order.post(f"{second.url}/v1/agents/order-1/heartbeat")
        assert beat.status_code == 200, beat.text
        stored = first.run(first.runtime.registry.store.load())
        assert [item.record.owner for item in stored if item.record.spec.id == "order-1"] == [
            "order-agent"
        ]
        # The certificate's grants hold as a key's would: order.* only.
        outside = registration("pay-1", f"{agent.url}/invoke", "payment.charge")
        assert order.post(f"{first.url}/v1/agents", json=outside).status_code == 403
        # A caller certificate invokes on the fast path, on either coordinator.
        for coordinator in (first, second):
            answer = web.post(f"{coordinator.url}/v1/invoke", json=_invoke("order.get"))
            assert answer.status_code == 200, answer.text
        # The mapping is policy: removed at run time on one coordinator, the certificate
        # is no credential on any of them (its handshake still succeeds).
        policy = tomllib.loads(POLICY)
        policy["identity"]["certificates"] = policy["identity"]["certificates"][1:]
        change = web.put(f"{first.url}/v1/policy", json=policy, headers=_bearer(admin_key))
        assert change.status_code == 200, change.text
        wait_until(
            lambda: order.post(f"{second.url}/v1/agents/order-1/heartbeat").status_code == 401,
            "the order agent's certificate to stop being a credential",
        )
    assert len(fake.received) == 2


def test_certificates_that_must_not_get_in(
    pki: Pki, start_coordinator: Any, agents: Any, report: ReportFactory, admin_key: str
):
    attack = report("tls_client_certificates", "TLS client certificates")
    coordinator = start_coordinator(
        tls_cert=pki.coordinator.cert, tls_key=pki.coordinator.key, tls_client_ca=pki.shop_ca
    )
    url = coordinator.url
    fake, agent = agents()
    with _client(pki, pki.web_caller) as web:
        key = _mint(web, url, admin_key, "agent-1", "agent")
        body = registration("order-1", f"{agent.url}/invoke", "order.get")
        assert web.post(f"{url}/v1/agents", json=body, headers=_bearer(key)).status_code == 201
    sneaky = registration("order-2", f"{agent.url}/invoke", "order.get")
    for case, leaf in (("no certificate", None), ("another CA", pki.rogue_order_agent)):
        for method, path, json in (
            ("POST", "/v1/agents", sneaky),
            ("POST", "/v1/invoke", _invoke("order.get")),
            ("GET", "/v1/agents", None),
        ):
            with _client(pki, leaf) as http:
                try:
                    answer = http.request(method, url + path, json=json)
                except httpx.TransportError as exc:  # refused at the handshake
                    attack.record(f"{case}: {method} {path}", through=False, error=str(exc))
                else:
                    attack.record(
                        f"{case}: {method} {path}", through=True, status=answer.status_code
                    )
    # A valid certificate that no rule maps is no credential.
    with _client(pki, pki.stranger) as stranger:
        for method, path, json in (
            ("POST", "/v1/agents", sneaky),
            ("POST", "/v1/invoke", _invoke("order.get")),
            ("GET", "/v1/agents", None),
        ):
            answer = stranger.request(method, url + path, json=json)
            attack.record(
                f"unmapped certificate: {method} {path}",
                through=answer.status_code != 401,
                status=answer.status_code,
                code=answer.json()["error"]["code"],
            )
    attack.figures["delivered"] = len(fake.received)
    attack.assert_nothing_got_through()
    assert fake.received == []
    assert "order-2" not in coordinator.runtime.registry.index.by_id


@pytest.mark.parametrize("backend", ["memory"])
def test_deliveries_verify_https_agents_against_the_agent_ca(
    pki: Pki, start_coordinator: Any, agents: Any, admin_key: str
):
    trusted, trusted_server = agents(server_context(pki.agent))
    rogue, rogue_server = agents(server_context(pki.rogue_agent))
    coordinator = start_coordinator(agent_ca_file=pki.agents_ca)
    system_only = start_coordinator()
    port = trusted_server.port
    with httpx.Client(timeout=10) as http:
        for c in (coordinator, system_only):
            # By name: the guard checks the address dialled, TLS the name in the certificate.
            for agent_id, endpoint in (
                ("trusted-1", f"https://localhost:{port}/invoke"),
                ("rogue-1", f"{rogue_server.url}/invoke"),
            ):
                body = registration(agent_id, endpoint, agent_id.split("-")[0] + ".get")
                answer = http.post(f"{c.url}/v1/agents", json=body, headers=_bearer(admin_key))
                assert answer.status_code == 201, answer.text
        # https changes nothing for the guard: the metadata address stays refused.
        body = registration("meta-1", "https://169.254.169.254/invoke", "meta.get")
        answer = http.post(f"{coordinator.url}/v1/agents", json=body, headers=_bearer(admin_key))
        assert answer.json()["error"]["code"] == "endpoint_not_allowed", answer.text
        outcomes = {}
        for name, c in (("agent CA", coordinator), ("system store", system_only)):
            for capability in ("trusted.get", "rogue.get"):
                answer = http.post(
                    f"{c.url}/v1/invoke", json=_invoke(capability), headers=_bearer(admin_key)
                )
                outcomes[(name, capability)] = _last_attempt(answer)
        probes = {
            agent_id: coordinator.run(
                coordinator.runtime.transports.get("http").probe(
                    coordinator.runtime.registry.index.by_id[agent_id].spec.transport,
                    timeout_s=5,
                )
            )
            for agent_id in ("trusted-1", "rogue-1")
        }
    assert outcomes == {
        ("agent CA", "trusted.get"): "ok",
        ("agent CA", "rogue.get"): "agent_unreachable (certificate verify failed)",
        ("system store", "trusted.get"): "agent_unreachable (certificate verify failed)",
        ("system store", "rogue.get"): "agent_unreachable (certificate verify failed)",
    }
    assert probes == {"trusted-1": True, "rogue-1": False}
    assert len(trusted.received) == 1  # only the coordinator that trusts its CA reached it
    assert rogue.received == []  # never delivered: the handshake failed first


@pytest.mark.parametrize("backend", ["memory"])
def test_an_agent_demanding_mutual_tls_gets_the_coordinators_client_certificate(
    pki: Pki, start_coordinator: Any, admin_key: str
):
    demanding = server_context(pki.agent, client_ca=pki.shop_ca)
    presenting = start_coordinator(
        agent_ca_file=pki.agents_ca,
        agent_client_cert=pki.coordinator_client.cert,
        agent_client_key=pki.coordinator_client.key,
    )
    anonymous = start_coordinator(agent_ca_file=pki.agents_ca)
    with stdlib_agent(demanding) as agent, httpx.Client(timeout=10) as http:
        for c in {id(presenting): presenting, id(anonymous): anonymous}.values():
            body = registration("strict-1", agent.url, "strict.get")
            answer = http.post(f"{c.url}/v1/agents", json=body, headers=_bearer(admin_key))
            assert answer.status_code == 201, answer.text
        statuses = [
            http.post(
                f"{presenting.url}/v1/invoke",
                json=_invoke("strict.get"),
                headers=_bearer(admin_key),
            ).status_code
            for _ in range(3)
        ]
        refused = http.post(
            f"{anonymous.url}/v1/invoke", json=_invoke("strict.get"), headers=_bearer(admin_key)
        )
    assert statuses == [200, 200, 200]
    # Refused at the handshake: never read by the agent, so never sent as far as the
    # caller is concerned (safe to try elsewhere), and the reason is named.
    assert _last_attempt(refused) == "agent_unreachable", refused.text
    assert "refused the TLS handshake (tlsv13 alert certificate required)" in refused.text
    # Three invocations, three executions, each with the coordinator's certificate.
    assert [e["client_cn"] for e in agent.executions] == ["coordinator"] * 3


@pytest.mark.parametrize("backend", ["memory"])
def test_nginx_demanding_mutual_tls_verifies_the_coordinators_certificate(
    pki: Pki, start_coordinator: Any, admin_key: str
):
    if nginx_binary() is None:
        pytest.fail("nginx is missing: scripts/test.sh installs it")
    coordinator = start_coordinator(
        agent_ca_file=pki.agents_ca,
        agent_client_cert=pki.coordinator_client.cert,
        agent_client_key=pki.coordinator_client.key,
    )
    anonymous = start_coordinator(agent_ca_file=pki.agents_ca)
    with (
        nginx_agent(pki.agent, pki.shop_ca) as agent,
        httpx.Client(timeout=10) as http,
    ):
        for c in (coordinator, anonymous):
            body = registration("nginx-1", agent.url, "nginx.get")
            answer = http.post(f"{c.url}/v1/agents", json=body, headers=_bearer(admin_key))
            assert answer.status_code == 201, answer.text
        answer = http.post(
            f"{coordinator.url}/v1/invoke", json=_invoke("nginx.get"), headers=_bearer(admin_key)
        )
        refused = http.post(
            f"{anonymous.url}/v1/invoke", json=_invoke("nginx.get"), headers=_bearer(admin_key)
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == {"client": "CN=coordinator", "verify": "SUCCESS"}
        assert refused.status_code != 200
        verified = wait_until(
            lambda: [line for line in agent.posts() if " SUCCESS " in line], "nginx's log"
        )
    assert len(verified) == 1


def test_the_sdk_agent_serves_tls_and_demands_the_coordinators_certificate(
    pki: Pki, start_coordinator: Any, backend: str
):
    coordinator = start_coordinator(
        tls_cert=pki.coordinator.cert,
        tls_key=pki.coordinator.key,
        tls_client_ca=pki.shop_ca,
        agent_ca_file=pki.agents_ca,
        agent_client_cert=pki.coordinator_client.cert,
        agent_client_key=pki.coordinator_client.key,
    )
    agent = Agent(
        "order-1",
        ["order.get"],
        coordinator_url=coordinator.url,
        tls_cert=pki.agent.cert,
        tls_key=pki.agent.key,
        tls_client_ca=pki.shop_ca,  # the CA of the coordinator's client certificate
        coordinator_ca_file=pki.shop_ca,
        client_cert=pki.order_agent.cert,  # its SPIFFE ID is its principal: no API key
        client_key=pki.order_agent.key,
    )
    executions: list[str] = []

    @agent.handler
    async def handle(request: AgentRequest) -> dict[str, Any]:
        executions.append(request.request_id)
        return {"order": "shipped"}

    server = ServerThread(agent.app, ssl_context=agent.ssl_context)
    agent.endpoint_url = f"{server.url}/invoke"
    assert agent.endpoint_url.startswith("https://")
    with server:
        assert agent.is_registered
        caller = SyncReachClient(
            coordinator.url,
            ca_file=pki.shop_ca,
            client_cert=pki.web_caller.cert,
            client_key=pki.web_caller.key,
        )
        with caller:
            answers = [caller.invoke("order.get", payload={"n": n}) for n in range(2)]
        # The agent refuses a caller without a certificate from its client CA.
        for leaf in (None, pki.rogue_order_agent):
            with (
                pytest.raises(httpx.TransportError),
                httpx.Client(verify=client_context(pki.agents_ca, leaf)) as direct,
            ):
                direct.post(agent.endpoint_url, json={"request_id": "x"})
    assert [a.result for a in answers] == [{"order": "shipped"}] * 2
    assert executions == [a.request_id for a in answers]  # each once, and nothing else


SERVING_AGENT = """
import sys
from agent_reach.sdk.agent import Agent

ca, cert, key, client_ca, client_cert, client_key, url = sys.argv[1:]
agent = Agent(
    "order-served",
    ["order.get"],
    coordinator_url=url,
    tls_cert=cert,
    tls_key=key,
    tls_client_ca=client_ca,
    coordinator_ca_file=ca,
    client_cert=client_cert,
    client_key=client_key,
)
agent.handler(lambda request: {"served": "over tls"})
agent.serve(port=0, log_level="warning")
"""


@pytest.mark.parametrize("backend", ["memory"])
def test_the_sdk_agents_serve_registers_an_https_endpoint(pki: Pki, start_coordinator: Any):
    coordinator = start_coordinator(
        tls_cert=pki.coordinator.cert,
        tls_key=pki.coordinator.key,
        tls_client_ca=pki.shop_ca,
        agent_ca_file=pki.agents_ca,
        agent_client_cert=pki.coordinator_client.cert,
        agent_client_key=pki.coordinator_client.key,
    )
    order = pki.order_agent
    files = (pki.shop_ca, pki.agent.cert, pki.agent.key, pki.shop_ca, order.cert, order.key)
    process = subprocess.Popen(
        [sys.executable, "-c", SERVING_AGENT, *map(str, files), coordinator.url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    index = coordinator.runtime.registry.index.by_id
    try:
        wait_until(lambda: "order-served" in index or process.poll() is not None, "registration")
        assert process.poll() is None, process.communicate()[1]
        assert index["order-served"].spec.transport.endpoint.startswith("https://127.0.0.1:")
        with _client(pki, pki.web_caller) as web:
            answer = web.post(f"{coordinator.url}/v1/invoke", json=_invoke("order.get"))
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == {"served": "over tls"}
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    # It shut down gracefully and deregistered on the way out, by its certificate alone.
    wait_until(lambda: "order-served" not in index, "deregistration")


def test_the_edge_server_puts_the_verified_certificate_in_the_asgi_scope(pki: Pki):
    seen: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            await send({"type": f"{message['type']}.complete"})
            return
        seen.append({"scheme": scope["scheme"], **scope.get("extensions", {}).get("tls", {})})
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    context = server_context(pki.coordinator, client_ca=pki.shop_ca)
    with ServerThread(app, edge=EdgeConfig(), ssl_context=context) as server:
        assert server.url.startswith("https://")
        with _client(pki, pki.order_agent) as http:
            assert http.get(f"{server.url}/anything").status_code == 204
            assert http.get(f"{server.url}/again").status_code == 204  # the same connection
    assert seen[0] == seen[1]
    assert seen[0]["scheme"] == "https"
    assert seen[0]["tls_version"] in ("TLSv1.2", "TLSv1.3")
    assert seen[0]["client_cert_name"] == "commonName=order"
    assert seen[0]["peer"] == PeerCertificate(common_name="order", uris=(ORDER_AGENT,))


def test_a_client_that_never_finishes_its_handshake_is_closed(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(edge, "HANDSHAKE_TIMEOUT_S", 0.2)  # 10 s in service
    server = ServerThread(FakeAgent(), edge=EdgeConfig(), ssl_context=server_context(pki.agent))
    with server, socket.create_connection((server.host, server.port), timeout=10) as idle:
        idle.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, and no more
        assert idle.recv(1024) == b""  # the server closed it (a timeout raises instead)

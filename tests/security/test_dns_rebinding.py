"""DNS rebinding: a foreign `Origin` or, on a loopback bind, a foreign `Host` is refused
with 403 `origin_not_allowed` on `/mcp`, the dashboard and the API — with security on
and off — while curl-like callers and the coordinator's own pages are unaffected."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from agent_reach.config import Settings
from agent_reach.identity.origins import OriginGuard
from agent_reach.testing.servers import run_coordinator

ADMIN_KEY = "dns-rebinding-admin-key-0123456789"
EVIL = "http://evil.example.com"
MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "page", "version": "1"},
    },
}


@pytest.fixture(params=["on", "off"])
def coordinator(request: pytest.FixtureRequest) -> Iterator[str]:
    settings = Settings(
        auth=request.param,
        admin_key=ADMIN_KEY,
        allowed_origins="https://console.example.com",
        decision_log="off",
    )
    with run_coordinator(settings) as (url, _):
        yield url


def call(
    url: str, path: str, *, method: str = "GET", body: object = None, **headers: str
) -> tuple[int, dict[str, object] | None]:
    """Status and JSON body (None when not JSON), read with the standard library."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"authorization": f"Bearer {ADMIN_KEY}", **headers}
    if data is not None:
        sent["content-type"] = "application/json"
        sent["accept"] = "application/json, text/event-stream"
    request = urllib.request.Request(url + path, data=data, method=method, headers=sent)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def refused(answer: tuple[int, dict[str, object] | None]) -> bool:
    status, body = answer
    return status == 403 and body is not None and body["error"]["code"] == "origin_not_allowed"  # type: ignore[index]


INVOKE = {"capability": "nobody.home", "payload": {}}


@pytest.mark.parametrize(
    ("path", "method", "body"),
    [("/mcp", "POST", MCP_INITIALIZE), ("/ui/", "GET", None), ("/v1/invoke", "POST", INVOKE)],
)
def test_a_rebound_page_is_refused_everywhere(
    coordinator: str, path: str, method: str, body: object
) -> None:
    attempts = [
        {"origin": EVIL, "host": "evil.example.com"},  # the request
        {"origin": EVIL},  # a cross-origin request to the loopback name
        {"host": "evil.example.com:8500"},  # a same-origin GET of a rebound page: no Origin
    ]
    for headers in attempts:
        assert refused(call(coordinator, path, method=method, body=body, **headers)), headers


def test_requests_without_origin_and_the_coordinators_own_pages_pass(coordinator: str) -> None:
    port = coordinator.rsplit(":", 1)[1]
    assert call(coordinator, "/v1/agents")[0] == 200
    assert call(coordinator, "/v1/agents", origin=coordinator)[0] == 200
    localhost = f"http://localhost:{port}"
    assert call(coordinator, "/v1/agents", origin=localhost, host=f"localhost:{port}")[0] == 200
    status, body = call(coordinator, "/v1/invoke", method="POST", body=INVOKE, origin=coordinator)
    assert (status, body["error"]["code"]) == (404, "no_capability")  # type: ignore[index]
    status, _ = call(coordinator, "/mcp", method="POST", body=MCP_INITIALIZE, origin=coordinator)
    assert status == 200


def test_an_allowed_origin_passes_and_only_it(coordinator: str) -> None:
    assert call(coordinator, "/v1/agents", origin="https://console.example.com")[0] == 200
    assert refused(call(coordinator, "/v1/agents", origin="https://console.example.com.evil.io"))
    assert refused(call(coordinator, "/v1/agents", origin="null"))


def test_public_metadata_stays_readable_from_any_origin(coordinator: str) -> None:
    status, body = call(coordinator, "/.well-known/agent-card.json", origin=EVIL)
    assert status == 200 and body is not None and "skills" in body


def guard(**settings: object) -> OriginGuard:
    return OriginGuard(Settings(**settings))  # type: ignore[arg-type]


def test_a_wildcard_bind_trusts_ip_hosts_and_named_origins_only() -> None:
    wildcard = guard(host="0.0.0.0", port=8500, public_url="https://reach.shop.internal")
    wildcard.check("/v1/agents", b"reach.example.net", None)  # no Origin: not a browser page
    wildcard.check("/v1/agents", b"10.1.2.3:8500", b"http://10.1.2.3:8500")
    wildcard.check("/v1/agents", b"reach.shop.internal", b"https://reach.shop.internal")
    with pytest.raises(Exception, match="may not use this coordinator"):
        wildcard.check("/v1/agents", b"rebound.evil.io:8500", b"http://rebound.evil.io:8500")


def test_a_proxy_keeping_the_public_host_is_allowed_by_naming_it() -> None:
    behind = guard(host="127.0.0.1", port=8500, allowed_origins="https://reach.shop.com")
    behind.check("/v1/agents", b"reach.shop.com", None)
    behind.check("/v1/agents", b"reach.shop.com", b"https://reach.shop.com")
    with pytest.raises(Exception, match="not a loopback name"):
        behind.check("/v1/agents", b"evil.example.com", None)
    anything = guard(host="127.0.0.1", allowed_origins="*")
    anything.check("/v1/agents", b"127.0.0.1:8500", b"https://anywhere.example")

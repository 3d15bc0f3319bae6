"""The A2A and MCP faces' fast path answers on the wire exactly as the full stack does.

Two coordinators side by side, each with its own agents: one on the edge server as
deployed (`/a2a`, `/a2a/message:send`, 2026-07-28 `tools/call` and `tools/call` in a
2025-11-25 session on the fast path),
one with `EdgeConfig(fast_faces=False)` (everything through the ASGI app: FastAPI, the
MCP SDK's streamable-HTTP layer). The same raw requests go to both: successes, auth
failures, bad JSON, unknown methods and tools, a wrong version or session, a foreign
Origin, another Accept, streams. Status, the headers that matter and the body must
agree once the ids each run mints (trace, request, message, session ids, timestamps)
are masked, and each agent must count the same executions: one per delivered call.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.server.app import create_app
from agent_reach.server.edge import EdgeConfig, EdgeServer
from agent_reach.server.fastfaces.exchange import EdgeFaces
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.raw_http import RawClient, Reply
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"},
}
MCP_ACCEPT = "application/json, text/event-stream"
# Headers whose values must agree; the rest (x-reach-node, date) name the process.
COMPARED = (
    "content-type",
    "content-length",
    "transfer-encoding",
    "www-authenticate",
    "retry-after",
    "cache-control",
    "x-accel-buffering",
    "allow",
)
_MINTED = re.compile(
    rb"[0-9a-f]{32}|[0-9a-f]{16}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    rb"|\d{4}-\d\d-\d\dT[0-9:.]+Z?|\\?\"(score|duration_ms)\\?\":[0-9.e-]+"
)


@dataclass
class Side:
    """One coordinator, the agents behind it, and the caller's key there."""

    url: str
    key: str
    echo: FakeAgent
    broken: FakeAgent
    edge: EdgeServer
    app: Any
    admin: str
    session: str = ""

    def taken(self) -> tuple[int, int]:
        """(answered on the fast path, handed to the app) so far."""
        faces = self.edge.faces
        assert isinstance(faces, EdgeFaces)
        return faces.answered, faces.handed_on


@pytest.fixture
def sides(settings: Settings) -> Iterator[tuple[Side, Side]]:
    """(fast, full): the same setup on a coordinator with and without the fast path."""
    admin = secrets.token_urlsafe(24)
    with ExitStack() as stack:
        made = []
        for n, fast in enumerate((True, False)):
            own = {"auth": "on", "admin_key": SecretStr(admin)}
            if settings.registry_backend == "redis":
                own["redis_prefix"] = f"{settings.redis_prefix}:{n}"
            app = create_app(settings.model_copy(update=own))
            server = stack.enter_context(ServerThread(app, edge=EdgeConfig(fast_faces=fast)))
            echo, broken = FakeAgent(answer={"echo": "pong", "n": 1}), FakeAgent(status=500)
            echo_url = stack.enter_context(ServerThread(echo)).url
            broken_url = stack.enter_context(ServerThread(broken)).url
            key = _setup(server.url, admin, echo_url, broken_url)
            assert isinstance(server.server, EdgeServer)
            made.append(Side(server.url, key, echo, broken, server.server, app, admin))
        for side in made:
            side.session = _session(side)
        yield made[0], made[1]


def _setup(url: str, admin: str, echo_url: str, broken_url: str) -> str:
    """Agents for echo.say, text.say (text answers), broken.op and payroll.run; a caller
    key granted all but payroll.run."""
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {admin}"}) as http:
        for agent_id, tag, endpoint in (
            ("echo-1", "echo.say", echo_url),
            ("broken-1", "broken.op", broken_url),
            ("payroll-1", "payroll.run", echo_url),
        ):
            registration = {
                "id": agent_id,
                "capabilities": [tag],
                "description": f"{tag} for the wire test",
                "transport": {"type": "http", "endpoint": f"{endpoint}/invoke"},
            }
            assert http.post("/v1/agents", json=registration).status_code == 201
        grant = {"principal": "caller", "role": "caller", "capabilities": ["echo.*", "broken.*"]}
        created = http.post("/v1/keys", json=grant)
        assert created.status_code == 201, created.text
        return str(created.json()["key"])


def _session(side: Side) -> str:
    """A 2025-11-25 session on `side`, initialized and listed (as a client opens one)."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "wire-test", "version": "1"},
        },
    }
    reply = _send(side, "/mcp", init, {"accept": MCP_ACCEPT})
    session = reply.headers["mcp-session-id"]
    headers = {"accept": MCP_ACCEPT, "mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
    assert (
        _send(
            side, "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers
        ).status
        == 202
    )
    assert (
        _send(side, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers).status
        == 200
    )
    return session


def _send(
    side: Side,
    path: str,
    body: Any,
    headers: dict[str, str],
    *,
    auth: str | None = "key",
    method: str = "POST",
) -> Reply:
    """One request (a POST unless told) on a fresh connection; `body` JSON unless bytes;
    `auth` "key" for the side's caller key, None for none, else that Authorization value."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = {"host": "127.0.0.1", "content-type": "application/json", **headers}
    if auth == "key":
        lines["authorization"] = f"Bearer {side.key}"
    elif auth is not None:
        lines["authorization"] = auth
    lines = {k: v.replace("{session}", side.session) for k, v in lines.items()}
    lines["content-length"] = str(len(raw))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in lines.items())
    client = RawClient(side.url)
    try:
        client.send(head.encode() + b"\r\n" + raw)
        return client.reply()
    finally:
        client.close()


def _seen(reply: Reply) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in reply.headers.items() if k in COMPARED}
    if "content-length" in headers:  # masked ids change lengths only with the ids
        headers["content-length"] = "n"
    body = _MINTED.sub(b"<minted>", reply.body)
    return reply.status, headers, body


def _same(
    fast: Side, full: Side, path: str, body: Any, headers: dict[str, str], **kw: Any
) -> Reply:
    """The request on both sides; their answers must agree. The fast side's answer."""
    answers = [_send(side, path, body, headers, **kw) for side in (fast, full)]
    assert "x-reach-node" in answers[0].headers
    assert _seen(answers[0]) == _seen(answers[1])
    return answers[0]


def _message(capability: str | None = "echo.say", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": secrets.token_hex(8),
        "role": "ROLE_USER",
        "parts": [{"data": {"sku": "P-1"}}],
        **extra,
    }
    if capability is not None:
        message["metadata"] = {"capability": capability}
    return message


def _rpc(method: str, params: Any, call_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}


def _call(name: str, arguments: Any = None, meta: Any = META, call_id: Any = 7) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": meta}
    if arguments is not None:
        params["arguments"] = arguments
    return _rpc("tools/call", params, call_id)


def _modern(name: str = "echo.say", **headers: str) -> dict[str, str]:
    return {
        "accept": MCP_ACCEPT,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
        **headers,
    }


def _counts(side: Side) -> tuple[int, int]:
    return len(side.echo.received), len(side.broken.received)


def test_a2a_json_rpc_answers_agree(sides: tuple[Side, Side]) -> None:
    fast, full = sides
    v1 = {"a2a-version": "1.0"}
    sent = _same(fast, full, "/a2a", _rpc("SendMessage", {"message": _message()}), v1)
    assert b"TASK_STATE_COMPLETED" in sent.body and b"pong" in sent.body
    asks = _message(None, metadata={"capability": "echo.say", "reply": "message"})
    replied = _same(fast, full, "/a2a", _rpc("SendMessage", {"message": asks}), v1)
    assert b'"message"' in replied.body and b"pong" in replied.body
    v03 = {**_message(), "role": "user", "kind": "message"}
    assert _same(fast, full, "/a2a", _rpc("message/send", {"message": v03}), {}).status == 200
    for auth in (None, "Bearer nope"):
        assert (
            _same(
                fast, full, "/a2a", _rpc("SendMessage", {"message": _message()}), v1, auth=auth
            ).status
            == 401
        )
    assert b"-32700" in _same(fast, full, "/a2a", b"{not json", v1).body
    assert b"-32600" in _same(fast, full, "/a2a", [_rpc("SendMessage", {})], v1).body
    assert b"-32601" in _same(fast, full, "/a2a", _rpc("tasks/teleport", {}), v1).body
    assert (
        b"-32009"
        in _same(
            fast, full, "/a2a", _rpc("SendMessage", {"message": _message()}), {"a2a-version": "9.9"}
        ).body
    )
    assert b"-32602" in _same(fast, full, "/a2a", _rpc("SendMessage", {}), v1).body
    refused = _same(
        fast, full, "/a2a", _rpc("SendMessage", {"message": _message("payroll.run")}), v1
    )
    assert b"forbidden" in refused.body or b"not_allowed" in refused.body or refused.status >= 400
    rejected = _same(
        fast,
        full,
        "/a2a",
        # no registered capability by that name: declined (text routing would depend on
        # when each coordinator last calibrated)
        _rpc("SendMessage", {"message": _message("echo.nothing")}),
        v1,
    )
    assert b"TASK_STATE_REJECTED" in rejected.body
    foreign = _same(
        fast,
        full,
        "/a2a",
        _rpc("SendMessage", {"message": _message()}),
        {"origin": "https://evil.example"},
    )
    assert foreign.status == 403
    failed = _same(fast, full, "/a2a", _rpc("SendMessage", {"message": _message("broken.op")}), v1)
    assert b'"error"' in failed.body
    streamed = _same(fast, full, "/a2a", _rpc("SendStreamingMessage", {"message": _message()}), v1)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    # one execution per delivered message, on each side: 4 echoes, 1 broken attempt
    assert _counts(fast) == _counts(full) == (4, 1)
    # the fast side answered all but the foreign Origin and the stream (and the session's
    # three opening requests); the other has no fast path
    assert fast.taken() == (13, 5) and full.edge.faces is None


def test_a2a_rest_send_answers_agree(sides: tuple[Side, Side]) -> None:
    fast, full = sides
    path, v1 = "/a2a/message:send", {"a2a-version": "1.0"}
    assert b"pong" in _same(fast, full, path, {"message": _message()}, v1).body
    assert _same(fast, full, path, {"message": _message()}, v1, auth=None).status == 401
    assert _same(fast, full, path, b"[1,", v1).status == 400
    assert _same(fast, full, path, [1], v1).status == 400
    assert _same(fast, full, path, {"message": _message()}, {"a2a-version": "0.3"}).status == 400
    assert _same(fast, full, path, {"message": _message("broken.op")}, v1).status >= 400
    assert (
        _same(fast, full, path, {"message": _message()}, {"origin": "https://evil.example"}).status
        == 403
    )
    assert _counts(fast) == _counts(full) == (1, 1)
    assert fast.taken() == (6, 4) and full.edge.faces is None


def test_mcp_tool_calls_answer_alike(sides: tuple[Side, Side]) -> None:
    fast, full = sides
    payload = {"payload": {"sku": "P-1"}}
    called = _same(fast, full, "/mcp", _call("echo.say", payload), _modern())
    assert called.status == 200 and b'"pong"' in called.body and b'"isError":false' in called.body
    assert _same(fast, full, "/mcp", _call("echo.say", call_id="id-2"), _modern()).status == 200
    assert (
        b'"isError":true'
        in _same(fast, full, "/mcp", _call("broken.op", payload), _modern("broken.op")).body
    )
    unknown = _same(fast, full, "/mcp", _call("payroll.run", payload), _modern("payroll.run"))
    assert unknown.status == 400 and b"Unknown tool" in unknown.body
    refused = _same(fast, full, "/mcp", _call("echo.say", payload), _modern(), auth="Bearer nope")
    assert refused.status == 401 and "www-authenticate" in refused.headers
    assert _same(fast, full, "/mcp", b'{"jsonrpc":', _modern()).status == 400
    assert (
        _same(fast, full, "/mcp", _call("echo.say", payload), _modern("other.tool")).status == 400
    )
    assert (
        _same(
            fast, full, "/mcp", _call("echo.say", payload), _modern(accept="application/json")
        ).status
        == 406
    )
    assert (
        _same(
            fast,
            full,
            "/mcp",
            _call("echo.say", payload),
            _modern(**{"content-type": "text/plain"}),
        ).status
        == 400
    )
    odd = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    assert (
        _same(
            fast,
            full,
            "/mcp",
            _call("echo.say", payload, odd),
            _modern(**{"mcp-protocol-version": "2099-01-01"}),
        ).status
        == 400
    )
    bad_meta = {**META, "io.modelcontextprotocol/clientCapabilities": "all"}
    assert _same(fast, full, "/mcp", _call("echo.say", payload, bad_meta), _modern()).status == 400
    assert (
        _same(
            fast, full, "/mcp", _call("echo.say", payload), _modern(origin="https://evil.example")
        ).status
        == 403
    )
    listed = _same(
        fast,
        full,
        "/mcp",
        _rpc("tools/list", {"_meta": META}),
        _modern(**{"mcp-method": "tools/list"}),
    )
    assert b"echo.say" in listed.body and b"payroll.run" not in listed.body
    assert (
        _same(
            fast, full, "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, _modern()
        ).status
        == 202
    )
    in_session = {
        "accept": MCP_ACCEPT,
        "mcp-session-id": "{session}",
        "mcp-protocol-version": HANDSHAKE,
    }
    old = _rpc("tools/call", {"name": "echo.say", "arguments": payload}, 9)
    assert b"pong" in _same(fast, full, "/mcp", old, in_session).body
    stale = {**in_session, "mcp-session-id": "0" * 32}
    assert _same(fast, full, "/mcp", old, stale).status == 404
    # delivered: 2 modern calls and 1 in the session to echo, 1 to broken; none refused
    assert _counts(fast) == _counts(full) == (3, 1)
    # fast: the 2026-07-28 calls (delivered, failed, unknown, unauthenticated) and the
    # session's call; the rest and the session's three opening requests went to the SDK
    assert fast.taken() == (6, 13) and full.edge.faces is None


def test_tool_calls_in_a_session_answer_alike(sides: tuple[Side, Side]) -> None:
    """A 2025-11-25 session's `tools/call`: an event stream of one message, as the SDK's
    session transport sends it, for successes, failures and refusals alike; anything
    the fast path does not answer goes to the SDK and is answered the same."""
    fast, full = sides
    payload = {"payload": {"sku": "P-1"}}
    session = {
        "accept": MCP_ACCEPT,
        "mcp-session-id": "{session}",
        "mcp-protocol-version": HANDSHAKE,
    }

    def call(name: Any, arguments: Any = payload, call_id: Any = 9, **params: Any) -> Any:
        given = {"name": name, **params}
        if arguments is not None:
            given["arguments"] = arguments
        return _rpc("tools/call", given, call_id)

    called = _same(fast, full, "/mcp", call("echo.say"), session)
    assert called.status == 200 and called.headers["content-type"] == "text/event-stream"
    assert called.headers["mcp-session-id"] == fast.session
    assert called.body.startswith(b"event: message\r\ndata: {") and b"pong" in called.body
    assert b"pong" in _same(fast, full, "/mcp", call("echo.say", None, "id-é"), session).body
    progress = call("echo.say", _meta={"progressToken": "t-1"})
    assert b"pong" in _same(fast, full, "/mcp", progress, session).body
    failed = _same(fast, full, "/mcp", call("broken.op"), session)
    assert b'"isError":true' in failed.body
    unknown = _same(fast, full, "/mcp", call("payroll.run"), session)
    assert unknown.status == 200 and b"Unknown tool" in unknown.body
    assert b"-32602" in _same(fast, full, "/mcp", call("echo.say", [1]), session).body
    assert b"-32602" in _same(fast, full, "/mcp", call(7), session).body
    refused = _same(fast, full, "/mcp", call("echo.say"), session, auth="Bearer nope")
    assert refused.status == 401 and "www-authenticate" in refused.headers
    assert _same(fast, full, "/mcp", b'{"jsonrpc":', session).status == 400
    for accept in ("application/json", "text/event-stream"):
        assert (
            _same(fast, full, "/mcp", call("echo.say"), {**session, "accept": accept}).status == 406
        )
    for content_type, status in (("text/plain", 400), ("application/json-seq", 415)):
        headers = {**session, "content-type": content_type}
        assert _same(fast, full, "/mcp", call("echo.say"), headers).status == status
    other_version = {**session, "mcp-protocol-version": "2025-06-18"}
    assert b"pong" in _same(fast, full, "/mcp", call("echo.say"), other_version).body
    no_version = {k: v for k, v in session.items() if k != "mcp-protocol-version"}
    assert b"pong" in _same(fast, full, "/mcp", call("echo.say"), no_version).body
    foreign = {**session, "origin": "https://evil.example"}
    assert _same(fast, full, "/mcp", call("echo.say"), foreign).status == 403
    listed = _same(fast, full, "/mcp", _rpc("tools/list", {}), session)
    assert b"echo.say" in listed.body and b"payroll.run" not in listed.body
    # on the fast path: 3 deliveries, the failed and the unknown tool, the refusal
    assert fast.taken() == (6, 14)
    # another principal's key in the session: 404, as if the session did not exist
    other = _key(fast, "other-caller"), _key(full, "other-caller")
    for side, key in zip(sides, other, strict=True):
        reply = _send(side, "/mcp", call("echo.say"), session, auth=f"Bearer {key}")
        assert reply.status == 404 and b"Session not found" in reply.body
    assert fast.taken() == (6, 15)
    # ended: a DELETE, then the call is the SDK's 404 on both
    for side in sides:
        assert _send(side, "/mcp", b"", session, method="DELETE").status == 200
    gone = _same(fast, full, "/mcp", call("echo.say"), session)
    assert gone.status == 404
    assert _counts(fast) == _counts(full) == (5, 1)  # the other key's call delivered nothing
    assert fast.taken() == (6, 16) and full.edge.faces is None
    assert not fast.app.mcp.sessions.live and not full.app.mcp.sessions.live


def test_the_face_ends_an_idle_session(settings: Settings) -> None:
    """The face ends idle sessions itself (the SDK's timer, off, would never see the
    fast path's calls): the session's id answers the SDK's 404 from then on."""
    admin = secrets.token_urlsafe(24)
    app = create_app(settings.model_copy(update={"auth": "on", "admin_key": SecretStr(admin)}))
    app.mcp.sessions.idle_s = 0.2
    echo = FakeAgent(answer={"echo": "pong"})
    with ServerThread(app) as server, ServerThread(echo) as agent:
        key = _setup(server.url, admin, agent.url, agent.url)
        assert isinstance(server.server, EdgeServer)
        side = Side(server.url, key, echo, echo, server.server, app, admin)
        side.session = _session(side)
        session = {
            "accept": MCP_ACCEPT,
            "mcp-session-id": "{session}",
            "mcp-protocol-version": HANDSHAKE,
        }
        wait_until(lambda: not app.mcp.sessions.live, "the idle session ended")
        gone = _send(side, "/mcp", _rpc("tools/call", {"name": "echo.say"}, 4), session)
        assert gone.status == 404 and side.taken() == (0, 4)
        assert not echo.received


def _key(side: Side, principal: str) -> str:
    """A caller key for another principal on `side`, granted echo.*."""
    grant = {"principal": principal, "role": "caller", "capabilities": ["echo.*"]}
    with httpx.Client(base_url=side.url, headers={"authorization": f"Bearer {side.admin}"}) as http:
        created = http.post("/v1/keys", json=grant)
        assert created.status_code == 201, created.text
        return str(created.json()["key"])


def test_a_tool_call_that_outlasts_the_sdk_window_becomes_an_event_stream(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK commits to SSE after 15 s (made 0.3 s here, on both sides): a ping, then
    the answer as one `message` event."""
    from mcp.server import _streamable_http_modern

    from agent_reach.server.fastfaces import mcp as fast_mcp

    monkeypatch.setattr(_streamable_http_modern, "_SSE_PING_INTERVAL", 0.3)
    monkeypatch.setattr(fast_mcp, "SSE_AFTER_S", 0.3)
    fast, full = sides
    for side in sides:
        side.echo.delay_s = 0.5
    answers = [_send(side, "/mcp", _call("echo.say", {"payload": 1}), _modern()) for side in sides]
    for answer in answers:
        assert answer.status == 200
        assert answer.headers["content-type"] == "text/event-stream"
        assert answer.body.startswith(b": ping\r\n\r\n")
    events = [_MINTED.sub(b"", a.body.replace(b": ping\r\n\r\n", b"")) for a in answers]
    assert events[0] == events[1] and events[0].startswith(b"event: message\r\ndata: {")
    assert _counts(fast) == _counts(full) == (1, 0)
    assert fast.taken() == (1, 3)


def test_a_slow_tool_call_in_a_session_pings_as_the_sdk_does(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session transport's event stream pings every 15 s (sse-starlette's comment
    with the time; made 0.3 s here, on both sides), then sends the answer."""
    from sse_starlette import EventSourceResponse

    from agent_reach.server.fastfaces import mcp as fast_mcp

    monkeypatch.setattr(EventSourceResponse, "DEFAULT_PING_INTERVAL", 0.3)
    monkeypatch.setattr(fast_mcp, "SSE_AFTER_S", 0.3)
    fast, full = sides
    for side in sides:
        side.echo.delay_s = 0.5
    session = {
        "accept": MCP_ACCEPT,
        "mcp-session-id": "{session}",
        "mcp-protocol-version": HANDSHAKE,
    }
    call = _rpc("tools/call", {"name": "echo.say", "arguments": {"payload": 1}}, 5)
    answers = [_send(side, "/mcp", call, session) for side in sides]
    pings = re.compile(rb": ping - [0-9: .+-]+\r\n\r\n")
    for answer in answers:
        assert answer.status == 200 and answer.headers["content-type"] == "text/event-stream"
        assert pings.match(answer.body)
    assert _seen(answers[0])[:2] == _seen(answers[1])[:2]
    events = [_MINTED.sub(b"", pings.sub(b"", a.body)) for a in answers]
    assert events[0] == events[1] and events[0].startswith(b"event: message\r\ndata: {")
    assert _counts(fast) == _counts(full) == (1, 0)
    assert fast.taken() == (1, 3)

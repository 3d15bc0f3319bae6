"""The edge server (`server/edge.py`) on real sockets on 127.0.0.1, in raw bytes.

Two servers: a coordinator (invoke hot path, FastAPI behind it) with a FakeAgent, and
a small ASGI app for what only the adapter does (streaming, files, failures, a request
held open). Responses are parsed with httptools, so pipelined ones come apart exactly
as they arrived.
"""

from __future__ import annotations

import asyncio
import select
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agent_reach.config import Settings
from agent_reach.server.edge import EdgeConfig, EdgeServer, serve
from agent_reach.server.edge_asgi import BODY_HIGH_WATER, StartupFailed
from agent_reach.server.edge_connection import MAX_HEAD_BYTES
from agent_reach.server.limits import MAX_HEADERS
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.raw_http import RawClient, Reply
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until

IO_TIMEOUT_S = 5.0  # a safety net for blocking reads; no test waits for it
BODY_LIMIT = 4096  # the smallest max_body_bytes Settings allows is 1024
AGENT_DELAY_S = 0.05  # the agent answers after the coordinator's own /healthz would
FILE_BYTES = 1200 * 256  # several of StaticFiles' 64 KiB chunks
# A file far larger than a small receive window: the server's writes back up, so it
# must wait for the reader (pause_writing) instead of buffering the file.
LARGE_FILE_BYTES = 16 * 1024 * 256
INVOKE = b'{"capability": "echo", "payload": {"n": 1}}'
HEAD_BOUND = 256_000 + MAX_HEAD_BYTES  # one uvloop read, then the edge's own bound


def request(
    method: str, target: str, body: bytes | None = None, *, headers: tuple[str, ...] = ()
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "host: localhost", *headers]
    if body is not None:
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + (body or b"")


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def error_code(reply: Reply) -> str:
    return str(orjson.loads(reply.body)["error"]["code"])


@pytest.fixture(scope="module")
def coordinator() -> Iterator[str]:
    """A coordinator on the edge server with one FakeAgent for capability `echo`."""
    settings = Settings(auth="off", decision_log="off", max_body_bytes=BODY_LIMIT)
    agent = FakeAgent(answer={"echoed": True}, delay_s=AGENT_DELAY_S)
    with ServerThread(agent) as agent_server, run_coordinator(settings) as (url, _):
        registration = {
            "id": "echo-1",
            "capabilities": ["echo"],
            "transport": {"endpoint": f"{agent_server.url}/invoke"},
        }
        assert httpx.post(f"{url}/v1/agents", json=registration).status_code == 201
        yield url


@pytest.fixture
def connect() -> Iterator[Callable[..., RawClient]]:
    """Open raw connections (`connect(url)`), all closed after the test."""
    clients: list[RawClient] = []

    def open_client(url: str, **options: Any) -> RawClient:
        clients.append(RawClient(url, **options))
        return clients[-1]

    yield open_client
    for raw in clients:
        raw.close()


@pytest.fixture
def client(coordinator: str, connect: Callable[..., RawClient]) -> RawClient:
    return connect(coordinator)


class Held:
    """A request the test holds open: `entered` once the app has it, `release` to answer."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


def probe_app(files: Path, held: Held) -> Callable[..., Any]:
    """Echo, a stream without a length, static files, a request that leaves its body
    unread, a held request and three failures."""

    async def echo(request: Request) -> JSONResponse:
        body = await request.body()
        scope = request.scope
        return JSONResponse(
            {
                "path": scope["path"],
                "raw_path": scope["raw_path"].decode(),
                "query": scope["query_string"].decode(),
                "client": scope["client"][0],
                "body": body.decode(),
            }
        )

    async def stream(_: Request) -> StreamingResponse:
        async def parts() -> Any:
            for n in range(3):
                yield b"part%d;" % n

        return StreamingResponse(parts())

    async def ignore(_: Request) -> PlainTextResponse:
        return PlainTextResponse("not read")

    async def hold(_: Request) -> PlainTextResponse:
        held.entered.set()
        await asyncio.to_thread(held.release.wait, IO_TIMEOUT_S)
        return PlainTextResponse("released")

    web = Starlette(
        routes=[
            Route("/echo{rest:path}", echo, methods=["GET", "POST"]),
            Route("/stream", stream),
            Route("/ignore", ignore, methods=["POST"]),
            Route("/held", hold),
            Mount("/files", StaticFiles(directory=files)),
        ]
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path")
        if path == "/fail-before-start":
            raise RuntimeError("the app broke before answering")
        if path == "/fail-after-start":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            raise RuntimeError("the app broke before any byte went out")
        if path == "/fail-halfway":
            start = {"type": "http.response.start", "status": 200}
            await send({**start, "headers": [(b"content-length", b"10")]})
            await send({"type": "http.response.body", "body": b"12345", "more_body": True})
            raise RuntimeError("the app broke halfway")
        await web(scope, receive, send)

    return app


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("files")
    (directory / "big.bin").write_bytes(bytes(range(256)) * (FILE_BYTES // 256))
    (directory / "large.bin").write_bytes(bytes(range(256)) * (LARGE_FILE_BYTES // 256))
    return directory


@pytest.fixture
def probe(files: Path, held: Held) -> Iterator[Callable[..., ServerThread]]:
    """Start the probe app on the edge server: `probe(EdgeConfig(...))`."""
    servers: list[ServerThread] = []

    def start(config: EdgeConfig = EdgeConfig()) -> ServerThread:  # noqa: B008 (frozen)
        server = ServerThread(probe_app(files, held), edge=config).start()
        servers.append(server)
        return server

    yield start
    stop_all(servers)


# The invoke hot path and keep-alive


def test_one_connection_serves_invoke_and_control_plane_requests_in_turn(client):
    for _ in range(2):
        client.send(request("POST", "/v1/invoke", INVOKE))
        answer = client.reply()
        assert answer.status == 200, answer.body
        assert orjson.loads(answer.body)["result"] == {"echoed": True}
        assert answer.headers["content-type"] == "application/json"
        assert len(answer.headers["x-trace-id"]) == 32
        assert "connection" not in answer.headers
        client.send(request("GET", "/healthz"))
        assert client.reply().status == 200


def test_pipelined_requests_are_answered_in_the_order_they_were_sent(client):
    client.send(
        request("POST", "/v1/invoke?ignored=1", b'{"capability": "echo", "request_id": "p-1"}')
        + request("GET", "/healthz")
        + request("POST", "/v1/invoke", b'{"capability": "echo", "request_id": "p-2"}')
        + request("GET", "/v1/agents")
    )
    first, health, second, agents = (client.reply() for _ in range(4))
    assert orjson.loads(first.body)["request_id"] == "p-1"
    assert orjson.loads(health.body)["status"] == "ok"
    assert orjson.loads(second.body)["request_id"] == "p-2"
    assert agents.status == 200 and b"echo-1" in agents.body


def test_a_chunked_invoke_body_is_reassembled(client):
    head = "POST /v1/invoke HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n\r\n"
    client.send(head.encode() + chunked(INVOKE[:10], INVOKE[10:30], INVOKE[30:]))
    answer = client.reply()
    assert answer.status == 200, answer.body
    assert orjson.loads(answer.body)["result"] == {"echoed": True}


def test_expect_100_continue_is_answered_before_the_body_is_sent(client):
    head = request("POST", "/v1/invoke", headers=("expect: 100-continue",))
    client.send(head.removesuffix(b"\r\n") + b"content-length: %d\r\n\r\n" % len(INVOKE))
    assert client.reply().status == 100
    client.send(INVOKE)
    assert client.reply().status == 200


def test_a_declared_body_over_the_limit_is_refused_at_once_and_the_connection_closed(client):
    head = request("POST", "/v1/invoke", headers=("expect: 100-continue",))
    client.send(head.removesuffix(b"\r\n") + b"content-length: %d\r\n\r\n" % (BODY_LIMIT + 1))
    answer = client.reply()
    assert answer.status == 413
    assert error_code(answer) == "payload_too_large"
    assert answer.headers["connection"] == "close"
    assert client.is_closed()


def test_a_streamed_body_is_refused_as_it_passes_the_limit(client):
    head = b"POST /v1/invoke HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n\r\n"
    client.send(head + chunked(b"x" * 1024, b"x" * 1024, b"x" * 1024, b"x" * 1024, b"x"))
    answer = client.reply()
    assert answer.status == 413
    assert orjson.loads(answer.body)["error"]["trace_id"] == answer.headers["x-trace-id"]
    assert client.is_closed()


def test_too_many_headers_are_431(client):
    many = tuple(f"x-h{n}: 1" for n in range(MAX_HEADERS + 1))
    client.send(request("POST", "/v1/invoke", INVOKE, headers=many))
    answer = client.reply()
    assert answer.status == 431
    assert error_code(answer) == "headers_too_large"


def test_a_header_that_never_ends_is_431(client):
    client.send(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-long: ")
    for _ in range(HEAD_BOUND // 1024):
        if select.select([client.sock], [], [], 0)[0]:
            break  # answered already
        try:
            client.send(b"v" * 1024)
        except (BrokenPipeError, ConnectionResetError):
            break
    answer = client.reply()
    assert answer.status == 431
    assert error_code(answer) == "headers_too_large"


@pytest.mark.parametrize(
    "raw",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"POST /v1/invoke HTTP/1.1\r\nhost: localhost\r\ncontent-length: 5\r\n"
        b"transfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/agents HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n"
        b"content-length: 5\r\n\r\n0\r\n\r\n",
    ],
    ids=["garbage", "content-length then transfer-encoding", "the other way round"],
)
def test_malformed_requests_are_400_and_close_the_connection(client, raw):
    client.send(raw)
    answer = client.reply()
    assert answer.status == 400
    assert error_code(answer) == "bad_request"
    assert client.is_closed()


def test_an_answer_already_due_goes_out_before_the_refusal_of_what_follows(client):
    client.send(request("POST", "/v1/invoke", INVOKE) + b"GARBAGE\r\n\r\n")
    assert client.reply().status == 200
    assert client.reply().status == 400
    assert client.is_closed()


def test_http_1_0_closes_unless_keep_alive_is_asked_for(coordinator, connect):
    keeps = connect(coordinator)
    for _ in range(2):
        keeps.send(b"GET /healthz HTTP/1.0\r\nconnection: keep-alive\r\n\r\n")
        answer = keeps.reply()
        assert answer.status == 200
        assert answer.headers["connection"] == "keep-alive"
    closes = connect(coordinator)
    closes.send(b"POST /v1/invoke HTTP/1.0\r\ncontent-length: %d\r\n\r\n%s" % (len(INVOKE), INVOKE))
    answer = closes.reply()
    assert answer.status == 200
    assert answer.headers["connection"] == "close"
    assert closes.is_closed()


# The ASGI side


def test_the_scope_carries_the_decoded_path_raw_path_query_and_client(probe, connect):
    server = probe()
    client = connect(server.url)
    client.send(request("POST", "/echo/a%20b?x=1", b"hello"))
    seen = orjson.loads(client.reply().body)
    assert seen == {
        "path": "/echo/a b",
        "raw_path": "/echo/a%20b",
        "query": "x=1",
        "client": "127.0.0.1",
        "body": "hello",
    }


def test_the_app_reads_a_chunked_body_after_100_continue(probe, connect):
    client = connect(probe().url)
    head = b"POST /echo HTTP/1.1\r\nhost: localhost\r\nexpect: 100-continue\r\n"
    client.send(head + b"transfer-encoding: chunked\r\n\r\n")
    assert client.reply().status == 100
    client.send(chunked(b"one,", b"two"))
    assert orjson.loads(client.reply().body)["body"] == "one,two"


def test_a_response_without_a_length_is_chunked(probe, connect):
    client = connect(probe().url)
    client.send(request("GET", "/stream") + request("GET", "/echo"))
    streamed = client.reply()
    assert streamed.headers["transfer-encoding"] == "chunked"
    assert streamed.body == b"part0;part1;part2;"
    assert client.reply().status == 200


def test_http_1_0_gets_a_stream_delimited_by_closing(probe, connect):
    client = connect(probe().url)
    client.send(b"GET /stream HTTP/1.0\r\n\r\n")
    raw = client.read_to_end()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower()
    assert body == b"part0;part1;part2;"


def test_a_static_file_streams_whole_and_head_sends_no_body(probe, files, connect):
    client = connect(probe().url)
    client.send(request("GET", "/files/big.bin"))
    answer = client.reply()
    assert answer.headers["content-length"] == str(FILE_BYTES)
    assert answer.body == (files / "big.bin").read_bytes()
    client.send(request("HEAD", "/files/big.bin") + request("GET", "/echo"))
    raw = b""
    while raw.count(b"HTTP/1.1 200 OK") < 2 or not raw.endswith(b"}"):
        raw += client.sock.recv(65536)
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert f"content-length: {FILE_BYTES}".encode() in head.lower()
    assert rest.startswith(b"HTTP/1.1 200 OK")  # no body bytes between the two


def test_a_reader_slower_than_the_server_gets_a_large_file_whole(probe, files, connect):
    server = probe()
    assert isinstance(server.server, EdgeServer)
    edge = server.server
    client = connect(server.url, receive_buffer=4096)
    client.send(request("GET", "/files/large.bin") + request("GET", "/echo"))
    wait_until(
        lambda: any(c.write_paused for c in list(edge.connections)),
        "the server to wait for its reader",
    )
    assert client.reply().body == (files / "large.bin").read_bytes()
    assert client.reply().status == 200


def test_a_large_body_the_app_leaves_unread_is_dropped_and_the_connection_goes_on(probe, connect):
    client = connect(probe().url)
    client.send(request("POST", "/ignore", b"x" * (4 * BODY_HIGH_WATER)) + request("GET", "/echo"))
    assert client.reply().body == b"not read"
    assert orjson.loads(client.reply().body)["path"] == "/echo"


@pytest.mark.parametrize("path", ["/fail-before-start", "/fail-after-start"])
def test_an_app_failing_before_any_byte_went_out_gives_a_json_500(probe, path, connect):
    client = connect(probe().url)
    client.send(request("GET", path))
    answer = client.reply()
    assert answer.status == 500
    assert error_code(answer) == "internal_error"
    assert b"Traceback" not in answer.body and b"broke" not in answer.body
    assert client.is_closed()


def test_an_app_failing_halfway_through_its_answer_closes_the_connection(probe, connect):
    client = connect(probe().url)
    client.send(request("GET", "/fail-halfway"))
    raw = client.read_to_end()
    assert raw.startswith(b"HTTP/1.1 200 OK")
    assert raw.endswith(b"\r\n\r\n12345")


# Timeouts, shutdown, lifespan


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(probe, connect):
    client = connect(probe(EdgeConfig(keep_alive_s=0.2)).url)
    client.send(request("GET", "/echo"))
    assert client.reply().status == 200
    assert client.is_closed()


def test_a_head_that_does_not_arrive_in_time_is_dropped(probe, connect):
    client = connect(probe(EdgeConfig(header_timeout_s=0.2)).url)
    client.send(b"GET /echo HTTP/1.1\r\nhost: ed")
    assert client.is_closed()


def test_shutdown_finishes_the_request_in_flight_and_closes_idle_connections(probe, held, connect):
    server = probe()
    idle, busy = connect(server.url), connect(server.url)
    idle.send(request("GET", "/echo"))
    assert idle.reply().status == 200
    busy.send(request("GET", "/held"))
    assert held.entered.wait(IO_TIMEOUT_S)
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    assert idle.is_closed()  # the shutdown has begun
    held.release.set()
    answer = busy.reply()
    assert (answer.status, answer.body) == (200, b"released")
    assert answer.headers["connection"] == "close"
    stopping.join(IO_TIMEOUT_S)
    assert not server.thread.is_alive()


def test_a_failed_startup_stops_the_server_with_the_apps_message():
    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("the database is unreachable")
        yield

    app = Starlette(lifespan=lifespan)
    with pytest.raises(StartupFailed, match="the database is unreachable"):
        asyncio.run(serve(app, "127.0.0.1", 0))
    with pytest.raises(RuntimeError, match="the database is unreachable"):
        ServerThread(app, edge=EdgeConfig()).start()

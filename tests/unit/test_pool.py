"""HttpPool against real HTTP servers on 127.0.0.1: reuse, framing, the races, the limits."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import select
import shutil
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_reach.wire.pool import (
    ConnectFailed,
    ConnectionLost,
    ConnectTimedOut,
    HttpPool,
    InvalidResponse,
    PoolError,
    RequestTimeout,
    Response,
    ResponseTooLarge,
    _Connection,
    _encode_head,
)

TIMEOUT_S = 5.0
LINGER_OFF = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends an RST


@dataclass
class Received:
    """One request as the server read it; `conn` numbers connections, `nth` requests on one."""

    conn: int
    nth: int
    head: bytes
    body: bytes


@dataclass
class Reply:
    data: bytes = b""
    close: bool = False  # close the connection after writing `data`
    reset: bool = False  # reset the connection (RST) instead of answering
    hang: bool = False  # never answer; wait for the client to go away


Handler = Callable[[Received], Reply]


def ok(body: bytes = b"ok", *extra: bytes) -> Reply:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body)
    return Reply(head + b"".join(h + b"\r\n" for h in extra) + b"\r\n" + body)


class Agent:
    """A tiny HTTP/1.1 server that records every connection and request it gets."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.closed_connections = 0
        self.requests: list[Received] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}/invoke"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await asyncio.gather(*self._tasks)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        conn = self.connections
        self.connections += 1
        try:
            for nth in itertools.count():
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                received = Received(conn, nth, head, body)
                self.requests.append(received)
                reply = self.handler(received)
                if reply.hang:
                    await reader.read()  # returns at EOF: the client closed
                    return
                if reply.reset:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_OFF)
                    return  # the abort below closes with linger 0: an RST
                writer.write(reply.data)
                await writer.drain()
                if reply.close:
                    writer.close()
                    await writer.wait_closed()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.closed_connections += 1
            writer.transport.abort()


class ThreadAgent:
    """An HTTP/1.1 agent in its own thread, so it can reset a connection while the
    test's event loop is blocked; `executed` lists (connection, body) per request."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.executed: list[tuple[int, bytes]] = []
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> ThreadAgent:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        for conn in self.conns:
            conn.close()

    def reset_idle(self, client_fd: int) -> None:
        """Reset the first connection, then block until the client's socket has the RST."""
        conn = self.conns[0]
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_OFF)
        conn.shutdown(socket.SHUT_RD)  # wakes the serving thread's recv
        conn.close()
        readable, _, _ = select.select([client_fd], [], [], TIMEOUT_S)
        assert readable, "the RST did not reach the client"

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            for number in itertools.count():
                conn, _ = self.listener.accept()
                self.conns.append(conn)
                threading.Thread(target=self._answer, args=(conn, number), daemon=True).start()

    def _answer(self, conn: socket.socket, number: int) -> None:
        data = b""
        with contextlib.suppress(OSError):
            while chunk := conn.recv(65536):
                data += chunk
                head, sep, rest = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                if sep and len(rest) >= length:
                    self.executed.append((number, rest[:length]))
                    data = rest[length:]
                    conn.sendall(ok().data)


def _idle_fd(pool: HttpPool) -> int:
    (origin,) = pool._origins.values()
    (conn,) = origin.idle
    return int(conn._transport.get_extra_info("socket").fileno())


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Agent]]]:
    agents: list[Agent] = []

    async def start(handler: Handler, tls: ssl.SSLContext | None = None) -> Agent:
        agent = Agent(handler, tls)
        await agent.start()
        agents.append(agent)
        return agent

    yield start
    for agent in agents:
        await agent.stop()


@pytest.fixture
async def make_pool() -> AsyncIterator[Callable[..., HttpPool]]:
    pools: list[HttpPool] = []

    def make(**options: Any) -> HttpPool:
        pool = HttpPool(**options)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        await pool.aclose()


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` each loop turn until true; fail with `what` after a generous deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT_S
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        await asyncio.sleep(0.001)


async def post(
    pool: HttpPool, agent: Agent, body: bytes = b"{}", timeout_s: float = TIMEOUT_S
) -> Response:
    return await pool.request("POST", agent.url, body=body, timeout_s=timeout_s)


async def test_keep_alive_reuses_one_connection_for_sequential_requests(serve, make_pool):
    agent = await serve(lambda r: ok(r.body))
    pool = make_pool()
    answers = [await post(pool, agent, b"%d" % i) for i in range(5)]
    assert [a.body for a in answers] == [b"0", b"1", b"2", b"3", b"4"]
    assert agent.connections == 1
    assert [r.nth for r in agent.requests] == [0, 1, 2, 3, 4]


async def test_a_connection_numbered_past_fd_setsize_is_reused(serve, make_pool):
    """A busy coordinator holds more than 1,024 descriptors: the idle check before a
    reuse must not depend on select(), which refuses them (500s under overload)."""
    agent = await serve(lambda r: ok(r.body))
    with contextlib.ExitStack() as held:
        for _ in range(max(0, 1100 - _open_descriptors())):
            held.enter_context(socket.socket())
        pool = make_pool()
        answers = [await post(pool, agent, b"%d" % i) for i in range(3)]
    assert [a.body for a in answers] == [b"0", b"1", b"2"]
    assert agent.connections == 1


def _open_descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


async def test_request_carries_method_path_host_length_and_headers(serve, make_pool):
    agent = await serve(lambda r: ok())
    pool = make_pool()
    url = f"http://127.0.0.1:{agent.port}/a/b?x=1&y=2#frag"
    await pool.request("PUT", url, headers=[("X-Request-ID", "r-1")], body=b"abc", timeout_s=5)
    head = agent.requests[0].head
    assert head.startswith(b"PUT /a/b?x=1&y=2 HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:%d\r\n" % agent.port in head
    assert b"\r\nContent-Length: 3\r\n" in head
    assert b"\r\nX-Request-ID: r-1\r\n" in head
    assert agent.requests[0].body == b"abc"


async def test_encoded_header_lines_follow_the_checked_ones_as_they_are(serve, make_pool):
    agent = await serve(lambda r: ok())
    pool = make_pool()
    url = f"http://127.0.0.1:{agent.port}/invoke"
    encoded = b"x-request-id: r-1\r\nx-reach-hop: 4\r\n"
    await pool.request(
        "POST", url, headers=[("X-Mine", "m")], body=b"{}", timeout_s=5, encoded=encoded
    )
    head = agent.requests[0].head
    assert head.endswith(b"\r\nX-Mine: m\r\n" + encoded + b"\r\n")
    assert b"\r\nContent-Length: 2\r\n" in head
    assert agent.requests[0].body == b"{}"


async def test_response_headers_are_lower_cased_in_order(serve, make_pool):
    agent = await serve(lambda r: ok(b"{}", b"Content-Type: application/json", b"X-Trace: t1"))
    answer = await post(make_pool(), agent)
    assert answer.headers == [
        (b"content-length", b"2"),
        (b"content-type", b"application/json"),
        (b"x-trace", b"t1"),
    ]


async def test_chunked_response_is_reassembled_and_connection_reused(serve, make_pool):
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
    )
    agent = await serve(lambda r: Reply(chunked))
    pool = make_pool()
    first = await post(pool, agent)
    second = await post(pool, agent)
    assert first.body == second.body == b"abcdefg"
    assert agent.connections == 1


async def test_close_delimited_response_ends_at_eof_and_is_not_reused(serve, make_pool):
    agent = await serve(lambda r: Reply(b"HTTP/1.1 200 OK\r\n\r\nuntil the end", close=True))
    pool = make_pool()
    first = await post(pool, agent)
    second = await post(pool, agent)
    assert first.status == second.status == 200
    assert first.body == second.body == b"until the end"
    assert agent.connections == 2


async def test_connection_close_response_is_not_reused(serve, make_pool):
    agent = await serve(lambda r: ok(b"x", b"Connection: close"))
    pool = make_pool()
    await post(pool, agent)
    await post(pool, agent)
    assert agent.connections == 2


async def test_interim_1xx_is_skipped(serve, make_pool):
    agent = await serve(
        lambda r: Reply(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok().data)
    )
    answer = await post(make_pool(), agent)
    assert answer.status == 200
    assert answer.headers == [(b"content-length", b"2")]


async def test_head_response_has_no_body_despite_content_length(serve, make_pool):
    agent = await serve(lambda r: Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"))
    answer = await make_pool().request("HEAD", agent.url, timeout_s=TIMEOUT_S)
    assert (answer.status, answer.body) == (200, b"")
    assert b"Content-Length" not in agent.requests[0].head


async def test_redirect_is_returned_not_followed(serve, make_pool):
    agent = await serve(
        lambda r: Reply(b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n")
    )
    answer = await make_pool().request("GET", agent.url, timeout_s=TIMEOUT_S)
    assert answer.status == 302
    assert (b"location", b"/elsewhere") in answer.headers
    assert len(agent.requests) == 1


async def test_garbage_answer_is_invalid_response(serve, make_pool):
    agent = await serve(lambda r: Reply(b"SSH-2.0-OpenSSH_9.2\r\n\r\n"))
    with pytest.raises(InvalidResponse):
        await post(make_pool(), agent)


async def test_a_reused_connection_closed_after_the_request_was_read_is_not_resent(
    serve, make_pool
):
    # The keep-alive race as the client sees it, but the agent did read the request.
    agent = await serve(lambda r: Reply(close=True) if r.nth == 1 else ok())
    pool = make_pool()
    await post(pool, agent)
    with pytest.raises(ConnectionLost) as caught:
        await post(pool, agent)
    assert caught.value.sent is True  # it may have acted: only the caller may send it again
    assert [(r.conn, r.nth) for r in agent.requests] == [(0, 0), (0, 1)]
    assert agent.connections == 1


async def test_a_reused_connection_reset_after_the_request_was_read_is_not_resent(serve, make_pool):
    agent = await serve(lambda r: Reply(reset=True) if r.nth == 1 else ok())
    pool = make_pool()
    await post(pool, agent)
    with pytest.raises(ConnectionLost) as caught:
        await post(pool, agent)
    assert caught.value.sent is True
    assert len(agent.requests) == 2  # executed once each: the reset one was not sent again
    assert agent.connections == 1


async def reset_then_post_again(pool: HttpPool, agent: ThreadAgent) -> Response:
    url = f"http://127.0.0.1:{agent.port}/invoke"
    assert (await pool.request("POST", url, body=b"1", timeout_s=TIMEOUT_S)).body == b"ok"
    # Reset the idle connection while this loop is blocked: the pool's protocol has not
    # read the RST when the next request is taken to it.
    agent.reset_idle(client_fd=_idle_fd(pool))
    return await pool.request("POST", url, body=b"2", timeout_s=TIMEOUT_S)


async def test_an_idle_connection_reset_before_the_write_is_not_used(make_pool):
    with ThreadAgent() as agent:
        answer = await reset_then_post_again(make_pool(), agent)
    assert answer.body == b"ok"
    assert agent.executed == [(0, b"1"), (1, b"2")]


async def test_a_request_whose_write_fails_is_sent_once_on_a_fresh_connection(
    make_pool, monkeypatch
):
    # The RST lands after the idle check: the write itself fails, so nothing was sent.
    monkeypatch.setattr(_Connection, "is_usable", lambda conn: not conn.is_closing())
    with ThreadAgent() as agent:
        answer = await reset_then_post_again(make_pool(), agent)
    assert answer.body == b"ok"
    assert agent.executed == [(0, b"1"), (1, b"2")]  # the failed write reached nobody


async def test_idle_connection_closed_by_server_is_not_used(serve, make_pool):
    agent = await serve(lambda r: Reply(ok().data, close=True))  # keep-alive answer, then close
    pool = make_pool()
    await post(pool, agent)
    await wait_until(lambda: agent.closed_connections == 1, "the server closed the idle connection")
    assert (await post(pool, agent)).body == b"ok"
    assert agent.connections == 2


async def test_fresh_connection_closed_without_answer_is_not_retried(serve, make_pool):
    agent = await serve(lambda r: Reply(close=True))
    with pytest.raises(ConnectionLost) as caught:
        await post(make_pool(), agent)
    assert caught.value.sent is True
    assert len(agent.requests) == 1


async def test_close_mid_response_is_not_retried(serve, make_pool):
    partial = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part"
    agent = await serve(lambda r: Reply(partial, close=True) if r.nth == 1 else ok())
    pool = make_pool()
    await post(pool, agent)
    with pytest.raises(ConnectionLost) as caught:
        await post(pool, agent)  # on the reused connection: bytes came back, so no retry
    assert caught.value.sent is True
    assert len(agent.requests) == 2


async def test_timeout_closes_connection_and_discards_late_answer(serve, make_pool):
    agent = await serve(lambda r: Reply(hang=True) if r.conn == 0 else ok(b"fresh"))
    pool = make_pool()
    with pytest.raises(RequestTimeout) as caught:
        await post(pool, agent, timeout_s=0.2)
    assert caught.value.sent is True
    assert (await post(pool, agent)).body == b"fresh"
    assert agent.connections == 2
    await wait_until(lambda: agent.closed_connections == 1, "the timed-out connection was closed")


async def test_connect_refused_is_connect_failed(make_pool):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectFailed):
        await make_pool().request("GET", f"http://127.0.0.1:{port}/", timeout_s=TIMEOUT_S)


@pytest.mark.parametrize("chunked", [False, True])
async def test_response_over_limit_is_refused(serve, make_pool, chunked):
    big = b"x" * 5000
    if chunked:
        data = (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n"
            + big
            + b"\r\n0\r\n\r\n"
        )
    else:
        data = ok(big).data
    agent = await serve(lambda r: Reply(data) if r.conn == 0 else ok())
    pool = make_pool(max_response_bytes=1000)
    with pytest.raises(ResponseTooLarge):
        await post(pool, agent)
    assert (await post(pool, agent)).body == b"ok"
    assert agent.connections == 2


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("http://127.0.0.1:{port}/", [("X-Evil", "a\r\nX-Injected: 1")]),
        ("http://127.0.0.1:{port}/", [("X-Evil", "a\nb")]),
        ("http://127.0.0.1:{port}/", [("X-Evil\r\nX-Injected", "1")]),
        ("http://127.0.0.1:{port}/", [("Host", "other")]),
        ("http://127.0.0.1:{port}/", [("Content-Length", "0")]),
        ("http://127.0.0.1:{port}/a\r\nX-Injected: 1", []),
        ("http://127.0.0.1:{port}/a b", []),
    ],
)
async def test_header_and_url_injection_refused_before_sending(serve, make_pool, url, headers):
    agent = await serve(lambda r: ok())
    with pytest.raises(ValueError):
        await make_pool().request(
            "POST", url.format(port=agent.port), headers=headers, timeout_s=TIMEOUT_S
        )
    assert agent.connections == 0


async def test_requests_beyond_pool_size_queue_and_all_complete(serve, make_pool):
    agent = await serve(lambda r: ok(r.body))
    pool = make_pool(max_connections_per_origin=2)
    bodies = [b"%d" % i for i in range(50)]
    answers = await asyncio.gather(*(post(pool, agent, body) for body in bodies))
    assert [a.body for a in answers] == bodies
    assert agent.connections == 2


async def test_waiting_for_a_full_pool_times_out_without_sending(serve, make_pool):
    agent = await serve(lambda r: Reply(hang=True))
    pool = make_pool(max_connections_per_origin=1)
    first = asyncio.ensure_future(post(pool, agent, timeout_s=TIMEOUT_S))
    await wait_until(lambda: len(agent.requests) == 1, "the first request arrived")
    with pytest.raises(RequestTimeout) as caught:
        await post(pool, agent, timeout_s=0.05)
    assert caught.value.sent is False
    await pool.aclose()
    with pytest.raises(ConnectionLost):
        await first
    assert len(agent.requests) == 1


async def test_expired_idle_connection_is_closed_not_reused(serve, make_pool):
    agent = await serve(lambda r: ok())
    pool = make_pool(idle_timeout_s=0.0)
    await post(pool, agent)
    await post(pool, agent)
    assert agent.connections == 2
    await wait_until(lambda: agent.closed_connections == 2, "both idle connections were closed")


async def test_cancelled_request_closes_its_connection(serve, make_pool):
    agent = await serve(lambda r: Reply(hang=True) if r.conn == 0 else ok())
    pool = make_pool()
    pending = asyncio.ensure_future(post(pool, agent))
    await wait_until(lambda: len(agent.requests) == 1, "the request arrived")
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert (await post(pool, agent)).body == b"ok"
    assert agent.connections == 2


async def test_closed_pool_refuses_requests(serve, make_pool):
    agent = await serve(lambda r: ok())
    pool = make_pool()
    await post(pool, agent)
    await pool.aclose()
    with pytest.raises(PoolError):
        await post(pool, agent)
    await wait_until(lambda: agent.closed_connections == 1, "the pool closed its connection")


@pytest.fixture
def self_signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """A server context for 127.0.0.1 whose certificate the client is made to trust."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1"
    command += " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
    subprocess.run(
        [*command.split(), "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


async def test_https_uses_tls_and_keeps_alive(serve, make_pool, self_signed):
    agent = await serve(lambda r: ok(r.body), self_signed)
    pool = make_pool()
    assert (await post(pool, agent, b"1")).body == b"1"
    assert (await post(pool, agent, b"2")).body == b"2"
    assert agent.connections == 1


async def test_https_with_untrusted_certificate_is_connect_failed(serve, make_pool, self_signed):
    agent = await serve(lambda r: ok(), self_signed)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("SSL_CERT_FILE")
        patch.setenv("SSL_CERT_DIR", "/nonexistent")
        with pytest.raises(ConnectFailed):
            await post(make_pool(), agent)
    assert agent.requests == []


class FullBacklog:
    """A listener whose accept queue is full (backlog 0 and connections nobody accepts):
    the kernel drops new SYNs, as with a busy agent's small backlog. `drain()` starts
    accepting, answering every request `200 ok`."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.fillers = [socket.socket() for _ in range(3)]
        for filler in self.fillers:
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(self.sock.getsockname())

    def drain(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(TIMEOUT_S)
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        conn.settimeout(TIMEOUT_S)
        with contextlib.suppress(OSError), conn:
            if conn.recv(65536):
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                conn.recv(1)

    def close(self) -> None:
        for filler in self.fillers:
            filler.close()
        self.sock.close()


@pytest.fixture
def full_backlog() -> Iterator[FullBacklog]:
    listener = FullBacklog()
    yield listener
    listener.close()


async def test_a_connect_whose_first_syn_is_dropped_succeeds_on_the_retransmission(
    make_pool, full_backlog
):
    # Linux resends the SYN after 1 s; the default connect timeout leaves room for it.
    asyncio.get_running_loop().call_later(0.2, full_backlog.drain)
    response = await make_pool().request("GET", full_backlog.url, timeout_s=TIMEOUT_S)
    assert (response.status, response.body) == (200, b"ok")


async def test_a_connect_that_gets_no_answer_is_a_connect_timeout(make_pool, full_backlog):
    pool = make_pool(connect_timeout_s=0.2)
    with pytest.raises(ConnectTimedOut):
        await pool.request("GET", full_backlog.url, timeout_s=TIMEOUT_S)
    with pytest.raises(ConnectTimedOut):  # also when the request's own time is shorter
        await pool.request("GET", full_backlog.url, timeout_s=0.1)


@pytest.mark.parametrize(
    ("method", "body", "encoded"),
    [
        ("POST", b'{"a":1}', b"x-request-id: r-1\r\n"),
        ("POST", b"", b""),
        ("GET", b"", b""),
        ("GET", b"q", b"x-a: 1\r\n"),
        ("PURGE", b"", b""),  # not a standard method: made the general way, not cached
    ],
)
async def test_a_request_without_headers_is_made_as_the_general_encoder_makes_it(
    make_pool, method: str, body: bytes, encoded: bytes
) -> None:
    pool = make_pool()
    target = pool._parse("http://127.0.0.1:9/invoke?x=1")
    general = _encode_head(method, target.head, (), body, encoded) + body
    assert target.encode(method, body, encoded) == general
    assert target.encode(method, body, encoded) == general  # the cached line, the same bytes

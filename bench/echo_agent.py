"""A fast echo agent for benchmarks: bare asyncio Protocol + httptools, nothing else.

`POST <any path>` answers 200 with a small fixed JSON body, `GET /health` answers
200; connections stay open as long as the client keeps them alive. Run it as
`python bench/echo_agent.py --port 9040`. Uses uvloop when it is installed.

`--service-ms S --workers N` makes it a service of bounded capacity, like a real one:
N requests are served at once, each for S ms, the rest wait their turn (N / S requests
a second at most), so an overload benchmark can overload the agent, not the machine.

`--tls-cert FILE --tls-key FILE` serves HTTPS instead (bench/overhead.py --tls).
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
from dataclasses import dataclass

import httptools

_RESULT = b'{"result":{"echo":"pong","ok":true}}'
_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(_RESULT),
    _RESULT,
)
_HEALTHY = b'HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{"status":"ok"}'
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass(frozen=True, slots=True)
class Service:
    """Bounded capacity: `workers` POSTs served at once, each for `seconds`."""

    seconds: float
    workers: asyncio.Semaphore


SERVICE: Service | None = None  # set by main: None answers every POST at once
_SERVING: set[asyncio.Future[None]] = set()


class EchoProtocol(asyncio.Protocol):
    """One client connection; answers each request as soon as it is complete."""

    transport: asyncio.Transport  # set by connection_made, before any data

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.write(_BAD_REQUEST)
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        if method == b"POST" and SERVICE is not None:
            task = asyncio.ensure_future(self._serve(SERVICE, self.parser.should_keep_alive()))
            _SERVING.add(task)  # a task only the loop references may be collected mid-sleep
            task.add_done_callback(_SERVING.discard)
            return
        if method == b"POST":
            answer = _OK
        elif method == b"GET" and self.url == b"/health":
            answer = _HEALTHY
        else:
            answer = _NOT_FOUND
        self.transport.write(answer)
        if not self.parser.should_keep_alive():
            self.transport.close()

    async def _serve(self, service: Service, keep_alive: bool) -> None:
        async with service.workers:
            await asyncio.sleep(service.seconds)
        if self.transport.is_closing():
            return
        self.transport.write(_OK)
        if not keep_alive:
            self.transport.close()


async def serve(host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(EchoProtocol, host, port, backlog=4096, ssl=ssl_context)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9040)
    parser.add_argument("--service-ms", type=float, help="each POST takes this long")
    parser.add_argument("--workers", type=int, default=8, help="POSTs served at once")
    parser.add_argument("--tls-cert", help="PEM certificate: serve HTTPS")
    parser.add_argument("--tls-key", help="its PEM private key")
    args = parser.parse_args()
    context = None
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
    global SERVICE
    if args.service_ms is not None:
        SERVICE = Service(args.service_ms / 1000, asyncio.Semaphore(args.workers))
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.host, args.port, context))
    else:
        uvloop.run(serve(args.host, args.port, context))


if __name__ == "__main__":
    main()

"""An agent that writes its answers byte by byte, for the shapes no framework sends:
bare-LF line ends, two Content-Lengths, Content-Length with chunked, a body delimited
by closing, a keep-alive answer followed by a close, a cut-off body, not HTTP at all;
and `/reset-reused`, which acts on every request but resets (RST) a connection that
already served one instead of answering. Prints "PORT <n>"; GET /stats -> acted, and
closed: the connections it closed after an answer (a test may wait for such a close)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

acted = 0
closed = 0
RESULT = b'{"peer": "raw"}'
ANSWERS = {
    "/bare-lf": b"HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: 15\n\n" + RESULT,
    "/dup-cl": b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\ncontent-length: 16\r\n\r\n" + RESULT,
    "/cl-te": b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\ntransfer-encoding: chunked\r\n\r\n"
    + b"f\r\n"
    + RESULT
    + b"\r\n0\r\n\r\n",
    "/close": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
    + RESULT,
    "/idle-close": b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n" + RESULT,
    "/truncated": b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + RESULT,
    "/garbage": b"SPDY/3 what is this\r\n\r\n",
}
RESET_FIRST = b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n" + RESULT
CLOSE_AFTER = {"/close", "/idle-close", "/truncated", "/garbage", "/bare-lf"}
LINGER_OFF = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: closing sends an RST


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global acted, closed
    served = 0  # requests this connection has carried
    answered_then_closed = False
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            if method == "GET":
                body = json.dumps({"acted": acted, "closed": closed}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                continue
            acted += 1
            served += 1
            if path == "/reset-reused" and served > 1:
                writer.get_extra_info("socket").setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, LINGER_OFF
                )
                writer.transport.abort()
                return
            answer = ANSWERS.get(path, b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            writer.write(RESET_FIRST if path == "/reset-reused" else answer)
            await writer.drain()
            if path in CLOSE_AFTER:
                answered_then_closed = True
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()
    if answered_then_closed:
        closed += 1


async def main() -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


asyncio.run(main())

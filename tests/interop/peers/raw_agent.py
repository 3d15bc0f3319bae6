"""An agent that writes its answers byte by byte, for the shapes no framework sends:
bare-LF line ends, two Content-Lengths, Content-Length with chunked, a body delimited
by closing, a keep-alive answer followed by a close, a cut-off body, not HTTP at all.
Prints "PORT <n>"; GET /stats -> acted."""

from __future__ import annotations

import asyncio
import json

acted = 0
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
CLOSE_AFTER = {"/close", "/idle-close", "/truncated", "/garbage", "/bare-lf"}


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global acted
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
                body = json.dumps({"acted": acted}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                continue
            acted += 1
            writer.write(ANSWERS.get(path, b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"))
            await writer.drain()
            if path in CLOSE_AFTER:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()


async def main() -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


asyncio.run(main())

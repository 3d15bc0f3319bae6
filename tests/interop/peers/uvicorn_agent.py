"""An agent as a bare ASGI app under uvicorn (httptools). Prints "PORT <n>"; GET /stats
-> acted. `/chunked` streams its answer without a length (uvicorn chunks it)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import uvicorn
from shapes import shape

acted = 0


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global acted
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if scope["method"] == "GET":
        status, headers, data = 200, [("content-type", "application/json")], b""
        data = json.dumps({"acted": acted}).encode()
    else:
        acted += 1
        if scope["path"] == "/chunked":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"peer": ', "more_body": True})
            await send({"type": "http.response.body", "body": b'"uvicorn"}'})
            return
        status, headers, data, delay_s = shape("uvicorn", scope["path"], body)
        await asyncio.sleep(delay_s)
    raw = [(n.encode(), v.encode()) for n, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(128)  # connections wait in the backlog until uvicorn serves them
print(f"PORT {sock.getsockname()[1]}", flush=True)
config = uvicorn.Config(app, http="httptools", log_level="warning", access_log=False)
uvicorn.Server(config).run(sockets=[sock])

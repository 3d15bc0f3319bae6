"""An agent on aiohttp's web server. Prints "PORT <n>"; GET /stats -> acted.
`/chunked` streams its answer (chunked transfer coding)."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web
from shapes import shape

acted = 0


async def stats(request: web.Request) -> web.Response:
    return web.json_response({"acted": acted})


async def deliver(request: web.Request) -> web.StreamResponse:
    global acted
    acted += 1
    body = await request.read()
    if request.path == "/chunked":
        response = web.StreamResponse(headers={"content-type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(json.dumps({"peer": "aiohttp"}).encode())
        await response.write_eof()
        return response
    status, headers, data, delay_s = shape("aiohttp", request.path, body)
    await asyncio.sleep(delay_s)
    return web.Response(status=status, body=data or None, headers=headers)


async def main() -> None:
    app = web.Application(client_max_size=1 << 20)
    app.add_routes([web.get("/{tail:.*}", stats), web.post("/{tail:.*}", deliver)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {site._server.sockets[0].getsockname()[1]}", flush=True)  # type: ignore[union-attr]
    await asyncio.Event().wait()


asyncio.run(main())

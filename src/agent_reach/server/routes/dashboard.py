"""The operator dashboard at `/ui`: static files served as they are committed, no build step.

Every answer carries a strict Content-Security-Policy (scripts, styles and data
only from this origin, no inline code) and may not be framed. Nothing under
`/ui` changes state: the page only reads the JSON API.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboard"
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; base-uri 'none'; form-action 'none'; "
        b"frame-ancestors 'none'; object-src 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),  # revalidate (a cheap 304) so an upgrade shows at once
]


class _Secured:
    """Adds `SECURITY_HEADERS` to every response of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_secured)


def mount_dashboard(api: FastAPI) -> None:
    """Serve the dashboard under `/ui/` (and send `/ui` there)."""

    @api.get("/ui", include_in_schema=False)
    async def to_dashboard() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=308)

    api.mount("/ui", _Secured(StaticFiles(directory=DASHBOARD_DIR, html=True)), name="ui")

"""The scale webhook against a real receiver, and who may read `GET /v1/events`."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach.registry.webhook import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    ScaleWebhook,
    is_signed_by,
    sign,
)
from agent_reach.testing.agent_process import CoordinatorProcess

SECRET = b"a-secret-for-signing-scale-events"
FAST_BACKOFF_S = (0.01, 0.02, 0.04)


class Receiver:
    """Answers each POST with the next status of `statuses` (the last one repeats)."""

    def __init__(self, statuses: list[int]) -> None:
        self.seen: list[tuple[dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(statuses[min(len(outer.seen), len(statuses)) - 1])
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    served = Receiver(request.param)
    yield served
    served.close()


@pytest.mark.parametrize("receiver", [[503, 500, 204]], indirect=True)
async def test_webhook_is_retried_until_taken_and_signed_every_time(receiver: Receiver) -> None:
    async with httpx.AsyncClient() as client:
        hook = ScaleWebhook(receiver.url, SECRET, client, backoff_s=FAST_BACKOFF_S)
        delivered = await hook.send("docs.search/a-1/1.0", b'{"kind":"scale"}')

    assert delivered
    assert len(receiver.seen) == 3
    for headers, body in receiver.seen:
        assert is_signed_by(SECRET, body, headers[SIGNATURE_HEADER])
        assert headers[EVENT_ID_HEADER] == "docs.search/a-1/1.0"


@pytest.mark.parametrize("receiver", [[400]], indirect=True)
async def test_webhook_refused_with_a_4xx_is_not_retried(receiver: Receiver) -> None:
    async with httpx.AsyncClient() as client:
        hook = ScaleWebhook(receiver.url, SECRET, client, backoff_s=FAST_BACKOFF_S)
        assert not await hook.send("e-1", b"{}")

    assert len(receiver.seen) == 1


@pytest.mark.parametrize("receiver", [[503]], indirect=True)
async def test_webhook_gives_up_after_its_backoff_runs_out(receiver: Receiver) -> None:
    async with httpx.AsyncClient() as client:
        hook = ScaleWebhook(receiver.url, SECRET, client, backoff_s=FAST_BACKOFF_S)
        assert not await hook.send("e-1", b"{}")

    assert len(receiver.seen) == len(FAST_BACKOFF_S) + 1


def test_a_signature_over_other_bytes_does_not_verify() -> None:
    assert not is_signed_by(SECRET, b'{"instances_left":5}', sign(SECRET, b'{"instances_left":0}'))
    assert not is_signed_by(b"another-secret", b"{}", sign(SECRET, b"{}"))


def test_event_stream_is_for_observers_and_admins(tmp_path: Path) -> None:
    admin_key = secrets.token_urlsafe(32)
    coordinator = CoordinatorProcess(
        directory=tmp_path, extra_env={"AR_AUTH": "on", "AR_ADMIN_KEY": admin_key}
    ).start()
    try:
        as_admin = {"authorization": f"Bearer {admin_key}"}
        keys = {}
        for role in ("caller", "observer"):
            minted = httpx.post(
                f"{coordinator.url}/v1/keys",
                json={"principal": f"{role}-bot", "domain": "d", "role": role},
                headers=as_admin,
            )
            assert minted.status_code == 201, minted.text
            keys[role] = {"authorization": f"Bearer {minted.json()['key']}"}
        events = f"{coordinator.url}/v1/events"

        assert httpx.get(events).status_code == 401
        refused = httpx.get(events, headers=keys["caller"])
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
        for allowed in (as_admin, keys["observer"]):
            with httpx.stream("GET", events, headers=allowed, timeout=5.0) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                assert next(stream.iter_lines()) == ": subscribed"
    finally:
        coordinator.kill()

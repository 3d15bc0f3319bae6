"""The scale webhook: one signed POST per scale event, retried with backoff.

The body is the event as JSON; ``X-Reach-Signature: sha256=<hex>`` is the HMAC-SHA256
of the exact body bytes under `AR_SCALE_WEBHOOK_SECRET`, and ``X-Reach-Event-Id`` the
event's id, the same on every coordinator, so a receiver can drop a repeat (a delivery
that timed out may have arrived, and is sent again).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac

import httpx
import structlog

log = structlog.get_logger("agent_reach.registry")

SIGNATURE_HEADER = "x-reach-signature"
EVENT_ID_HEADER = "x-reach-event-id"
# 5 tries over ~7.5 s: a receiver restarting (a deploy) gets its event a few seconds late.
BACKOFF_S = (0.5, 1.0, 2.0, 4.0)
TIMEOUT_S = 2.0  # per try: a receiver answers at once and does its work afterwards


def sign(secret: bytes, body: bytes) -> str:
    """The signature header's value for `body`."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def is_signed_by(secret: bytes, body: bytes, signature: str) -> bool:
    """Whether `signature` is `body`'s under `secret` (constant time): for receivers."""
    return hmac.compare_digest(sign(secret, body), signature)


class ScaleWebhook:
    """POSTs events to `url`; a 2xx ends the retries, so does a 4xx other than 408/429."""

    def __init__(
        self,
        url: str,
        secret: bytes | None,
        client: httpx.AsyncClient,
        *,
        backoff_s: tuple[float, ...] = BACKOFF_S,
    ) -> None:
        self.url = url
        self.secret = secret
        self.client = client
        self.backoff_s = backoff_s

    async def send(self, event_id: str, body: bytes) -> bool:
        """Deliver one event; True once the receiver took it."""
        headers = {"content-type": "application/json", EVENT_ID_HEADER: event_id}
        if self.secret is not None:
            headers[SIGNATURE_HEADER] = sign(self.secret, body)
        for attempt, pause_s in enumerate((*self.backoff_s, None), start=1):
            try:
                answer = await self.client.post(
                    self.url, content=body, headers=headers, timeout=TIMEOUT_S
                )
                if answer.is_success:
                    log.info("scale_webhook_delivered", event_id=event_id, attempt=attempt)
                    return True
                if answer.status_code < 500 and answer.status_code not in (408, 429):
                    log.error("scale_webhook_refused", event_id=event_id, status=answer.status_code)
                    return False
                reason = f"status {answer.status_code}"
            except httpx.HTTPError as exc:
                reason = type(exc).__name__
            if pause_s is None:
                break
            log.warning("scale_webhook_retry", event_id=event_id, reason=reason, in_s=pause_s)
            await asyncio.sleep(pause_s)
        log.error("scale_webhook_failed", event_id=event_id, attempts=len(self.backoff_s) + 1)
        return False

"""The URLs the coordinator dials: checked before use, and the health endpoint's default."""

from __future__ import annotations

from urllib.parse import urlsplit

from agent_reach.errors import ValidationFailed
from agent_reach.model.agents import TransportSpec

REFUSED = "endpoint_not_allowed"  # the endpoint guard's code: one code for every bad endpoint


def check_http_url(url: str, field: str = "endpoint") -> None:
    """An absolute http(s) URL with a host, no credentials, no control characters."""
    if any(ord(ch) < 0x21 or ch == "\x7f" for ch in url):
        raise ValidationFailed(
            f"{field} contains whitespace or control characters", code=REFUSED, field=field
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed(
            f"{field} must be an absolute http(s) URL", code=REFUSED, field=field
        )
    if parts.username is not None or parts.password is not None:
        raise ValidationFailed(f"{field} must not carry credentials", code=REFUSED, field=field)
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        raise ValidationFailed(f"{field} has an invalid port", code=REFUSED, field=field) from exc


def check_endpoints(spec: TransportSpec) -> None:
    """The endpoint and, when registered, the health endpoint (`check_http_url`)."""
    check_http_url(spec.endpoint)
    if spec.health_endpoint is not None:
        check_http_url(spec.health_endpoint, "health_endpoint")


def health_url(spec: TransportSpec) -> str:
    """The health endpoint: as registered, else `/health` on the endpoint's origin."""
    if spec.health_endpoint:
        return spec.health_endpoint
    parts = urlsplit(spec.endpoint)
    return f"{parts.scheme}://{parts.netloc}/health"

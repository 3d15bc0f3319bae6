"""DNS-rebinding protection: which browser origins and Host names may reach the coordinator.

A web page the operator opens can point a name it controls at 127.0.0.1 and drive a
coordinator on the operator's machine with the browser. Two checks stop it, on every
path but the public metadata under `/.well-known/`:

- a request carrying `Origin` (browsers send it on cross-origin requests and on every
  same-origin request but GET and HEAD) must come from an allowed origin: the
  coordinator's own (`AR_PUBLIC_URL`'s, the bound address's, with a loopback bind
  `localhost` and the loopback addresses, and an IP-literal Host's — never a DNS name
  the request itself claims) or one of `AR_ALLOWED_ORIGINS`;
- with a loopback bind, the `Host` must be a loopback name or address (or the host of
  an allowed origin, for a proxy that keeps the public Host): a rebound page's
  same-origin GET carries no `Origin`, but its Host is the attacker's name.

Requests without `Origin` (curl, the SDKs, agents) on a loopback Host are unaffected.
Refusals are 403 `origin_not_allowed`.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from agent_reach.config import Settings
from agent_reach.errors import Forbidden

PUBLIC_PREFIX = "/.well-known/"  # the agent card, OAuth metadata, JWKS: public by design
_LOOPBACK_NAMES = ("localhost",)
_CACHE_MAX = 1024  # distinct Host / Origin values remembered; more flush the memory


class OriginGuard:
    """Decides, per request, whether its `Origin` and `Host` may reach the coordinator."""

    def __init__(self, settings: Settings) -> None:
        self.allow_any = "*" in settings.allowed_origins
        self.loopback_bind = is_loopback(settings.host)
        scheme = "https" if settings.tls_cert is not None else "http"
        allowed = {_origin(o) for o in settings.allowed_origins if o != "*"}
        if settings.public_url:
            allowed.add(_origin(settings.public_url))
        hosts = [settings.host] if not _is_wildcard(settings.host) else []
        if self.loopback_bind:
            hosts += ["localhost", "127.0.0.1", "[::1]"]
        for host in hosts:
            literal = f"[{host}]" if ":" in host and not host.startswith("[") else host
            allowed.add(f"{scheme}://{literal}:{settings.port}")
            if settings.port == (443 if scheme == "https" else 80):
                allowed.add(f"{scheme}://{literal}")
        self.allowed = frozenset(allowed)
        # Behind a proxy that keeps the public Host: the names of the allowed origins.
        self.named_hosts = frozenset(urlsplit(o).netloc for o in allowed)
        self.scheme = scheme
        self._verdicts: dict[tuple[bytes | None, bytes | None], str | None] = {}

    def check(self, path: str, host: bytes | None, origin: bytes | None) -> None:
        """Raise 403 `origin_not_allowed` unless the request may come in."""
        if origin is None and not self.loopback_bind:
            return
        key = (host, origin)
        reason = self._verdicts.get(key, "")
        if reason == "":
            reason = self._reason(host, origin)
            if len(self._verdicts) >= _CACHE_MAX:
                self._verdicts.clear()
            self._verdicts[key] = reason
        if reason is not None and not path.startswith(PUBLIC_PREFIX):
            raise Forbidden(reason, code="origin_not_allowed")

    def _reason(self, host: bytes | None, origin: bytes | None) -> str | None:
        """Why the request is refused, or None."""
        host_text = (host or b"").decode("latin-1").strip().lower()
        if (
            self.loopback_bind
            and host is not None  # HTTP/1.0 without Host: no browser sends that
            and not is_loopback(_hostname(host_text))
            and host_text not in self.named_hosts
        ):
            return (
                f"Host {host_text!r} is not a loopback name: this coordinator listens on "
                "loopback only (a DNS-rebinding page would use its own name)"
            )
        if origin is None or self.allow_any:
            return None
        seen = origin.decode("latin-1").strip().lower()
        if seen in self.allowed:
            return None
        if cannot_rebind(host_text) and seen == f"{self.scheme}://{host_text}":
            return None  # the coordinator's own origin, under a name no one can rebind
        return (
            f"Origin {seen!r} may not use this coordinator; allow it with "
            "AR_ALLOWED_ORIGINS (comma separated) or name the coordinator's own URL "
            "with AR_PUBLIC_URL"
        )


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or address, without a port) is this machine's loopback."""
    host = host.strip("[]").rstrip(".").lower()
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cannot_rebind(host: str) -> bool:
    """Whether a Host value (`name[:port]`) is an IP literal or a loopback name: no DNS
    name that someone else could point at this machine."""
    name = _hostname(host.strip().lower())
    return _is_ip(name) or is_loopback(name)


def _hostname(host: str) -> str:
    """The name or address of a Host header value (`[::1]:8500` -> `::1`)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")  # noqa: S104 -- compared, never bound here


def _origin(url: str) -> str:
    """`scheme://host[:port]` of a URL, lower case (an origin as browsers send it)."""
    parts = urlsplit(url.strip().lower())
    return f"{parts.scheme}://{parts.netloc}"

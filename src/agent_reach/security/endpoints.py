"""The endpoint guard: agents may only live on networks the operator allows.

Checked at registration and again at every new connection (DNS may change between
the two), so a registration cannot turn the coordinator into a proxy for the
metadata service, its own admin port or the Redis behind it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from urllib.parse import urlsplit

from agent_reach.config import DEFAULT_ENDPOINT_ALLOW
from agent_reach.errors import EndpointRefused

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Never, whatever the operator allows: link-local (cloud metadata at 169.254.169.254),
# "this network", multicast, broadcast, and the other clouds' metadata addresses.
ALWAYS_REFUSED = (
    "169.254.0.0/16",
    "fe80::/10",
    "0.0.0.0/8",
    "224.0.0.0/4",
    "ff00::/8",
    "255.255.255.255/32",
    "::/128",
    "100.100.100.200/32",
    "fd00:ec2::254/128",
)
_NUMERIC_HOST = re.compile(r"^[0-9a-fA-Fx.]+$")
_CANONICAL_V4 = re.compile(
    r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$"
)


class EndpointGuard:
    """Checks URLs and resolved addresses against the allowed networks."""

    def __init__(self, allowed: list[str] | tuple[str, ...] = DEFAULT_ENDPOINT_ALLOW) -> None:
        self.allowed: list[IPNetwork] = [ipaddress.ip_network(n, strict=False) for n in allowed]
        self.refused: list[IPNetwork] = [ipaddress.ip_network(n) for n in ALWAYS_REFUSED]

    def is_allowed(self, address: str) -> bool:
        """An address (IPv4-mapped IPv6 counts as its IPv4) in an allowed, never-refused net."""
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in net for net in self.refused):
            return False
        return any(ip in net for net in self.allowed)

    async def check_url(self, url: str, field: str = "endpoint") -> None:
        """Refuse a URL whose host is odd or resolves (even partly) outside the allowed nets."""
        host = urlsplit(url).hostname or ""
        if _NUMERIC_HOST.match(host) and not _CANONICAL_V4.match(host):
            raise EndpointRefused(
                f"{field}: write IPv4 addresses as four decimal numbers ({host!r} is ambiguous)",
                field=field,
            )
        for address in await self.resolve(host):
            if not self.is_allowed(address):
                raise EndpointRefused(
                    f"{field}: {host} resolves to {address}, outside the allowed networks",
                    field=field,
                )

    async def dial_address(self, host: str) -> str:
        """The address a new connection to `host` must dial, checked now (DNS may have
        changed since registration); a partly disallowed answer is refused whole.

        Raises `ConnectionRefusedError`, so the client reports an unreachable agent.
        """
        try:
            addresses = await self.resolve(host)
        except EndpointRefused as exc:
            raise ConnectionRefusedError(exc.message) from None
        refused = [a for a in addresses if not self.is_allowed(a)]
        if refused:
            raise ConnectionRefusedError(
                f"{host} resolves to {refused[0]}, outside the allowed networks"
            )
        return addresses[0]

    @staticmethod
    async def resolve(host: str) -> list[str]:
        """Every address the host resolves to; an unresolvable host is refused."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, None, type=socket.SOCK_STREAM
            )
        except (socket.gaierror, UnicodeError) as exc:
            raise EndpointRefused(f"{host!r} does not resolve", field="endpoint") from exc
        return sorted({str(info[4][0]) for info in infos})

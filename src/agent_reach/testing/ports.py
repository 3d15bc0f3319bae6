"""Ports for the servers tests start, without racing other processes for them.

A server that can bind port 0 and say which port it got is started that way
(`agent_reach.testing.serve_process`). One that cannot (nginx, redis-server, a
third-party server taking ``--port N``) is started on a port picked here with
`on_free_ports`, which starts it again on new ports when another process bound the
picked one first: its start function raises `PortTaken` when the server's output
says its bind failed.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TypeVar

PORT_RETRIES = 3  # new ports tried when another process took the one picked

T = TypeVar("T")


class PortTaken(RuntimeError):
    """A server could not bind its port: another process took it since it was picked."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Another process may take it before ours binds it: start the server through
    `on_free_ports`, or on port 0, rather than on this port alone.
    """
    [port] = free_ports(1)
    return port


def free_ports(count: int) -> list[int]:
    """`count` distinct ports on 127.0.0.1 that nothing listens on right now."""
    with ExitStack() as held:  # all bound at once, so the kernel hands out distinct ones
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


@contextmanager
def refused_port(*, reuse_address: bool = False) -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as this is held: bound
    by this process, never listened on, so no other process can take it meanwhile.

    With `reuse_address`, a server of this process that binds it with SO_REUSEADDR
    (`ServerThread`, asyncio's and uvicorn's servers) may listen on it while it is held:
    refused until that server listens, and never handed to a process asking the kernel
    for a free port meanwhile.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def port_was_taken(output: str) -> bool:
    """True when a server's output says its bind failed because the port is in use."""
    return "address already in use" in output.lower()


def on_free_ports(start: Callable[..., T], count: int = 1, *, retries: int = PORT_RETRIES) -> T:
    """`start(*ports)` with `count` free ports; with new ones, up to `retries` times,
    while it raises `PortTaken` (another process bound a port between pick and bind)."""
    while True:
        try:
            return start(*free_ports(count))
        except PortTaken:
            if retries == 0:
                raise
            retries -= 1

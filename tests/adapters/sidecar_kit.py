"""Run a sidecar in a thread next to a service, as `agent-reach sidecar` would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent_reach.sidecar.service import Sidecar, SidecarConfig
from agent_reach.testing.servers import ServerThread


@contextmanager
def running_sidecar(config: dict[str, Any]) -> Iterator[tuple[Sidecar, str]]:
    """A registered sidecar: yields it and its URL; deregisters when the block ends."""
    sidecar = Sidecar(SidecarConfig.model_validate(config))
    server = ServerThread(sidecar.app)
    sidecar.agent.endpoint_url = f"{server.url}/invoke"
    with server:
        yield sidecar, server.url

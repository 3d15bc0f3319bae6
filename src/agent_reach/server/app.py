"""The coordinator's ASGI app: the invoke fast path in front of the FastAPI control plane."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from agent_reach.clock import SYSTEM_CLOCK, Clock
from agent_reach.config import Settings
from agent_reach.routing.policy_source import PolicySource
from agent_reach.server.errors import install_error_handlers
from agent_reach.server.fastpath import handle_invoke
from agent_reach.server.limits import BodyLimit
from agent_reach.server.openapi import add_invoke_operation
from agent_reach.server.routes import (
    agents,
    contexts,
    decisions,
    health,
    keys,
    learning,
    queues,
    routing,
    tasks,
    traces,
    workflows,
)
from agent_reach.server.routes.dashboard import mount_dashboard
from agent_reach.server.runtime import Runtime, open_runtime


class CoordinatorApp:
    """ASGI entry: `POST /v1/invoke` goes straight to the invoker, the rest to FastAPI."""

    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.runtime: Runtime | None = None
        policy = PolicySource(clock, settings.policy_file)  # a bad file fails here, not later

        @asynccontextmanager
        async def lifespan(api: FastAPI) -> AsyncIterator[None]:
            async with open_runtime(settings, clock, policy) as runtime:
                api.state.runtime = self.runtime = runtime
                yield
                self.runtime = None

        self.api = FastAPI(
            title="Agent-Reach coordinator",
            version="1",
            lifespan=lifespan,
            docs_url="/docs",
            redoc_url=None,
        )
        install_error_handlers(self.api)
        for module in (agents, routing, tasks, health, traces, decisions, queues, contexts, keys):
            self.api.include_router(module.router)
        self.api.include_router(workflows.router)
        self.api.include_router(learning.router)
        mount_dashboard(self.api)
        add_invoke_operation(self.api)
        self._control_plane = BodyLimit(self.api, settings.max_body_bytes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        runtime = self.runtime
        if (
            runtime is not None
            and scope["type"] == "http"
            and scope["path"] == "/v1/invoke"
            and scope["method"] == "POST"
        ):
            await handle_invoke(scope, receive, send, runtime.invoke, self.settings.max_body_bytes)
        else:
            await self._control_plane(scope, receive, send)


def create_app(settings: Settings | None = None, clock: Clock = SYSTEM_CLOCK) -> CoordinatorApp:
    """The coordinator as an ASGI app; its lifespan opens and closes everything it holds."""
    return CoordinatorApp(settings or Settings(), clock)

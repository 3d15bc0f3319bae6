"""The sidecar: the agent for an unchanged service, running next to it.

    agent-reach sidecar --config sidecar.yaml

It registers the service's capabilities (descriptions, examples, `input_schema`),
keeps the lease, deregisters on stop, answers probes with the service's own health
URL, runs each request_id once (a repeated delivery gets the stored answer, the
service is called once) and translates every delivery with `adapters.translation`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from agent_reach.adapters.exchange import call_service, variables_of
from agent_reach.adapters.translation import CompiledTranslation, Kind, parse_translation
from agent_reach.errors import AgentFailed, AgentTimeout, InvalidRequest
from agent_reach.model.agents import DEFAULT_TTL_S, Capability, Example, SkillSpec
from agent_reach.model.delivery import Delivery
from agent_reach.sdk.agent import Agent, AgentRequest
from agent_reach.sidecar.stream import relayed
from agent_reach.wire import pool

DEFAULT_SERVICE_TIMEOUT_S = 5.0  # the longest synchronous timeout class (`reasoning`)
HEALTH_TIMEOUT_S = 1.0  # the coordinator's own probe timeout (AR_PROBE_TIMEOUT_S)


class ServiceConfig(BaseModel):
    """The unchanged service: where it answers, how its health is read."""

    model_config = ConfigDict(extra="forbid")

    url: str
    health_url: str
    timeout_s: float = Field(DEFAULT_SERVICE_TIMEOUT_S, gt=0, le=600)


class CapabilityConfig(BaseModel):
    """One capability and the translation of its deliveries."""

    model_config = ConfigDict(extra="allow")  # the translation's own fields

    capability: Capability
    description: Annotated[str, Field(max_length=4000)] = ""
    examples: list[Example] = []
    input_schema: dict[str, Any] | None = None
    kind: Kind = "json"
    stream: bool = False  # the service answers server-sent events: relayed as they come
    # This capability's own declarations, where they differ from the agent's.
    safe: StrictBool | None = None
    idempotent: StrictBool | None = None


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    # The service executes a request id at most once (it keeps its own guard): the
    # coordinator may then re-send a request whose outcome is unknown (docs/delivery.md).
    idempotent: StrictBool = False
    # The service has no side effects (a lookup): re-sent when unsure, and answered from
    # memory when it cannot answer (docs/delivery.md).
    safe: StrictBool = False
    display_name: str = ""
    description: str = ""
    ttl: float = DEFAULT_TTL_S
    timeout_class: str = "query"
    domain: str = "default"
    context_fields: list[str] = []


class SidecarConfig(BaseModel):
    """`sidecar.yaml`: the coordinator, this agent, the service and its capabilities."""

    model_config = ConfigDict(extra="forbid")

    coordinator: str
    api_key_env: str = "AR_API_KEY"  # the key is read from this variable, never from the file
    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535)
    endpoint_url: str | None = None  # what to register, when the bound address is not it
    agent: AgentConfig
    service: ServiceConfig
    capabilities: Annotated[list[CapabilityConfig], Field(min_length=1)]

    @classmethod
    def load(cls, path: Path) -> SidecarConfig:
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidRequest(f"cannot read the sidecar config {path}: {exc}") from None
        return cls.model_validate(document)


class Sidecar:
    """An `Agent` whose handler is the service, reached through its translations."""

    def __init__(self, config: SidecarConfig) -> None:
        self.config = config
        self.client = pool.HttpPool()
        self.translations: dict[str, CompiledTranslation] = {}
        self.streaming = {c.capability for c in config.capabilities if c.stream}
        for item in config.capabilities:
            where = f"capabilities.{item.capability}"
            translation = parse_translation(item.model_extra or {}, item.kind, where)
            self.translations[item.capability] = CompiledTranslation(translation, where)
        agent = config.agent
        self.agent = Agent(
            agent.id,
            [c.capability for c in config.capabilities],
            coordinator_url=config.coordinator,
            description=agent.description,
            examples=[e for c in config.capabilities for e in c.examples],
            display_name=agent.display_name,
            endpoint_url=config.endpoint_url,
            ttl=agent.ttl,
            timeout_class=agent.timeout_class,
            domain=agent.domain,
            context_fields=agent.context_fields,
            api_key=os.environ.get(config.api_key_env),
            skills=[
                SkillSpec(
                    capability=c.capability,
                    description=c.description,
                    examples=c.examples,
                    input_schema=c.input_schema,
                    safe=c.safe,
                    idempotent=c.idempotent,
                )
                for c in config.capabilities
            ],
            health_check=self.is_service_healthy,
            idempotent=agent.idempotent,
            safe=agent.safe,
        )
        self.agent.handler(self.handle)
        self.app = _CloseOnShutdown(self.agent.app, self.client)

    async def handle(self, request: AgentRequest) -> Any:
        """One delivery: translated, sent once, the answer mapped back (a streaming
        service's events relayed as they arrive, `sidecar.stream`)."""
        translation = self.translations[request.capability]
        context = await request.context_data() if "context" in translation.names else None
        delivery = Delivery(
            request_id=request.request_id,
            capability=request.capability,
            payload=request.payload,
            trace_id=request.trace_id,
            hop=request.hop,
            text=request.text,
        )
        timeout_s = self.config.service.timeout_s
        try:
            answer = await call_service(
                self.client,
                translation,
                self.config.service.url,
                variables_of(delivery, context),
                headers=[("x-request-id", request.request_id)],
                timeout_s=timeout_s,
                stream=request.capability in self.streaming,
            )
            return relayed(answer, timeout_s)
        except AgentFailed as exc:
            if isinstance(exc, AgentTimeout) or exc.outcome_unknown:
                exc.retryable = False  # the service may have acted
            raise

    async def is_service_healthy(self) -> bool:
        return await self.client.probe(self.config.service.health_url, timeout_s=HEALTH_TIMEOUT_S)

    def serve(self) -> None:
        """Serve until interrupted (blocking); registers on start, deregisters on stop."""
        self.agent.app = self.app  # type: ignore[assignment]  # same ASGI app, pool closed last
        self.agent.serve(self.config.host, self.config.port)


class _CloseOnShutdown:
    """The agent's ASGI app, closing the service client once the app has shut down."""

    def __init__(self, app: Any, client: pool.HttpPool) -> None:
        self.app = app
        self.client = client

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_after_close(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.client.aclose()
            await send(message)

        await self.app(scope, receive, send_after_close)

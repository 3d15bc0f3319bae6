"""A2A agents built with the official a2a-sdk server: a v1.0 one and a v0.3 one."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers.proto_helpers import (
    get_data_parts,
    get_message_text,
    new_data_part,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_reach.adapters.a2a_cards import IDEMPOTENT_EXTENSION, SAFE_EXTENSION
from agent_reach.testing.servers import ServerThread

RPC_PATH = "/rpc"  # not the base URL: the card must be what tells where to send
REST_PATH = "/rest"  # the HTTP+JSON binding's base, for the "rest" agent


@dataclass
class Ledger:
    """Each execution: (skill asked for in metadata, text, data parts)."""

    runs: list[tuple[str, str, list[Any]]] = field(default_factory=list)


class TravelExecutor(AgentExecutor):
    """`weather` answers a Message; `flights` works as a Task with an artifact."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        text = get_message_text(message)
        data = get_data_parts(message.parts)
        skill = str(dict(message.metadata).get("capability", "")) if message.metadata else ""
        self.ledger.runs.append((skill, text, data))
        if skill.startswith("flight"):
            task = context.current_task or new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            city = (data[0] or {}).get("to", "?") if data else "?"
            await updater.add_artifact(
                [new_text_part(f"2 flights to {city}"), new_data_part({"flights": 2, "to": city})]
            )
            await updater.complete()
            return
        if "storm" in text:
            raise RuntimeError("no forecast for storms")
        await event_queue.enqueue_event(new_text_message(f"sunny, you asked: {text}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


SKILLS = [
    AgentSkill(
        id="weather.forecast",
        name="Weather",
        description="weather forecast for a city, rain or sun 天气预报",
        tags=["weather", "中文"],
        examples=["will it rain in Hangzhou tomorrow", "明天杭州下雨吗"],
    ),
    AgentSkill(
        id="flight.search",
        name="Flights",
        description="search flights and plane tickets to a city 机票",
        tags=["Travel"],
        examples=["find me a flight to Beijing"],
    ),
]


def _v03_card(base: str) -> dict[str, Any]:
    """The card an a2a-sdk 0.3 server publishes (JSON-RPC preferred), at the older path."""
    return {
        "name": "travel-desk-v03",
        "description": "travel desk (A2A 0.3)",
        "url": f"{base}{RPC_PATH}",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "version": "1.0.0",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": s.id,
                "name": s.name,
                "description": s.description,
                "tags": list(s.tags),
                "examples": list(s.examples),
            }
            for s in SKILLS
        ],
    }


def start_travel_agent(
    version: str, *, idempotent: bool = False, safe: bool = False
) -> tuple[ServerThread, Ledger]:
    """The agent on 127.0.0.1 (started); v1.0 serves its card at the new well-known path,
    v0.3 at the older `/.well-known/agent.json`, answering `message/send`; "rest" is v1.0
    whose card prefers HTTP+JSON (listed first, JSON-RPC second) and serves only that."""
    ledger = Ledger()
    app = _Late()
    server = ServerThread(app)  # binds now: the card must name the address
    card = AgentCard(
        name="travel-desk",
        description="travel desk: weather and flights",
        version="1.0.0",
        supported_interfaces=[
            *(
                [
                    AgentInterface(
                        url=f"{server.url}{REST_PATH}",
                        protocol_binding="HTTP+JSON",
                        protocol_version="1.0",
                    )
                ]
                if version == "rest"
                else []
            ),
            AgentInterface(
                url=f"{server.url}{RPC_PATH}", protocol_binding="JSONRPC", protocol_version="1.0"
            ),
        ],
        capabilities=AgentCapabilities(
            streaming=False,
            extensions=[
                *([AgentExtension(uri=IDEMPOTENT_EXTENSION)] if idempotent else []),
                *([AgentExtension(uri=SAFE_EXTENSION)] if safe else []),
            ],
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=SKILLS,
    )
    handler = DefaultRequestHandler(
        agent_executor=TravelExecutor(ledger), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes: list[Any] = []
    if version == "rest":
        routes += create_agent_card_routes(card)
        routes += create_rest_routes(handler, path_prefix=REST_PATH)
        app.app = Starlette(routes=routes)
        return server.start(), ledger
    if version == "1.0":
        routes += create_agent_card_routes(card)
    else:

        async def old_card(request: Request) -> JSONResponse:
            return JSONResponse(_v03_card(server.url))

        routes.append(Route("/.well-known/agent.json", old_card))
    routes += create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=version == "0.3")
    app.app = Starlette(routes=routes)
    return server.start(), ledger


class _Late:
    """An ASGI app whose routes are built once the server's address is known."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@dataclass
class StoryLedger:
    """A streaming agent's runs (the text of each message) and the gates it waits on:
    after its first chunk it waits until the test opens the gate named by the text."""

    runs: list[str] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    loop: asyncio.AbstractEventLoop | None = None

    def gate(self, key: str) -> asyncio.Event:
        return self.gates.setdefault(key, asyncio.Event())

    def open(self, key: str) -> None:
        """Open the gate from the test's thread."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(lambda: self.gate(key).set())


class StoryExecutor(AgentExecutor):
    """Tells a story in three artifact chunks; the last two wait for the gate."""

    def __init__(self, ledger: StoryLedger) -> None:
        self.ledger = ledger

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        text = get_message_text(message)
        self.ledger.runs.append(text)
        task = context.current_task or new_task_from_user_message(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await updater.add_artifact([new_text_part("once")], artifact_id="story", append=False)
        await self.ledger.gate(text).wait()
        await updater.add_artifact([new_text_part(" upon")], artifact_id="story", append=True)
        await updater.add_artifact(
            [new_text_part(" a time")], artifact_id="story", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


STORY_SKILL = AgentSkill(
    id="story.tell",
    name="Stories",
    description="tells a story, streamed as it is written",
    tags=["story"],
    examples=["tell me a story"],
)


def start_story_agent(version: str) -> tuple[ServerThread, StoryLedger]:
    """A streaming A2A agent (`capabilities.streaming: true`) on 127.0.0.1, v1.0 or v0.3."""
    ledger = StoryLedger()
    app = _Late()
    server = ServerThread(app)
    card = AgentCard(
        name="storyteller",
        description="streams stories",
        version="1.0.0",
        supported_interfaces=[
            *(
                [
                    AgentInterface(
                        url=f"{server.url}{REST_PATH}",
                        protocol_binding="HTTP+JSON",
                        protocol_version="1.0",
                    )
                ]
                if version == "rest"
                else []
            ),
            AgentInterface(
                url=f"{server.url}{RPC_PATH}", protocol_binding="JSONRPC", protocol_version="1.0"
            ),
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[STORY_SKILL],
    )
    handler = DefaultRequestHandler(
        agent_executor=StoryExecutor(ledger), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes: list[Any] = []
    if version == "rest":
        routes += create_agent_card_routes(card)
        routes += create_rest_routes(handler, path_prefix=REST_PATH)
        app.app = Starlette(routes=routes)
        return server.start(), ledger
    if version == "1.0":
        routes += create_agent_card_routes(card)
    else:
        old = {
            "name": "storyteller",
            "description": "streams stories (A2A 0.3)",
            "url": f"{server.url}{RPC_PATH}",
            "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3.0",
            "version": "1.0.0",
            "capabilities": {"streaming": True},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {
                    "id": STORY_SKILL.id,
                    "name": STORY_SKILL.name,
                    "description": STORY_SKILL.description,
                    "tags": list(STORY_SKILL.tags),
                    "examples": list(STORY_SKILL.examples),
                }
            ],
        }

        async def old_card(request: Request) -> JSONResponse:
            return JSONResponse(old)

        routes.append(Route("/.well-known/agent.json", old_card))
    routes += create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=version == "0.3")
    app.app = Starlette(routes=routes)
    server.start()
    ledger.loop = server.loop
    return server, ledger

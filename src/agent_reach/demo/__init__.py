"""`agent-reach demo`: a coordinator and the customer-service agents, all real, on loopback.

It starts everything in this process on ephemeral ports, sends a scripted series of
customer requests through the coordinator, stops one inventory instance, shows that
the other one takes its traffic, plays the deployment hand-off (`demo/deployment.py`)
and a delegation on behalf of the customer (`demo/delegation.py`), and shuts
everything down. It decides nothing.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.config import Settings
from agent_reach.demo.delegation import play_delegation
from agent_reach.demo.deployment import handoff_agents, play_handoff
from agent_reach.demo.scenario import SCRIPT, SCRIPT_AFTER_STOP, Ask, build_agents
from agent_reach.demo.workflow import play_shipment
from agent_reach.errors import ReachError
from agent_reach.observability.logging import configure_logging
from agent_reach.sdk.client import ReachClient
from agent_reach.testing.servers import ServerThread, run_coordinator

STOPPED_INSTANCE = "inventory-01"


SCORE_NOTE = (
    "match: the calibrated confidence (0-1) that the text means that capability, fitted "
    "on the registered agents' own cards; below 0.5, or within 0.15 of another "
    "capability, the router does not guess and the generic agent takes it. Instances "
    "of the chosen capability are then ranked by health, context affinity, load and "
    "success rate."
)
VERBOSE_HINT = "answers are cut to fit; `agent-reach demo --verbose` shows them in full"
HUMAN = "human.handoff"  # the generic agent: takes what the router will not guess
MATCHERS_READY_POLLS = 300  # 0.1 s apart: the encoder loads and fits in a few seconds


@dataclass(slots=True)
class Row:
    """One request of the demo as the table shows it."""

    number: int
    ask: Ask
    agent_id: str | None
    routed: str | None  # the capability the text was routed to
    confidence: float | None  # its calibrated match confidence
    latency_ms: float
    summary: str


def run_demo(console: Console | None = None, *, verbose: bool = False) -> int:
    """Run the whole scenario and print it; 0 when everything behaved as the demo claims.

    Logging is turned down to warnings for the process, so the tables stay readable;
    answers are cut to one line unless `verbose`.
    """
    console = console or Console()
    configure_logging("warning", json=False)
    # Security off: a local demo on loopback, without keys to hand around — and said so.
    settings = Settings(registry_backend="memory", decision_log="off", auth="off")
    console.print(
        "[bold yellow]security is OFF for this demo[/] (AR_AUTH=off: no API keys, every "
        "caller is an admin); `agent-reach serve` runs with it on"
    )
    with run_coordinator(settings) as (url, _), ExitStack() as stack:
        agents = build_agents(url) + handoff_agents(url)
        servers: dict[str, ServerThread] = {}
        for agent in agents:
            server = ServerThread(agent.app)
            agent.endpoint_url = f"{server.url}/invoke"
            servers[agent.id] = stack.enter_context(server)
        return asyncio.run(_play(console, url, servers, verbose))


async def _play(console: Console, url: str, servers: dict[str, ServerThread], verbose: bool) -> int:
    async with ReachClient(url) as client:
        await _check_registered(client, set(servers))
        await _matchers_ready(url)
        console.print(
            f"[bold]Agent-Reach demo[/]: coordinator {url}, {len(servers)} agents registered"
        )
        before = await _send_all(client, SCRIPT, first_number=1)
        console.print(_table("Customer requests", before, verbose=verbose))
        console.print(f"[dim]{SCORE_NOTE}[/]")
        if not verbose:
            console.print(f"[dim]{VERBOSE_HINT}[/]")

        console.rule(f"stopping {STOPPED_INSTANCE}")
        await asyncio.to_thread(servers[STOPPED_INSTANCE].stop)  # its lifespan deregisters it
        after = await _send_all(client, SCRIPT_AFTER_STOP, first_number=len(before) + 1)
        console.print(_table("Inventory requests after the stop", after, verbose=verbose))
        workflow_ok = await play_shipment(console, client)

        console.rule("deployment hand-off")
        handoff = await play_handoff(console, client, url)

        console.rule("delegation on behalf of the customer")
        delegated = await play_delegation(console, client, url)

    served_before, served_after = _inventory_agents(before), _inventory_agents(after)
    rows = (*before, *after)
    answered = sum(row.agent_id is not None for row in rows)
    routed = sum(row.routed == row.ask.capability for row in rows)
    # a refused text goes to the generic human agent: never to the wrong specialist
    misrouted = sum(row.routed not in (row.ask.capability, HUMAN) for row in rows)
    total = len(before) + len(after)
    console.print(
        f"[bold]summary[/]: {answered}/{total} requests answered; {routed}/{total} texts "
        f"routed by meaning to the capability meant, {total - routed - misrouted} the router "
        f"would not guess went to {HUMAN}, {misrouted} to a wrong one; inventory.check went to "
        f"{', '.join(sorted(served_before))} before the stop and to "
        f"{', '.join(sorted(served_after))} after it"
    )
    is_expected = (
        answered == total
        and misrouted == 0
        and len(served_before) == 2
        and STOPPED_INSTANCE not in served_after
        and workflow_ok
    )
    return 0 if is_expected and handoff.is_expected and delegated.is_expected else 1


async def _check_registered(client: ReachClient, agent_ids: set[str]) -> None:
    """Every agent registers while it starts; refuse to go on if the coordinator lacks one."""
    live = {agent_id for ids in (await client.capabilities()).values() for agent_id in ids}
    if not agent_ids <= live:
        raise ReachError(
            f"agents not registered: {sorted(agent_ids - live)}", code="demo_not_ready"
        )


async def _matchers_ready(url: str) -> None:
    """Wait until the sentence encoder has loaded and both matchers are calibrated on the
    agents' cards (a few seconds); text is routed lexically until then."""
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        for _ in range(MATCHERS_READY_POLLS):
            if (await http.get("/v1/policy")).json()["matching"]["current"]:
                return
            await asyncio.sleep(0.1)
    raise ReachError("the text matchers did not get ready", code="demo_not_ready")


async def _send_all(client: ReachClient, script: list[list[Ask]], first_number: int) -> list[Row]:
    """Send each step's requests together, steps one after another; rows in script order."""
    rows: list[Row] = []
    for step in script:
        numbers = range(first_number + len(rows), first_number + len(rows) + len(step))
        rows += await asyncio.gather(
            *(_send(client, n, ask) for n, ask in zip(numbers, step, strict=True))
        )
    return rows


async def _send(client: ReachClient, number: int, ask: Ask) -> Row:
    started = SYSTEM_CLOCK.monotonic()
    try:
        answer = await client.invoke(text=ask.text, payload=ask.payload)
    except ReachError as exc:
        latency_ms = (SYSTEM_CLOCK.monotonic() - started) * 1000
        message = f"[red]{exc.code}[/]: {escape(exc.message)}"
        return Row(number, ask, None, None, None, latency_ms, message)
    latency_ms = (SYSTEM_CLOCK.monotonic() - started) * 1000
    route = answer.route
    confidence = None  # a generic agent is no match: it takes what was refused
    if route.rule != "generic":
        confidence = next(
            (c.factors.get("match") for c in route.candidates if c.agent_id == answer.agent_id),
            None,
        )
    return Row(
        number,
        ask,
        answer.agent_id,
        route.capability,
        confidence,
        latency_ms,
        _summary(answer.result),
    )


def _routed(row: Row) -> str:
    if row.routed == row.ask.capability:
        return row.routed
    return f"[red]{row.routed or 'refused'}[/] (meant {row.ask.capability})"


def _summary(result: Any) -> str:
    return str(result.get("answer", result)) if isinstance(result, dict) else str(result)


def _inventory_agents(rows: list[Row]) -> set[str]:
    return {row.agent_id for row in rows if row.routed == "inventory.check" and row.agent_id}


def _table(title: str, rows: list[Row], *, verbose: bool = False) -> Table:
    """One row per request; the last cell holds what the customer said and the answer,
    each one line cut to fit the terminal (80 columns included), or whole when `verbose`."""
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("routed to")
    table.add_column("match", justify="right", no_wrap=True)
    table.add_column("instance", no_wrap=True, style="cyan")
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column("customer → answer", min_width=12)  # shrinks first: the others stay whole
    for row in rows:
        cell = Text("\n").join([Text(row.ask.text), Text.from_markup(f"[dim]→[/] {row.summary}")])
        cell.no_wrap, cell.overflow = (False, "fold") if verbose else (True, "ellipsis")
        table.add_row(
            str(row.number),
            _routed(row),
            "-" if row.confidence is None else f"{row.confidence:.2f}",
            row.agent_id or "[red]-[/]",
            f"{row.latency_ms:.1f}",
            cell,
        )
    return table

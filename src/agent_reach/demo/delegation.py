"""The demo's delegation: a customer-service agent hands an out-of-scope question to a
specialist on behalf of the customer (docs/mesh.md).

`cs-bot` answers what it knows; asked for a refund, it delegates `refund.request` with
its delivery's token. The policy that allows it is put in force first, and printed:
agents of the customer-service domain may hand `refund.*` on, and nothing else. The
specialist verifies its token with the coordinator's public keys and reports the chain
it states; the demo prints it (customer → agent → agent).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape

from agent_reach.demo.scenario import DOMAIN
from agent_reach.errors import ReachError
from agent_reach.sdk.agent import Agent, AgentRequest
from agent_reach.sdk.client import ReachClient
from agent_reach.sdk.delegation import DelegationVerifier
from agent_reach.testing.servers import ServerThread

QUESTION = "我要退款：订单 A1003 的快充头坏了"
ORDER_ID = "A1003"
# With security off every agent's principal is the same anonymous one: the rule names
# the agents' domain. With keys, name the delegating agents' principal (docs/mesh.md).
POLICY_TOML = f"""[[access.delegate]]
principals = ["domain:{DOMAIN}"]
capabilities = ["refund.*"]"""
DELEGATE_RULE = {"principals": [f"domain:{DOMAIN}"], "capabilities": ["refund.*"]}
REGISTER_POLLS = 100  # 0.05 s apart


@dataclass(slots=True)
class Delegated:
    """What the step showed: the answer and the chain the specialist verified."""

    answer: str
    on_behalf_of: str | None
    chain: list[tuple[str, str]]  # (instance, capability), oldest first
    request_id: str

    @property
    def is_expected(self) -> bool:
        return [c for _, c in self.chain] == ["cs.chat", "refund.request"]


def delegation_agents(coordinator_url: str) -> list[Agent]:
    """cs-bot, which delegates refunds, and the refund specialist."""
    bot = Agent(
        "cs-bot",
        ["cs.chat"],
        coordinator_url=coordinator_url,
        display_name="客服机器人",
        description="常见问题；退款交给退款专员",
        domain=DOMAIN,
    )
    specialist = Agent(
        "refund-specialist",
        ["refund.request"],
        coordinator_url=coordinator_url,
        display_name="退款专员",
        description="退款申请",
        domain=DOMAIN,
        delegation=True,  # its deliveries carry a token, for it to verify
    )
    verifier = DelegationVerifier(coordinator_url)

    @bot.handler
    async def chat(request: AgentRequest) -> dict[str, Any]:
        text = str((request.payload or {}).get("text", ""))
        if "退款" not in text:
            return {"answer": "您好，请问有什么可以帮您？"}
        handed = await request.delegate(
            "refund.request", payload={"order_id": request.payload.get("order_id")}
        )
        return {"answer": handed.result["answer"], "specialist": handed.result}

    @specialist.handler
    async def refund(request: AgentRequest) -> dict[str, Any]:
        if request.delegation is None:
            return {"answer": "只受理客服转来的退款", "on_behalf_of": None, "chain": []}
        seen = await verifier.verify(request.delegation["token"])
        order_id = request.payload.get("order_id")
        return {
            "answer": f"订单 {order_id} 的退款已受理，3 个工作日内原路退回",
            "on_behalf_of": seen.caller,
            "chain": [[hop.instance, hop.capability] for hop in seen.chain],
        }

    return [bot, specialist]


async def play_delegation(console: Console, client: ReachClient, coordinator_url: str) -> Delegated:
    """Start the two agents, put the rule in force, ask, print the chain; stop them."""
    console.print("the policy that lets customer-service agents hand refunds on:")
    console.print(escape(POLICY_TOML), highlight=False)
    servers = []
    for agent in delegation_agents(coordinator_url):
        server = ServerThread(agent.app)
        agent.endpoint_url = f"{server.url}/invoke"
        servers.append(server)
    try:
        for server in servers:
            await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(base_url=coordinator_url, timeout=10) as http:
            await _allow_refund_delegation(http)
            await _registered(client, {"cs.chat", "refund.request"})
        try:
            answer = await client.invoke(
                "cs.chat", payload={"text": QUESTION, "order_id": ORDER_ID}
            )
        except ReachError as exc:
            console.print(f"[red]{exc.code}[/]: {escape(exc.message)}")
            return Delegated("", None, [], "")
        result = answer.result["specialist"]
        delegated = Delegated(
            answer.result["answer"],
            result["on_behalf_of"],
            [(instance, capability) for instance, capability in result["chain"]],
            answer.request_id,
        )
    finally:
        for server in servers:
            await asyncio.to_thread(server.stop)
    console.print(f"customer: {QUESTION}", highlight=False)
    console.print(f"  [dim]→[/] {escape(delegated.answer)}", highlight=False)
    console.print(f"chain: {chain_line(delegated)}", highlight=False)
    return delegated


def chain_line(delegated: Delegated) -> str:
    """`caller → agent (capability) → agent (capability)`, as the specialist verified it."""
    hops = [f"{instance} ({capability})" for instance, capability in delegated.chain]
    return " → ".join([f"{delegated.on_behalf_of} (customer)", *hops])


async def _allow_refund_delegation(http: httpx.AsyncClient) -> None:
    """Add the delegate rule to the policy in force."""
    current = (await http.get("/v1/policy")).json()["policy"]
    access = current.setdefault("access", {})
    access["delegate"] = [*access.get("delegate", []), DELEGATE_RULE]
    (await http.put("/v1/policy", json=current)).raise_for_status()


async def _registered(client: ReachClient, capabilities: set[str]) -> None:
    for _ in range(REGISTER_POLLS):
        live = {tag for tag, ids in (await client.capabilities()).items() if ids}
        if capabilities <= live:
            return
        await asyncio.sleep(0.05)
    raise ReachError("the delegation agents did not register", code="demo_not_ready")

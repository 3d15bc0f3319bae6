"""The CI/CD hand-off of the original write-ups: code generation, then deployment.

A pipeline opens a shared context and asks `codegen.generate` for a change. The
code-generation agent builds it, writes the artifact URL and the environment tag into
the context, and invokes `deploy.execute` itself — a nested call, one hop further,
in the same trace. The deploy agent reads only its projection of the context (the
two fields it registered, never the pipeline's other data) and answers with its log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from agent_reach.sdk.agent import Agent, AgentRequest
from agent_reach.sdk.client import ReachClient

DOMAIN = "delivery"
ARTIFACTS = "https://artifacts.shop.internal"
# What the pipeline puts in the shared context; `review` and `requested_by` are not
# the deploy agent's business, and its projection never shows them.
PIPELINE = {
    "pipeline": {"repo": "shop-web", "commit": "9f1c2e7", "branch": "release/2.4"},
    "requested_by": "ci-bot",
    "review": {"approved_by": ["lin.wei"], "notes": "cart rounding fix"},
}
DEPLOY_FIELDS = ["build.artifact_url", "deploy.environment"]


@dataclass(frozen=True, slots=True)
class Handoff:
    """What the hand-off showed: both hops, what the deploy agent saw, and its log."""

    codegen_hop: int
    deploy_hop: int
    deploy_saw: dict[str, Any]
    log: list[str]
    trace_id: str

    @property
    def is_expected(self) -> bool:
        """Nested one hop further, with exactly the projection it registered for."""
        return (
            self.deploy_hop == self.codegen_hop - 1
            and set(self.deploy_saw) == {"build", "deploy"}
            and set(self.deploy_saw["build"]) == {"artifact_url"}
            and bool(self.log)
        )


def codegen_agent(coordinator_url: str) -> Agent:
    agent = Agent(
        "codegen-01",
        ["codegen.generate"],
        coordinator_url=coordinator_url,
        display_name="代码生成",
        description="generate the change, build it, hand the artifact to deployment",
        domain=DOMAIN,
        timeout_class="reasoning",
        context_fields=["pipeline", "build", "deploy"],
    )

    @agent.handler
    async def generate(request: AgentRequest) -> dict[str, Any]:
        pipeline = (await request.context_data())["pipeline"]
        digest = hashlib.sha256(f"{pipeline['repo']}@{pipeline['commit']}".encode()).hexdigest()
        artifact = f"{ARTIFACTS}/{pipeline['repo']}/{pipeline['commit']}.tar.gz"
        environment = "staging" if pipeline["branch"].startswith("release/") else "dev"
        await request.update_context(
            {
                "build": {"artifact_url": artifact, "sha256": digest},
                "deploy": {"environment": environment},
            }
        )
        context_id = (request.context or {})["id"]
        deployed = await request.client.invoke(
            "deploy.execute", payload={"change": request.payload}, context_id=context_id
        )
        return {"hop": request.hop, "artifact_url": artifact, "deploy": deployed.result}

    return agent


def deploy_agent(coordinator_url: str) -> Agent:
    agent = Agent(
        "deploy-01",
        ["deploy.execute"],
        coordinator_url=coordinator_url,
        display_name="部署执行",
        description="roll an artifact out to an environment",
        domain=DOMAIN,
        context_fields=DEPLOY_FIELDS,
    )

    @agent.handler
    async def execute(request: AgentRequest) -> dict[str, Any]:
        seen = await request.context_data()
        artifact = seen["build"]["artifact_url"]
        environment = seen["deploy"]["environment"]
        log = [
            f"pull {artifact}",
            f"verify signature of {artifact.rsplit('/', 1)[-1]}",
            f"roll out to {environment}: 3/3 pods ready",
            f"smoke test {environment}: 200 OK",
        ]
        return {"hop": request.hop, "saw": seen, "environment": environment, "log": log}

    return agent


def handoff_agents(coordinator_url: str) -> list[Agent]:
    """The two agents of the hand-off."""
    return [codegen_agent(coordinator_url), deploy_agent(coordinator_url)]


async def play_handoff(console: Console, client: ReachClient, coordinator_url: str) -> Handoff:
    """Open the pipeline's context, ask for the change, print the hand-off."""
    async with httpx.AsyncClient(base_url=coordinator_url, timeout=10) as http:
        opened = await http.post("/v1/contexts", json={"document": PIPELINE})
        opened.raise_for_status()
        context_id = opened.json()["context_id"]
    answer = await client.invoke(
        "codegen.generate", payload={"ticket": "SHOP-1287"}, context_id=context_id
    )
    deployed = answer.result["deploy"]
    handoff = Handoff(
        codegen_hop=answer.result["hop"],
        deploy_hop=deployed["hop"],
        deploy_saw=deployed["saw"],
        log=deployed["log"],
        trace_id=answer.trace_id,
    )
    console.print(_table(handoff, answer.result["artifact_url"]))
    for line in handoff.log:
        console.print(f"  [dim]deploy-01[/] {line}")
    return handoff


def _table(handoff: Handoff, artifact: str) -> Table:
    table = Table(
        title="Deployment hand-off (nested call, hop counting, context projection)",
        title_justify="left",
        caption=f"one trace ({handoff.trace_id}): deploy.execute runs inside codegen-01's call",
        caption_justify="left",
    )
    table.add_column("hop budget", justify="right", no_wrap=True)
    table.add_column("agent", no_wrap=True, style="cyan")
    table.add_column("capability", no_wrap=True)
    table.add_column("context it read")
    table.add_row(
        str(handoff.codegen_hop),
        "codegen-01",
        "codegen.generate",
        "pipeline, build, deploy → built " + artifact,
    )
    seen = ", ".join(
        f"{name}.{field}" for name, value in handoff.deploy_saw.items() for field in value
    )
    table.add_row(str(handoff.deploy_hop), "deploy-01", "deploy.execute", seen)
    return table

"""`agent-reach acl`: explain access decisions of a policy file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.console import Console
from rich.markup import escape

from agent_reach.cli.common import (
    Command,
    commands,
    reporting_errors,
)
from agent_reach.errors import (
    InvalidRequest,
)
from agent_reach.model.keys import ROLES, Role

if TYPE_CHECKING:
    from agent_reach.model.access import AccessRule
    from agent_reach.security.access import Action

app = commands("Explain access decisions of a policy file.")


@app.command("check", cls=Command)
@reporting_errors
def acl_check(
    principal: Annotated[str, typer.Argument(metavar="PRINCIPAL", help="The principal's name.")],
    capability: Annotated[
        str, typer.Argument(metavar="CAPABILITY", help="The capability tag to check.")
    ],
    domain: Annotated[
        str | None, typer.Option(metavar="DOMAIN", help="The principal's domain, if any.")
    ] = None,
    role: Annotated[
        str, typer.Option(metavar="ROLE", help="caller, agent, observer or admin.")
    ] = "caller",
    grant: Annotated[
        list[str] | None,
        typer.Option(
            "--grant",
            "-g",
            metavar="PATTERN",
            help="A capability pattern the principal's key carries (repeatable), as given "
            "to `keys create --capability`.",
        ),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            envvar="AR_POLICY_FILE",
            exists=True,
            dir_okay=False,
            help="Policy file.",
        ),
    ] = None,
) -> None:
    """Explain whether PRINCIPAL may invoke and register CAPABILITY: which key grant or
    policy rule decided, and its quotas."""
    # the policy's whole model and the access rules: only when this command runs
    from pydantic import TypeAdapter

    from agent_reach.clock import SYSTEM_CLOCK
    from agent_reach.model.access import CapabilityPattern
    from agent_reach.model.agents import normalize_capability
    from agent_reach.model.keys import Principal
    from agent_reach.policy.source import PolicySource
    from agent_reach.security.access import capability_matches, decide_access, principal_matches

    rules = PolicySource(SYSTEM_CLOCK, policy).current
    grants = tuple(TypeAdapter(list[CapabilityPattern]).validate_python(grant or []))
    who = Principal("-", principal.lower(), domain.lower() if domain else None, _role(role), grants)
    tag = normalize_capability(capability)
    console = Console()
    if policy is None:
        console.print(
            "no policy file loaded (--policy or AR_POLICY_FILE): only the key's grants apply",
            soft_wrap=True,
        )
    checks: tuple[tuple[Action, list[AccessRule]], ...] = (
        ("invoke", rules.access.invoke),
        ("register", rules.access.registration),
    )
    for action, action_rules in checks:
        decision = decide_access(action_rules, who, tag, action)
        verdict = "[bold green]allowed[/]" if decision.allowed else "[bold red]denied[/]"
        why = escape(decision.reason)
        if decision.rule is not None:
            why += (
                f": principals {decision.rule.principals} capabilities {decision.rule.capabilities}"
            )
        console.print(f"{action} {escape(tag)}: {verdict} — {why}", soft_wrap=True)
    for rule in rules.quotas:
        if any(principal_matches(p, who) for p in rule.principals) and any(
            capability_matches(c, tag) for c in rule.capabilities
        ):
            console.print(
                f"quota: {rule.rate_per_s:g}/s, burst {rule.burst}, per {rule.scope}",
                soft_wrap=True,
            )


def _role(role: str) -> Role:
    if role not in ROLES:
        raise InvalidRequest(f"--role must be one of {', '.join(ROLES)}", code="invalid_arguments")
    return cast(Role, role)

"""`agent-reach`: run a coordinator, manage agents, invoke and explain routing, run the demo.

Every command that talks to a coordinator takes `--coordinator` (default
`AR_COORDINATOR_URL`, else http://127.0.0.1:8500). Errors print one red line with
their code, then the server's `problems` (field: reason) or how to pass a key, and exit
1; no command ever prints a traceback for them. `serve` refuses a bad setting in one
line and exits 2.
"""

from __future__ import annotations

import functools
import gc
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, ParamSpec, TypeVar, cast
from urllib.parse import quote, urlsplit

import httpx
import orjson
import structlog
import typer
import uvloop
from pydantic import TypeAdapter, ValidationError
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agent_reach.adapters.sidecar import Sidecar, SidecarConfig
from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.config import Settings, load_mapping, setting_problems
from agent_reach.demo import run_demo
from agent_reach.errors import (
    InvalidRequest,
    ReachError,
    StoreUnavailable,
    Unauthorized,
    error_from_body,
)
from agent_reach.model.access import AccessRule, CapabilityPattern
from agent_reach.model.agents import AgentSpec, InstanceView, normalize_capability
from agent_reach.model.decisions import RouteDecision, TextMatch
from agent_reach.model.keys import ROLES, Principal, Role
from agent_reach.observability.logging import configure_logging
from agent_reach.observability.traffic import Scrape, Traffic, parse_scrape, traffic
from agent_reach.routing.policy_source import PolicySource
from agent_reach.sdk.client import SyncReachClient
from agent_reach.security.access import (
    Action,
    capability_matches,
    decide_access,
    principal_matches,
)
from agent_reach.server import edge
from agent_reach.server.app import create_app
from agent_reach.server.edge_asgi import StartupFailed
from agent_reach.server.workers import check_workers, serve_workers
from agent_reach.troubleshooting.report import why_report

DEFAULT_COORDINATOR_URL = "http://127.0.0.1:8500"  # `agent-reach serve` listens on 8500
GC_THRESHOLDS = (50_000, 50, 100)  # generation 0 every 50k allocations instead of 700

_STATUS_STYLES = {"healthy": "green", "suspect": "yellow", "offline": "red"}

MEMORY_STATE_WARNING = (
    "state lives in this process's memory (AR_REGISTRY_BACKEND=memory): API keys, "
    "registrations, contexts and tasks vanish when it stops. To keep them, run it on Redis: "
    "bash scripts/ensure-redis.sh && AR_REGISTRY_BACKEND=redis agent-reach serve"
)
API_KEY_HINT = "pass a key with --api-key KEY or set AR_API_KEY=KEY (keys: agent-reach keys create)"

P = ParamSpec("P")
R = TypeVar("R")

app = typer.Typer(
    name="agent-reach",
    help="Agent-Reach: discovery, routing and delivery between agents.",
    no_args_is_help=True,
    add_completion=False,
)
agents_app = typer.Typer(
    help="Register, list and deregister agent instances.", no_args_is_help=True
)
app.add_typer(agents_app, name="agents")
keys_app = typer.Typer(help="Create, list and revoke API keys (needs an admin key).")
app.add_typer(keys_app, name="keys", no_args_is_help=True)
acl_app = typer.Typer(help="Explain access decisions of a policy file.")
app.add_typer(acl_app, name="acl", no_args_is_help=True)

CoordinatorUrl = Annotated[
    str,
    typer.Option("--coordinator", envvar="AR_COORDINATOR_URL", help="Base URL of the coordinator."),
]
ApiKey = Annotated[
    str | None,
    typer.Option("--api-key", envvar="AR_API_KEY", help="API key (Bearer); env AR_API_KEY."),
]


def reporting_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn Agent-Reach and validation errors into one red line and exit status 1."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except ReachError as exc:
            lines = [f"{exc.code}: {exc.message}", *_server_problems(exc)]
            if isinstance(exc, Unauthorized):
                lines.append(API_KEY_HINT)
        except ValidationError as exc:
            lines = [f"validation_error: {_problems(exc)}"]
        console = Console(stderr=True)
        console.print(f"[bold red]error[/] {escape(lines[0])}", soft_wrap=True)
        for line in lines[1:]:
            console.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
        raise typer.Exit(1)

    return run


@app.command()
@reporting_errors
def serve(
    host: Annotated[
        str | None, typer.Option(help="Interface to bind; default AR_HOST, else 127.0.0.1.")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to listen on; default AR_PORT, else 8500.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="TOML or YAML settings file."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            help="Coordinator processes sharing the port (SO_REUSEPORT), one per core; "
            "more than 1 needs the Redis backend."
        ),
    ] = 1,
) -> None:
    """Run the coordinator (settings from --config or AR_* variables; flags win).

    A bad setting is one line on stderr and exit status 2, before anything starts.
    """
    overrides: dict[str, Any] = {"host": host, "port": port}
    try:
        if config is not None:
            settings = Settings.from_file(config, **overrides)
        else:
            settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
        configure_logging(settings.log_level, json=settings.log_json)
        check_workers(settings, workers)
        coordinator = create_app(settings)  # reads the policy file
    except ValidationError as exc:
        _refuse_to_start(*setting_problems(exc))
    except ReachError as exc:
        _refuse_to_start(f"{exc.code}: {exc.message}")
    except OSError as exc:
        _refuse_to_start(f"{exc.filename}: {exc.strerror}")
    os.environ.pop("AR_ADMIN_KEY", None)  # kept only as a digest from here on
    os.environ.pop("AR_METRICS_TOKEN", None)  # likewise
    _announce_state(settings)
    if workers > 1:  # the workers get the settings as built here, secrets included
        raise typer.Exit(serve_workers(settings, workers, GC_THRESHOLDS))
    # Requests make little cyclic garbage; collecting less often, and never scanning the
    # long-lived objects of startup again, took p99 at 64 concurrent requests from ~30 ms
    # to ~12 ms (bench/overhead.py).
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        uvloop.run(edge.serve(coordinator, settings.host, settings.port))
    except StartupFailed as exc:
        reason = coordinator.startup_error
        if reason is None:  # not a setting: the whole story belongs in the log
            structlog.get_logger("agent_reach.server").error("startup_failed", error=str(exc))
            raise typer.Exit(edge.STARTUP_FAILURE) from None
        if isinstance(reason, StoreUnavailable):
            _refuse_to_start(f"{_state_location(settings)} did not answer: {reason.message}")
        _refuse_to_start(reason.message if isinstance(reason, ReachError) else str(reason))
    except OSError as exc:  # the port is taken or the host is not ours
        _refuse_to_start(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}")


def _announce_state(settings: Settings) -> None:
    """Say where state lives, and for memory what a restart loses and how to keep it."""
    log = structlog.get_logger("agent_reach.server")
    if settings.registry_backend == "memory":
        log.warning("state_in_memory", message=MEMORY_STATE_WARNING)
        return
    log.info(
        "state_backend",
        message=f"state lives in {_state_location(settings)}: it outlives this process "
        "and every coordinator on it shares it",
    )


def _state_location(settings: Settings) -> str:
    """Where the backend keeps state, without a password: `redis at host:port/db (prefix 'ar')`."""
    if settings.registry_backend != "redis":
        return f"the {settings.registry_backend} backend"
    parts = urlsplit(settings.redis_url)
    return (
        f"redis at {parts.hostname}:{parts.port or 6379}{parts.path or '/0'} "
        f"(AR_REDIS_URL, prefix {settings.redis_prefix!r})"
    )


def _refuse_to_start(*lines: str) -> NoReturn:
    """Say what is wrong with the settings, one line each, and exit with status 2."""
    for line in lines:
        print(line, file=sys.stderr)
    raise typer.Exit(2)


@agents_app.command("register")
@reporting_errors
def register_agent(
    file: Annotated[
        Path,
        typer.Argument(
            exists=True,
            dir_okay=False,
            help="JSON or YAML: the v1 body or the legacy `agent:` form.",
        ),
    ],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Register an agent instance described in FILE."""
    spec = AgentSpec.from_legacy(load_mapping(file))
    with SyncReachClient(coordinator, api_key=api_key) as client:
        view = client.register(spec)
    console = Console()
    console.print(f"registered [bold]{view.id}[/] at {escape(spec.transport.endpoint)}")
    console.print(instances_table([view]))
    console.print(
        f"the lease lasts its ttl, {spec.ttl:g} s: without a heartbeat (POST "
        f"/v1/agents/{escape(view.id)}/heartbeat) the instance leaves the pool after that; "
        "an SDK agent heartbeats by itself",
        soft_wrap=True,
        highlight=False,
    )


@agents_app.command("list")
@reporting_errors
def list_agents(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL, api_key: ApiKey = None
) -> None:
    """List instances with status, load, success rate and median latency."""
    with SyncReachClient(coordinator, api_key=api_key) as client:
        views = client.agents()
    Console().print(instances_table(views))


@agents_app.command("deregister")
@reporting_errors
def deregister_agent(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="Instance id.")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Take an instance out of the pool at once."""
    with SyncReachClient(coordinator, api_key=api_key) as client:
        client.deregister(agent_id)
    Console().print(f"deregistered [bold]{escape(agent_id)}[/]")


@app.command()
@reporting_errors
def invoke(
    capability: Annotated[str, typer.Argument(help="Capability tag, e.g. inventory.check.")],
    payload: Annotated[str, typer.Option(help="The payload as JSON.")] = "null",
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Route a request to the best live instance of CAPABILITY and print its answer."""
    try:
        body = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"--payload is not valid JSON: {exc}", code="invalid_json") from None
    with SyncReachClient(coordinator, api_key=api_key) as client:
        answer = client.invoke(capability, payload=body)
    console = Console()
    console.print(
        f"[bold]{answer.status}[/] from [bold cyan]{answer.agent_id}[/] "
        f"(request {answer.request_id}, trace {answer.trace_id})"
    )
    console.print_json(orjson.dumps(answer.result).decode())


@app.command()
@reporting_errors
def route(
    text: Annotated[str | None, typer.Argument(help="User text to route by meaning.")] = None,
    capability: Annotated[str | None, typer.Option(help="Capability tag to route.")] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Explain the routing decision for TEXT or a --capability; nothing is invoked."""
    if (text is None) == (capability is None):
        raise InvalidRequest("give TEXT or --capability (one of them)", code="invalid_arguments")
    with SyncReachClient(coordinator, api_key=api_key) as client:
        decision = client.route(capability, text=text)
    Console().print(decision_table(decision))


@app.command()
@reporting_errors
def demo(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show every answer in full.")
    ] = False,
) -> None:
    """Run the customer-service scenario on loopback: coordinator and agents in-process."""
    raise typer.Exit(run_demo(verbose=verbose))


@app.command()
@reporting_errors
def trace(
    trace_id: Annotated[str, typer.Argument(metavar="TRACE_ID", help="32 hex digits.")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Print a trace's hops as a tree with timings: route, attempts, nested calls."""
    document = orjson.loads(_call(coordinator, api_key, "GET", f"/v1/traces/{trace_id}"))
    Console().print(trace_tree(document))


@app.command()
@reporting_errors
def why(
    request_id: Annotated[str, typer.Argument(metavar="REQUEST_ID")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Walk one request: routing, registry, context, delivery; name the first wrong step."""
    path = f"/v1/requests/{quote(request_id, safe='')}/why"
    Console().print(why_report(orjson.loads(_call(coordinator, api_key, "GET", path))))


@app.command()
@reporting_errors
def top(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between refreshes.")] = 1.0,
    once: Annotated[bool, typer.Option(help="Print one frame (one interval) and exit.")] = False,
    api_key: ApiKey = None,
) -> None:
    """Live per-capability traffic: requests/s, errors/s, p50 and p99 latency (Ctrl-C stops).

    On a terminal the table is redrawn in place; piped or redirected, one table is
    printed per interval.
    """
    _scrape = functools.partial(_scrape_metrics, coordinator, api_key)
    console = Console()
    before = _scrape()
    if once:
        time.sleep(interval)
        console.print(traffic_table(traffic(before, _scrape()), coordinator))
        return
    try:
        if not console.is_terminal:
            while True:
                time.sleep(interval)
                after = _scrape()
                console.print(traffic_table(traffic(before, after), coordinator))
                console.file.flush()
                before = after
        with Live(traffic_table([], coordinator), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                after = _scrape()
                live.update(traffic_table(traffic(before, after), coordinator), refresh=True)
                before = after
    except KeyboardInterrupt:
        pass


@app.command()
@reporting_errors
def deadletters(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Newest entries to show.")] = 50,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """List dead-lettered requests (refused for good, never delivered again), newest first."""
    letters = orjson.loads(_call(coordinator, api_key, "GET", f"/v1/deadletters?limit={limit}"))
    table = Table(title=f"dead letters ({letters['count']} kept)", title_justify="left")
    for column in ("time", "reason", "request id", "capability", "hop", "trace id"):
        table.add_column(column, no_wrap=True)
    for item in letters["items"]:
        request = item.get("request", {})
        table.add_row(
            time.strftime("%H:%M:%S", time.localtime(item["time"])),
            item["reason"],
            item["request_id"],
            request.get("capability") or "(text)",
            str(item["hop"]),
            item["trace_id"],
        )
    Console().print(table)


@keys_app.command("create")
@reporting_errors
def create_key(
    principal: Annotated[str, typer.Option(help="Who the key is for, e.g. order-bot.")],
    domain: Annotated[
        str | None, typer.Option(help="Optional domain the policy's domain rules match.")
    ] = None,
    role: Annotated[str, typer.Option(help="caller, agent, observer or admin.")] = "caller",
    capability: Annotated[
        list[str] | None,
        typer.Option(
            "--capability",
            "-c",
            help="A capability pattern the key grants (repeatable): an agent key may "
            "register it, a caller key may invoke and route to it.",
        ),
    ] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Create an API key; it is printed once and never stored in plaintext."""
    body: dict[str, Any] = {"principal": principal, "role": role, "capabilities": capability or []}
    if domain is not None:
        body["domain"] = domain
    created = orjson.loads(_call(coordinator, api_key, "POST", "/v1/keys", body))
    console = Console()
    where = f", domain {escape(created['domain'])}" if created["domain"] else ""
    grants = ", ".join(created["capabilities"]) or "none"
    console.print(
        f"key for [bold]{escape(created['principal'])}[/] ({created['role']}{where}, "
        f"grants: {escape(grants)}), id {created['key_id']} — shown once, keep it:",
        soft_wrap=True,
    )
    console.print(created["key"], soft_wrap=True, highlight=False)


@keys_app.command("list")
@reporting_errors
def list_keys(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL, api_key: ApiKey = None
) -> None:
    """Key ids with their principals (never the keys)."""
    table = Table(title="API keys", title_justify="left")
    for column in ("key id", "principal", "domain", "role", "grants", "revoked"):
        table.add_column(column, no_wrap=column != "grants")
    for key in orjson.loads(_call(coordinator, api_key, "GET", "/v1/keys"))["keys"]:
        table.add_row(
            key["key_id"],
            escape(key["principal"]),
            escape(key["domain"] or "-"),
            key["role"],
            escape(", ".join(key["capabilities"]) or "-"),
            "[red]yes[/]" if key["revoked"] else "no",
        )
    Console().print(table)


@keys_app.command("revoke")
@reporting_errors
def revoke_key(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Revoke a key: every coordinator refuses it within a second."""
    _call(coordinator, api_key, "DELETE", f"/v1/keys/{key_id}")
    Console().print(f"revoked [bold]{escape(key_id)}[/]")


@acl_app.command("check")
@reporting_errors
def acl_check(
    principal: Annotated[str, typer.Argument(metavar="PRINCIPAL", help="The principal's name.")],
    capability: Annotated[str, typer.Argument(metavar="CAPABILITY")],
    domain: Annotated[str | None, typer.Option(help="The principal's domain, if any.")] = None,
    role: Annotated[str, typer.Option(help="caller, agent, observer or admin.")] = "caller",
    grant: Annotated[
        list[str] | None,
        typer.Option(
            "--grant",
            "-g",
            help="A capability pattern the principal's key carries (repeatable), as given "
            "to `keys create --capability`.",
        ),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(envvar="AR_POLICY_FILE", exists=True, dir_okay=False, help="Policy file."),
    ] = None,
) -> None:
    """Explain whether PRINCIPAL may invoke and register CAPABILITY: which key grant or
    policy rule decided, and its quotas."""
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


def trace_tree(document: dict[str, Any]) -> Tree:
    """The spans of a `GET /v1/traces/{id}` answer as a tree, children in start order."""
    summary = document["summary"]
    tree = Tree(
        Text.assemble(
            ("trace ", "bold"),
            document["trace_id"],
            "  ",
            _status_text(summary["status"], summary["is_error"]),
            f"  {summary['duration_ms']:.2f} ms",
        )
    )
    spans = document["spans"]
    ids = {s["span_id"] for s in spans}
    nodes: dict[str | None, Tree] = {}
    for span in spans:  # start order, so a parent always comes before its children
        parent = span["parent_id"] if span["parent_id"] in ids else None
        nodes[span["span_id"]] = nodes.get(parent, tree).add(_span_label(span))
    return tree


def traffic_table(rows: list[Traffic], coordinator: str) -> Table:
    """One frame of `agent-reach top`."""
    table = Table(title=f"traffic at {coordinator}", title_justify="left")
    table.add_column("capability", style="bold", no_wrap=True)
    for header in ("req/s", "errors/s", "total", "errors", "p50 ms", "p99 ms"):
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(
            row.capability or "-",
            f"{row.requests_per_s:.1f}",
            Text(f"{row.errors_per_s:.1f}", style="red" if row.errors_per_s else ""),
            str(row.total),
            str(row.errors),
            _optional(row.p50_ms, "{:.1f}"),
            _optional(row.p99_ms, "{:.1f}"),
        )
    return table


def _span_label(span: dict[str, Any]) -> Text:
    label = Text.assemble((f"{span['kind']:<8}", "dim"), span["name"] or "-")
    if span["agent_id"]:
        label.append(f" → {span['agent_id']}", style="cyan")
    if span["kind"] == "attempt":
        label.append(f"  attempt {span['attempt']}")
        if span["note"]:
            label.append(f" ({span['note']})", style="yellow")
    elif span["kind"] == "route" and span["note"]:
        label.append(f"  rule {span['note']}", style="dim")
    label.append("  ")
    label.append_text(_status_text(span["status"], span["is_error"]))
    label.append(f"  +{span['offset_ms']:.2f} ms  {span['duration_ms']:.2f} ms", style="dim")
    return label


def _status_text(status: str, is_error: bool) -> Text:
    return Text(status, style="bold red" if is_error else "bold green")


def _call(
    coordinator: str,
    api_key: str | None,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
) -> bytes:
    """One call to the coordinator; error answers raise their `ReachError` class."""
    url = coordinator.rstrip("/") + path
    sent = {**(headers or {}), **({"authorization": f"Bearer {api_key}"} if api_key else {})}
    try:
        response = httpx.request(method, url, json=body, headers=sent, timeout=10)
    except httpx.TransportError as exc:
        raise ReachError(
            f"could not reach the coordinator at {coordinator}: {exc}",
            code="coordinator_unreachable",
        ) from None
    if not response.is_success:
        try:
            body = response.json()
        except ValueError:
            body = None
        raise error_from_body(response.status_code, body)
    return response.content


def _scrape_metrics(coordinator: str, api_key: str | None) -> Scrape:
    text = _call(coordinator, api_key, "GET", "/metrics").decode()
    return parse_scrape(text, SYSTEM_CLOCK.monotonic())


def instances_table(views: list[InstanceView]) -> Table:
    """Instances with capabilities, status, load, success rate and p50 latency."""
    table = Table(title="agents", title_justify="left")
    table.add_column("id", no_wrap=True, style="bold")
    table.add_column("capabilities")
    table.add_column("status", no_wrap=True)
    table.add_column("load", justify="right", no_wrap=True)
    table.add_column("success", justify="right", no_wrap=True)
    table.add_column("p50 ms", justify="right", no_wrap=True)
    for view in views:
        stats = view.stats
        table.add_row(
            view.id,
            ", ".join(view.capabilities),
            f"[{_STATUS_STYLES[view.status]}]{view.status}[/]",
            f"{stats.load:.2f}",
            _optional(stats.success_rate, "{:.0%}"),
            _optional(stats.latency_ms_p50, "{:.1f}"),
        )
    return table


def decision_table(decision: RouteDecision) -> Table:
    """Every candidate with each factor and its score; the chosen one highlighted."""
    weights = decision.weights
    factors = list(weights) + sorted(
        {name for c in decision.candidates for name in c.factors} - set(weights)
    )
    chosen = decision.agent_id or "none"
    caption = f"rule [bold]{decision.rule}[/] · policy {decision.policy_version}"
    if decision.refused_by is not None:
        caption += f" (refused by {decision.refused_by})"
    if decision.margin is not None:
        caption += f" · margin {decision.margin:.3f}"
    if decision.text is not None:
        caption += "\n" + _text_explained(decision.text, decision.margin)
    table = Table(
        title=f"route decision: {chosen}",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    table.add_column("", no_wrap=True)
    table.add_column("capability", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("matchers", no_wrap=True)
    for name in factors:
        weight = weights.get(name)
        header = name if weight is None else f"{name}\n×{weight:.2f}"
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    for candidate in decision.candidates:
        is_chosen = (candidate.capability, candidate.agent_id) == (
            decision.capability,
            decision.agent_id,
        )
        table.add_row(
            "→" if is_chosen else "",
            candidate.capability,
            candidate.agent_id,
            " ".join(f"{name} {score:.2f}" for name, score in candidate.match.items()),
            *(_optional(candidate.factors.get(name), "{:.3f}") for name in factors),
            f"{candidate.score:.3f}",
            style="bold green" if is_chosen else None,
        )
    return table


def _text_explained(text: TextMatch, margin: float | None) -> str:
    """How a text was matched: matchers, calibration, thresholds, what was learned, params."""
    gap = "-" if margin is None else f"{margin:.3f}"
    lines = [
        f"matchers {' + '.join(text.matchers) or 'none'}"
        + (f" (pending: {', '.join(text.pending)})" if text.pending else "")
        + (" · calibrated on the catalog" if text.calibrated else " · not calibrated (few cards)"),
        f"thresholds: match ≥ {text.min_confidence:g}, gap to the next capability {gap}"
        f" ≥ {text.margin:g} (calibrated confidences, the match column)",
    ]
    if text.learned:
        lines.append(f"learned example {text.learned['id']} → {text.learned['capability']}")
    if text.not_mine:
        lines.append(f"said not mine (421) before: {', '.join(text.not_mine)}")
    if text.params is not None:
        lines.append(f"params {orjson.dumps(text.params).decode()}")
    return "\n".join(lines)


def _optional(value: float | None, template: str) -> str:
    return "-" if value is None else template.format(value)


def _server_problems(exc: ReachError) -> list[str]:
    """The `problems` of a server's validation error, one `field: reason` each."""
    problems = exc.details.get("problems")
    if not isinstance(problems, list):
        return []
    return [
        f"{p.get('field') or 'body'}: {p.get('problem')}" for p in problems if isinstance(p, dict)
    ]


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'body'}: {error['msg']}"
        for error in exc.errors()
    )


policy_app = typer.Typer(help="Show, replace and audit the policy in force (at run time).")
app.add_typer(policy_app, name="policy", no_args_is_help=True)


@policy_app.command("show")
@reporting_errors
def show_policy(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL, api_key: ApiKey = None
) -> None:
    """The policy in force: version, revision, where it came from, and the policy as JSON."""
    status = orjson.loads(_call(coordinator, api_key, "GET", "/v1/policy"))
    console = Console()
    console.print(_policy_line(status), soft_wrap=True, highlight=False)
    console.print_json(orjson.dumps(status["policy"]).decode())


@policy_app.command("set")
@reporting_errors
def set_policy(
    file: Annotated[
        Path,
        typer.Argument(exists=True, dir_okay=False, help="TOML or YAML: the policy file's schema."),
    ],
    if_match: Annotated[
        str | None,
        typer.Option(help="Replace only if this version is still in force (else 409)."),
    ] = None,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Replace the policy on every coordinator with FILE (needs an admin key)."""
    headers = {} if if_match is None else {"if-match": if_match}
    answer = orjson.loads(
        _call(coordinator, api_key, "PUT", "/v1/policy", load_mapping(file), headers=headers)
    )
    change = answer["change"]
    Console().print(
        f"policy {change['before'] or '-'} → {change['after']} (revision {change['revision']})",
        soft_wrap=True,
        highlight=False,
    )


@policy_app.command("changes")
@reporting_errors
def policy_changes(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Newest changes to show.")] = 20,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """The policy's audit log, newest first: who, when, versions before and after (admin)."""
    answer = orjson.loads(_call(coordinator, api_key, "GET", f"/v1/policy/changes?limit={limit}"))
    table = Table(title="policy changes", title_justify="left")
    for column in ("revision", "time", "by", "source", "before", "after"):
        table.add_column(column, no_wrap=True)
    for change in answer["changes"]:
        table.add_row(
            str(change["revision"]),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(change["at"])),
            escape(change["by"]),
            change["source"],
            change["before"] or "-",
            change["after"],
        )
    Console().print(table)


def _policy_line(status: dict[str, Any]) -> str:
    by = f" by {status['changed_by']}" if status.get("changed_by") else ""
    line = (
        f"policy {status['version']} (revision {status['revision']}, source {status['source']}{by})"
    )
    if status.get("last_error"):
        line += f"; last rejected edit: {status['last_error']}"
    return line


@agents_app.command("import-a2a")
@reporting_errors
def import_a2a(
    url: Annotated[str, typer.Argument(help="The A2A agent's base URL or its agent card URL.")],
    agent_id: Annotated[
        str | None, typer.Option("--id", help="Instance id; default: from the URL's host and port.")
    ] = None,
    ttl: Annotated[
        float,
        typer.Option(help="Lease in seconds; an A2A agent does not heartbeat: import it again."),
    ] = 86_400.0,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Register an A2A agent: the coordinator reads its card; its skills become capabilities."""
    parts = urlsplit(url)
    name = agent_id or re.sub(r"[^A-Za-z0-9._-]+", "-", f"a2a-{parts.netloc}").strip("-")
    body = {"id": name, "ttl": ttl, "transport": {"type": "a2a", "endpoint": url}}
    with SyncReachClient(coordinator, api_key=api_key) as client:
        view = client.register(body)
    console = Console()
    console.print(f"imported [bold]{escape(view.id)}[/]: {escape(', '.join(view.capabilities))}")
    console.print(instances_table([view]))


@app.command()
@reporting_errors
def sidecar(
    config: Annotated[
        Path, typer.Option(exists=True, dir_okay=False, help="The sidecar's YAML file.")
    ],
) -> None:
    """Run a sidecar: the agent for an unchanged JSON, XML or SOAP service next to it."""
    configure_logging("info", json=True)
    Sidecar(SidecarConfig.load(config)).serve()


workflow_app = typer.Typer(help="Run workflows (DAGs of capability steps) and show their runs.")
app.add_typer(workflow_app, name="workflow", no_args_is_help=True)
# What a saved definition has beyond what a run takes inline.
_DEFINITION_ONLY = ("name", "description", "inputs")


@workflow_app.command("run")
@reporting_errors
def run_workflow(
    file: Annotated[Path, typer.Argument(help="The workflow as YAML or JSON.", exists=True)],
    input_json: Annotated[str, typer.Option("--input", help="The run's input as JSON.")] = "{}",
    run_async: Annotated[
        bool, typer.Option("--async", help="Print the run id and return.")
    ] = False,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Run the workflow in FILE and print its steps as a tree with timings."""
    document = load_mapping(file)
    if isinstance(document.get("workflow"), dict):
        document = document["workflow"]  # the `workflow: {...}` file form
    try:
        given = orjson.loads(input_json)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"--input is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(given, dict):
        raise InvalidRequest("--input must be a JSON object", code="invalid_input")
    inputs = document.get("inputs") or {}
    defaults = {n: s.get("default") for n, s in inputs.items() if isinstance(s, dict)}
    body = {k: v for k, v in document.items() if k not in _DEFINITION_ONLY}
    body["input"] = {**{k: v for k, v in defaults.items() if v is not None}, **given}
    body["mode"] = "async" if run_async else "sync"
    view = orjson.loads(_call(coordinator, api_key, "POST", "/v1/workflows/run", body))
    Console().print(workflow_tree(view))


@workflow_app.command("show")
@reporting_errors
def show_workflow(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id.")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Print one of your runs: its steps as a tree (by dependency) with their timings."""
    view = orjson.loads(_call(coordinator, api_key, "GET", f"/v1/workflows/{run_id}"))
    Console().print(workflow_tree(view))


@workflow_app.command("cancel")
@reporting_errors
def cancel_workflow(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id.")],
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """Cancel one of your runs: no step starts after this; steps in flight finish."""
    view = orjson.loads(_call(coordinator, api_key, "POST", f"/v1/workflows/{run_id}/cancel"))
    Console().print(f"run {view['run_id']} cancelled (it was {view['status']})")


def workflow_tree(view: dict[str, Any]) -> Tree:
    """A run's steps under the run, each under the last of its dependencies to end."""
    steps = view["steps"]
    ended = [s["ended_ms"] for s in steps if s.get("ended_ms") is not None]
    tree = Tree(
        Text.assemble(
            ("run ", "bold"),
            view["run_id"],
            f"  {view.get('intent') or view.get('name') or ''}  ",
            _status_text(view["status"], view["status"] == "error"),
            f"  {max(ended, default=0.0):.1f} ms",
        )
    )
    by_id = {s["id"]: s for s in steps}
    nodes: dict[str, Tree] = {}
    for step in sorted(steps, key=lambda s: (s.get("started_ms") is None, s.get("started_ms"))):
        parents = [d for d in step.get("depends_on") or [] if d in nodes]
        parent = max(parents, key=lambda d: by_id[d].get("ended_ms") or 0.0, default=None)
        nodes[step["id"]] = (nodes[parent] if parent else tree).add(_step_label(step))
    return tree


def _step_label(step: dict[str, Any]) -> Text:
    label = Text.assemble((f"{step['id']:<10}", "bold"), step.get("capability") or "-")
    if step.get("agent_id"):
        label.append(f" → {step['agent_id']}", style="cyan")
    label.append("  ")
    status = step["status"]
    label.append_text(_status_text(status, status in ("failed", "skipped", "parked")))
    if step.get("fallback_used"):
        label.append(f" (fallback {step['fallback_used']})", style="yellow")
    started, ended = step.get("started_ms"), step.get("ended_ms")
    if started is not None and ended is not None:
        label.append(f"  +{started:.1f} ms  {ended - started:.1f} ms", style="dim")
    if step.get("reason"):
        label.append(f"  {step['reason']}", style="dim")
    return label

"""What every command shares: the coordinator and key options, calls, error reporting.

Commands import only what they use: typer and rich here; httpx, the SDK's client and its
models, the settings and file loaders when a command runs (`call`, `reach_client`,
`read_mapping`), so `agent-reach --help` starts in a fraction of the coordinator's import.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer
from pydantic_core import ValidationError  # pydantic's own, without importing pydantic
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperCommand, TyperGroup, TyperOption

from agent_reach.errors import (
    ReachError,
    Unauthorized,
    error_from_body,
)

if TYPE_CHECKING:
    from agent_reach.sdk.client import SyncReachClient

DEFAULT_COORDINATOR_URL = "http://127.0.0.1:8500"  # `agent-reach serve` listens on 8500
CALL_TIMEOUT_S = 10.0  # a management call; `invoke` waits as long as its request may take

API_KEY_HINT = "pass a key with --api-key KEY or set AR_API_KEY=KEY (keys: agent-reach keys create)"

P = ParamSpec("P")
R = TypeVar("R")

CoordinatorUrl = Annotated[
    str,
    typer.Option(
        "--coordinator",
        metavar="URL",
        envvar="AR_COORDINATOR_URL",
        help="Base URL of the coordinator.",
    ),
]
ApiKey = Annotated[
    str | None,
    typer.Option(
        "--api-key", metavar="KEY", envvar="AR_API_KEY", help="API key, sent as a Bearer token."
    ),
]


_REQUIRED = re.compile(r"^\{([A-Z_]+)\}(\.\.\.)?$")


def _bare_flags(params: list[Any]) -> list[Any]:
    """Typer 0.29's rich help writes an option's type beside it, and for a flag that type
    is `<bool>` (its own `--help` too: the type column reads `metavar`, else the type,
    and never asks whether the option takes a value). An empty metavar leaves flags bare.
    """
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class Command(TyperCommand):
    """A command whose help shows flags without a type, and its usage line a required
    argument bare, an optional one in brackets (`why REQUEST_ID`, `route [TEXT]`), as
    POSIX utilities write them; Typer 0.29 puts a required one in braces."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _bare_flags(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [_REQUIRED.sub(r"\1\2", piece) for piece in super().collect_usage_pieces(ctx)]


class Group(TyperGroup):
    """A group of commands whose help shows flags without a type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _bare_flags(super().get_params(ctx))


def commands(help_text: str) -> typer.Typer:
    """A group of commands, as every group of `agent-reach` is made."""
    return typer.Typer(cls=Group, help=help_text, no_args_is_help=True)


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


def status_text(status: str, is_error: bool) -> Text:
    return Text(status, style="bold red" if is_error else "bold green")


def call(
    coordinator: str,
    api_key: str | None,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = CALL_TIMEOUT_S,
) -> bytes:
    """One call to the coordinator; error answers raise their `ReachError` class."""
    import httpx  # on the first call: `--help` and usage errors never need it

    url = coordinator.rstrip("/") + path
    sent = {**(headers or {}), **({"authorization": f"Bearer {api_key}"} if api_key else {})}
    try:
        response = httpx.request(method, url, json=body, headers=sent, timeout=timeout_s)
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


def reach_client(coordinator: str, api_key: str | None) -> SyncReachClient:
    """The SDK's blocking client (imported here: its models load only when a command calls)."""
    from agent_reach.sdk.client import SyncReachClient

    return SyncReachClient(coordinator, api_key=api_key)


def read_mapping(path: Path) -> dict[str, Any]:
    """A JSON, YAML or TOML file as a mapping (`config.load_mapping`, imported on use)."""
    from agent_reach.config import load_mapping

    return load_mapping(path)


def optional(value: float | None, template: str) -> str:
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

"""`agent-reach top` and `deadletters`: live traffic and refused requests."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agent_reach.cli.common import (
    DEFAULT_COORDINATOR_URL,
    ApiKey,
    CoordinatorUrl,
    call,
    optional,
    reporting_errors,
)
from agent_reach.clock import SYSTEM_CLOCK

if TYPE_CHECKING:
    from agent_reach.observability.traffic import Scrape, Traffic


@reporting_errors
def top(
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    interval: Annotated[
        float, typer.Option(metavar="SECONDS", min=0.1, help="Seconds between refreshes.")
    ] = 1.0,
    once: Annotated[
        bool, typer.Option("--once", help="Print one frame (one interval) and exit.")
    ] = False,
    api_key: ApiKey = None,
) -> None:
    """Live per-capability traffic: requests/s, errors/s, p50 and p99 latency (Ctrl-C stops).

    On a terminal the table is redrawn in place; piped or redirected, one table is
    printed per interval.
    """
    from agent_reach.observability.traffic import traffic  # prometheus' parser, on use

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


@reporting_errors
def deadletters(
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=1000, help="Newest entries to show.")
    ] = 50,
    coordinator: CoordinatorUrl = DEFAULT_COORDINATOR_URL,
    api_key: ApiKey = None,
) -> None:
    """List dead-lettered requests (refused for good, never delivered again), newest first."""
    letters = orjson.loads(call(coordinator, api_key, "GET", f"/v1/deadletters?limit={limit}"))
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
            optional(row.p50_ms, "{:.1f}"),
            optional(row.p99_ms, "{:.1f}"),
        )
    return table


def _scrape_metrics(coordinator: str, api_key: str | None) -> Scrape:
    from agent_reach.observability.traffic import parse_scrape

    text = call(coordinator, api_key, "GET", "/metrics").decode()
    return parse_scrape(text, SYSTEM_CLOCK.monotonic())

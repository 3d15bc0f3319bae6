"""What each translation costs: the sidecar hop, a SOAP round trip, an A2A send.

    .venv/bin/python bench/adapters.py [--requests 300] [--json bench/results/adapters.json]

Real peers on 127.0.0.1, the same ones the adapter tests reach: the Node Express order
service (needs node; `express` is installed into tests/adapters/peers on first use),
the spyne SOAP inventory service and an official a2a-sdk v1.0 agent, with a memory
coordinator. One request at a time (latency, not throughput); the paths of one table
take turns request by request, so the machine's noise falls on all of them alike.

  JSON:  service direct | a delivery to the sidecar | coordinator -> sidecar -> service |
         coordinator `http-template` transport -> service
  SOAP:  envelope posted direct | coordinator `soap` transport | coordinator -> sidecar
  A2A:   SendMessage direct | coordinator /v1/invoke -> agent | coordinator /a2a -> agent
  SSE:   a streaming Starlette agent: its first event and its end, posted direct |
         through coordinator /v1/invoke with `Accept: text/event-stream`

Prints a table (p50/p90 in ms and the p50 added over the direct call) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

PEERS = Path(__file__).resolve().parents[1] / "tests" / "adapters"
sys.path.insert(0, str(PEERS))

from peers.a2a_agents import start_travel_agent  # noqa: E402
from peers.foreign import express_service  # noqa: E402
from peers.soap_inventory import NAMESPACE, soap_service  # noqa: E402
from peers.sse_agents import python_sse_agent  # noqa: E402
from sidecar_kit import running_sidecar  # noqa: E402

from agent_reach.config import Settings  # noqa: E402
from agent_reach.testing.servers import run_coordinator  # noqa: E402

WARMUP = 30
ENVELOPE = (
    '<?xml version="1.0" encoding="utf-8"?><soap:Envelope '
    'xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>'
    f'<tns:CheckStock xmlns:tns="{NAMESPACE}"><tns:sku>SKU-1</tns:sku></tns:CheckStock>'
    "</soap:Body></soap:Envelope>"
)
SOAP = {
    "soap_action": "CheckStock",
    "body": f'<tns:CheckStock xmlns:tns="{NAMESPACE}"><tns:sku>{{{{ payload.sku }}}}</tns:sku>'
    "</tns:CheckStock>",
    "response": {
        "namespaces": {"tns": NAMESPACE},
        "map": {"in_stock": "number(//tns:CheckStockResult)"},
    },
}
ORDER = {
    "method": "GET",
    "path": "/api/orders/{{ payload.order_id }}",
    "response": {"map": "data.order"},
}
Call = Callable[[], httpx.Response]
STREAMS: dict[str, Callable[[], Any]] = {}  # the streamed paths, filled by `_setup`
SSE_TITLE = "SSE (a streaming Starlette agent, three events)"


def _delivery(capability: str, payload: Any, n: int) -> dict[str, Any]:
    return {
        "request_id": f"bench-{n}",
        "capability": capability,
        "payload": payload,
        "trace_id": "0" * 32,
        "hop": 4,
    }


def measure(paths: dict[str, Call], requests: int) -> dict[str, list[float]]:
    """Each path `requests` times, taking turns; milliseconds per request."""
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for round_ in range(WARMUP + requests):
        for name, call in paths.items():
            started = time.perf_counter()
            response = call()
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code >= 300:
                raise RuntimeError(f"{name}: HTTP {response.status_code} {response.text[:300]}")
            if round_ >= WARMUP:
                samples[name].append(elapsed)
    return samples


def measure_streams(paths: dict[str, Callable[[], Any]], requests: int) -> dict[str, list[float]]:
    """Each streamed path `requests` times, taking turns: milliseconds to the first
    event (`<path> first event`) and to the stream's end (`<path> whole stream`)."""
    samples: dict[str, list[float]] = {}
    for name in paths:
        samples[f"{name}: first event"] = []
        samples[f"{name}: whole stream"] = []
    for round_ in range(WARMUP + requests):
        for name, open_stream in paths.items():
            started = time.perf_counter()
            with open_stream() as response:
                lines = response.iter_lines()
                while not next(lines).startswith("data:"):
                    pass
                first = time.perf_counter()
                for _ in lines:
                    pass
            ended = time.perf_counter()
            if response.status_code != 200:
                raise RuntimeError(f"{name}: HTTP {response.status_code}")
            if round_ >= WARMUP:
                samples[f"{name}: first event"].append((first - started) * 1000)
                samples[f"{name}: whole stream"].append((ended - started) * 1000)
    return samples


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1]


@contextmanager
def _setup() -> Iterator[dict[str, dict[str, Call]]]:
    with ExitStack() as stack:
        url, _ = stack.enter_context(run_coordinator(Settings(decision_log="off", auth="off")))
        http = stack.enter_context(httpx.Client(base_url=url, timeout=10))
        direct = stack.enter_context(httpx.Client(timeout=10))
        express = stack.enter_context(express_service())
        soap_url, _ = stack.enter_context(soap_service())
        sidecar_config = {
            "coordinator": url,
            "agent": {"id": "orders-sidecar"},
            "service": {"url": express, "health_url": f"{express}/health"},
            "capabilities": [{"capability": "order.status", **ORDER}],
        }
        _, sidecar = stack.enter_context(running_sidecar(sidecar_config))
        soap_sidecar = {
            "coordinator": url,
            "agent": {"id": "erp-sidecar"},
            "service": {"url": soap_url, "health_url": f"{soap_url}?wsdl"},
            "capabilities": [{"capability": "erp.stock.sidecar", "kind": "soap", **SOAP}],
        }
        stack.enter_context(running_sidecar(soap_sidecar))
        for body in (
            {
                "id": "orders-direct",
                "capabilities": ["order.direct"],
                "transport": {"type": "http-template", "endpoint": express, **ORDER},
            },
            {
                "id": "erp-direct",
                "capabilities": ["erp.stock"],
                "transport": {"type": "soap", "endpoint": soap_url, **SOAP},
            },
        ):
            assert http.post("/v1/agents", json=body).status_code == 201
        agent, _ = start_travel_agent("1.0")
        stack.callback(agent.stop)
        assert (
            http.post(
                "/v1/agents",
                json={"id": "travel", "transport": {"type": "a2a", "endpoint": agent.url}},
            ).status_code
            == 201
        )
        counter = iter(range(10**9))

        def invoke(capability: str, payload: Any = None, text: str | None = None) -> Call:
            return lambda: http.post(
                "/v1/invoke", json={"capability": capability, "payload": payload, "text": text}
            )

        def a2a_body(n: int, capability: str | None) -> dict[str, Any]:
            metadata = {"capability": capability} if capability else {}
            return {
                "jsonrpc": "2.0",
                "id": n,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": f"m-{n}",
                        "role": "ROLE_USER",
                        "parts": [{"text": "Hangzhou?"}],
                        "metadata": metadata,
                    }
                },
            }

        sse = stack.enter_context(python_sse_agent())
        assert (
            http.post(
                "/v1/agents",
                json={
                    "id": "streamer",
                    "capabilities": ["chat.stream"],
                    "transport": {"type": "http", "endpoint": f"{sse}/invoke"},
                },
            ).status_code
            == 201
        )
        accept = {"accept": "text/event-stream"}
        streamed = {"words": ["one", "two", "three"], "wait": False}
        streams: dict[str, Callable[[], Any]] = {
            "agent direct": lambda: direct.stream(
                "POST",
                f"{sse}/invoke",
                json=_delivery("chat.stream", streamed, next(counter)),
                headers=accept,
            ),
            "coordinator /v1/invoke": lambda: http.stream(
                "POST",
                "/v1/invoke",
                json={"capability": "chat.stream", "payload": streamed},
                headers=accept,
            ),
        }
        STREAMS.update(streams)
        v1 = {"A2A-Version": "1.0"}
        yield {
            "JSON (Express)": {
                "service direct": lambda: direct.get(f"{express}/api/orders/A-100"),
                "delivery to the sidecar": lambda: direct.post(
                    f"{sidecar}/invoke",
                    json=_delivery("order.status", {"order_id": "A-100"}, next(counter)),
                ),
                "coordinator -> sidecar": invoke("order.status", {"order_id": "A-100"}),
                "coordinator http-template": invoke("order.direct", {"order_id": "A-100"}),
            },
            "SOAP (spyne)": {
                "envelope direct": lambda: direct.post(
                    soap_url,
                    content=ENVELOPE,
                    headers={"content-type": "text/xml", "soapaction": '"CheckStock"'},
                ),
                "coordinator soap transport": invoke("erp.stock", {"sku": "SKU-1"}),
                "coordinator -> sidecar": invoke("erp.stock.sidecar", {"sku": "SKU-1"}),
            },
            "A2A (a2a-sdk v1.0 agent)": {
                "SendMessage direct": lambda: direct.post(
                    f"{agent.url}/rpc", json=a2a_body(next(counter), "weather"), headers=v1
                ),
                "coordinator /v1/invoke": invoke("weather", None, "Hangzhou?"),
                "coordinator /a2a": lambda: http.post(
                    "/a2a", json=a2a_body(next(counter), "weather"), headers=v1
                ),
            },
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--json", type=Path, default=Path("bench/results/adapters.json"))
    args = parser.parse_args()
    console = Console()
    report: dict[str, Any] = {
        "machine": platform.platform(),
        "requests": args.requests,
        "tables": {},
    }
    with _setup() as tables:
        for title, paths in [*tables.items(), (SSE_TITLE, STREAMS)]:
            if title == SSE_TITLE:
                samples = measure_streams(paths, args.requests)
                samples = {  # first events first: the direct first event is the base
                    name: samples[name]
                    for name in sorted(samples, key=lambda n: ("whole" in n, "coordinator" in n))
                }
            else:
                samples = measure(paths, args.requests)
            base = statistics.median(next(iter(samples.values())))
            table = Table(title=title, title_justify="left")
            for column in ("path", "p50 ms", "p90 ms", "added p50 ms"):
                table.add_column(column, justify="left" if column == "path" else "right")
            rows = []
            for name, values in samples.items():
                p50, p90 = statistics.median(values), _p(values, 0.9)
                rows.append(
                    {
                        "path": name,
                        "p50_ms": round(p50, 3),
                        "p90_ms": round(p90, 3),
                        "added_p50_ms": round(p50 - base, 3),
                    }
                )
                table.add_row(name, f"{p50:.2f}", f"{p90:.2f}", f"{p50 - base:+.2f}")
            console.print(table)
            report["tables"][title] = rows
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

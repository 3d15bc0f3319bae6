"""bench/overhead.py: ratios come from each repeat's own runs, seconds apart."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "overhead.py"


def _runs(bench: ModuleType, concurrency: int, rps: dict[str, list[float]]) -> list[object]:
    return [
        bench.Result(target, concurrency, value, 1.0, 2.0, 3.0, 0, 0, 10.0, repeat)
        for target, values in rps.items()
        for repeat, value in enumerate(values)
    ]


def test_each_repeat_is_its_own_ratio_and_the_median_of_them_decides(bench):
    # The machine slows down between repeats: the coordinator's req/s halves, nginx's
    # barely moves. Repeat by repeat the coordinator makes 0.22, 0.21 and 0.20 of nginx.
    runs = _runs(
        bench,
        64,
        {
            "direct": [100_000.0, 100_000.0, 100_000.0],
            "nginx": [40_000.0, 40_000.0, 20_000.0],
            "coordinator": [8_800.0, 8_400.0, 4_000.0],
        },
    )
    [row] = bench.summarize(runs)
    assert row.nginx_share_runs == [0.22, 0.21, 0.2]
    assert row.coordinator_over_nginx == pytest.approx(0.21)
    assert row.goal_met is True  # the ratio of the medians, 8,400 / 40,000, is also 0.21
    # When they disagree, the repeats' own ratios count:
    runs = _runs(
        bench,
        64,
        {
            "direct": [100_000.0] * 3,
            "nginx": [44_000.0, 30_000.0, 30_000.0],
            "coordinator": [8_800.0, 6_300.0, 6_000.0],
        },
    )
    [row] = bench.summarize(runs)
    assert row.nginx_share_runs == [0.2, 0.21, 0.2]
    assert row.coordinator_over_nginx == pytest.approx(0.2)  # not 6,300 / 30,000 = 0.21
    [coordinator] = [r for r in bench.medians(runs) if r.target == "coordinator"]
    assert coordinator.rps == 6_300.0


def test_the_c64_goal_needs_the_share_and_the_p99(bench):
    runs = _runs(bench, 64, {"direct": [100_000.0], "nginx": [40_000.0], "coordinator": [9_000.0]})
    for run in runs:
        run.p99_ms = 25.0
    [row] = bench.summarize(runs)
    assert row.coordinator_over_nginx == pytest.approx(0.225)
    assert row.goal_met is False  # p99 over 20 ms


def test_the_tls_variant_secures_both_of_nginxs_sides(bench):
    plain = bench.nginx_conf(False)
    secured = bench.nginx_conf(True)
    assert plain == bench.NGINX_CONF
    for before, after in bench.NGINX_TLS.items():
        assert before in plain and before not in secured
        assert after in secured
    text = secured.format(tmp="/t", agent_port=1, port=2, workers=1, ca="C", cert="P", key="K")
    assert "listen 127.0.0.1:2 ssl;" in text and "proxy_pass https://agent;" in text
    assert "proxy_ssl_verify on;" in text and "proxy_ssl_trusted_certificate C;" in text


def test_the_echo_agent_serves_https_with_the_runs_certificate(bench, tmp_path):
    import http.client
    import subprocess
    import sys

    tls = bench.make_tls_files(tmp_path)
    [port] = bench.free_ports(1)
    agent = subprocess.Popen(
        [sys.executable, str(BENCH.with_name("echo_agent.py")), "--port", str(port),
         "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        bench.wait_healthy(
            "echo agent", agent, port, "/health", tmp_path / "none.log", tls=tls.client_context()
        )
        assert bench.http_call(port, "POST", "/invoke", bench.BODY, tls=tls.client_context()) == (
            200,
            b'{"result":{"echo":"pong","ok":true}}',
        )
        with pytest.raises((OSError, http.client.HTTPException)):  # plain HTTP gets no answer
            bench.http_call(port, "GET", "/health")
    finally:
        agent.terminate()
        agent.wait(10)


def test_the_floor_is_set_against_nginx_and_the_coordinator_against_it(bench):
    rps = {
        "direct": [100_000.0, 100_000.0],
        "nginx": [40_000.0, 20_000.0],
        "coordinator": [4_000.0, 2_400.0],
        "floor": [16_000.0, 6_000.0],
    }
    runs = _runs(bench, 64, rps)
    for run in runs:
        run.p50_ms = {"direct": 1.0, "floor": 1.25, "coordinator": 1.5}.get(run.target, 1.1)
        run.cpu_us_per_req = {"floor": 120.0, "coordinator": 380.0}.get(run.target, 50.0)
    [row] = bench.summarize(runs)
    floor = row.floor
    assert floor.floor_share_runs == [0.4, 0.3]
    assert floor.floor_over_nginx == pytest.approx(0.35)
    assert floor.coordinator_over_floor == pytest.approx((0.25 + 0.4) / 2)  # 4/16, 2.4/6
    assert floor.floor_added_p50_ms == pytest.approx(0.25)
    assert floor.coordinator_cpu_over_floor_us == pytest.approx(260.0)
    # Without the floor's runs there is no floor row, and the rest is unchanged.
    [without] = bench.summarize([run for run in runs if run.target != "floor"])
    assert without.floor is None
    assert without.nginx_share_runs == row.nginx_share_runs


def test_the_floor_runs_only_where_it_can_serve(bench):
    import argparse

    def args(**kw: object) -> argparse.Namespace:
        return argparse.Namespace(**{"no_floor": False, "tls": False, "workers": 1, **kw})

    assert bench.floor_runs(args())
    assert not bench.floor_runs(args(no_floor=True))
    assert not bench.floor_runs(args(tls=True))  # it speaks plain HTTP
    assert not bench.floor_runs(args(workers=2))  # it is one process


def test_the_floor_relays_to_the_agent_in_the_coordinators_envelope(bench, tmp_path):
    import json
    import subprocess
    import sys

    agent_port, floor_port = bench.free_ports(2)
    route = f"echo=echo-1@http://127.0.0.1:{agent_port}/invoke"
    procs = [
        subprocess.Popen([sys.executable, str(BENCH.with_name(name)), "--port", str(port), *more])
        for name, port, more in (
            ("echo_agent.py", agent_port, []),
            ("relay_floor.py", floor_port, ["--route", route]),
        )
    ]
    try:
        for proc, port in zip(procs, (agent_port, floor_port), strict=True):
            bench.wait_healthy("server", proc, port, "/health", tmp_path / "none.log")
        status, body = bench.http_call(floor_port, "POST", "/v1/invoke", bench.BODY)
        answer = json.loads(body)
        assert status == 200 and answer["status"] == "ok" and answer["agent_id"] == "echo-1"
        assert answer["result"] == {"result": {"echo": "pong", "ok": True}}
        assert answer["route"]["capability"] == "echo"
        assert [a["outcome"] for a in answer["attempts"]] == ["ok"]
        assert len(answer["request_id"]) == 32 and answer["request_id"] != answer["trace_id"]
        for body, status, code in (
            ('{"capability":"nope"}', 404, "unknown_capability"),
            ('{"capability":["echo"]}', 404, "unknown_capability"),
            ("[1]", 404, "unknown_capability"),
            ("{", 400, "invalid_json"),
        ):
            got, text = bench.http_call(floor_port, "POST", "/v1/invoke", body)
            assert (got, json.loads(text)["error"]["code"]) == (status, code)
        procs[0].terminate()  # the agent is gone: the floor answers 502
        procs[0].wait(10)
        got, text = bench.http_call(floor_port, "POST", "/v1/invoke", bench.BODY)
        assert (got, json.loads(text)["error"]["code"]) == (502, "agent_error")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def test_a_caller_that_leaves_mid_request_leaves_the_floor_serving(bench, tmp_path):
    import socket
    import subprocess
    import sys
    import time

    agent_port, floor_port = bench.free_ports(2)
    route = f"echo=echo-1@http://127.0.0.1:{agent_port}/invoke"
    log = tmp_path / "floor.log"
    with log.open("wb") as out:
        procs = [
            subprocess.Popen(
                [sys.executable, str(BENCH.with_name("echo_agent.py")), "--port",
                 str(agent_port), "--service-ms", "300"]
            ),
            subprocess.Popen(
                [sys.executable, str(BENCH.with_name("relay_floor.py")), "--port",
                 str(floor_port), "--route", route],
                stdout=out, stderr=subprocess.STDOUT,
            ),
        ]  # fmt: skip
    try:
        for proc, port in zip(procs, (agent_port, floor_port), strict=True):
            bench.wait_healthy("server", proc, port, "/health", log)
        head = f"POST /v1/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: {len(bench.BODY)}\r\n\r\n"
        request = (head + bench.BODY).encode()
        for _ in range(3):  # the agent takes 300 ms; each caller leaves after 50
            with socket.create_connection(("127.0.0.1", floor_port)) as caller:
                caller.sendall(request)
                time.sleep(0.05)
        time.sleep(0.4)  # the agent answers the callers that left
        status, _ = bench.http_call(floor_port, "POST", "/v1/invoke", bench.BODY)
        assert status == 200 and procs[1].poll() is None
        assert log.read_text() == ""  # no traceback, no "Task exception was never retrieved"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


@pytest.mark.parametrize(
    "text", ["echo", "echo=@http://h:1/", "echo=a@https://h:1/", "=a@http://h:1/", "echo=a@h:1"]
)
def test_a_floor_route_names_capability_agent_and_http_url(text):
    relay = _relay_module()
    with pytest.raises(ValueError):
        relay.parse_route(text)


def test_a_floor_route_holds_the_request_head_for_its_agent():
    relay = _relay_module()
    capability, (agent_id, address, head) = relay.parse_route("echo=e-1@http://127.0.0.1:9/in")
    assert (capability, agent_id, address) == ("echo", "e-1", ("127.0.0.1", 9))
    assert head.startswith(b"POST /in HTTP/1.1\r\nhost: 127.0.0.1:9\r\n")


def _relay_module() -> ModuleType:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_relay_floor", BENCH.with_name("relay_floor.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

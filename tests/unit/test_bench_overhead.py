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

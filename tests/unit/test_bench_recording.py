"""bench/recording.py: its variants replace what they name for one run, and only then."""

from __future__ import annotations

from pathlib import Path

from agent_reach.wire.pool import HttpPool, Response

BENCH = Path(__file__).parents[2] / "bench" / "recording.py"


def test_a_variant_replaces_its_methods_for_the_run_only(bench):
    original = HttpPool.__dict__["request"]
    with bench.replaced(bench.VARIANTS["socket (answered at once)"]):
        assert HttpPool.__dict__["request"] is not original
    assert HttpPool.__dict__["request"] is original
    for cls, name, _ in bench.VARIANTS["all four"]:
        assert cls.__dict__[name] is not bench._off


async def test_the_socket_variants_answer_with_the_answer_kept_from_a_real_request(bench):
    answer = Response(200, [(b"content-type", b"application/json")], b'{"ok":true}')

    async def from_the_agent(self, *args, **kwargs):
        return answer

    pool = HttpPool()
    try:
        with (
            bench.replaced(((HttpPool, "request", from_the_agent),)),
            bench.replaced(bench._keeping_the_answer()),
        ):
            assert await pool.request("POST", "http://127.0.0.1:9/x", timeout_s=1) is answer
        for variant in ("socket (answered at once)", "socket (answered next iteration)"):
            with bench.replaced(bench.VARIANTS[variant]):
                assert await pool.request("POST", "http://127.0.0.1:9/x", timeout_s=1) is answer
    finally:
        await pool.aclose()

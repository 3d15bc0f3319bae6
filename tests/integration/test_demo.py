"""`agent-reach demo` end to end, in its own process, exactly as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from agent_reach.demo import STOPPED_INSTANCE
from agent_reach.demo.scenario import SCRIPT, SCRIPT_AFTER_STOP

GUARD_TIMEOUT_S = 120.0  # a hang guard only; the demo itself takes a few seconds
SURVIVOR = "inventory-02"


def inventory_instances(output: str) -> set[str]:
    """Instances named on the table rows of `inventory.check` requests."""
    rows = [line for line in output.splitlines() if "│ inventory.check" in line]
    return {name for name in (STOPPED_INSTANCE, SURVIVOR) for row in rows if name in row}


def test_demo_moves_inventory_traffic_to_the_surviving_instance() -> None:
    # Exactly a user's environment: not the suite's AR_AUTH=off (the demo must set it itself).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AR_")}
    env.update(COLUMNS="200", PYTHONIOENCODING="utf-8")
    finished = subprocess.run(
        [sys.executable, "-m", "agent_reach", "demo"],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=GUARD_TIMEOUT_S,
        check=False,
    )

    assert finished.returncode == 0, finished.stdout + finished.stderr
    before, marker, after = finished.stdout.partition(f"stopping {STOPPED_INSTANCE}")
    assert marker, finished.stdout
    assert inventory_instances(before) == {STOPPED_INSTANCE, SURVIVOR}
    assert inventory_instances(after) == {SURVIVOR}
    total = sum(len(step) for step in (*SCRIPT, *SCRIPT_AFTER_STOP))
    assert f"{total}/{total} requests answered" in after
    assert "0 to a wrong one" in after  # by text, with the default install
    routed = re.search(r"(\d+)/\d+ texts routed by meaning", after)
    assert routed is not None and int(routed.group(1)) >= total // 2, after
    assert "Traceback" not in finished.stderr
    assert "security is OFF" in finished.stdout  # said loudly, not only in a log line
    assert finished.stdout.count("match: the calibrated confidence") == 1  # said once
    assert "--verbose" in finished.stdout
    # One delegation on behalf of the customer, the rule that allows it, and its chain
    # as the specialist verified it from its token.
    assert 'principals = ["domain:customer-service"]' in finished.stdout
    assert (
        "chain: anonymous (customer) → cs-bot (cs.chat) → refund-specialist (refund.request)"
        in finished.stdout
    )

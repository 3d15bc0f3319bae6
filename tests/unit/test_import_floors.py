"""Imports run down the floors: the invoke path loads none of the transports that
translate (`adapters/`), nor federation, nor anything the composition root builds, and
the modules an import cycle once hid load first in a fresh interpreter.

Each case runs in a fresh interpreter, so nothing another test imported counts.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ABOVE_INVOKE = (
    "agent_reach.adapters",
    "agent_reach.federation",
    "agent_reach.faces",
    "agent_reach.server",
    "agent_reach.sidecar",
)

LOADED = """
import sys
import {module}
print("LOADED", ",".join(sorted(n for n in sys.modules if n.startswith({above!r}))))
"""


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


@pytest.mark.parametrize(
    "module",
    ["agent_reach.invoke.service", "agent_reach.invoke.attempts", "agent_reach.invoke.transports"],
)
def test_the_invoke_path_loads_nothing_above_it(module: str) -> None:
    assert _run(LOADED.format(module=module, above=ABOVE_INVOKE)) == "LOADED"


@pytest.mark.parametrize(
    "module",
    [
        "agent_reach.federation.results",
        "agent_reach.federation.transport",
        "agent_reach.adapters.transports.a2a",
        "agent_reach.server.transports",
    ],
)
def test_federation_and_the_transports_import_first_in_a_fresh_interpreter(module: str) -> None:
    """`federation.results` once reached itself again through the transports' table
    (which imported the MCP transport, which imports it): an ImportError first."""
    _run(f"import {module}")

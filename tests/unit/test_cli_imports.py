"""The CLI imports only what a command uses: `--help`, `invoke --help` and `--version`
never load the coordinator (server, faces, runtime), the SDK's agent nor its models.

Each case runs in a fresh interpreter, so nothing another test imported counts.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# What only `serve`, `demo` and `sidecar` (or a command's own run) may import.
NEVER_FOR_HELP = (
    "agent_reach.server",
    "agent_reach.faces",
    "agent_reach.invoke",
    "agent_reach.routing",
    "agent_reach.sdk.agent",
    "agent_reach.sdk.client",
    "agent_reach.config",
    "fastapi",
    "uvicorn",
    "mcp",
    "numpy",
    "httpx",
)

RUN = """
import sys
from agent_reach.cli import app
try:
    app({args!r}, prog_name="agent-reach")
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
loaded = sorted({{name for name in sys.modules for top in {never!r}
                 if name == top or name.startswith(top + ".")}})
print("LOADED", ",".join(loaded))
"""


def loaded_by(args: list[str]) -> list[str]:
    code = RUN.format(args=args, never=NEVER_FOR_HELP)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED"))
    return [name for name in line.removeprefix("LOADED ").split(",") if name]


@pytest.mark.parametrize(
    "args",
    [["--help"], ["invoke", "--help"], ["route", "--help"], ["serve", "--help"], ["--version"]],
)
def test_help_and_version_load_none_of_the_coordinator(args: list[str]) -> None:
    assert loaded_by(args) == []


def test_importing_the_cli_loads_none_of_the_coordinator() -> None:
    code = (
        "import sys, agent_reach.cli; "
        f"print('LOADED', ','.join(m for m in sys.modules if m.startswith({NEVER_FOR_HELP!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "LOADED"


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-m", "agent_reach", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == f"agent-reach {version('agent-reach')}\n"


@pytest.mark.parametrize(
    "module",
    ["agent_reach.sidecar.service", "agent_reach.sidecar.mcp_bridge", "agent_reach.demo"],
)
def test_what_serve_demo_and_sidecar_load_imports_first_in_a_fresh_interpreter(
    module: str,
) -> None:
    """With nothing imported before them (as `agent-reach sidecar` now runs), their
    modules load: no import cycle hides behind an order the package used to impose."""
    subprocess.run([sys.executable, "-c", f"import {module}"], timeout=60, check=True)

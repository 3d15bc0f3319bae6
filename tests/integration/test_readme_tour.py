"""The README's quick tour, run as written: its code blocks, in order, in one shell.

Bash blocks run in one `bash` session that starts in a stand-in for the repository (a
folder whose `.venv` is this repository's); each Python block is saved, at its turn,
in the shell's current folder under the name its first line gives (``# caller.py``),
as a user saving it would. Only the ports change (8500, 9040, 9041 become free ones),
so the tour can run next to anything else; the environment is a user's, without any
`AR_*`. The tour works in a scratch folder of its own: it leaves nothing in the folder
it started in.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from agent_reach.testing.ports import PortTaken, on_free_ports, port_was_taken

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
TOUR_TIMEOUT_S = 180.0  # a hang guard; the tour itself takes some seconds
PORTS = ("8500", "9040", "9041")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
HARNESS = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n"


def tour_blocks(readme: str) -> list[tuple[str, str]]:
    """(language, code) of every block of the "Quick tour" section, in order."""
    section = readme.split("\n## Quick tour\n", 1)[1].split("\n## ", 1)[0]
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(section)]


def test_the_tour_has_the_steps_it_promises() -> None:
    blocks = tour_blocks(README.read_text(encoding="utf-8"))
    names = [code.splitlines()[0] for language, code in blocks if language == "python"]
    shell = "\n".join(code for language, code in blocks if language == "bash")

    assert names == ["# inventory_agent.py", "# logistics_agent.py", "# caller.py"]
    for step in ("agent-reach serve", "keys create", "--role agent", "--role caller"):
        assert step in shell
    for step in ("agents list", "agent-reach route", "agent-reach trace", "/ui/#key="):
        assert step in shell


def run_tour(directory: Path, ports: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The tour's blocks as one bash script, started in `directory`/repository, its
    ports replaced by `ports`; `PortTaken` when one of them was taken meanwhile."""

    def localize(code: str) -> str:
        for old, new in ports.items():
            code = code.replace(old, new)
        return code

    start, scratch = directory / "repository", directory / "tmp"
    start.mkdir()
    scratch.mkdir()
    (start / ".venv").symlink_to(REPOSITORY / ".venv")
    script = [HARNESS]
    for language, code in tour_blocks(README.read_text(encoding="utf-8")):
        if language == "python":
            name = code.splitlines()[0].removeprefix("# ").strip()
            script.append(f"cat > {name} <<'PYTHON_BLOCK'\n{localize(code)}PYTHON_BLOCK")
        elif language == "bash":
            script.append(localize(code))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AR_")}
    env.update(COLUMNS="160", PYTHONIOENCODING="utf-8", TMPDIR=str(scratch))
    finished = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=start,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TOUR_TIMEOUT_S,
        check=False,
    )
    if finished.returncode != 0 and port_was_taken(finished.stdout + finished.stderr):
        raise PortTaken(finished.stdout + finished.stderr)
    return finished


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    attempts: list[tuple[Path, dict[str, str]]] = []

    def attempt(*picked: int) -> subprocess.CompletedProcess[str]:
        directory = tmp_path / f"attempt-{len(attempts)}"
        directory.mkdir()
        attempts.append((directory, dict(zip(PORTS, map(str, picked), strict=True))))
        return run_tour(*attempts[-1])

    # The README's fixed ports (a user runs it as written) are replaced by free ones,
    # picked again if another process binds one first.
    finished = on_free_ports(attempt, len(PORTS))
    directory, ports = attempts[-1]
    start, scratch = directory / "repository", directory / "tmp"

    output = finished.stdout
    assert finished.returncode == 0, output + finished.stderr
    assert "inventory-01 {'sku': 'X5-BLUE-256', 'in_stock': True}" in output
    assert "order.track logistics-01 {'order': 'A1001'" in output
    assert "route: order.track → logistics-01" in output
    assert [p.name for p in start.iterdir()] == [".venv"]  # nothing left where it started
    (folder,) = scratch.iterdir()  # where `cd "$(mktemp -d)"` took it
    assert {"inventory_agent.py", "logistics_agent.py", "caller.py"} <= {
        p.name for p in folder.iterdir()
    }
    trace_id = (folder / "caller.out").read_text(encoding="utf-8").splitlines()[-1]
    assert f"trace {trace_id}  ok" in output
    assert f"http://127.0.0.1:{ports['8500']}/ui/#key=" in output
    assert "state_in_memory" in finished.stderr  # serve said what a restart loses
    assert "Traceback" not in finished.stderr
    assert (folder / "decisions.jsonl").stat().st_size > 0

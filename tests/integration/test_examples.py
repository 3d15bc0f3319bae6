"""Each example under `examples/` runs as written, as the README's tour does
(test_readme_tour.py): its `run.sh` in bash, in a copy of the example whose fixed ports
(8500 and the agents') are replaced by free ones, with a user's environment (no
`AR_*`), its scratch files in a folder of the test's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from agent_reach.testing.ports import PortTaken, on_free_ports, port_was_taken

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = REPOSITORY / "examples"
RUN_TIMEOUT_S = 240.0  # a hang guard; an example takes well under a minute
PORT = re.compile(r"\b(8500|90[0-9]{2})\b")


def run_example(
    name: str, directory: Path, ports: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`examples/<name>/run.sh` from a copy under `directory` with `ports` replaced;
    `PortTaken` when a server found one of them taken."""
    copy = directory / "repository" / "examples" / name
    shutil.copytree(EXAMPLES / name, copy)
    for path in copy.iterdir():
        path.write_text(PORT.sub(lambda m: ports[m.group(1)], path.read_text("utf-8")), "utf-8")
    (directory / "repository" / ".venv").symlink_to(REPOSITORY / ".venv")
    scratch = directory / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AR_")}
    env.update(COLUMNS="160", PYTHONIOENCODING="utf-8", TMPDIR=str(scratch))
    finished = subprocess.run(
        ["bash", str(copy / "run.sh")],
        cwd=directory / "repository",
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    logs = "".join(p.read_text("utf-8") for p in scratch.glob("*/*.log"))
    if finished.returncode != 0 and port_was_taken(finished.stdout + finished.stderr + logs):
        raise PortTaken(logs)
    return finished


def ports_of(name: str) -> list[str]:
    """The fixed ports the example's files name, in order of first mention."""
    found = [PORT.findall(p.read_text("utf-8")) for p in sorted((EXAMPLES / name).iterdir())]
    return list(dict.fromkeys(port for ports in found for port in ports))


def run(name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    fixed = ports_of(name)
    attempts = 0

    def attempt(*picked: int) -> subprocess.CompletedProcess[str]:
        nonlocal attempts
        attempts += 1
        directory = tmp_path / f"attempt-{attempts}"
        directory.mkdir()
        return run_example(name, directory, dict(zip(fixed, map(str, picked), strict=True)))

    return on_free_ports(attempt, len(fixed))


def test_every_example_has_a_run_script_and_is_tested_here() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == ["mesh"]
    assert all((EXAMPLES / name / "run.sh").is_file() for name in ["mesh"])


def test_the_mesh_example_delegates_within_the_budget_refuses_and_obeys_the_kill_switch(
    tmp_path: Path,
) -> None:
    finished = run("mesh", tmp_path)

    output = finished.stdout
    assert finished.returncode == 0, output + finished.stderr
    delegated, refused, killed = output.split("== ")[1:]
    assert "'refunded': True" in delegated
    assert "'on_behalf_of': 'shop-frontend'" in delegated
    assert "'through': ['cs-agents', 'refund-agents']" in delegated
    assert "'refused': 'budget_exhausted'" in refused
    assert '"disabled":true' in killed
    assert "'refused': 'no_instance'" in killed
    assert "Traceback" not in finished.stderr

"""Every shell and Python block of the README and `docs/` runs as written, or says it
does not.

The convention (the README's "Examples in these documents"): every fenced block names
its language. A shell block (`bash`, `sh`, `console`, `shell`) or a Python block
(`python`) is one of two things:

- run by a test: the README's "Quick tour" by `test_readme_tour.py`, every other one
  here, against a coordinator with security on whose address is the documents' default
  (`127.0.0.1:8500`, `localhost:8500`; only the port changes), with `AR_ADMIN_KEY`,
  `AR_API_KEY` (the same admin key) and `AR_COORDINATOR_URL` set and agents serving the
  capabilities the examples name;
- a file of an example: its first line names it (`# examples/mesh/cs_bot.py: ...`), it
  is that file as it is, and `test_examples.py` runs the example;
- run by another test, which its first line names (`# run by tests/security/
  test_tls_docs.py: <what it needs>`): one that needs a setting of its own;
- illustrative: its first line is `# illustrative: <why it cannot run as it stands>`,
  and it is not run.

Blocks in other languages (`json`, `yaml`, `toml`, `http`, `text`) are data, not
commands; the policy example is parsed by `tests/unit/test_docs.py`. TypeScript blocks
(`ts`) are compiled and run by `clients/typescript/test/docs.test.mjs`, which holds them
to the same rule (`// illustrative: <why>` on the first line, or run).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until

REPOSITORY = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "console", "shell"}
PYTHON = {"python"}
KNOWN = SHELL | PYTHON | {"json", "yaml", "toml", "http", "text", "ts", "floors"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
ILLUSTRATIVE = re.compile(r"# illustrative: \S")
EXAMPLE_FILE = re.compile(r"# (examples/[\w./-]+):")
RUN_ELSEWHERE = re.compile(r"# run by (tests/[\w/-]+\.py): \S")
ADMIN_KEY = "doc-examples-admin-key-0123456789"
BLOCK_TIMEOUT_S = 60.0  # a hang guard; each example takes well under a second
# The capabilities the examples call, with what their agent answers.
AGENTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "erp-inventory-01": (
        {
            "capabilities": ["erp.inventory.query"],
            "description": "how many units of a SKU are in stock",
            "examples": ["how many SKU-1 are in stock?", "is SKU-9 still in stock"],
        },
        {"in_stock": 7},
    ),
    "order-query-01": (
        {"capabilities": ["order.query"], "description": "an order's status"},
        {"status": "shipped"},
    ),
    "kb-01": (
        {"capabilities": ["kb.article.query"], "description": "help articles"},
        {"articles": ["Shipping takes 2 days"]},
    ),
}


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language and its text."""

    path: Path
    line: int
    language: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPOSITORY)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.language in SHELL | PYTHON

    @property
    def example_file(self) -> Path | None:
        """The file of `examples/` the block shows, when its first line names one."""
        first = self.code.splitlines()[0] if self.code else ""
        named = EXAMPLE_FILE.match(first)
        return None if named is None else REPOSITORY / named.group(1)

    @property
    def runner(self) -> Path | None:
        """The test that runs the block, when its first line names one."""
        first = self.code.splitlines()[0] if self.code else ""
        named = RUN_ELSEWHERE.match(first)
        return None if named is None else REPOSITORY / named.group(1)

    @property
    def illustrative(self) -> bool:
        first = self.code.splitlines()[0] if self.code else ""
        return ILLUSTRATIVE.match(first) is not None


def blocks() -> list[Block]:
    """Every fenced block of the README and docs/, in order."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(path, line, match.group(1).strip(), match.group(2)))
    return found


def in_the_tour(block: Block) -> bool:
    """Whether the block is in the README's "Quick tour" (run by test_readme_tour.py)."""
    if block.path.name != "README.md":
        return False
    text = block.path.read_text(encoding="utf-8")
    start = text.index("\n## Quick tour\n")
    end = text.index("\n## ", start + 1)
    offset = sum(len(line) + 1 for line in text.split("\n")[: block.line - 1])
    return start < offset < end


def examples() -> list[Block]:
    """The blocks this module runs."""
    return [
        b
        for b in blocks()
        if b.runnable
        and not b.illustrative
        and not in_the_tour(b)
        and b.example_file is None
        and b.runner is None
    ]


def test_every_block_names_a_known_language() -> None:
    unknown = [(b.name, b.language) for b in blocks() if b.language not in KNOWN]
    assert unknown == [], "name the block's language (one of KNOWN), or add it there"


def test_every_command_block_is_run_by_a_test_or_marked_illustrative() -> None:
    runnable = [b for b in blocks() if b.runnable]
    tour = [b for b in runnable if in_the_tour(b)]
    marked = [b for b in runnable if b.illustrative]
    files = [b for b in runnable if b.example_file is not None]
    elsewhere = [b for b in runnable if b.runner is not None]
    run_here = examples()

    assert len(tour) == 7  # the tour's four shell and three Python blocks
    assert not [b.name for b in tour if b.illustrative], "the tour runs every block"
    assert len(files) >= 4  # the mesh's worked example (test_examples.py runs it)
    assert sorted(b.name for b in tour + marked + files + elsewhere + run_here) == sorted(
        b.name for b in runnable
    )
    runners = [b for b in elsewhere if b.path.name not in b.runner.read_text("utf-8")]  # type: ignore[union-attr]
    assert runners == [], "the test a block names reads that block's document"
    assert len(run_here) >= 4 and len(marked) >= 4
    half_marked = [b.name for b in runnable if "illustrative" in b.code and not b.illustrative]
    assert half_marked == [], "the marker is the first line: '# illustrative: <why>'"


def test_a_block_showing_an_example_file_is_that_file_as_it_is() -> None:
    shown = [b for b in blocks() if b.example_file is not None]
    differ = [b.name for b in shown if b.example_file.read_text("utf-8") != b.code]  # type: ignore[union-attr]
    assert shown and differ == [], "copy the file into the block again (or the block into it)"


def _matching_current(url: str, auth: dict[str, str]) -> bool:
    """Whether every text matcher has fitted the catalog (as a reader's would have by the
    time they call the agents an example registered)."""
    policy = httpx.get(f"{url}/v1/policy", headers=auth).json()
    return bool(policy["matching"]["current"])


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A secured coordinator and the examples' agents; the environment a reader has."""
    settings = Settings(decision_log="off", auth="on", admin_key=SecretStr(ADMIN_KEY))
    servers = [
        ServerThread(FakeAgent(name=name, answer=answer)) for name, (_, answer) in AGENTS.items()
    ]
    with run_coordinator(settings) as (url, _):
        try:
            auth = {"authorization": f"Bearer {ADMIN_KEY}"}
            for server, (agent_id, (card, _)) in zip(servers, AGENTS.items(), strict=True):
                server.start()
                body = {
                    "id": agent_id,
                    **card,
                    "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
                }
                assert httpx.post(f"{url}/v1/agents", json=body, headers=auth).status_code == 201
            env = {k: v for k, v in os.environ.items() if not k.startswith("AR_")}
            env.update(
                PATH=f"{REPOSITORY / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                AR_ADMIN_KEY=ADMIN_KEY,
                AR_API_KEY=ADMIN_KEY,
                AR_COORDINATOR_URL=url,
                PORT=url.rsplit(":", 1)[1],
                HOME=str(tmp_path_factory.mktemp("home")),
            )
            wait_until(
                lambda: _matching_current(url, auth), "the text matchers to fit", timeout_s=60
            )
            yield env
        finally:
            stop_all(servers)


@pytest.mark.parametrize("block", examples(), ids=lambda b: b.name)
def test_the_example_runs_as_written(
    block: Block, environment: dict[str, str], tmp_path: Path
) -> None:
    code = block.code.replace(":8500", f":{environment['PORT']}")
    if block.language in PYTHON:
        command = [str(REPOSITORY / ".venv" / "bin" / "python"), "-c", code]
    else:
        command = ["bash", "-c", "set -euo pipefail\n" + code]

    finished = subprocess.run(
        command,
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )

    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert '{"error":' not in finished.stdout.replace(" ", ""), finished.stdout
    assert "Traceback" not in finished.stderr, finished.stderr

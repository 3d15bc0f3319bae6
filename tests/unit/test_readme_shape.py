"""The README is for a stranger: short, the two commands first, what it does with a
link per row into docs/, and one table of headline figures, each with the command that
measures it; the method and the history live in docs/benchmarks.md."""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
MAX_BYTES = 20 * 1024
FIRST_LINES = [
    "# Agent-Reach",
    "",
    "    bash scripts/demo.sh    # set up and run the demo (embedded default: memory backend,"
    " nothing else to install)",
    "    bash scripts/test.sh    # set up and run the whole test suite (installs what it needs,"
    " starts Redis if none runs)",
]
IDENTITY_ROW = "Identity and TLS: IdP tokens (OIDC), mutual TLS, DNS-rebinding protection"


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _table(heading: str) -> list[list[str]]:
    """The rows (cells) of the first table under `## heading`, header row excluded."""
    section = _text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]


def test_the_readme_is_at_most_20_kb_and_starts_with_the_two_commands() -> None:
    assert len(README.read_bytes()) <= MAX_BYTES
    assert _text().splitlines()[: len(FIRST_LINES)] == FIRST_LINES


def test_every_row_of_what_it_does_links_into_docs() -> None:
    rows = _table("What it does")

    assert len(rows) >= 10
    unlinked = [
        row[0] for row in rows if not re.search(r"\]\(docs/[\w-]+\.md(#[\w-]+)?\)", row[-1])
    ]
    assert unlinked == []
    identity = [row for row in rows if row[0] == IDENTITY_ROW]
    assert identity and "](docs/security.md#identity-and-tls)" in identity[0][-1]


def test_one_table_of_headline_figures_each_with_its_command() -> None:
    text = _text()
    rows = _table("Headline figures")
    tables = sum(1 for block in re.split(r"\n\s*\n", text) if block.lstrip().startswith("| "))

    assert tables == 2  # what it does, and the figures
    measures = " ".join(row[0] for row in rows)
    for measure in ("added latency", "throughput per core", "routing accuracy", "restarted"):
        assert measure in measures
    commands = [row[-1] for row in rows]
    assert all(c.startswith("`") or c == "the same command" for c in commands), commands
    assert all(re.search(r"\d", row[1]) for row in rows)
    assert "](docs/benchmarks.md)" in text

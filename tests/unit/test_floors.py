"""Imports run down the floors that docs/architecture.md draws: no module of the package
imports from a floor above its own (type-checking and function-level imports included),
and every package and top-level module stands on exactly one floor."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "agent_reach"
DOC = ROOT / "docs" / "architecture.md"


def floors() -> dict[str, int]:
    """Package (or top-level module) name -> its floor, from the page's `floors` block."""
    block = re.search(r"```floors\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block, "docs/architecture.md lost its ```floors block"
    table: dict[str, int] = {}
    for line in block.group(1).splitlines():
        number, *names = line.split()
        for name in names:
            assert name not in table, f"{name} stands on two floors"
            table[name] = int(number)
    return table


def unit_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imports_of(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name.startswith("agent_reach.")]


def test_every_package_stands_on_a_floor() -> None:
    table = floors()
    units = {unit_of(p) for p in PACKAGE.rglob("*.py")}
    assert units - table.keys() == set(), "add these to docs/architecture.md's floors"
    assert table.keys() - units == set(), "these floors name what no longer exists"


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_import_runs_back_up(path: Path) -> None:
    table = floors()
    own = unit_of(path)
    upward = [
        f"line {line}: {name} (floor {table[name.split('.')[1]]} > {own}'s {table[own]})"
        for line, name in imports_of(path)
        if name.split(".")[1] != own and table.get(name.split(".")[1], -1) > table[own]
    ]
    assert upward == []


def test_the_check_sees_an_import_that_runs_back_up(tmp_path: Path) -> None:
    """The walk reads what a module imports, however it is written."""
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agent_reach.server.runtime import Runtime\n"
        "def f():\n    import agent_reach.cli\n"
    )
    assert [name for _, name in imports_of(module)] == [
        "agent_reach.server.runtime",
        "agent_reach.cli",
    ]

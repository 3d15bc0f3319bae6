"""The A2A and MCP faces depend on the narrow `FaceHandler`, never on the server: no
module of `faces/` imports `agent_reach.server` (not even for type checking), and the
edge's fast faces reach the coordinator only through the handler, not the runtime."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agent_reach

SRC = Path(agent_reach.__file__).parent
FACES = sorted((SRC / "faces").glob("*.py"))
FAST_FACES = sorted((SRC / "server" / "fastfaces").glob("*.py"))


def _imported(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (TYPE_CHECKING blocks and functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", FACES, ids=lambda p: p.name)
def test_a_face_module_imports_nothing_of_the_server(path: Path) -> None:
    upward = sorted(n for n in _imported(path) if n.split(".")[:2] == ["agent_reach", "server"])
    assert upward == []


@pytest.mark.parametrize("path", FAST_FACES, ids=lambda p: p.name)
def test_a_fast_face_never_reaches_for_the_runtime(path: Path) -> None:
    assert "agent_reach.server.runtime" not in _imported(path)


def test_the_faces_load_without_the_server() -> None:
    """In a fresh interpreter, importing every face loads no module of the server."""
    modules = [f"agent_reach.faces.{p.stem}" for p in FACES if p.stem != "__init__"]
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('agent_reach.server')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"

"""Services in other languages (Node Express, Java) as child processes on 127.0.0.1."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).parent
STARTUP_S = 60.0  # `java File.java` compiles in memory first: seconds on a busy machine


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: scripts/test.sh installs it (apt-get)")
    return path


@contextmanager
def _serve(command: list[str]) -> Iterator[str]:
    """Run the service, read `listening PORT` from its first line, yield its URL."""
    process = subprocess.Popen(
        command, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"{command[0]} did not start: {line}{process.stdout.read()}")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        deadline = time.monotonic() + STARTUP_S
        while httpx.get(f"{url}/health").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} is not healthy at {url}")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def express_service() -> Iterator[str]:
    """The Express order service (express installed into this folder on first use)."""
    node = _need("node")
    if not (HERE / "node_modules" / "express").is_dir():
        subprocess.run(
            [_need("npm"), "install", "--no-package-lock", "--no-audit", "--no-fund", "--silent"],
            cwd=HERE,
            check=True,
        )
    with _serve([node, "orders.js"]) as url:
        yield url


@contextmanager
def java_service() -> Iterator[str]:
    """The Java tracking service, run from its source file."""
    with _serve([_need("java"), "Tracking.java"]) as url:
        yield url

"""Fixtures shared by unit-test modules."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """The benchmark script at the test module's `BENCH` path, imported as a module."""
    path = request.module.BENCH
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]

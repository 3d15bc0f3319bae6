"""The only module that reads time; `ManualClock` lets tests move it by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic seconds for deadlines and leases, wall seconds for records shown to people."""

    def monotonic(self) -> float: ...

    def wall(self) -> float: ...


class SystemClock:
    """The real clocks of the process."""

    monotonic = staticmethod(time.monotonic)
    wall = staticmethod(time.time)


class ManualClock:
    """A clock that only moves when a test calls `advance`."""

    def __init__(self, start: float = 1_000.0) -> None:
        self._now = start

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return 1_700_000_000.0 + self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


SYSTEM_CLOCK = SystemClock()

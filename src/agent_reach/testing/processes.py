"""A child process the tests drive with signals: kill, graceful stop, freeze and thaw."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import IO, Any

STOP_GRACE_S = 5.0  # after SIGTERM, then SIGKILL


class ChildProcess:
    """One spawned process; the subclasses say how to start it and when it is ready."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._is_paused = False

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def spawn(
        self, command: list[str], *, output: IO[Any] | int | None = None, **options: Any
    ) -> None:
        """Start `command` (our own interpreter or a server binary, never user input)."""
        self._process = subprocess.Popen(  # noqa: S603 - commands built by the test kit
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, **options
        )
        self._is_paused = False

    def kill(self) -> None:
        """SIGKILL and reap: no shutdown code runs, connections die mid-exchange."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()
        self._is_paused = False

    def stop(self) -> None:
        """SIGTERM (graceful shutdown), SIGKILL after `STOP_GRACE_S`."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            if self._is_paused:
                process.send_signal(
                    signal.SIGCONT
                )  # a stopped process acts on SIGTERM once resumed
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_GRACE_S)
        self.kill()

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections, nothing answers. Returns once
        the process is stopped (a signal is delivered when the process is next scheduled)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)
            self._is_paused = True
            if self._process.poll() is None:
                os.waitpid(self._process.pid, os.WUNTRACED)  # reports the stop, reaps nothing

    def resume(self) -> None:
        """SIGCONT."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)
            self._is_paused = False

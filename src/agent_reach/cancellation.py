"""A cancel that a store driver swallowed is still a cancel.

redis-py's command timeout can turn a cancel that lands inside a command into its own
timeout error (which our stores report as `StoreUnavailable`), or absorb it: a loop that
keeps going after a store error would then never end, and a coordinator's shutdown would
wait for it. The Redis stores' error seam (`backends/redis/errors.translate_errors`)
raises the cancel instead of the store error, and after a command that came back as if
never cancelled; loops that forgive store errors call `honour_cancel()` after each such
call too, for stores outside that seam.
"""

from __future__ import annotations

import asyncio


def honour_cancel() -> None:
    """Raise `CancelledError` if the current task has been asked to stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError

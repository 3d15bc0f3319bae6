"""The decision log: one JSON line per routing decision, written off the event loop.

Targets: `off`, `stdout`, `stderr`, or a file path (rotated by size). Records are
serialized on the caller's thread with orjson (a few µs) and written by a
`QueueListener` thread, so a slow disk never stalls routing. Whatever the target,
the newest decisions also stay in memory for `GET /v1/decisions` and the dashboard.
"""

from __future__ import annotations

import logging
import queue
import sys
from collections import deque
from dataclasses import dataclass
from logging.handlers import QueueHandler, QueueListener, RotatingFileHandler
from pathlib import Path
from typing import Literal

import orjson

from agent_reach.clock import Clock
from agent_reach.model.decisions import RouteDecision

DEFAULT_MAX_BYTES = 50 * 1024 * 1024  # rotate at 50 MB
DEFAULT_BACKUPS = 5  # keep 5 rotated files: 300 MB at most
DEFAULT_RECENT = 256  # decisions kept in memory: the dashboard lists 100; each one held costs


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~3x on the hot path
class RecentDecision:
    """One decision as the dashboard lists it."""

    time: float
    kind: Literal["route", "invoke"]
    request_id: str
    trace_id: str
    decision: RouteDecision


class DecisionLog:
    """Writes decisions as JSON lines to the configured target; `close` flushes."""

    def __init__(
        self,
        target: str,
        clock: Clock,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        backups: int = DEFAULT_BACKUPS,
        recent: int = DEFAULT_RECENT,
    ) -> None:
        self.clock = clock
        self._recent: deque[RecentDecision] = deque(maxlen=recent)
        self._listener: QueueListener | None = None
        self._logger: logging.Logger | None = None
        if target == "off":
            return
        handler: logging.Handler
        if target in ("stdout", "stderr"):
            handler = logging.StreamHandler(sys.stdout if target == "stdout" else sys.stderr)
        else:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            handler = RotatingFileHandler(
                target, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
            )
        handler.setFormatter(logging.Formatter("%(message)s"))
        pending: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self._listener = QueueListener(pending, handler)
        self._listener.start()
        logger = logging.getLogger(f"agent_reach.decisions.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        logger.addHandler(QueueHandler(pending))
        self._logger = logger

    @property
    def is_on(self) -> bool:
        return self._logger is not None

    def record(
        self,
        decision: RouteDecision,
        *,
        kind: Literal["route", "invoke"],
        request_id: str,
        trace_id: str,
    ) -> None:
        """Log one decision: who was considered with which scores, the choice and why.

        The user's text is not logged (it may hold personal data); the request_id
        joins the record to the caller's own logs.
        """
        now = self.clock.wall()
        self._recent.append(RecentDecision(now, kind, request_id, trace_id, decision))
        if self._logger is None:
            return
        line = orjson.dumps(
            {
                "time": now,
                "kind": kind,
                "request_id": request_id,
                "trace_id": trace_id,
                "capability": decision.capability,
                "agent_id": decision.agent_id,
                "rule": decision.rule,
                "refused_by": decision.refused_by,
                "margin": decision.margin,
                "policy_version": decision.policy_version,
                "candidates": decision.candidates,
            }
        )
        self._logger.info(line.decode())

    def recent(
        self, limit: int, *, trace_id: str | None = None, agent_id: str | None = None
    ) -> list[RecentDecision]:
        """The newest decisions first; only those of `trace_id`, or weighing `agent_id`."""
        found: list[RecentDecision] = []
        for entry in reversed(self._recent):
            if trace_id is not None and entry.trace_id != trace_id:
                continue
            if agent_id is not None and not _involves(entry.decision, agent_id):
                continue
            found.append(entry)
            if len(found) >= limit:
                break
        return found

    def close(self) -> None:
        """Write what is queued and stop the writer thread."""
        if self._listener is not None:
            self._listener.stop()
            for handler in self._listener.handlers:
                handler.close()
            self._listener = None
            self._logger = None


def _involves(decision: RouteDecision, agent_id: str) -> bool:
    return decision.agent_id == agent_id or any(c.agent_id == agent_id for c in decision.candidates)

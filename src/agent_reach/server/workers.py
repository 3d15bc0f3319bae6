"""`agent-reach serve --workers N`: one coordinator process per core on one port.

Each worker is a whole coordinator (its own event loop, edge server, probes and
sweepers) that binds the port itself with SO_REUSEPORT, so the kernel spreads new
connections across the workers with no process in between. Workers share every
piece of state through the Redis backend, as separate coordinators do; the memory
backend would give each worker its own registry, so it is refused. The parent only
starts the workers, passes SIGINT/SIGTERM on, and exits when they have exited
(with the first failure's status, if any).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import socket
from types import FrameType

import structlog

from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest

log = structlog.get_logger("agent_reach.server")

BACKLOG = 2048  # as the single-process edge server's
MAX_WORKERS = 256  # far above any core count a coordinator host has


def check_workers(settings: Settings, workers: int) -> None:
    """Refuse a worker count the settings cannot serve (memory backend, no SO_REUSEPORT)."""
    if not 1 <= workers <= MAX_WORKERS:
        raise InvalidRequest(f"--workers must be between 1 and {MAX_WORKERS}", code="bad_workers")
    if workers == 1:
        return
    if settings.registry_backend == "memory":
        raise InvalidRequest(
            "--workers needs the Redis backend (AR_REGISTRY_BACKEND=redis, AR_REDIS_URL=...): "
            "on the memory backend every worker would keep its own registry, tasks and "
            "idempotency records",
            code="workers_need_shared_state",
        )
    if not hasattr(socket, "SO_REUSEPORT"):
        raise InvalidRequest("--workers needs SO_REUSEPORT (Linux, BSD, macOS)", code="bad_workers")


def listen_shared(host: str, port: int) -> socket.socket:
    """A listening socket on host:port that other workers may bind as well."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(False)
    return sock


def serve_workers(settings: Settings, workers: int, gc_thresholds: tuple[int, int, int]) -> int:
    """Run `workers` coordinator processes on settings.host:port until they exit; the
    exit status (0, or the first failed worker's). Each tunes its GC as `serve` does."""
    check_workers(settings, workers)
    context = multiprocessing.get_context("spawn")  # no event loop or threads inherited
    children = [
        context.Process(target=_worker, args=(settings, n, gc_thresholds), name=f"coordinator-{n}")
        for n in range(workers)
    ]

    def stop(sig: int, frame: FrameType | None) -> None:
        for child in children:
            if child.pid is not None and child.is_alive():
                os.kill(child.pid, sig)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for child in children:
            child.start()
        log.info("workers_started", workers=workers, port=settings.port)
        status = 0
        for child in children:
            child.join()
            if child.exitcode and not status:
                status = child.exitcode
                stop(signal.SIGTERM, None)  # one failed: take the others down with it
        return status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _worker(settings: Settings, number: int, gc_thresholds: tuple[int, int, int]) -> None:
    """One worker: a coordinator on its own SO_REUSEPORT socket (runs in a child)."""
    from agent_reach.observability.logging import configure_logging
    from agent_reach.server import edge
    from agent_reach.server.app import create_app

    configure_logging(settings.log_level, json=settings.log_json)
    gc.freeze()
    gc.set_threshold(*gc_thresholds)
    sock = listen_shared(settings.host, settings.port)
    structlog.contextvars.bind_contextvars(worker=number)
    edge.run(create_app(settings), settings.host, settings.port, sock=sock)

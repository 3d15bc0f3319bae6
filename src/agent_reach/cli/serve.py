"""`agent-reach serve`: run the coordinator."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn
from urllib.parse import urlsplit

import typer

from agent_reach.cli.common import (
    reporting_errors,
)

if TYPE_CHECKING:
    from agent_reach.config import Settings

GC_THRESHOLDS = (50_000, 50, 100)  # generation 0 every 50k allocations instead of 700

MEMORY_STATE_WARNING = (
    "state lives in this process's memory (AR_REGISTRY_BACKEND=memory): API keys, "
    "registrations, contexts and tasks vanish when it stops. To keep them, run it on Redis: "
    "bash scripts/ensure-redis.sh && AR_REGISTRY_BACKEND=redis agent-reach serve"
)


@reporting_errors
def serve(
    host: Annotated[
        str | None,
        typer.Option(metavar="HOST", help="Interface to bind; default AR_HOST, else 127.0.0.1."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(metavar="PORT", help="Port to listen on; default AR_PORT, else 8500."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", exists=True, dir_okay=False, help="TOML or YAML settings file."
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Coordinator processes sharing the port (SO_REUSEPORT), one per core; "
            "more than 1 needs the Redis backend.",
        ),
    ] = 1,
    tls_cert: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="PEM certificate (chain): serve HTTPS; env AR_TLS_CERT."),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="PEM private key of --tls-cert; env AR_TLS_KEY."),
    ] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="PEM CA(s): require client certificates they issued (mutual TLS); "
            "env AR_TLS_CLIENT_CA.",
        ),
    ] = None,
) -> None:
    """Run the coordinator (settings from --config or AR_* variables; flags win).

    A bad setting is one line on stderr and exit status 2, before anything starts.
    """
    # The coordinator and its settings load here, not when any other command runs.
    import structlog
    import uvloop
    from pydantic import ValidationError

    from agent_reach.config import Settings, setting_problems
    from agent_reach.errors import ReachError, StoreUnavailable
    from agent_reach.identity.tls import delivery_context
    from agent_reach.observability.logging import configure_logging
    from agent_reach.server import edge
    from agent_reach.server.app import create_app
    from agent_reach.server.edge_asgi import StartupFailed
    from agent_reach.server.workers import check_workers, serve_workers

    overrides: dict[str, Any] = {
        "host": host,
        "port": port,
        "tls_cert": tls_cert,
        "tls_key": tls_key,
        "tls_client_ca": tls_client_ca,
    }
    try:
        if config is not None:
            settings = Settings.from_file(config, **overrides)
        else:
            settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
        configure_logging(settings.log_level, json=settings.log_json)
        check_workers(settings, workers)
        coordinator = create_app(settings)  # reads the policy file and the AR_TLS_* files
        delivery_context(settings)  # the AR_AGENT_* files: here, not once in each worker
    except ValidationError as exc:
        _refuse_to_start(*setting_problems(exc))
    except ReachError as exc:
        _refuse_to_start(f"{exc.code}: {exc.message}")
    except OSError as exc:
        _refuse_to_start(f"{exc.filename}: {exc.strerror}")
    os.environ.pop("AR_ADMIN_KEY", None)  # kept only as a digest from here on
    os.environ.pop("AR_METRICS_TOKEN", None)  # likewise
    _announce_state(settings)
    if workers > 1:  # the workers get the settings as built here, secrets included
        raise typer.Exit(serve_workers(settings, workers, GC_THRESHOLDS))
    # Requests make little cyclic garbage; collecting less often, and never scanning the
    # long-lived objects of startup again, took p99 at 64 concurrent requests from ~30 ms
    # to ~12 ms (bench/overhead.py).
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        uvloop.run(edge.serve(coordinator, settings.host, settings.port))
    except StartupFailed as exc:
        reason = coordinator.startup_error
        if reason is None:  # not a setting: the whole story belongs in the log
            structlog.get_logger("agent_reach.server").error("startup_failed", error=str(exc))
            raise typer.Exit(edge.STARTUP_FAILURE) from None
        if isinstance(reason, StoreUnavailable):
            _refuse_to_start(f"{_state_location(settings)} did not answer: {reason.message}")
        _refuse_to_start(reason.message if isinstance(reason, ReachError) else str(reason))
    except OSError as exc:  # the port is taken or the host is not ours
        _refuse_to_start(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}")


def _announce_state(settings: Settings) -> None:
    """Say where state lives, and for memory what a restart loses and how to keep it."""
    import structlog

    log = structlog.get_logger("agent_reach.server")
    if settings.registry_backend == "memory":
        log.warning("state_in_memory", message=MEMORY_STATE_WARNING)
        return
    log.info(
        "state_backend",
        message=f"state lives in {_state_location(settings)}: it outlives this process "
        "and every coordinator on it shares it",
    )


def _state_location(settings: Settings) -> str:
    """Where the backend keeps state, without a password: `redis at host:port/db (prefix 'ar')`."""
    if settings.registry_backend != "redis":
        return f"the {settings.registry_backend} backend"
    parts = urlsplit(settings.redis_url)
    return (
        f"redis at {parts.hostname}:{parts.port or 6379}{parts.path or '/0'} "
        f"(AR_REDIS_URL, prefix {settings.redis_prefix!r})"
    )


def _refuse_to_start(*lines: str) -> NoReturn:
    """Say what is wrong with the settings, one line each, and exit with status 2."""
    for line in lines:
        print(line, file=sys.stderr)
    raise typer.Exit(2)

"""The policy in force: loaded from the policy file (if any), swapped whole on reload.

The file is polled (stat every `reload_s`); an edit that validates replaces the policy
for the next decision, an invalid edit is logged and the previous policy stays.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import ValidationError

from agent_reach.clock import Clock
from agent_reach.config import load_mapping
from agent_reach.errors import InvalidRequest
from agent_reach.routing.factor_defaults import with_factor_defaults
from agent_reach.routing.policy import RoutingPolicy

log = structlog.get_logger("agent_reach.policy")

DEFAULT_RELOAD_S = 1.0  # an edit is in force within about a second


@dataclass(frozen=True, slots=True)
class PolicyStatus:
    """What `GET /v1/policy` shows: the policy in force and where it came from."""

    version: str
    source: str
    loaded_at: float
    policy: RoutingPolicy
    last_error: str | None


class PolicySource:
    """Holds the current `RoutingPolicy`; calling it returns the policy in force."""

    def __init__(
        self, clock: Clock, path: Path | None = None, factors_on: Sequence[str] | None = None
    ) -> None:
        self.clock = clock
        self.path = path
        self.factors_on = factors_on  # AR_ROUTE_AFFINITY_DEFAULT
        self.current = RoutingPolicy.model_validate(with_factor_defaults({}, factors_on))
        self.loaded_at = clock.wall()
        self.last_error: str | None = None
        self._digest: bytes | None = None
        if path is not None:
            content = path.read_bytes()
            self.current = _parse(path, content, factors_on)
            self._digest = hashlib.sha256(content).digest()

    def __call__(self) -> RoutingPolicy:
        return self.current

    def status(self) -> PolicyStatus:
        return PolicyStatus(
            version=self.current.version,
            source=str(self.path) if self.path else "defaults",
            loaded_at=self.loaded_at,
            policy=self.current,
            last_error=self.last_error,
        )

    def reload(self) -> bool:
        """Re-read the file; True when a new, valid policy is now in force."""
        if self.path is None:
            return False
        try:
            content = self.path.read_bytes()
        except OSError as exc:
            return self._reject(f"cannot read the policy file: {exc.strerror}")
        digest = hashlib.sha256(content).digest()
        if digest == self._digest:
            return False
        self._digest = digest
        try:
            policy = _parse(self.path, content, self.factors_on)
        except InvalidRequest as exc:
            return self._reject(exc.message)
        previous, self.current = self.current.version, policy
        self.loaded_at, self.last_error = self.clock.wall(), None
        log.info("policy_reloaded", previous=previous, version=policy.version, path=str(self.path))
        return True

    async def watch(self, reload_s: float = DEFAULT_RELOAD_S) -> None:
        """Reload whenever the file's content changes, until cancelled."""
        while True:
            await asyncio.sleep(reload_s)
            self.reload()

    def _reject(self, message: str) -> bool:
        self.last_error = message
        log.error("policy_rejected", path=str(self.path), error=message, kept=self.current.version)
        return False


def _parse(path: Path, content: bytes, factors_on: Sequence[str] | None) -> RoutingPolicy:
    """A policy from TOML/YAML bytes; any problem is one `InvalidRequest` with the reason."""
    try:
        data = load_mapping(path, content.decode("utf-8"))
        return RoutingPolicy.model_validate(with_factor_defaults(data, factors_on))
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{path}: not UTF-8 text") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidRequest(f"{path}: {problems}") from exc

"""The policy in force: loaded from the policy file (if any), swapped whole on reload."""

from __future__ import annotations

from pathlib import Path

from agent_reach.config import load_mapping
from agent_reach.routing.policy import RoutingPolicy


class PolicySource:
    """Holds the current `RoutingPolicy`; calling it returns the policy in force."""

    def __init__(self, policy: RoutingPolicy | None = None, path: Path | None = None) -> None:
        self.path = path
        self.current = policy if policy is not None else RoutingPolicy()

    @classmethod
    def from_file(cls, path: Path | None) -> PolicySource:
        """The file's policy, or the defaults when no file is configured."""
        if path is None:
            return cls()
        return cls(RoutingPolicy.model_validate(load_mapping(path)), path)

    def __call__(self) -> RoutingPolicy:
        return self.current

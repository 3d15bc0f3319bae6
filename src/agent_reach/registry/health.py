"""The health state machine of one instance: healthy -> suspect -> offline and back.

Probes and deliveries feed the same counter of consecutive failures (active and
passive detection). An offline instance gets no traffic; only a successful probe
brings it back, and while it stays offline it is re-probed after a pause that
doubles each time (Envoy-style ejection), so recovery does not wait a whole
probe interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent_reach.model.agents import HealthStatus

SUSPECT_AFTER = 3  # DESIGN.md: 3 consecutive failures -> suspect (original production setting)
OFFLINE_AFTER = 5  # DESIGN.md: 2 more -> offline and out of the pool
EJECTION_BASE_S = 2.0  # RELIABILITY.md: base ejection 2 s ...
EJECTION_MAX_S = 60.0  # ... doubling while the instance keeps failing, at most this
# Doublings that reach EJECTION_MAX_S; more would only overflow the float (an instance
# timing out thousands of deliveries under overload fails that many times while out).
_MAX_DOUBLINGS = 16

Source = Literal["probe", "delivery"]


@dataclass(slots=True)
class HealthTracker:
    """Consecutive failures and the state they lead to; returns the state after each event."""

    state: HealthStatus = "healthy"
    failures: int = 0
    ejections: int = 0
    reprobe_at: float | None = None

    def record(self, *, ok: bool, source: Source, now: float) -> HealthStatus:
        """Apply one probe or delivery outcome and return the (possibly new) state."""
        if ok:
            if self.state == "offline" and source != "probe":
                return self.state  # an offline instance comes back through a probe only
            self.state, self.failures, self.reprobe_at = "healthy", 0, None
            if source == "probe":
                self.ejections = 0
            return self.state
        self.failures += 1
        if self.failures >= OFFLINE_AFTER:
            self.ejections += 1  # each failure while out doubles the pause before the next probe
            self.state = "offline"
            doublings = min(self.ejections - 1, _MAX_DOUBLINGS)
            pause = min(EJECTION_MAX_S, EJECTION_BASE_S * 2**doublings)
            self.reprobe_at = now + pause
        elif self.failures >= SUSPECT_AFTER:
            self.state = "suspect"
        return self.state

    def adopt(self, state: HealthStatus, now: float) -> None:
        """Take a state another coordinator's checks reached, as if seen here."""
        if state == self.state:
            return
        self.state = state
        if state == "healthy":
            self.failures, self.reprobe_at = 0, None
        elif state == "suspect":
            self.failures = max(self.failures, SUSPECT_AFTER)
        else:
            self.failures = max(self.failures, OFFLINE_AFTER)
            self.reprobe_at = now + EJECTION_BASE_S

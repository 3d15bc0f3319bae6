"""The health state machine of one instance: healthy -> suspect -> offline and back.

Probes and deliveries feed the same counter of consecutive failures (active and
passive detection). An offline instance gets no traffic; only a successful probe
brings it back, and while it stays offline it is re-probed after a pause that
doubles with each ejection (Envoy-style): going offline is one, every failed
re-probe another; failures of deliveries still in flight when it went out are
not. So recovery does not wait a whole probe interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent_reach.model.agents import HealthStatus

SUSPECT_AFTER = 3  # 3 consecutive failures -> suspect (original production setting)
OFFLINE_AFTER = 5  # 2 more -> offline and out of the pool
EJECTION_BASE_S = 2.0  # base ejection 2 s ...
EJECTION_MAX_S = 60.0  # ... doubling with each failed re-probe, at most this
# Doublings that reach EJECTION_MAX_S; more would only overflow the float (an instance
# that fails its re-probes for days is ejected that many times).
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
        if self.state == "offline":
            # Out already: only a failed re-probe is a new ejection (and doubles the pause);
            # the deliveries still in flight when it went out add nothing.
            if source == "probe":
                self._eject(now)
        elif self.failures >= OFFLINE_AFTER:
            self._eject(now)
        elif self.failures >= SUSPECT_AFTER:
            self.state = "suspect"
        return self.state

    def _eject(self, now: float) -> None:
        self.ejections += 1
        self.state = "offline"
        doublings = min(self.ejections - 1, _MAX_DOUBLINGS)
        pause = min(EJECTION_MAX_S, EJECTION_BASE_S * 2**doublings)
        self.reprobe_at = now + pause

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

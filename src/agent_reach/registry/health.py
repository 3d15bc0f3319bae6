"""The health state machine of one instance: unknown -> healthy -> suspect -> offline and back.

A new instance is `unknown` until a probe passes or a delivery succeeds (its first probe
is sent at registration): routable, but any instance that has answered is preferred.
Failing before it ever answered, it is never `suspect` (there is nothing to suspect
yet): it stays `unknown` until OFFLINE_AFTER failures take it out.

Probes and deliveries feed the same counter of consecutive failures (active and
passive detection). An offline instance gets no traffic; only a successful probe
sent after it went out brings it back, and while it stays offline it is re-probed
after a pause that doubles with each ejection (Envoy-style): going offline is one,
every failed re-probe another; the deliveries and probes still in flight when it
went out count for nothing. So recovery does not wait a whole probe interval. Nor
does a passing probe sent before the latest failure clear it (the probe sent at
registration may answer after the first deliveries failed).

A passing probe readmits an instance but does not prove it: one whose health
endpoint passes while it fails every delivery (a fast-failing "black hole") is
ejected again at once, and each such ejection doubles the pause too. The count
starts over once a delivery succeeds, or once the instance has stayed in for
EJECTION_MAX_S since its readmission.
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

    state: HealthStatus = "unknown"
    failures: int = 0
    ejections: int = 0
    reprobe_at: float | None = None
    ejected_at: float | None = None
    readmitted_at: float | None = None
    failed_at: float | None = None  # the latest failure: a probe sent before it is stale

    def record(
        self, *, ok: bool, source: Source, now: float, sent_at: float | None = None
    ) -> HealthStatus:
        """Apply one probe or delivery outcome and return the (possibly new) state;
        `sent_at` is when a probe was sent (default: `now`)."""
        sent_at = now if sent_at is None else sent_at
        if self.state == "offline":
            return self._while_out(ok, source, now, sent_at)
        if ok and source == "probe" and self.failed_at is not None and sent_at < self.failed_at:
            return self.state  # passed before the failures that came since: says nothing
        if ok:
            if self.ejections and (source == "delivery" or self._stayed_in(now)):
                self.ejections, self.readmitted_at = 0, None
            self.state, self.failures, self.reprobe_at = "healthy", 0, None
            return self.state
        self.failures += 1
        self.failed_at = now
        if self.failures >= OFFLINE_AFTER:
            self._eject(now)
        elif self.failures >= SUSPECT_AFTER and self.state != "unknown":
            self.state = "suspect"
        return self.state

    def _while_out(self, ok: bool, source: Source, now: float, sent_at: float) -> HealthStatus:
        """Out of the pool, only a probe sent since it went out counts: its pass readmits
        the instance, its failure is another ejection (the pause doubles). Deliveries
        still in flight when it went out add nothing, nor does a probe sent before."""
        if source != "probe" or (self.ejected_at is not None and sent_at < self.ejected_at):
            return self.state
        if ok:
            self.state, self.failures, self.reprobe_at = "healthy", 0, None
            self.readmitted_at = now
        else:
            self._eject(now)
        return self.state

    def _stayed_in(self, now: float) -> bool:
        return self.readmitted_at is not None and now - self.readmitted_at >= EJECTION_MAX_S

    def _eject(self, now: float) -> None:
        self.ejections += 1
        self.state, self.ejected_at = "offline", now
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
        elif state == "unknown":
            self.reprobe_at = None
        elif state == "suspect":
            self.failures = max(self.failures, SUSPECT_AFTER)
        else:
            self.failures = max(self.failures, OFFLINE_AFTER)
            self.reprobe_at, self.ejected_at = now + EJECTION_BASE_S, now

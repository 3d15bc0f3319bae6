"""Every error Agent-Reach raises, and the one table that maps it to HTTP.

ReachError
  Unauthorized             401 unauthorized: no valid API key (token_*: a bearer token that fails)
  Forbidden                403 forbidden: the key's principal may not do this
  QuotaExceeded            429 quota_exceeded: try again after `retry_after_s`
  CallerError              the caller must change the request (4xx)
    InvalidRequest           400 invalid_request
      ValidationFailed         422 validation_error
        KeyReused                422 idempotency_key_reused: same id, different body
        WorkflowRefused          422 invalid_workflow (or the reason's own code: a cycle, ...)
    NotFound                 404 not_found
      UnknownAgent             404 unknown_agent: register again
      UnknownTask              404 unknown_task
      UnknownRun               404 unknown_run
      UnknownWorkflow          404 unknown_workflow
    Conflict                 409 conflict
      InProgress               409 in_progress: the same request_id is running
    PayloadTooLarge          413 payload_too_large
  NoRoute                  no agent can take the request
    NoCapability             404 no_capability
    NoMatch                  404 no_match: the text fits no capability well enough
    Ambiguous                422 ambiguous: the text fits two capabilities too equally
    NoInstance               503 no_instance
  AgentFailed              the agent answered with an error (502 agent_error)
    AgentUnreachable         502 agent_unreachable: never reached, safe to retry
    AgentTimeout             504 agent_timeout: may have acted (outcome unknown)
    OutcomeUnknown           502 outcome_unknown: may have acted; not re-sent (not idempotent)
  HopLimit                 508 hop_limit: the request went through too many agents
  StoreUnavailable         503 store_unavailable: the backend did not answer
    StoreFull                507 store_full: the backend is out of memory; nothing was written
  Overloaded               503 overloaded: beyond the admission limits; retry after `retry_after_s`

The server renders every one of them as ``{"error": {"code", "message", ...}}``
and the SDK maps such a body back to the same class with `error_from_body`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

REALM = 'Bearer realm="agent-reach"'  # the RFC 6750 challenge of every 401


class ReachError(Exception):
    """Root of every Agent-Reach error: a stable `code`, an HTTP `status`, a safe message."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]
        self.details = details

    def retry_after(self) -> str | None:
        """The `Retry-After` header value (whole seconds) when the error says when to retry."""
        seconds = self.details.get("retry_after_s")
        return None if seconds is None else str(max(1, math.ceil(float(seconds))))

    def challenge(self) -> str | None:
        """The `WWW-Authenticate` header value (RFC 6750) when the error asks for credentials."""
        return None

    def to_body(self) -> dict[str, Any]:
        """The wire form: ``{"error": {"code", "message", **details}}``."""
        return {"error": {"code": self.code, "message": self.message, **self.details}}


class Unauthorized(ReachError):
    """No valid API key: missing, malformed, unknown or revoked (one answer for all).

    A bearer token that does not verify is one too, with its own code (`token_expired`,
    `token_not_yet_valid`, `token_audience`, `token_issuer`, `token_signature`,
    `token_malformed`) and an RFC 6750 `invalid_token` challenge."""

    status = 401
    code = "unauthorized"

    def challenge(self) -> str | None:
        if not self.code.startswith("token_"):
            return REALM
        description = "".join(c for c in self.message if c.isprintable() and c not in '"\\')
        return f'{REALM}, error="invalid_token", error_description="{description[:200]}"'


class Forbidden(ReachError):
    """A valid key whose principal may not do this (deny by default)."""

    status = 403
    code = "forbidden"


class QuotaExceeded(ReachError):
    """The caller's token bucket for this capability is empty; `retry_after_s` says when."""

    status = 429
    code = "quota_exceeded"
    retryable = True


class CallerError(ReachError):
    """The request itself is wrong; sending it again unchanged will fail again."""

    status = 400
    code = "bad_request"


class InvalidRequest(CallerError):
    """Malformed JSON (400) or a body that breaks the schema (422, `validation_error`)."""

    code = "invalid_request"


class ValidationFailed(InvalidRequest):
    status = 422
    code = "validation_error"


class NotFound(CallerError):
    status = 404
    code = "not_found"


class UnknownAgent(NotFound):
    """The id has no live registration: the agent must register again."""

    code = "unknown_agent"


class UnknownTask(NotFound):
    """No task has this id (never accepted, or its record expired)."""

    code = "unknown_task"


class UnknownRun(NotFound):
    """No workflow run has this id for this caller (never started, or its record expired)."""

    code = "unknown_run"


class UnknownWorkflow(NotFound):
    """No workflow is saved under this name for this caller."""

    code = "unknown_workflow"


class Conflict(CallerError):
    status = 409
    code = "conflict"


class InProgress(Conflict):
    """The same request_id is being executed right now and the caller asked not to wait."""

    code = "in_progress"


class RunEnded(Conflict):
    """The workflow run has already ended: there is nothing left to cancel."""

    code = "run_ended"


class KeyReused(ValidationFailed):
    """The request_id was used before with a different request body."""

    code = "idempotency_key_reused"


class WorkflowRefused(ValidationFailed):
    """A workflow refused at submission, nothing executed: `code` names the reason
    (`workflow_cycle`, `unknown_dependency`, `duplicate_step`, `too_many_steps`,
    `bad_template`, `missing_input`) and the details name the steps involved."""

    code = "invalid_workflow"


class PayloadTooLarge(CallerError):
    status = 413
    code = "payload_too_large"


class NoRoute(ReachError):
    """No live agent can take the request (nothing was sent)."""

    status = 503
    code = "no_route"


class NoCapability(NoRoute):
    """No registered instance has ever offered the requested capability."""

    status = 404
    code = "no_capability"


class NoMatch(NoRoute):
    """The text matched no capability with enough confidence (and no generic agent is up)."""

    status = 404
    code = "no_match"


class Ambiguous(NoRoute):
    """The two best candidates serve different capabilities and are within the margin."""

    status = 422
    code = "ambiguous"


class NoInstance(NoRoute):
    """The capability exists but none of its instances is live right now."""

    status = 503
    code = "no_instance"
    retryable = True


class AgentFailed(ReachError):
    """The agent answered, but with a failure status or an unreadable body."""

    status = 502
    code = "agent_error"
    retryable = True


class AgentUnreachable(AgentFailed):
    """The delivery never reached the agent (connect refused or reset before sending)."""

    code = "agent_unreachable"


class AgentTimeout(AgentFailed):
    """No answer within the timeout; the agent may have acted (`outcome_unknown`)."""

    status = 504
    code = "agent_timeout"


class OutcomeUnknown(AgentFailed):
    """An earlier delivery may have acted and no instance declared `idempotent`: not re-sent."""

    code = "outcome_unknown"
    retryable = False


class HopLimit(ReachError):
    """The request's hop budget is spent: agents are passing it around in a loop."""

    status = 508
    code = "hop_limit"


class StoreUnavailable(ReachError):
    """The state backend did not answer in time; nothing was decided."""

    status = 503
    code = "store_unavailable"
    retryable = True


class StoreFull(StoreUnavailable):
    """The state backend refused a write for want of memory (Redis at its `maxmemory`
    with `noeviction`); nothing was written. Reads still work; writes work again once
    expiries or deletions free room."""

    status = 507
    code = "store_full"


class Overloaded(ReachError):
    """The coordinator (or the capability) holds as many requests as it may: refused at
    once, before anything ran; retry after `retry_after_s`, with the same request_id."""

    status = 503
    code = "overloaded"
    retryable = True


_BY_CODE: dict[str, type[ReachError]] = {
    cls.code: cls
    for cls in (
        Unauthorized,
        Forbidden,
        QuotaExceeded,
        CallerError,
        InvalidRequest,
        ValidationFailed,
        NotFound,
        UnknownAgent,
        UnknownTask,
        UnknownRun,
        UnknownWorkflow,
        Conflict,
        InProgress,
        RunEnded,
        KeyReused,
        WorkflowRefused,
        PayloadTooLarge,
        NoRoute,
        NoCapability,
        NoMatch,
        Ambiguous,
        NoInstance,
        AgentFailed,
        AgentUnreachable,
        AgentTimeout,
        OutcomeUnknown,
        HopLimit,
        StoreUnavailable,
        StoreFull,
        Overloaded,
    )
}


def error_from_body(status: int, body: Any) -> ReachError:
    """Rebuild the error a coordinator rendered, so SDK callers can catch by class."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        exc = ReachError(f"unexpected answer with HTTP status {status}", code="unexpected_answer")
        exc.status = status  # type: ignore[misc]
        return exc
    code = str(error.get("code", "internal_error"))
    message = str(error.get("message", ""))
    details = {k: v for k, v in error.items() if k not in ("code", "message")}
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = _closest_by_status(status)
        exc = cls(message, code=code, **details)
    else:
        exc = cls(message, **details)
    exc.status = status  # type: ignore[misc]
    return exc


def _closest_by_status(status: int) -> type[ReachError]:
    if status == 401:
        return Unauthorized
    if status == 403:
        return Forbidden
    if status == 404:
        return NotFound
    if status == 409:
        return Conflict
    if 400 <= status < 500:
        return CallerError
    if status == 504:
        return AgentTimeout
    if status == 502:
        return AgentFailed
    return ReachError

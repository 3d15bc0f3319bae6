"""Every error Agent-Reach raises, and the one table that maps it to HTTP.

ReachError
  Unauthorized             401 unauthorized: no valid API key (token_*: a bearer token that fails)
  Forbidden                403 forbidden: the key's principal may not do this
  QuotaExceeded            429 quota_exceeded: try again after `retry_after_s`
  CallerError              the caller must change the request (4xx)
    InvalidRequest           400 invalid_request
      TlsSettingError          400 bad_tls_setting: a TLS setting names an unusable file
      ValidationFailed         422 validation_error
        KeyReused                422 idempotency_key_reused: same id, different body
        WorkflowRefused          422 invalid_workflow (or the reason's own code: a cycle, ...)
        EndpointRefused          422 endpoint_not_allowed: where agents may not be
    NotFound                 404 not_found
      UnknownAgent             404 unknown_agent: register again
      UnknownTask              404 unknown_task
      UnknownRun               404 unknown_run
      UnknownWorkflow          404 unknown_workflow
      UnknownRequest           404 unknown_request: no request of this caller has this id
    Conflict                 409 conflict
      InProgress               409 in_progress: the same request_id is running
      RunEnded                 409 run_ended: the workflow run has already ended
      AlreadyRated             409 already_rated
    PayloadTooLarge          413 payload_too_large
    TargetTooLong            414 uri_too_long
    UnsupportedMediaType     415 unsupported_media_type
    HeadersTooLarge          431 headers_too_large
    VersionNotSupported      505 http_version_not_supported
    DelegationCycle          422 delegation_cycle: the capability is already in the chain
  NoRoute                  no agent can take the request
    NoCapability             404 no_capability
    NoMatch                  404 no_match: the text fits no capability well enough
    Ambiguous                422 ambiguous: the text fits two capabilities too equally
    NoInstance               503 no_instance
    AllDeclined              503 all_declined: every candidate asked turned the request down
  AgentFailed              the agent answered with an error (502 agent_error)
    AgentUnreachable         502 agent_unreachable: never reached, safe to retry
    AgentTimeout             504 agent_timeout: may have acted (outcome unknown)
    OutcomeUnknown           502 outcome_unknown: may have acted; not re-sent (not idempotent)
  HopLimit                 508 hop_limit: the request went through too many agents
  DelegationExpired        504 delegation_expired: the chain's deadline passed; not sent
  StoreUnavailable         503 store_unavailable: the backend did not answer
    StoreFull                507 store_full: the backend is out of memory; nothing was written
  Overloaded               503 overloaded: beyond the admission limits; retry after `retry_after_s`
  TokenUnavailable         502 token_unavailable: (SDK) no token could be had from the IdP
  TaskPending              500 task_pending: (SDK) the task had not finished within `wait_s`

The server renders every one of them as ``{"error": {"code", "message", ...}}``
and the SDK maps such a body back to the same class with `error_from_body`: every
class is in `ERROR_CLASSES`, each under its own code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_reach.model.invocations import TaskView

REALM = 'Bearer realm="agent-reach"'  # the RFC 6750 challenge of every 401


class ReachError(Exception):
    """Root of every Agent-Reach error: a stable `code`, an HTTP `status`, a safe message.

    `code`, `status` and `retryable` are the class's unless given: a failure whose
    class may be retried says `retryable=False` when this one may not (the agent acted
    and answered), as Temporal's `ApplicationError(non_retryable=...)` does. `details`
    are the wire body's other fields, in the order given."""

    status: int = 500
    code: str = "internal_error"
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        retryable: bool | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if retryable is not None:
            self.retryable = retryable
        self.details = details

    # What a failed delivery says, read as typed fields (on the wire they are details).

    @property
    def http_status(self) -> int | None:
        """The status the agent answered with, when it answered."""
        value = self.details.get("http_status")
        return value if isinstance(value, int) else None

    @property
    def outcome_unknown(self) -> bool | None:
        """Whether the agent may have acted (the request was sent); None when unsaid."""
        value = self.details.get("outcome_unknown")
        return None if value is None else bool(value)

    @outcome_unknown.setter
    def outcome_unknown(self, value: bool) -> None:
        self.details["outcome_unknown"] = value

    @property
    def connect_timeout(self) -> bool:
        """Whether the connection timed out (weaker evidence than a refusal)."""
        return bool(self.details.get("connect_timeout", False))

    @property
    def attempts(self) -> list[Any]:
        """The delivery attempts made before this error, first to last."""
        value = self.details.get("attempts")
        return value if isinstance(value, list) else []

    @attempts.setter
    def attempts(self, value: list[Any]) -> None:
        self.details["attempts"] = value

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


class UnknownRequest(NotFound):
    """No request this caller may rate or correct has this id (never served or routed,
    too old, or another's)."""

    code = "unknown_request"


class Conflict(CallerError):
    status = 409
    code = "conflict"


class InProgress(Conflict):
    """The same request_id is being executed right now and the caller asked not to wait."""

    code = "in_progress"


class RunEnded(Conflict):
    """The workflow run has already ended: there is nothing left to cancel."""

    code = "run_ended"


class AlreadyRated(Conflict):
    """The caller has already rated this request."""

    code = "already_rated"


class KeyReused(ValidationFailed):
    """The request_id was used before with a different request body."""

    code = "idempotency_key_reused"


class WorkflowRefused(ValidationFailed):
    """A workflow refused at submission, nothing executed: `code` names the reason
    (`workflow_cycle`, `unknown_dependency`, `duplicate_step`, `too_many_steps`,
    `bad_template`, `missing_input`) and the details name the steps involved."""

    code = "invalid_workflow"


class EndpointRefused(ValidationFailed):
    """The endpoint points where agents may not be."""

    code = "endpoint_not_allowed"


class TlsSettingError(InvalidRequest):
    """A TLS setting names a file that cannot be used; the message says which and why."""

    code = "bad_tls_setting"


class PayloadTooLarge(CallerError):
    status = 413
    code = "payload_too_large"


class TargetTooLong(CallerError):
    """The request target is too long (414, RFC 9110 §15.5.15)."""

    status = 414
    code = "uri_too_long"


class UnsupportedMediaType(CallerError):
    """A `/v1` body declared as something other than JSON (415, RFC 9110 §15.5.16)."""

    status = 415
    code = "unsupported_media_type"


class HeadersTooLarge(CallerError):
    """Too many request headers, or too many bytes of them (431, RFC 6585)."""

    status = 431
    code = "headers_too_large"


class VersionNotSupported(CallerError):
    """A request line naming an HTTP version other than 1.0 and 1.1 (505)."""

    status = 505
    code = "http_version_not_supported"


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


class AllDeclined(NoRoute):
    """Every candidate asked turned the request down and no generic agent is live."""

    status = 503
    code = "all_declined"


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


class DelegationCycle(CallerError):
    """The capability is already in the chain: handing it back is passing the buck (a
    caller's error, as the SDKs read a 422 before the class was in the table)."""

    status = 422
    code = "delegation_cycle"


class DelegationExpired(ReachError):
    """The chain's deadline passed before the request could be delivered (it waited,
    parked): it was not sent, and a token for it could not be valid any more."""

    status = 504
    code = "delegation_expired"


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


class TokenUnavailable(ReachError):
    """(SDK) No token could be had from the IdP: unreachable, or it refused the client."""

    status = 502
    code = "token_unavailable"


class TaskPending(ReachError):
    """(SDK) `wait_s` passed before the task finished; `task` says where it stands."""

    code = "task_pending"
    task: TaskView | None = None  # None when rebuilt from a body

    def __init__(self, message: str, *, task: TaskView | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.task = task


ERROR_CLASSES: Mapping[str, type[ReachError]] = {
    cls.code: cls
    for cls in (
        Unauthorized,
        Forbidden,
        QuotaExceeded,
        CallerError,
        InvalidRequest,
        TlsSettingError,
        ValidationFailed,
        KeyReused,
        WorkflowRefused,
        EndpointRefused,
        NotFound,
        UnknownAgent,
        UnknownTask,
        UnknownRun,
        UnknownWorkflow,
        UnknownRequest,
        Conflict,
        InProgress,
        RunEnded,
        AlreadyRated,
        PayloadTooLarge,
        TargetTooLong,
        UnsupportedMediaType,
        HeadersTooLarge,
        VersionNotSupported,
        NoRoute,
        NoCapability,
        NoMatch,
        Ambiguous,
        NoInstance,
        AllDeclined,
        AgentFailed,
        AgentUnreachable,
        AgentTimeout,
        OutcomeUnknown,
        HopLimit,
        DelegationCycle,
        DelegationExpired,
        StoreUnavailable,
        StoreFull,
        Overloaded,
        TokenUnavailable,
        TaskPending,
    )
}
"""Every `ReachError` class by its code: the one table the SDK rebuilds errors from."""


def error_from_body(status: int, body: Any) -> ReachError:
    """Rebuild the error a coordinator rendered, so SDK callers can catch by class."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ReachError(
            f"unexpected answer with HTTP status {status}", code="unexpected_answer", status=status
        )
    code = str(error.get("code", "internal_error"))
    message = str(error.get("message", ""))
    details = {k: v for k, v in error.items() if k not in ("code", "message")}
    cls = ERROR_CLASSES.get(code) or _closest_by_status(status)
    # Not `cls(message, **details)`: a detail may share a name with a keyword (`status`).
    exc = cls.__new__(cls)
    ReachError.__init__(exc, message, code=code, status=status)
    exc.details = details
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

/**
 * Every error the coordinator answers, rebuilt as a class the caller can catch
 * (`catch (e) { if (e instanceof NoCapability) ... }`): one table from the API's
 * `error.code`, the same as the Python SDK's (`agent_reach/errors.py`).
 *
 * Each error carries `code` (the API's machine-readable code), `status` (the HTTP
 * status it came with), `retryable`, `retryAfter` (seconds, when the answer said when)
 * and `details`: the problem's other fields (`request_id`, `trace_id`, `route`,
 * `problems`, `failed`...).
 */

import type { TaskView } from "./views.js";

/** A problem's fields beside `code` and `message`, as the coordinator sent them. */
export type ErrorDetails = Record<string, unknown>;

export class ReachError extends Error {
  static readonly status: number = 500;
  static readonly code: string = "internal_error";
  static readonly retryable: boolean = false;

  /** The API's machine-readable code (`no_capability`, `version_conflict`...). */
  readonly code: string;
  /** The HTTP status the error came with. */
  status: number;
  /** Whether trying again (later, or elsewhere) may succeed. */
  readonly retryable: boolean;
  readonly details: ErrorDetails;

  constructor(message: string, options: { code?: string; status?: number; details?: ErrorDetails } = {}) {
    super(message);
    const cls = new.target as unknown as typeof ReachError;
    this.name = cls.name;
    this.code = options.code ?? cls.code;
    this.status = options.status ?? cls.status;
    this.retryable = cls.retryable;
    this.details = options.details ?? {};
  }

  /** Seconds to wait before trying again, when the answer said so (`retry_after_s`). */
  get retryAfter(): number | undefined {
    const seconds = this.details["retry_after_s"];
    return typeof seconds === "number" ? seconds : undefined;
  }

  /** The wire form: `{"error": {"code", "message", ...details}}`. */
  toBody(): { error: Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}

export class Unauthorized extends ReachError {
  static override readonly status: number = 401;
  static override readonly code: string = "unauthorized";
}
export class Forbidden extends ReachError {
  static override readonly status: number = 403;
  static override readonly code: string = "forbidden";
}
export class QuotaExceeded extends ReachError {
  static override readonly status: number = 429;
  static override readonly code: string = "quota_exceeded";
  static override readonly retryable: boolean = true;
}
export class CallerError extends ReachError {
  static override readonly status: number = 400;
  static override readonly code: string = "bad_request";
}
export class InvalidRequest extends CallerError {
  static override readonly code: string = "invalid_request";
}
export class TlsSettingError extends InvalidRequest {
  static override readonly code: string = "bad_tls_setting";
}
export class ValidationFailed extends InvalidRequest {
  static override readonly status: number = 422;
  static override readonly code: string = "validation_error";
}
export class NotFound extends CallerError {
  static override readonly status: number = 404;
  static override readonly code: string = "not_found";
}
export class UnknownAgent extends NotFound {
  static override readonly code: string = "unknown_agent";
}
export class UnknownTask extends NotFound {
  static override readonly code: string = "unknown_task";
}
export class UnknownRun extends NotFound {
  static override readonly code: string = "unknown_run";
}
export class UnknownWorkflow extends NotFound {
  static override readonly code: string = "unknown_workflow";
}
export class UnknownRequest extends NotFound {
  static override readonly code: string = "unknown_request";
}
export class Conflict extends CallerError {
  static override readonly status: number = 409;
  static override readonly code: string = "conflict";
}
export class InProgress extends Conflict {
  static override readonly code: string = "in_progress";
}
export class RunEnded extends Conflict {
  static override readonly code: string = "run_ended";
}
export class AlreadyRated extends Conflict {
  static override readonly code: string = "already_rated";
}
export class KeyReused extends ValidationFailed {
  static override readonly code: string = "idempotency_key_reused";
}
export class WorkflowRefused extends ValidationFailed {
  static override readonly code: string = "invalid_workflow";
}
export class EndpointRefused extends ValidationFailed {
  static override readonly code: string = "endpoint_not_allowed";
}
export class PayloadTooLarge extends CallerError {
  static override readonly status: number = 413;
  static override readonly code: string = "payload_too_large";
}
export class TargetTooLong extends CallerError {
  static override readonly status: number = 414;
  static override readonly code: string = "uri_too_long";
}
export class UnsupportedMediaType extends CallerError {
  static override readonly status: number = 415;
  static override readonly code: string = "unsupported_media_type";
}
export class HeadersTooLarge extends CallerError {
  static override readonly status: number = 431;
  static override readonly code: string = "headers_too_large";
}
export class VersionNotSupported extends CallerError {
  static override readonly status: number = 505;
  static override readonly code: string = "http_version_not_supported";
}
export class NoRoute extends ReachError {
  static override readonly status: number = 503;
  static override readonly code: string = "no_route";
}
export class NoCapability extends NoRoute {
  static override readonly status: number = 404;
  static override readonly code: string = "no_capability";
}
export class NoMatch extends NoRoute {
  static override readonly status: number = 404;
  static override readonly code: string = "no_match";
}
export class Ambiguous extends NoRoute {
  static override readonly status: number = 422;
  static override readonly code: string = "ambiguous";
}
export class NoInstance extends NoRoute {
  static override readonly status: number = 503;
  static override readonly code: string = "no_instance";
  static override readonly retryable: boolean = true;
}
export class AllDeclined extends NoRoute {
  static override readonly status: number = 503;
  static override readonly code: string = "all_declined";
}
export class AgentFailed extends ReachError {
  static override readonly status: number = 502;
  static override readonly code: string = "agent_error";
  static override readonly retryable: boolean = true;
}
export class AgentUnreachable extends AgentFailed {
  static override readonly code: string = "agent_unreachable";
}
export class AgentTimeout extends AgentFailed {
  static override readonly status: number = 504;
  static override readonly code: string = "agent_timeout";
}
export class OutcomeUnknown extends AgentFailed {
  static override readonly code: string = "outcome_unknown";
  static override readonly retryable: boolean = false;
}
export class HopLimit extends ReachError {
  static override readonly status: number = 508;
  static override readonly code: string = "hop_limit";
}
export class DelegationCycle extends CallerError {
  static override readonly status: number = 422;
  static override readonly code: string = "delegation_cycle";
}
export class DelegationExpired extends ReachError {
  static override readonly status: number = 504;
  static override readonly code: string = "delegation_expired";
}
export class StoreUnavailable extends ReachError {
  static override readonly status: number = 503;
  static override readonly code: string = "store_unavailable";
  static override readonly retryable: boolean = true;
}
export class StoreFull extends StoreUnavailable {
  static override readonly status: number = 507;
  static override readonly code: string = "store_full";
}
export class Overloaded extends ReachError {
  static override readonly status: number = 503;
  static override readonly code: string = "overloaded";
  static override readonly retryable: boolean = true;
}

/** An IdP that cannot be reached or refuses the client (raised by `ClientCredentials`). */
export class TokenUnavailable extends ReachError {
  static override readonly status: number = 502;
  static override readonly code: string = "token_unavailable";
}

/** `waitMs` passed before the task finished (raised by `ReachClient.invoke`); `task` says
 * where it stands (absent when rebuilt from an error body). */
export class TaskPending extends ReachError {
  static override readonly code: string = "task_pending";
  readonly task: TaskView;

  constructor(task: TaskView) {
    const why = (task.instances ?? [])
      .map((i) => `${String(i["agent_id"])} (${String(i["status"])}): ${String(i["last_error"] ?? "no error recorded")}`)
      .join("; ");
    super(`task ${task.taskId} is still ${task.status}${why ? ` — ${why}` : ""}`, { details: { task_id: task.taskId } });
    this.task = task;
  }
}

type ErrorClass = typeof ReachError;

/** The API's error code -> its class: the table `errorFromBody` picks from. */
export const ERROR_CLASSES: Readonly<Record<string, ErrorClass>> = Object.freeze(
  Object.fromEntries(
    [
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
    ].map((cls) => [cls.code, cls as unknown as ErrorClass]),
  ),
);

/**
 * The error a coordinator rendered as `{"error": {"code", "message", ...}}`, by class:
 * the class of its code, else the closest one for its status (a `token_expired` 401 is
 * an `Unauthorized` with that code). `retryAfterHeader` (seconds) fills `retry_after_s`
 * when the body did not.
 */
export function errorFromBody(status: number, body: unknown, retryAfterHeader?: string | null): ReachError {
  const error = isObject(body) ? body["error"] : undefined;
  if (!isObject(error)) {
    return new ReachError(`unexpected answer with HTTP status ${status}`, { code: "unexpected_answer", status });
  }
  const code = String(error["code"] ?? "internal_error");
  const message = String(error["message"] ?? "");
  const details: ErrorDetails = {};
  for (const [name, value] of Object.entries(error)) {
    if (name !== "code" && name !== "message") details[name] = value;
  }
  if (details["retry_after_s"] === undefined && retryAfterHeader) {
    const seconds = Number(retryAfterHeader);
    if (Number.isFinite(seconds)) details["retry_after_s"] = seconds;
  }
  const cls = ERROR_CLASSES[code] ?? closestByStatus(status);
  // ReachError's constructor for every class (`TaskPending`'s own takes a task).
  return Reflect.construct(ReachError, [message, { code, status, details }], cls) as ReachError;
}

function closestByStatus(status: number): ErrorClass {
  if (status === 401) return Unauthorized;
  if (status === 403) return Forbidden;
  if (status === 404) return NotFound;
  if (status === 409) return Conflict;
  if (status >= 400 && status < 500) return CallerError;
  if (status === 504) return AgentTimeout;
  if (status === 502) return AgentFailed;
  return ReachError;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The coordinator (or a context URL) could not be reached at all. */
export function unreachable(where: string, cause: unknown): ReachError {
  return new ReachError(`could not reach the coordinator at ${where}: ${describe(cause)}`, {
    code: "coordinator_unreachable",
  });
}

/** A fetch failure in words: undici hides the socket error in `cause`. */
export function describe(error: unknown): string {
  if (error instanceof Error) {
    if (error.name === "TimeoutError") return "no answer within the timeout";
    const cause = (error as { cause?: unknown }).cause;
    if (cause instanceof Error && cause.message) return cause.message;
    return error.message || error.name;
  }
  return String(error);
}

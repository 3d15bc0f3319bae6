/** The coordinator's answers as the SDK gives them: camelCase at the top, and `raw`,
 * the answer as the API sent it (nested objects such as `route` keep the API's names). */
import { ReachError, isObject } from "./errors.js";
import type { TaskView } from "./views.js";

export interface InvokeResult {
  /** `ok`, `fallback` (another instance or a generic agent answered) or `degraded`. */
  status: string;
  agentId: string | null;
  /** The agent's answer, unchanged. */
  result: unknown;
  requestId: string;
  traceId: string;
  /** The routing decision, as the API gives it (`capability`, `candidates`, `negotiation`...). */
  route: Record<string, unknown> | null;
  /** Each delivery attempt (`agent_id`, `outcome`, `cost`...). */
  attempts: Record<string, unknown>[];
  /** How a non-JSON answer was turned into `result` (`text`, `xml`, `sse`), else null. */
  normalized: string | null;
  raw: Record<string, unknown>;
}

export interface ContextView {
  contextId: string;
  version: number;
  document: Record<string, unknown> | undefined;
  expiresInS: number | undefined;
  raw: Record<string, unknown>;
}

export function invokeResult(body: unknown): InvokeResult {
  const raw = expectObject(body, "invoke answer");
  return {
    status: String(raw["status"]),
    agentId: (raw["agent_id"] as string | null | undefined) ?? null,
    result: raw["result"],
    requestId: String(raw["request_id"]),
    traceId: String(raw["trace_id"]),
    route: isObject(raw["route"]) ? raw["route"] : null,
    attempts: Array.isArray(raw["attempts"]) ? (raw["attempts"] as Record<string, unknown>[]) : [],
    normalized: (raw["normalized"] as string | null | undefined) ?? null,
    raw,
  };
}

export function taskView(body: unknown): TaskView {
  const raw = expectObject(body, "task");
  return {
    taskId: String(raw["task_id"]),
    requestId: String(raw["request_id"]),
    traceId: String(raw["trace_id"]),
    status: String(raw["status"]),
    httpStatus: typeof raw["http_status"] === "number" ? raw["http_status"] : null,
    answer: raw["answer"],
    instances: Array.isArray(raw["instances"]) ? (raw["instances"] as Record<string, unknown>[]) : null,
    raw,
  };
}

export function contextView(body: unknown): ContextView {
  const raw = expectObject(body, "context");
  return {
    contextId: String(raw["context_id"]),
    version: Number(raw["version"]),
    document: isObject(raw["document"]) ? raw["document"] : undefined,
    expiresInS: typeof raw["expires_in_s"] === "number" ? raw["expires_in_s"] : undefined,
    raw,
  };
}

export function expectObject(body: unknown, what: string): Record<string, unknown> {
  if (!isObject(body)) {
    throw new ReachError(`the coordinator's ${what} has an unexpected shape`, { code: "unexpected_answer" });
  }
  return body;
}

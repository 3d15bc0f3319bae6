/**
 * Callers' side of the coordinator API. Every non-2xx answer throws the class of its
 * error code (`NoCapability`, `AgentTimeout`, `Conflict`...), and a coordinator that
 * cannot be reached throws `ReachError` with code `coordinator_unreachable`.
 */
import { ReachError, TaskPending, describe, errorFromBody, isObject } from "./errors.js";
import type { InvokeResult, ContextView } from "./results.js";
import type { TaskView } from "./views.js";
import { contextView, expectObject, invokeResult, taskView } from "./results.js";
import { STREAM_MEDIA_TYPE, readEvents } from "./streams.js";
import type { StreamEvent } from "./streams.js";
import type { TokenProvider } from "./tokens.js";
import { DEFAULT_TIMEOUT_MS, Transport } from "./transport.js";

const TASK_POLL_FIRST_MS = 50; // a task is looked at after 50 ms ...
const TASK_POLL_MAX_MS = 1000; // ... then less often, at most every second
const MERGE_PATCH = "application/merge-patch+json"; // RFC 7386

export interface ReachClientOptions {
  /** The coordinator's base URL, e.g. `http://127.0.0.1:8500`. */
  coordinator: string;
  apiKey?: string;
  /** An IdP token instead of `apiKey`: a function returning one, or `ClientCredentials`. */
  tokenProvider?: TokenProvider;
  /** Per call (default 35 s: the `long` timeout class's 30 s, and routing). */
  timeoutMs?: number;
}

export interface InvokeOptions {
  capability?: string;
  /** The user's words: routed by them, or given to a named capability. */
  text?: string;
  payload?: unknown;
  /** The same id is the same request: never executed twice. */
  requestId?: string;
  contextId?: string;
  /** Cost units the request and every delegation it leads to may spend. */
  budget?: number;
  timeoutClass?: string;
  /** When no instance can take it now: park it (true, the default) or fail at once. */
  suspend?: boolean;
  maxHop?: number;
  onDuplicate?: "wait" | "reject";
  mode?: "sync" | "async" | "fanout";
  /** The caller's own deadline (`X-Reach-Deadline-Ms`): the delivery must answer within it. */
  deadlineMs?: number;
  /** How long `invoke` waits for a task (202) to finish; `null` waits without limit. */
  waitMs?: number | null;
}

export interface RouteOptions {
  capability?: string;
  text?: string;
  contextId?: string;
  requestId?: string;
  /** For text: how many ranked capabilities the caller may invoke to list (1-50, the
   * API's `top_k`; default 3), in the answer's `ranked`, whatever the decision. */
  topK?: number;
}

/** Raised when `waitMs` passed before the task finished; `task` says where it stands. */
export class ReachClient {
  readonly coordinator: string;
  readonly #http: Transport;

  constructor(options: ReachClientOptions | Transport) {
    this.#http = options instanceof Transport ? options : new Transport(options);
    this.coordinator = this.#http.base;
  }

  /** Route and deliver; the agent's answer is `result`. A task (202: suspended or
   * `long` requests) is waited for up to `waitMs` (default 35 s), then `TaskPending`. */
  async invoke(options: InvokeOptions): Promise<InvokeResult> {
    const { body } = await this.#http.json({
      method: "POST",
      path: "/v1/invoke",
      body: invokeBody(options),
      headers: deadlineHeader(options),
    });
    if (isObject(body) && "task_id" in body) {
      return this.waitTask(String(body["task_id"]), options.waitMs === undefined ? DEFAULT_TIMEOUT_MS : options.waitMs);
    }
    return invokeResult(body);
  }

  /** Route and deliver, asking for a stream: each event as the agent sends it, then the
   * last one (`reach.end`) with the whole answer in `answer`. An agent that does not
   * stream gives that last event only. An error before the stream began, or one that
   * ended it (`reach.error`), throws its class. Leaving the loop early closes the
   * connection: the coordinator stops the agent's stream. */
  async *invokeStream(options: InvokeOptions): AsyncGenerator<StreamEvent> {
    const closed = new AbortController();
    try {
      const response = await this.#http.send({
        method: "POST",
        path: "/v1/invoke",
        body: invokeBody(options),
        headers: { ...deadlineHeader(options), accept: STREAM_MEDIA_TYPE },
        signal: closed.signal,
      });
      const type = response.headers.get("content-type") ?? "";
      if (!response.ok || !type.startsWith(STREAM_MEDIA_TYPE) || response.body === null) {
        const text = await response.text();
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        if (!response.ok) throw errorFromBody(response.status, body, response.headers.get("retry-after"));
        throw new ReachError("expected a stream, got a whole answer", { code: "unexpected_answer" });
      }
      yield* readEvents(response.body);
    } catch (error) {
      if (error instanceof ReachError) throw error;
      if (error instanceof SyntaxError) {
        throw new ReachError(`an event of the stream is not JSON: ${error.message}`, { code: "unexpected_answer" });
      }
      throw new ReachError(`the stream from ${this.coordinator} broke: ${describe(error)}`, { code: "coordinator_unreachable" });
    } finally {
      closed.abort();
    }
  }

  /** Start an asynchronous invocation (`mode: async`); follow it with `task` / `waitTask`. */
  async submit(options: InvokeOptions): Promise<TaskView> {
    const { body } = await this.#http.json({
      method: "POST",
      path: "/v1/invoke",
      body: invokeBody({ ...options, mode: "async" }),
    });
    if (!isObject(body) || !("task_id" in body)) {
      throw new ReachError("expected a task for an asynchronous request", { code: "unexpected_answer" });
    }
    return taskView(body);
  }

  /** The task's status, and its answer once finished. */
  async task(taskId: string): Promise<TaskView> {
    const { body } = await this.#http.json({ method: "GET", path: `/v1/tasks/${encodeURIComponent(taskId)}` });
    return taskView(body);
  }

  /** Poll until the task finishes: its result, or the error it ended with. */
  async waitTask(taskId: string, waitMs: number | null = DEFAULT_TIMEOUT_MS): Promise<InvokeResult> {
    const deadline = waitMs === null ? Number.POSITIVE_INFINITY : performance.now() + waitMs;
    let pause = TASK_POLL_FIRST_MS;
    for (;;) {
      const task = await this.task(taskId);
      if (task.httpStatus !== null) {
        if (task.httpStatus === 200) return invokeResult(task.answer);
        throw errorFromBody(task.httpStatus, task.answer);
      }
      if (performance.now() + pause > deadline) throw new TaskPending(task);
      await sleep(pause);
      pause = Math.min(TASK_POLL_MAX_MS, pause * 2);
    }
  }

  /** The explained routing decision; nothing is invoked. */
  async route(options: RouteOptions): Promise<Record<string, unknown>> {
    const body = present({
      capability: options.capability,
      text: options.text,
      context_id: options.contextId,
      request_id: options.requestId,
      top_k: options.topK,
    });
    return expectObject((await this.#http.json({ method: "POST", path: "/v1/route", body })).body, "route");
  }

  /** Register (or re-register) an instance: the registration body of the agent contract. */
  async register(registration: Record<string, unknown>, options: { timeoutMs?: number } = {}): Promise<Record<string, unknown>> {
    const sent = { method: "POST", path: "/v1/agents", body: registration };
    const { body } = await this.#http.json(options.timeoutMs === undefined ? sent : { ...sent, timeoutMs: options.timeoutMs });
    return expectObject(body, "instance");
  }

  /** Renew the lease and return its ttl (s); `UnknownAgent` means register again. */
  async heartbeat(agentId: string): Promise<number> {
    const { body } = await this.#http.json({ method: "POST", path: `/v1/agents/${encodeURIComponent(agentId)}/heartbeat` });
    return Number(expectObject(body, "heartbeat")["ttl"]);
  }

  /** Take the instance out of the pool at once. */
  async deregister(agentId: string): Promise<void> {
    await this.#http.json({ method: "DELETE", path: `/v1/agents/${encodeURIComponent(agentId)}` });
  }

  /** Every instance the key may see, with its status, load, success rate and latency. */
  async agents(): Promise<Record<string, unknown>[]> {
    const { body } = await this.#http.json({ method: "GET", path: "/v1/agents" });
    return expectObject(body, "agent list")["agents"] as Record<string, unknown>[];
  }

  /** Capability -> ids of its live instances. */
  async capabilities(): Promise<Record<string, string[]>> {
    const { body } = await this.#http.json({ method: "GET", path: "/v1/capabilities" });
    return expectObject(body, "capability list")["capabilities"] as Record<string, string[]>;
  }

  /** A new context owned by this key's principal. */
  async createContext(options: { document?: Record<string, unknown>; ttlS?: number; shareWith?: string[] } = {}): Promise<ContextView> {
    const body = present({ document: options.document, ttl_s: options.ttlS, share_with: options.shareWith });
    return contextView((await this.#http.json({ method: "POST", path: "/v1/contexts", body })).body);
  }

  /** A context's document and version; `fields` reads a projection. */
  async getContext(contextId: string, options: { fields?: string[] } = {}): Promise<ContextView> {
    const query = options.fields ? `?fields=${encodeURIComponent(options.fields.join(","))}` : "";
    const path = `/v1/contexts/${encodeURIComponent(contextId)}${query}`;
    return contextView((await this.#http.json({ method: "GET", path })).body);
  }

  /** Merge `patch` (RFC 7386); with `ifVersion`, `Conflict` (`version_conflict`) when
   * the context changed since. */
  async patchContext(contextId: string, patch: Record<string, unknown>, options: { ifVersion?: number } = {}): Promise<ContextView> {
    const headers: Record<string, string> = { "content-type": MERGE_PATCH };
    if (options.ifVersion !== undefined) headers["if-match"] = String(options.ifVersion);
    const path = `/v1/contexts/${encodeURIComponent(contextId)}`;
    return contextView((await this.#http.json({ method: "PATCH", path, raw: JSON.stringify(patch), headers })).body);
  }

  async deleteContext(contextId: string): Promise<void> {
    await this.#http.json({ method: "DELETE", path: `/v1/contexts/${encodeURIComponent(contextId)}` });
  }

  /** The capability that should have served an earlier text request (`capability`), or a
   * rating of an earlier answer (`rating`). */
  async feedback(options: { requestId: string; capability?: string; rating?: "good" | "bad" }): Promise<Record<string, unknown>> {
    const body = present({ request_id: options.requestId, capability: options.capability, rating: options.rating });
    return expectObject((await this.#http.json({ method: "POST", path: "/v1/feedback", body })).body, "feedback");
  }

  /** A client whose calls carry these headers too (a handler's hop and trace). */
  withHeaders(headers: Record<string, string>): ReachClient {
    return new ReachClient(this.#http.withHeaders(headers));
  }

  /** A client whose only credential is a delegation token (docs/mesh.md). */
  withDelegation(token: string): ReachClient {
    return new ReachClient(this.#http.withDelegation(token));
  }
}

export function invokeBody(options: InvokeOptions): Record<string, unknown> {
  const body = present({
    capability: options.capability,
    text: options.text,
    context_id: options.contextId,
    request_id: options.requestId,
    budget: options.budget,
    timeout_class: options.timeoutClass,
    suspend: options.suspend,
    max_hop: options.maxHop,
    on_duplicate: options.onDuplicate,
    mode: options.mode,
  });
  body["payload"] = options.payload ?? null;
  return body;
}

function deadlineHeader(options: InvokeOptions): Record<string, string> {
  return options.deadlineMs === undefined ? {} : { "x-reach-deadline-ms": String(Math.ceil(options.deadlineMs)) };
}

function present(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

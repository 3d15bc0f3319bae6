/** One delivery as a handler sees it, and the answers a handler may throw. */
import type { InvokeOptions } from "./client.js";
import { ReachClient } from "./client.js";
import { CallerError, ReachError, errorFromBody, isObject, unreachable } from "./errors.js";
import type { InvokeResult } from "./results.js";

// A context call is one store read or write on the coordinator (milliseconds); after 5 s,
// the longest synchronous timeout class (`reasoning`), the delivery has failed anyway.
const CONTEXT_TIMEOUT_MS = 5000;
const MERGE_PATCH = "application/merge-patch+json";

/** Throw from a handler to have the coordinator try another instance (answers 503). */
export class RetryLater extends Error {
  override name = "RetryLater";
}

/** Throw from a handler to say "this request is not mine" (answers 421): for a request
 * routed by text the coordinator tries the next-best other capability. */
export class NotMine extends Error {
  override name = "NotMine";
}

/** `{token, expiresAt, depth}`: the delivery's delegation token (docs/mesh.md). */
export interface Delegation {
  token: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  depth: number;
}

/** The request's context, read and written with the delivery's token: only the
 * `contextFields` the agent registered are seen, and may be written. */
export class RequestContext {
  readonly id: string;
  readonly url: string;
  /** The context's version as last read or written here. */
  version: number | undefined;
  readonly #token: string;
  #loaded: Promise<Record<string, unknown>> | undefined;

  constructor(id: string, url: string, token: string) {
    this.id = id;
    this.url = url;
    this.#token = token;
  }

  /** This agent's projection of the context (fetched once, then kept until `patch`). */
  get(): Promise<Record<string, unknown>> {
    this.#loaded ??= this.#call("GET").then((answer) => {
      this.version = Number(answer["version"]);
      return (answer["document"] ?? {}) as Record<string, unknown>;
    });
    return this.#loaded;
  }

  /** Merge `patch` (RFC 7386) and return the new version; with `ifVersion`, `Conflict`
   * (`version_conflict`) when the context changed since. */
  async patch(patch: Record<string, unknown>, options: { ifVersion?: number } = {}): Promise<number> {
    const headers: Record<string, string> = { "content-type": MERGE_PATCH };
    if (options.ifVersion !== undefined) headers["if-match"] = String(options.ifVersion);
    const answer = await this.#call("PATCH", headers, JSON.stringify(patch));
    this.#loaded = undefined;
    this.version = Number(answer["version"]);
    return this.version;
  }

  async #call(method: string, headers: Record<string, string> = {}, body?: string): Promise<Record<string, unknown>> {
    let response: Response;
    try {
      response = await fetch(this.url, {
        method,
        headers: { ...headers, authorization: `Bearer ${this.#token}` },
        body,
        signal: AbortSignal.timeout(CONTEXT_TIMEOUT_MS),
      });
    } catch (error) {
      throw unreachable(this.url, error);
    }
    const answer: unknown = await response.json().catch(() => undefined);
    if (!response.ok) throw errorFromBody(response.status, answer);
    if (!isObject(answer)) throw new ReachError("the context answer is not a JSON object", { code: "unexpected_answer" });
    return answer;
  }
}

export interface DelegateOptions extends Omit<InvokeOptions, "capability" | "text"> {
  capability?: string;
  text?: string;
}

export interface RequestInit {
  requestId: string;
  capability: string;
  payload: unknown;
  text: string | undefined;
  params: Record<string, unknown> | undefined;
  traceId: string;
  hopsLeft: number;
  deadline: number | undefined;
  delegation: Delegation | null;
  context: RequestContext | null;
  /** Made on first use: most handlers call nobody. */
  client: () => ReachClient;
  signal: () => AbortSignal;
}

export class AgentRequest {
  readonly requestId: string;
  readonly capability: string;
  /** The caller's payload, as the caller sent it. */
  readonly payload: unknown;
  /** The caller's words, when it sent any. */
  readonly text: string | undefined;
  /** What the capability's `input_schema` pulled out of the words. */
  readonly params: Record<string, unknown> | undefined;
  readonly traceId: string;
  /** How many more agents the request may pass through after this one. */
  readonly hopsLeft: number;
  /** When this attempt must be answered (ms since the epoch), from `X-Reach-Deadline-Ms`. */
  readonly deadline: number | undefined;
  readonly delegation: Delegation | null;
  /** The request's context (`null` without one). */
  readonly context: RequestContext | null;
  /** Set by `reportCost`: sent as `X-Reach-Cost`. */
  cost: number | undefined;
  readonly #makeClient: () => ReachClient;
  readonly #makeSignal: () => AbortSignal;
  #client: ReachClient | undefined;
  #signal: AbortSignal | undefined;

  constructor(init: RequestInit) {
    this.requestId = init.requestId;
    this.capability = init.capability;
    this.payload = init.payload;
    this.text = init.text;
    this.params = init.params;
    this.traceId = init.traceId;
    this.hopsLeft = init.hopsLeft;
    this.deadline = init.deadline;
    this.delegation = init.delegation;
    this.context = init.context;
    this.#makeClient = init.client;
    this.#makeSignal = init.signal;
  }

  /** A client on the coordinator that passes this delivery's hop budget and trace on. */
  get client(): ReachClient {
    this.#client ??= this.#makeClient();
    return this.#client;
  }

  /** Aborted when the delivery's connection closes (the caller left, the deadline passed). */
  get signal(): AbortSignal {
    this.#signal ??= this.#makeSignal();
    return this.#signal;
  }

  /** Report what the work cost, in the registration's `cost` units (`X-Reach-Cost`). */
  reportCost(units: number): void {
    if (!Number.isFinite(units) || units < 0) throw new RangeError("a cost is a finite number >= 0");
    this.cost = units;
  }

  /** Hand a sub-task on, on behalf of this request's caller: an invoke (by capability or
   * by text) whose only credential is the delivery's delegation token. */
  async delegate(options: DelegateOptions): Promise<InvokeResult> {
    if (this.delegation === null) {
      throw new CallerError(
        "this delivery carries no delegation token: no [[access.delegate]] rule names this agent, and it did not register with delegation: true",
        { code: "no_delegation" },
      );
    }
    return this.client.withDelegation(this.delegation.token).invoke(options);
  }
}

/** The delivery's `delegation` and `context` blocks, read defensively. */
export function delegationOf(block: unknown): Delegation | null {
  if (!isObject(block) || typeof block["token"] !== "string") return null;
  return { token: block["token"], expiresAt: Number(block["expires_at"] ?? 0), depth: Number(block["depth"] ?? 0) };
}

export function contextOf(block: unknown, coordinator: string): RequestContext | null {
  if (!isObject(block)) return null;
  const { id, url, token } = block;
  if (typeof url !== "string" || typeof token !== "string") return null;
  // Context URLs are paths on the coordinator unless it says otherwise (AR_PUBLIC_URL).
  return new RequestContext(String(id ?? ""), new URL(url, coordinator + "/").toString(), token);
}

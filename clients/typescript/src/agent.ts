/**
 * Agent authors' side: an HTTP agent (Node's `http`) that registers itself, keeps its
 * lease and runs handlers, as the agent contract (docs/agent-contract.md) says.
 *
 *   const agent = new Agent({ id: "inventory-01", capabilities: ["inventory.check"], coordinator });
 *   agent.handle("inventory.check", async (req) => ({ sku: req.payload.sku, in_stock: true }));
 *   const { url } = await agent.listen({ port: 9040 });
 *
 * A delivery whose request id was seen before never runs a handler again: it gets the
 * stored answer, or waits for the run still in flight. A handler that is an async
 * generator streams its answer as server-sent events, one event per `yield`.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { ReachClient } from "./client.js";
import { CallerError, ReachError, UnknownAgent, describe, isObject } from "./errors.js";
import { AgentRequest, NotMine, RetryLater, contextOf, delegationOf } from "./request.js";
import { STREAM_MEDIA_TYPE } from "./streams.js";
import type { TokenProvider } from "./tokens.js";
import { RunOnce, LiveStream } from "./runs.js";
import type { Outcome } from "./runs.js";

// Results kept for repeated deliveries: at 100 requests/s that covers the last 100 s,
// longer than the coordinator's whole retry schedule (1 s, 2 s, 4 s).
export const REMEMBERED_REQUESTS = 10_000;
const HEARTBEATS_PER_TTL = 3; // renew at ttl/3, so two lost heartbeats do not lose the lease
const REGISTER_BACKOFF_FIRST_MS = 100;
const REGISTER_BACKOFF_MAX_MS = 5000;
const CALL_TIMEOUT_MS = 5000; // a registration or heartbeat is one store write
const DEFAULT_LISTEN_TIMEOUT_MS = 10_000;
// Longer than any pool's idle time on the coordinator's side, so the agent never closes
// a kept-alive connection just as a delivery is being written on it.
const KEEP_ALIVE_MS = 75_000;

export type Handler = (req: AgentRequest) => unknown;

/** What an offer endpoint receives (docs/agent-contract.md, "Offers"). */
export interface OfferRequest {
  capability: string;
  text: string | null;
  params: Record<string, unknown> | null;
  /** What is left of the request's deadline. */
  deadlineMs: number;
  /** Cost units left in the delegation chain's budget; null without a budget. */
  budgetLeft: number | null;
}

/** An offer: take it or not, and how fast, how well and at what cost. */
export interface OfferAnswer {
  accept: boolean;
  etaMs?: number;
  confidence?: number;
  cost?: number;
}

export type OfferFn = (req: OfferRequest) => boolean | OfferAnswer | Promise<boolean | OfferAnswer>;

/** Text for routing to one capability, when the agent-wide description is too broad. */
export interface Skill {
  capability: string;
  description?: string;
  examples?: string[];
  inputSchema?: Record<string, unknown>;
}

export interface AgentOptions {
  id: string;
  capabilities: string[];
  /** The coordinator's base URL. */
  coordinator: string;
  apiKey?: string;
  tokenProvider?: TokenProvider;
  description?: string;
  displayName?: string;
  examples?: string[];
  skills?: Skill[];
  inputSchema?: Record<string, unknown>;
  /** Declared by default: a repeated request id never runs a handler again. */
  idempotent?: boolean;
  /** Sent only when set. */
  safe?: boolean;
  /** Ask for a delegation token on every delivery (to verify it). */
  delegation?: boolean;
  /** What one call spends from a delegation chain's budget. */
  cost?: number;
  timeoutClass?: string;
  /** The lease, seconds (default 60); renewed every ttl / 3. */
  ttl?: number;
  weight?: number;
  domain?: string;
  generic?: boolean;
  contextFields?: string[];
  minInstances?: number;
  /** Ask for offers before deliveries (`offer()` turns it on by itself). */
  negotiate?: boolean | { timeoutMs?: number; endpoint?: string };
  /** The endpoint to register instead of `http://<host>:<port>/invoke`. */
  endpointUrl?: string;
  /** Decides what `GET /health` answers (200 or 503). */
  healthCheck?: () => boolean | Promise<boolean>;
  /** Where warnings go (a lost lease, a failed heartbeat); default: one line to stderr. */
  log?: (event: string, fields: Record<string, unknown>) => void;
}

export interface ListenOptions {
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** How long `listen()` keeps trying to register before it fails (default 10 s). */
  timeoutMs?: number;
  /** Your own server, whose request listener passes the agent's requests (`/invoke`,
   * `/offer`, `/health`) to `agent.serveHttp` and answers the others itself. */
  server?: http.Server;
}

export class Agent {
  readonly id: string;
  readonly options: AgentOptions;
  readonly #handlers = new Map<string, Handler>();
  #default: Handler | undefined;
  #offer: OfferFn | undefined;
  readonly #runs = new RunOnce(REMEMBERED_REQUESTS);
  readonly #client: ReachClient;
  #server: http.Server | undefined;
  #endpoint: string | undefined;
  #keeper: ReturnType<typeof setTimeout> | undefined;
  #renewing: Promise<void> | undefined;
  #closing = false;
  #registered = false;

  constructor(options: AgentOptions) {
    this.id = options.id;
    this.options = options;
    const { coordinator, apiKey, tokenProvider } = options;
    this.#client = new ReachClient({
      coordinator,
      ...(apiKey === undefined ? {} : { apiKey }),
      ...(tokenProvider === undefined ? {} : { tokenProvider }),
      timeoutMs: CALL_TIMEOUT_MS,
    });
  }

  /** The handler of one capability; without a capability, of every capability that has
   * none. It takes an `AgentRequest` and returns (or resolves to) anything
   * JSON-serializable; an async generator streams its answer. */
  handle(capability: string, handler: Handler): this;
  handle(handler: Handler): this;
  handle(capabilityOrHandler: string | Handler, handler?: Handler): this {
    if (typeof capabilityOrHandler === "function") this.#default = capabilityOrHandler;
    else this.#handlers.set(capabilityOrHandler.toLowerCase(), handler as Handler);
    return this;
  }

  /** What this agent offers when asked before a delivery (turns negotiation on). */
  offer(fn: OfferFn): this {
    this.#offer = fn;
    return this;
  }

  /** True from the first successful registration until `close()`. */
  get isRegistered(): boolean {
    return this.#registered;
  }

  /** The registration body this agent sends. */
  registration(): Record<string, unknown> {
    const endpoint = this.#endpoint ?? this.options.endpointUrl;
    if (endpoint === undefined) throw new Error(`agent ${this.id} has no endpoint: call listen() first`);
    const o = this.options;
    const body: Record<string, unknown> = {
      id: o.id,
      capabilities: o.capabilities,
      transport: { type: "http", endpoint, ...(endpoint.endsWith("/invoke") ? { health_endpoint: endpoint.slice(0, -7) + "/health" } : {}) },
      idempotent: o.idempotent ?? true,
    };
    const optional: Record<string, unknown> = {
      display_name: o.displayName,
      description: o.description,
      examples: o.examples,
      input_schema: o.inputSchema,
      safe: o.safe,
      delegation: o.delegation,
      cost: o.cost,
      timeout_class: o.timeoutClass,
      ttl: o.ttl,
      weight: o.weight,
      domain: o.domain,
      generic: o.generic,
      context_fields: o.contextFields,
      min_instances: o.minInstances,
      skills: o.skills?.map((s) => ({
        capability: s.capability,
        ...(s.description === undefined ? {} : { description: s.description }),
        ...(s.examples === undefined ? {} : { examples: s.examples }),
        ...(s.inputSchema === undefined ? {} : { input_schema: s.inputSchema }),
      })),
    };
    for (const [name, value] of Object.entries(optional)) if (value !== undefined) body[name] = value;
    if (o.negotiate || this.#offer !== undefined) {
      const given = typeof o.negotiate === "object" ? o.negotiate : {};
      const base = endpoint.replace(/\/invoke$/, "").replace(/\/+$/, "");
      body["negotiate"] = {
        endpoint: given.endpoint ?? `${base}/offer`,
        ...(given.timeoutMs === undefined ? {} : { timeout_ms: given.timeoutMs }),
      };
    }
    return body;
  }

  /** Serve on `host:port`, register (retrying until `timeoutMs`, then failing with
   * `coordinator_unreachable`; a refusal fails at once), then keep the lease. */
  async listen(options: ListenOptions = {}): Promise<{ url: string }> {
    if (this.#server !== undefined) throw new Error(`agent ${this.id} is already listening`);
    const host = options.host ?? "127.0.0.1";
    const server = options.server ?? http.createServer((req, res) => this.serveHttp(req, res));
    server.keepAliveTimeout = KEEP_ALIVE_MS;
    server.headersTimeout = KEEP_ALIVE_MS + 1000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    // Every interface bound: advertise the machine's name, as the Python SDK does.
    const advertised = host === "0.0.0.0" || host === "::" || host === "" ? os.hostname() : host;
    const shown = advertised.includes(":") ? `[${advertised}]` : advertised;
    const url = `http://${shown}:${port}`;
    this.#server = server;
    this.#endpoint = this.options.endpointUrl ?? `${url}/invoke`;
    this.#closing = false;
    try {
      await this.#registerWithin(options.timeoutMs ?? DEFAULT_LISTEN_TIMEOUT_MS);
    } catch (error) {
      await this.#stopServer();
      throw error;
    }
    this.#scheduleHeartbeat();
    return { url };
  }

  /** Stop renewing the lease, deregister, stop serving. */
  async close(): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#keeper);
    await this.#renewing; // a registration in flight must not land after the deregistration
    if (this.#registered) {
      this.#registered = false;
      try {
        await this.#client.deregister(this.id);
      } catch (error) {
        if (!(error instanceof UnknownAgent)) this.#log("agent_deregistration_failed", { error: describe(error) });
      }
    }
    await this.#stopServer();
  }

  async #stopServer(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
  }

  async #registerWithin(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    let pause = REGISTER_BACKOFF_FIRST_MS;
    let last: unknown;
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new ReachError(
          `agent ${this.id} could not register with the coordinator at ${this.#client.coordinator} within ${timeoutMs} ms: ${describe(last)}`,
          { code: "coordinator_unreachable" },
        );
      }
      try {
        await this.#client.register(this.registration(), { timeoutMs: Math.ceil(Math.min(CALL_TIMEOUT_MS, left)) });
        this.#registered = true;
        return;
      } catch (error) {
        if (error instanceof CallerError || !(error instanceof ReachError)) throw error; // refused: trying again changes nothing
        if (error.status === 401 || error.status === 403) throw error;
        last = error;
      }
      await sleep(Math.min(pause * (0.5 + Math.random() / 2), Math.max(0, deadline - performance.now())));
      pause = Math.min(pause * 2, REGISTER_BACKOFF_MAX_MS);
    }
  }

  #scheduleHeartbeat(): void {
    if (this.#closing) return;
    const every = ((this.options.ttl ?? 60) * 1000) / HEARTBEATS_PER_TTL;
    this.#keeper = setTimeout(() => {
      this.#renewing = this.#renew().finally(() => {
        this.#renewing = undefined;
      });
    }, every);
    this.#keeper.unref();
  }

  /** One heartbeat; when the coordinator forgot the instance (it restarted, the lease
   * ran out), register again, with backoff, until it takes it. */
  async #renew(): Promise<void> {
    try {
      await this.#client.heartbeat(this.id);
    } catch (error) {
      if (error instanceof UnknownAgent) {
        this.#log("agent_lease_lost", {});
        await this.#registerAgain();
      } else {
        this.#log("agent_heartbeat_failed", { error: describe(error) });
      }
    }
    this.#scheduleHeartbeat();
  }

  async #registerAgain(): Promise<void> {
    let pause = REGISTER_BACKOFF_FIRST_MS;
    while (!this.#closing) {
      try {
        await this.#client.register(this.registration());
        return;
      } catch (error) {
        if (error instanceof CallerError) {
          this.#log("agent_registration_refused", { error: describe(error) });
          return;
        }
        this.#log("agent_registration_failed", { error: describe(error) });
      }
      await sleep(pause * (0.5 + Math.random() / 2));
      pause = Math.min(pause * 2, REGISTER_BACKOFF_MAX_MS);
    }
  }

  #log(event: string, fields: Record<string, unknown>): void {
    const log = this.options.log ?? defaultLog;
    try {
      log(event, { agent_id: this.id, ...fields });
    } catch {
      // a failing logger must not stop the lease keeping
    }
  }

  /** Node's request listener of the agent contract: `POST /invoke`, `POST /offer`,
   * `GET /health`; anything else is 404. */
  serveHttp(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? "").split("?")[0];
    // Whatever fails past the handlers' own answers (a socket gone mid-write) ends this
    // response only: an unhandled rejection would end the process.
    const guarded = (work: Promise<void>): void => void work.catch(() => res.destroy());
    if (req.method === "POST" && path === "/invoke") return guarded(readBody(req).then((body) => this.#invoke(req, res, body)));
    if (req.method === "POST" && path === "/offer") return guarded(readBody(req).then((body) => this.#answerOffer(res, body)));
    if (req.method === "GET" && path === "/health") return guarded(this.#health(res));
    req.resume();
    sendJson(res, 404, { error: { code: "not_found", message: `no ${req.method} ${path} here` } });
  }

  async #invoke(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<void> {
    let delivery: unknown;
    try {
      delivery = JSON.parse(raw);
    } catch {
      delivery = undefined;
    }
    const problem = deliveryProblem(delivery);
    if (problem !== undefined) return sendError(res, 400, "invalid_delivery", `the body is not a valid delivery: ${problem}`);
    const d = delivery as Record<string, unknown>;
    const capability = String(d["capability"]);
    const handler = this.#handlers.get(capability.toLowerCase()) ?? this.#default;
    if (handler === undefined) return sendError(res, 404, "no_handler", `no handler for capability ${JSON.stringify(capability)}`);
    const hop = Number(d["hop"]);
    const deadlineMs = Number(req.headers["x-reach-deadline-ms"]);
    const request = new AgentRequest({
      requestId: String(d["request_id"]),
      capability,
      payload: d["payload"] ?? null,
      text: typeof d["text"] === "string" ? d["text"] : undefined,
      params: isObject(d["params"]) ? d["params"] : undefined,
      traceId: String(d["trace_id"]),
      hopsLeft: hop,
      deadline: Number.isFinite(deadlineMs) && deadlineMs > 0 ? Date.now() + deadlineMs : undefined,
      delegation: delegationOf(d["delegation"]),
      context: contextOf(d["context"], this.#client.coordinator),
      client: () => {
        const headers: Record<string, string> = { "x-reach-hop": String(hop) };
        const traceparent = req.headers["traceparent"];
        if (typeof traceparent === "string" && traceparent) headers["traceparent"] = traceparent;
        return this.#client.withHeaders(headers);
      },
      signal: () => {
        const closed = new AbortController();
        if (res.closed) closed.abort();
        else res.once("close", () => closed.abort());
        return closed.signal;
      },
    });
    let outcome: Outcome;
    try {
      outcome = await this.#runs.run(request.requestId, () => run(handler, request));
    } catch (error) {
      return answerFailure(res, error);
    }
    if (outcome instanceof LiveStream) {
      if (outcome.take()) return outcome.relay(res);
      let whole: string;
      try {
        whole = await outcome.whole;
      } catch (error) {
        return answerFailure(res, error);
      }
      res.writeHead(200, { "content-type": STREAM_MEDIA_TYPE, "content-length": Buffer.byteLength(whole) });
      return void res.end(whole);
    }
    const answerHeaders: Record<string, string | number> = {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(outcome.body),
    };
    if (outcome.cost !== undefined) answerHeaders["x-reach-cost"] = String(outcome.cost);
    res.writeHead(200, answerHeaders);
    res.end(outcome.body);
  }

  async #answerOffer(res: http.ServerResponse, raw: string): Promise<void> {
    let asked: unknown;
    try {
      asked = JSON.parse(raw);
    } catch {
      asked = undefined;
    }
    if (!isObject(asked) || typeof asked["capability"] !== "string" || typeof asked["deadline_ms"] !== "number") {
      return sendError(res, 400, "invalid_offer_request", "not an offer request: it needs capability and deadline_ms");
    }
    if (this.#offer === undefined) return sendJson(res, 200, { accept: true });
    let answer: boolean | OfferAnswer;
    try {
      answer = await this.#offer({
        capability: asked["capability"],
        text: typeof asked["text"] === "string" ? asked["text"] : null,
        params: isObject(asked["params"]) ? asked["params"] : null,
        deadlineMs: asked["deadline_ms"],
        budgetLeft: typeof asked["budget_left"] === "number" ? asked["budget_left"] : null,
      });
    } catch (error) {
      return sendError(res, 500, "offer_error", messageOf(error), false);
    }
    const offer = typeof answer === "boolean" ? { accept: answer } : answer;
    if (!isObject(offer) || typeof offer.accept !== "boolean") {
      return sendError(res, 500, "offer_error", "the offer function answered neither a boolean nor {accept}", false);
    }
    const body: Record<string, unknown> = { accept: offer.accept };
    if (offer.etaMs !== undefined) body["eta_ms"] = offer.etaMs;
    if (offer.confidence !== undefined) body["confidence"] = offer.confidence;
    if (offer.cost !== undefined) body["cost"] = offer.cost;
    sendJson(res, 200, body);
  }

  async #health(res: http.ServerResponse): Promise<void> {
    let ok = true;
    try {
      ok = this.options.healthCheck === undefined || (await this.options.healthCheck());
    } catch {
      ok = false;
    }
    sendJson(res, ok ? 200 : 503, { status: ok ? "ok" : "unavailable", id: this.id });
  }
}

/** Run a handler once and encode its answer: JSON, or a stream once its first event is there. */
async function run(handler: Handler, request: AgentRequest): Promise<Outcome> {
  const answer = handler(request);
  if (isAsyncIterable(answer)) return LiveStream.open(answer[Symbol.asyncIterator]());
  const value = await answer;
  let body: string | undefined;
  try {
    body = JSON.stringify(value === undefined ? null : value);
  } catch (error) {
    throw new NotJson(request.capability, error);
  }
  if (body === undefined) throw new NotJson(request.capability, new TypeError(`a ${typeof value} is not JSON`));
  return { body, cost: request.cost };
}

/** A handler's answer that JSON cannot hold (a BigInt, a cycle, a function). */
class NotJson extends Error {
  constructor(capability: string, cause: unknown) {
    super(`the handler of ${capability} answered something that is not JSON-serializable: ${messageOf(cause)}`);
  }
}

function answerFailure(res: http.ServerResponse, error: unknown): void {
  if (error instanceof RetryLater) return sendError(res, 503, "retry_later", error.message || "the agent cannot take it now");
  if (error instanceof NotMine) return sendError(res, 421, "not_mine", error.message || "this request is not mine", false);
  if (error instanceof NotJson) return sendError(res, 500, "answer_not_json", error.message, false);
  if (error instanceof ReachError) {
    // A call the handler made through Agent-Reach failed (`hop_limit`, a refused
    // delegation) or it refused the delivery itself: the caller gets that error.
    const headers: Record<string, string> = error.retryable ? {} : { "x-reach-retryable": "false" };
    return sendJson(res, error.status, error.toBody(), headers);
  }
  // A crash in the handler would crash on any instance: tell the coordinator to stop.
  sendError(res, 500, "handler_error", messageOf(error), false);
}

function deliveryProblem(delivery: unknown): string | undefined {
  if (!isObject(delivery)) return "not a JSON object";
  for (const name of ["request_id", "capability", "trace_id"]) {
    if (typeof delivery[name] !== "string") return `${name} must be a string`;
  }
  if (!Number.isInteger(delivery["hop"])) return "hop must be an integer";
  return undefined;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value && !(value instanceof Promise);
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export function sendJson(res: http.ServerResponse, status: number, document: unknown, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(document);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

function sendError(res: http.ServerResponse, status: number, code: string, message: string, retryable = true): void {
  sendJson(res, status, { error: { code, message } }, retryable ? {} : { "x-reach-retryable": "false" });
}

function defaultLog(event: string, fields: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ event, ...fields })}\n`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

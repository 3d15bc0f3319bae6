/** One coordinator's HTTP API: the credential every call carries, timeouts, error answers
 * turned into their `ReachError` class. Built-in `fetch` (its pooled keep-alive
 * connections), nothing else. */
import { ReachError, errorFromBody, isObject, unreachable } from "./errors.js";
import { EXPIRED_CODE, expireToken, tokenOf } from "./tokens.js";
import type { TokenProvider } from "./tokens.js";

// The `long` timeout class delivers within 30 s; 5 s more covers routing and transfer.
export const DEFAULT_TIMEOUT_MS = 35_000;

export interface TransportOptions {
  coordinator: string;
  apiKey?: string | undefined;
  tokenProvider?: TokenProvider | undefined;
  timeoutMs?: number | undefined;
}

export interface Sent {
  method: string;
  path: string;
  body?: unknown;
  /** Sent as is (a merge patch); `body` is sent as JSON. */
  raw?: string;
  headers?: Record<string, string>;
  /** For a stream: no timeout once the answer's headers are in; `signal` ends it. */
  signal?: AbortSignal;
  /** This call's timeout instead of the transport's. */
  timeoutMs?: number;
}

export class Transport {
  readonly base: string;
  readonly timeoutMs: number;
  readonly #apiKey: string | undefined;
  readonly #provider: TokenProvider | undefined;
  readonly #headers: Record<string, string>;

  constructor(options: TransportOptions, headers: Record<string, string> = {}) {
    if (options.apiKey !== undefined && options.tokenProvider !== undefined) {
      throw new TypeError("give apiKey or tokenProvider, not both");
    }
    this.base = options.coordinator.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#apiKey = options.apiKey;
    this.#provider = options.tokenProvider;
    this.#headers = headers;
  }

  /** The same coordinator and credential, with these headers on every call. */
  withHeaders(headers: Record<string, string>): Transport {
    return new Transport(this.#options(), { ...this.#headers, ...headers });
  }

  /** The same coordinator, with a delegation token as the only credential. */
  withDelegation(token: string): Transport {
    return new Transport({ coordinator: this.base, apiKey: token, timeoutMs: this.timeoutMs }, this.#headers);
  }

  /** The answer's JSON; the error's class for any non-2xx answer. */
  async json(sent: Sent): Promise<{ status: number; body: unknown; headers: Headers }> {
    const response = await this.send(sent);
    const text = await response.text().catch((error: unknown) => {
      throw unreachable(this.base, error);
    });
    let body: unknown = null;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
    }
    if (!response.ok) throw errorFromBody(response.status, body, response.headers.get("retry-after"));
    if (body === undefined) {
      throw new ReachError(`${sent.method} ${sent.path}: the coordinator's answer is not JSON`, {
        code: "unexpected_answer",
      });
    }
    return { status: response.status, body, headers: response.headers };
  }

  /** The raw answer, whatever its status; a 401 `token_expired` is retried once with a
   * fresh token from the provider. */
  async send(sent: Sent): Promise<Response> {
    const token = await this.#token();
    let response = await this.#fetch(sent, token);
    if (response.status === 401 && this.#provider !== undefined && token !== undefined) {
      const copy = response.clone();
      if (await isExpired(copy)) {
        expireToken(this.#provider, token);
        const fresh = await this.#token();
        if (fresh !== token) {
          await response.body?.cancel();
          response = await this.#fetch(sent, fresh);
        }
      }
    }
    return response;
  }

  async #fetch(sent: Sent, token: string | undefined): Promise<Response> {
    const headers: Record<string, string> = { ...this.#headers, ...sent.headers };
    if (token !== undefined) headers["authorization"] = `Bearer ${token}`;
    let body: string | undefined = sent.raw;
    if (sent.body !== undefined) {
      body = JSON.stringify(sent.body);
      headers["content-type"] ??= "application/json";
    }
    const timeoutMs = Math.max(1, Math.ceil(sent.timeoutMs ?? this.timeoutMs));
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      if (sent.signal === undefined) {
        return await fetch(this.base + sent.path, { method: sent.method, headers, body, signal: timeout });
      }
      // A stream: the timeout covers the answer's start only, `signal` its whole life.
      const started = new AbortController();
      const stop = (): void => started.abort(sent.signal?.reason);
      sent.signal.addEventListener("abort", stop, { once: true });
      const timer = setTimeout(() => started.abort(new DOMException("timeout", "TimeoutError")), timeoutMs);
      try {
        return await fetch(this.base + sent.path, { method: sent.method, headers, body, signal: started.signal });
      } finally {
        clearTimeout(timer);
      }
    } catch (error) {
      throw unreachable(this.base, error);
    }
  }

  async #token(): Promise<string | undefined> {
    if (this.#provider !== undefined) return tokenOf(this.#provider);
    return this.#apiKey;
  }

  #options(): TransportOptions {
    return { coordinator: this.base, apiKey: this.#apiKey, tokenProvider: this.#provider, timeoutMs: this.timeoutMs };
  }
}

async function isExpired(response: Response): Promise<boolean> {
  try {
    const body: unknown = await response.json();
    const error = isObject(body) ? body["error"] : undefined;
    return isObject(error) && error["code"] === EXPIRED_CODE;
  } catch {
    return false;
  }
}

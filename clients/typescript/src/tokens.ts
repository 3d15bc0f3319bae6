/**
 * Bearer tokens from the organisation's IdP instead of an API key.
 *
 * A `tokenProvider` is a function returning a token (sync or async; called for every
 * request, so it does its own caching) or `ClientCredentials`, which fetches access
 * tokens from the IdP's token endpoint (OAuth 2.0 client credentials, RFC 6749 4.4)
 * and fetches the next one once 80 % of a token's lifetime has passed. Either way, a
 * request refused with 401 `token_expired` is sent once more with a fresh token.
 */
import { ReachError, TokenUnavailable, describe, isObject } from "./errors.js";

export const REFRESH_AT = 0.8; // of a token's lifetime: the next one is fetched from then on
const TOKEN_TIMEOUT_MS = 10_000;
const DISCOVERY_PATHS = ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"];
export const EXPIRED_CODE = "token_expired";

/** No token could be had from the IdP: unreachable, or it refused the client. */
export interface ClientCredentialsOptions {
  clientId: string;
  clientSecret: string;
  /** The IdP's token endpoint; or give `issuer` and it is read from discovery. */
  tokenUrl?: string;
  issuer?: string;
  scope?: string;
  /** RFC 8707: the coordinator's audience. */
  resource?: string;
  /** For IdPs that take `audience` instead (Auth0). */
  audience?: string;
  authMethod?: "client_secret_basic" | "client_secret_post";
  timeoutMs?: number;
}

/** OAuth client-credentials settings; one object may serve several clients. */
export class ClientCredentials {
  readonly clientId: string;
  tokenUrl: string | undefined;
  readonly issuer: string | undefined;
  readonly #options: ClientCredentialsOptions;
  #token: string | undefined;
  #freshUntil = 0; // performance.now(): the token is used until then
  #pending: Promise<string> | undefined;

  constructor(options: ClientCredentialsOptions) {
    if ((options.tokenUrl === undefined) === (options.issuer === undefined)) {
      throw new TypeError("ClientCredentials needs exactly one of tokenUrl and issuer");
    }
    const method = options.authMethod ?? "client_secret_basic";
    if (method !== "client_secret_basic" && method !== "client_secret_post") {
      throw new TypeError(`unsupported authMethod ${JSON.stringify(method)}`);
    }
    this.clientId = options.clientId;
    this.tokenUrl = options.tokenUrl;
    this.issuer = options.issuer;
    this.#options = options;
  }

  /** The current token; when one is due, concurrent callers share one fetch. */
  async token(): Promise<string> {
    if (this.#token !== undefined && performance.now() < this.#freshUntil) return this.#token;
    if (this.#pending === undefined) {
      this.#pending = this.#fetch().finally(() => {
        this.#pending = undefined;
      });
    }
    return this.#pending;
  }

  /** Stop using `token` (the coordinator found it expired): the next call fetches. */
  expire(token: string): void {
    if (token === this.#token) this.#freshUntil = 0;
  }

  toJSON(): object {
    return { clientId: this.clientId, tokenUrl: this.tokenUrl }; // never the secret
  }

  async #fetch(): Promise<string> {
    const where = this.tokenUrl ?? this.issuer;
    const timeout = this.#options.timeoutMs ?? TOKEN_TIMEOUT_MS;
    let response: Response;
    try {
      if (this.tokenUrl === undefined) this.tokenUrl = await this.#discover(timeout);
      response = await fetch(this.tokenUrl, { method: "POST", ...this.#request(), signal: AbortSignal.timeout(timeout) });
    } catch (error) {
      if (error instanceof ReachError) throw error;
      throw new TokenUnavailable(`could not reach the IdP at ${where}: ${describe(error)}`);
    }
    const answer = await answerOf(response);
    const token = answer["access_token"];
    const lifetime = answer["expires_in"];
    if (typeof token !== "string" || !token) throw new TokenUnavailable("the IdP's token answer holds no access_token");
    this.#token = token;
    // No expires_in: used until the coordinator says it expired.
    const seconds = typeof lifetime === "number" ? lifetime : Number.POSITIVE_INFINITY;
    this.#freshUntil = performance.now() + REFRESH_AT * seconds * 1000;
    return token;
  }

  async #discover(timeout: number): Promise<string> {
    const base = (this.issuer as string).replace(/\/+$/, "");
    for (const path of DISCOVERY_PATHS) {
      const response = await fetch(base + path, { signal: AbortSignal.timeout(timeout) });
      if (response.status !== 200) continue;
      const endpoint = (await answerOf(response))["token_endpoint"];
      if (typeof endpoint === "string" && /^https?:\/\//.test(endpoint)) return endpoint;
    }
    throw new TokenUnavailable("the IdP publishes no discovery document naming a token_endpoint");
  }

  #request(): { headers: Record<string, string>; body: URLSearchParams } {
    const { scope, resource, audience, clientId, clientSecret } = this.#options;
    const form = new URLSearchParams({ grant_type: "client_credentials" });
    for (const [name, value] of Object.entries({ scope, resource, audience })) {
      if (value !== undefined) form.set(name, value);
    }
    const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
    if (this.#options.authMethod === "client_secret_post") {
      form.set("client_id", clientId);
      form.set("client_secret", clientSecret);
    } else {
      headers["authorization"] = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString("base64")}`;
    }
    return { headers, body: form };
  }
}

/** The JSON object of a 200 answer; `TokenUnavailable` naming the IdP's error otherwise. */
async function answerOf(response: Response): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    body = undefined;
  }
  if (response.status !== 200 || !isObject(body)) {
    const error = isObject(body) ? body["error"] : undefined;
    const why = error ? ` (${String(error)}: ${String((body as Record<string, unknown>)["error_description"] ?? "")})` : "";
    throw new TokenUnavailable(`${response.url}: HTTP ${response.status}${why}`);
  }
  return body;
}

export type TokenCallable = () => string | Promise<string>;
export type TokenProvider = TokenCallable | ClientCredentials;

/** The current token of a provider. */
export async function tokenOf(provider: TokenProvider): Promise<string> {
  return provider instanceof ClientCredentials ? provider.token() : provider();
}

/** Tell a provider the coordinator refused `token` as expired. */
export function expireToken(provider: TokenProvider, token: string): void {
  if (provider instanceof ClientCredentials) provider.expire(token);
}

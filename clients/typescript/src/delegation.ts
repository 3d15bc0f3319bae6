/**
 * For agents: check a delivery's delegation token with the coordinators' public keys.
 *
 * The keys come from `GET /.well-known/jwks.json`: fetched on the first verification
 * (concurrent first verifications share that one fetch), kept, and fetched again when
 * a token names a key not seen yet, at most every 10 s, so a made-up `kid` cannot make
 * the verifier hammer the coordinator. A tampered, expired or foreign token throws
 * `Unauthorized` with code `delegation_invalid`.
 */
import { decodeJwt, decodeProtectedHeader, importJWK, jwtVerify } from "jose";
import type { JWK, JWTPayload, KeyObject } from "jose";
import { Unauthorized, describe, isObject } from "./errors.js";

export const ALGORITHM = "EdDSA";
export const JWKS_PATH = "/.well-known/jwks.json";
export const REFETCH_MS = 10_000;
const TOKEN_TYPE = "delegation+jwt";

/** One agent a delegation came through: its principal, instance and capability. */
export interface Hop {
  agent: string;
  instance: string;
  capability: string;
}

/** What a verified token says: on whose behalf (`sub`, also `caller`), through whom
 * (`chain`, oldest first, this agent last; `act` as signed), what may be handed on
 * (`scope`), the chain's `budget`, and until when (`exp`, seconds since the epoch). */
export interface VerifiedDelegation {
  sub: string;
  caller: string;
  act: Record<string, unknown> | undefined;
  chain: Hop[];
  scope: string[];
  contextId: string | undefined;
  hop: number;
  budget: number | undefined;
  requestId: string;
  exp: number;
  claims: JWTPayload;
}

export interface DelegationVerifierOptions {
  coordinator: string;
  timeoutMs?: number;
}

type Key = KeyObject | Uint8Array;

export class DelegationVerifier {
  readonly url: string;
  readonly #timeoutMs: number;
  #keys = new Map<string, Key>();
  #fetchedAt = Number.NEGATIVE_INFINITY;
  #fetching: Promise<void> | undefined;
  /** How many times the keys were fetched (one shared fetch counts once). */
  fetches = 0;

  constructor(options: DelegationVerifierOptions) {
    this.url = options.coordinator.replace(/\/+$/, "");
    this.#timeoutMs = options.timeoutMs ?? 5000;
  }

  /** The token's statement; `Unauthorized` (`delegation_invalid`) when it is not the
   * coordinators' own, valid now. */
  async verify(token: string): Promise<VerifiedDelegation> {
    let kid: unknown;
    let issuer: unknown;
    try {
      kid = decodeProtectedHeader(token).kid;
      issuer = decodeJwt(token).iss; // checked below against the signed claims
    } catch {
      throw invalid("not a JWT");
    }
    let key = typeof kid === "string" ? this.#keys.get(kid) : undefined;
    if (key === undefined) {
      await this.#refresh();
      key = typeof kid === "string" ? this.#keys.get(kid) : undefined;
    }
    if (key === undefined) throw invalid("signed with a key the coordinator does not publish");
    if (typeof issuer !== "string") throw invalid("the token names no issuer");
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(token, key, {
        algorithms: [ALGORITHM],
        issuer,
        audience: issuer,
        typ: TOKEN_TYPE,
        requiredClaims: ["exp", "iss", "aud", "sub", "may_act"],
      }));
    } catch (error) {
      throw invalid(describe(error));
    }
    return statement(claims);
  }

  /** Fetch the keys unless a fetch is running (then share it) or one ran lately. */
  #refresh(): Promise<void> {
    if (this.#fetching !== undefined) return this.#fetching;
    if (performance.now() - this.#fetchedAt < REFETCH_MS) return Promise.resolve();
    this.#fetchedAt = performance.now();
    this.#fetching = this.#fetch().finally(() => {
      this.#fetching = undefined;
    });
    return this.#fetching;
  }

  async #fetch(): Promise<void> {
    this.fetches += 1;
    let keys: unknown;
    try {
      const response = await fetch(this.url + JWKS_PATH, { signal: AbortSignal.timeout(this.#timeoutMs) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      keys = ((await response.json()) as { keys?: unknown }).keys;
      if (!Array.isArray(keys)) throw new Error("no keys");
    } catch (error) {
      throw invalid(`the coordinator's keys could not be read (${describe(error)})`);
    }
    const found = new Map<string, Key>();
    for (const jwk of keys as JWK[]) {
      if (!isObject(jwk) || jwk.alg !== ALGORITHM || typeof jwk.kid !== "string") continue;
      found.set(jwk.kid, await importJWK(jwk, ALGORITHM));
    }
    this.#keys = found;
  }
}

function statement(claims: JWTPayload): VerifiedDelegation {
  const hops: Hop[] = [];
  // `act` nests the earlier agents, newest outermost (RFC 8693 4.1); `may_act` is the
  // agent holding the token, this one.
  let link: unknown = claims["may_act"];
  let acts: unknown = claims["act"];
  while (isObject(link)) {
    hops.push({ agent: String(link["sub"]), instance: String(link["instance"]), capability: String(link["cap"]) });
    link = acts;
    acts = isObject(acts) ? acts["act"] : undefined;
  }
  const budget = claims["budget"];
  const ctx = claims["ctx"];
  return {
    sub: String(claims.sub),
    caller: String(claims.sub),
    act: isObject(claims["act"]) ? claims["act"] : undefined,
    chain: hops.reverse(),
    scope: String(claims["scope"] ?? "").split(" ").filter(Boolean),
    contextId: typeof ctx === "string" ? ctx : undefined,
    hop: Number(claims["hop"] ?? 0),
    budget: typeof budget === "number" ? budget : undefined,
    requestId: String(claims["rid"] ?? ""),
    exp: Number(claims.exp),
    claims,
  };
}

function invalid(why: string): Unauthorized {
  return new Unauthorized(`the delegation token is not valid: ${why}`, { code: "delegation_invalid" });
}

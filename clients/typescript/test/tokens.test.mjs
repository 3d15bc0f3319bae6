// IdP tokens instead of API keys: `ClientCredentials` against an OAuth token endpoint
// (a local IdP signing real ES256 JWTs the real coordinator verifies through discovery
// and its JWKS), renewed at 80 % of a token's life and once on 401 `token_expired`.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, test } from "node:test";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { Agent, ClientCredentials, ReachClient, TokenUnavailable } from "../dist/index.js";
import { Coordinator, freePort, waitUntil } from "./coordinator.mjs";

const AUDIENCE = "https://reach.test/api";

/** An OAuth authorization server: discovery, JWKS, and client-credentials tokens whose
 * real lifetime (`exp`) and announced one (`expires_in`) each client sets. */
class LocalIdP {
  constructor() {
    this.clients = new Map();
    this.issued = new Map(); // client id -> tokens issued
  }

  async start() {
    const { privateKey, publicKey } = await generateKeyPair("ES256");
    this.privateKey = privateKey;
    this.jwk = { ...(await exportJWK(publicKey)), kid: "idp-key-1", alg: "ES256", use: "sig" };
    this.port = await freePort();
    this.issuer = `http://127.0.0.1:${this.port}`;
    this.server = http.createServer((req, res) => this.#serve(req, res));
    await new Promise((resolve) => this.server.listen(this.port, "127.0.0.1", resolve));
    return this;
  }

  client(id, secret, claims, { ttlS = 600, announcedS = ttlS } = {}) {
    this.clients.set(id, { secret, claims, ttlS, announcedS });
    this.issued.set(id, 0);
  }

  #serve(req, res) {
    const json = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.url === "/.well-known/openid-configuration") {
      return json(200, { issuer: this.issuer, token_endpoint: `${this.issuer}/token`, jwks_uri: `${this.issuer}/jwks` });
    }
    if (req.url === "/jwks") return json(200, { keys: [this.jwk] });
    if (req.url !== "/token" || req.method !== "POST") return json(404, {});
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString());
      const [id, secret] = Buffer.from((req.headers.authorization ?? "").replace(/^Basic /, ""), "base64").toString().split(":");
      const client = this.clients.get(id);
      if (form.get("grant_type") !== "client_credentials" || client === undefined || client.secret !== secret) {
        return json(401, { error: "invalid_client", error_description: "unknown client or wrong secret" });
      }
      this.issued.set(id, this.issued.get(id) + 1);
      const now = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ ...client.claims, jti: `${id}-${this.issued.get(id)}` })
        .setProtectedHeader({ alg: "ES256", kid: this.jwk.kid, typ: "at+jwt" })
        .setIssuer(this.issuer)
        .setAudience(form.get("resource") ?? AUDIENCE)
        .setSubject(id)
        .setIssuedAt(now)
        .setExpirationTime(now + client.ttlS)
        .sign(this.privateKey);
      json(200, { access_token: token, token_type: "Bearer", expires_in: client.announcedS });
    });
  }

  stop() {
    this.server.close();
  }
}

const idp = new LocalIdP();
let coordinator;
let agent;

before(async () => {
  await idp.start();
  coordinator = new Coordinator({ env: { AR_OIDC_ISSUER: idp.issuer, AR_OIDC_AUDIENCE: AUDIENCE, AR_OIDC_LEEWAY_S: "0" } });
  await coordinator.start();
  idp.client("tok-agent", "agent-secret", { reach_role: "agent", reach_capabilities: ["tok.*"] }, { ttlS: 2 });
  // The agent registers and heartbeats with IdP tokens alone, found through discovery.
  const credentials = new ClientCredentials({ clientId: "tok-agent", clientSecret: "agent-secret", issuer: idp.issuer });
  agent = new Agent({ id: "tok-ts", capabilities: ["tok.echo"], coordinator: coordinator.url, tokenProvider: credentials, ttl: 1.5, log: () => undefined });
  agent.handle("tok.echo", (req) => ({ echo: req.payload }));
  await agent.listen();
});

after(async () => {
  await agent?.close();
  await coordinator?.stop();
  idp.stop();
});

test("a caller with client credentials: one token for many calls", async () => {
  idp.client("tok-caller", "caller-secret", { reach_role: "caller", reach_capabilities: ["tok.*"] });
  const credentials = new ClientCredentials({ clientId: "tok-caller", clientSecret: "caller-secret", tokenUrl: `${idp.issuer}/token` });
  const client = new ReachClient({ coordinator: coordinator.url, tokenProvider: credentials });
  const answers = await Promise.all([1, 2, 3].map((n) => client.invoke({ capability: "tok.echo", payload: n })));
  assert.deepEqual(answers.map((a) => a.result.echo), [1, 2, 3]);
  assert.equal(idp.issued.get("tok-caller"), 1); // concurrent first calls shared one fetch
});

test("the agent's tokens are renewed at 80 % of their life: its lease outlives them", async () => {
  const before = idp.issued.get("tok-agent");
  await waitUntil(() => idp.issued.get("tok-agent") >= before + 2, "two renewals of the agent's 2 s token", 15_000);
  const admin = new ReachClient({ coordinator: coordinator.url, apiKey: coordinator.adminKey });
  assert.ok((await admin.agents()).some((a) => a.id === "tok-ts"));
  assert.equal((await admin.invoke({ capability: "tok.echo", payload: "x" })).agentId, "tok-ts");
});

test("a token the coordinator finds expired is replaced once, at once", async () => {
  // Announced for an hour, expired after 1 s: only the coordinator's 401 tells.
  idp.client("tok-liar", "liar-secret", { reach_role: "caller", reach_capabilities: ["tok.*"] }, { ttlS: 1, announcedS: 3600 });
  const credentials = new ClientCredentials({ clientId: "tok-liar", clientSecret: "liar-secret", tokenUrl: `${idp.issuer}/token` });
  const client = new ReachClient({ coordinator: coordinator.url, tokenProvider: credentials });
  await client.invoke({ capability: "tok.echo", payload: 1 });
  assert.equal(idp.issued.get("tok-liar"), 1);
  await new Promise((resolve) => setTimeout(resolve, 2100)); // past its exp (whole seconds)
  const answer = await client.invoke({ capability: "tok.echo", payload: 2 });
  assert.equal(answer.result.echo, 2);
  assert.equal(idp.issued.get("tok-liar"), 2);
});

test("an IdP that refuses the client is TokenUnavailable, naming its error", async () => {
  const credentials = new ClientCredentials({ clientId: "tok-caller", clientSecret: "wrong", tokenUrl: `${idp.issuer}/token` });
  const client = new ReachClient({ coordinator: coordinator.url, tokenProvider: credentials });
  await assert.rejects(client.agents(), (error) => error instanceof TokenUnavailable && /invalid_client/.test(error.message));
});

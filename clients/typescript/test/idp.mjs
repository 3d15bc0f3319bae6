// A local OAuth authorization server for the token tests: discovery, JWKS, and
// client-credentials tokens (real ES256 JWTs the real coordinator verifies).
import http from "node:http";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { freePort } from "./coordinator.mjs";

export const AUDIENCE = "https://reach.test/api";

/** An OAuth authorization server: discovery, JWKS, and client-credentials tokens whose
 * real lifetime (`exp`) and announced one (`expires_in`) each client sets. */
export class LocalIdP {
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


// A mesh agent on Node's `http` module and `jose`, not on our SDK (docs/mesh.md).
//
//   node mesh_agent.mjs <coordinator URL> <API key> <agent id> <capability>
//
// Registers itself with the coordinator (the API key is used for that only), then for
// each delivery: verifies its delegation token against the coordinator's
// GET /.well-known/jwks.json (EdDSA, iss = aud = the token's issuer), reads on whose
// behalf (`sub`) and through whom (`act`, `may_act`) it comes, and, when the payload
// says `then: {capability, payload}`, delegates onward with POST /v1/invoke and
// `Authorization: Bearer <delegation token>` as its only credential. A delivery whose
// token does not verify is refused with 401 `delegation_invalid`.
// Prints "PORT <n>" once registered; GET /stats -> {"acted", "refused", "last"}.
import http from "node:http";
import { createRemoteJWKSet, decodeJwt, jwtVerify } from "jose";

const [coordinator, apiKey, agentId, capability] = process.argv.slice(2);
const jwks = createRemoteJWKSet(new URL("/.well-known/jwks.json", coordinator));
const stats = { acted: 0, refused: 0, last: null };

// The chain, oldest agent first: `act` nests the earlier agents (newest outermost,
// RFC 8693 §4.1) and `may_act` is the agent holding the token, this one.
function chainOf(claims) {
  const hops = [];
  for (let act = claims.act; act; act = act.act) hops.unshift(act);
  hops.push(claims.may_act);
  return hops.map((hop) => ({ agent: hop.sub, instance: hop.instance, capability: hop.cap }));
}

async function verified(token) {
  const issuer = decodeJwt(token).iss; // checked by jwtVerify against the signed claims
  const { payload, protectedHeader } = await jwtVerify(token, jwks, {
    issuer,
    audience: issuer,
    algorithms: ["EdDSA"],
    typ: "delegation+jwt",
  });
  return { claims: payload, kid: protectedHeader.kid };
}

async function call(path, { method = "POST", token, body, traceparent } = {}) {
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  if (traceparent) headers.traceparent = traceparent; // joins the trace: not a credential
  const answer = await fetch(new URL(path, coordinator), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: answer.status, body: await answer.json() };
}

function send(res, status, document, headers = {}) {
  const body = JSON.stringify(document);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

async function invoke(req, res, delivery) {
  const token = delivery.delegation && delivery.delegation.token;
  let seen;
  try {
    if (!token) throw new Error("the delivery carries no delegation token");
    seen = await verified(token);
  } catch (error) {
    stats.refused += 1;
    const detail = { code: "delegation_invalid", message: `not the coordinator's: ${error.code || error.message}` };
    return send(res, 401, { error: detail }, { "x-reach-retryable": "false" });
  }
  stats.acted += 1;
  const view = {
    caller: seen.claims.sub,
    chain: chainOf(seen.claims),
    depth: delivery.delegation.depth,
    scope: String(seen.claims.scope || "").split(" ").filter(Boolean),
    kid: seen.kid,
  };
  stats.last = view;
  const answer = { at: agentId, seen: view };
  const next = (delivery.payload || {}).then;
  if (next) {
    const onward = await call("/v1/invoke", {
      token, // the delivery's token and nothing else: the coordinator acts as the caller
      body: { capability: next.capability, payload: next.payload || {} },
      traceparent: req.headers.traceparent,
    });
    answer.then =
      onward.status === 200
        ? { status: onward.status, result: onward.body.result, agent_id: onward.body.agent_id }
        : { status: onward.status, error: onward.body.error };
  }
  send(res, 200, answer);
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/health") return send(res, 200, { status: "ok" });
  if (req.method === "GET" && req.url === "/stats") return send(res, 200, stats);
  if (req.method !== "POST" || req.url !== "/invoke") return send(res, 404, {});
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let delivery;
    try {
      delivery = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return send(res, 400, { error: { code: "invalid_delivery", message: "not JSON" } });
    }
    invoke(req, res, delivery).catch((error) =>
      send(res, 500, { error: { code: "agent_error", message: String(error) } }),
    );
  });
});

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address();
  const registration = {
    id: agentId,
    capabilities: [capability],
    transport: { type: "http", endpoint: `http://127.0.0.1:${port}/invoke` },
    delegation: true,
  };
  const registered = await call("/v1/agents", { token: apiKey, body: registration });
  if (registered.status !== 201) {
    console.error(`registration failed: ${registered.status} ${JSON.stringify(registered.body)}`);
    process.exit(1);
  }
  console.log(`PORT ${port}`);
});

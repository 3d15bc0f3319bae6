// A mesh agent on the TypeScript SDK (@agent-reach/sdk, clients/typescript), the way a
// Node team writes one (docs/sdk-typescript.md).
//
//   node mesh_agent.mjs <coordinator URL> <API key> <agent id> <capability>
//
// Registers itself with the coordinator (`delegation: true`: every delivery carries a
// token), then for each delivery: verifies its delegation token with the SDK's
// `DelegationVerifier` (the coordinators' JWKS), reads on whose behalf (`sub`) and
// through whom (the chain) it comes, and, when the payload says
// `then: {capability, payload}`, delegates onward with `req.delegate`, whose only
// credential is the delivery's token. A delivery whose token does not verify is refused
// by the SDK with 401 `delegation_invalid` and `X-Reach-Retryable: false`.
// Prints "PORT <n>" once registered; GET /stats -> {"acted", "refused", "last"}.
import http from "node:http";
import { Agent, DelegationVerifier, ReachError, Unauthorized } from "@agent-reach/sdk";

const [coordinator, apiKey, agentId, capability] = process.argv.slice(2);
const verifier = new DelegationVerifier({ coordinator });
const stats = { acted: 0, refused: 0, last: null };
const agent = new Agent({ id: agentId, capabilities: [capability], coordinator, apiKey, delegation: true });

agent.handle(capability, async (req) => {
  let seen;
  try {
    seen = await verifier.verify(req.delegation?.token ?? "");
  } catch (error) {
    if (error instanceof Unauthorized) stats.refused += 1;
    throw error; // a ReachError: answered with its status and code, not retryable
  }
  stats.acted += 1;
  const view = { caller: seen.caller, chain: seen.chain, depth: req.delegation.depth, scope: seen.scope };
  stats.last = view;
  const answer = { at: agentId, seen: view };
  const next = req.payload?.then;
  if (next) {
    try {
      const onward = await req.delegate({ capability: next.capability, payload: next.payload ?? {} });
      answer.then = { status: 200, result: onward.result, agent_id: onward.agentId };
    } catch (error) {
      if (!(error instanceof ReachError)) throw error;
      answer.then = { status: error.status, error: { code: error.code, message: error.message, ...error.details } };
    }
  }
  return answer;
});

// The agent's own routes, and /stats beside them for the test.
const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/stats") {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify(stats));
  }
  agent.serveHttp(req, res);
});

try {
  const { url } = await agent.listen({ server });
  console.log(`PORT ${new URL(url).port}`);
} catch (error) {
  console.error(`registration failed: ${error.code}: ${error.message}`);
  process.exit(1);
}

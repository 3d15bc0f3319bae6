// The file with a coordinator of its own, which it restarts. IdP tokens instead of API
// keys: `ClientCredentials` against an OAuth token endpoint (test/idp.mjs), renewed at
// 80 % of a token's life and once on 401 `token_expired`. The lease: renewed while the
// agent runs, taken again after the coordinator restarts or forgets the instance; and a
// coordinator that does not answer fails listen(). And 421 "not mine" by text, on this
// coordinator's small catalog, where the words fit two capabilities.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import { Agent, ClientCredentials, NotMine, ReachClient, ReachError, TokenUnavailable } from "../dist/index.js";
import { Coordinator, freePort, waitUntil } from "./coordinator.mjs";
import { AUDIENCE, LocalIdP } from "./idp.mjs";

const idp = new LocalIdP();
let coordinator;
let admin;
let agent;
let tokenAgent;
let runs = 0;

before(async () => {
  await idp.start();
  coordinator = new Coordinator({ env: { AR_OIDC_ISSUER: idp.issuer, AR_OIDC_AUDIENCE: AUDIENCE, AR_OIDC_LEEWAY_S: "0" } });
  await coordinator.start();
  idp.client("tok-agent", "agent-secret", { reach_role: "agent", reach_capabilities: ["tok.*"] }, { ttlS: 2 });
  // An agent that registers and heartbeats with IdP tokens alone, found through discovery.
  const credentials = new ClientCredentials({ clientId: "tok-agent", clientSecret: "agent-secret", issuer: idp.issuer });
  tokenAgent = new Agent({ id: "tok-ts", capabilities: ["tok.echo"], coordinator: coordinator.url, tokenProvider: credentials, ttl: 1.5, log: () => undefined });
  tokenAgent.handle("tok.echo", (req) => ({ echo: req.payload }));
  await tokenAgent.listen();
  admin = new ReachClient({ coordinator: coordinator.url, apiKey: coordinator.adminKey });
  // The admin key: on memory a restart forgets every key made through the API.
  agent = new Agent({ id: "lease-ts", capabilities: ["lease.ping"], coordinator: coordinator.url, apiKey: coordinator.adminKey, ttl: 1.5, log: () => undefined });
  agent.handle("lease.ping", () => ({ pong: ++runs }));
  await agent.listen();
});

after(async () => {
  await agent?.close();
  await tokenAgent?.close();
  await coordinator?.stop();
  idp.stop();
});

const listed = async () => {
  try {
    return (await admin.agents()).some((a) => a.id === "lease-ts");
  } catch {
    return false; // restarting
  }
};

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

test("421 not mine: a request routed by text goes on to the next-best other capability", async () => {
  const options = { coordinator: coordinator.url, apiKey: coordinator.adminKey, log: () => undefined };
  const refund = new Agent({ ...options, id: "refund-ts", capabilities: ["refund.request"], description: "退款申请、我要退款、退货退钱", examples: ["我要退款", "这个订单退钱"] });
  const faq = new Agent({ ...options, id: "faq-ts", capabilities: ["faq.answer"], description: "常见问题、退款政策、退货规则", examples: ["退款政策是什么", "多久能退款"] });
  let declined = 0;
  refund.handle(() => {
    declined += 1;
    throw new NotMine("refunds go through the FAQ first");
  });
  faq.handle((req) => ({ faq: req.text }));
  await refund.listen();
  await faq.listen();
  try {
    await waitUntil(async () => (await admin.route({ text: "退款" })).capability === "refund.request", "the router to fit both cards");
    const answer = await admin.invoke({ text: "退款", payload: {} });
    assert.equal(answer.status, "fallback");
    assert.deepEqual(answer.result, { faq: "退款" });
    assert.deepEqual(answer.attempts.map((a) => [a.agent_id, a.http_status ?? null]), [["refund-ts", 421], ["faq-ts", null]]);
    assert.equal(declined, 1);
  } finally {
    await refund.close();
    await faq.close();
  }
});

test("the lease outlives its ttl: heartbeats renew it", async () => {
  const first = (await admin.agents()).find((a) => a.id === "lease-ts");
  assert.ok(first);
  await new Promise((resolve) => setTimeout(resolve, 2500)); // longer than the 1.5 s ttl
  assert.ok(await listed());
  assert.equal((await admin.invoke({ capability: "lease.ping", payload: {} })).agentId, "lease-ts");
});

test("after a coordinator restart the agent registers again by itself", async () => {
  await coordinator.restart();
  await waitUntil(listed, "lease-ts to register again");
  const answer = await admin.invoke({ capability: "lease.ping", payload: {} });
  assert.equal(answer.agentId, "lease-ts");
  // The agent on IdP tokens too: its token provider authenticates the new registration.
  await waitUntil(async () => (await admin.agents()).some((a) => a.id === "tok-ts"), "tok-ts to register again");
  assert.equal((await admin.invoke({ capability: "tok.echo", payload: 1 })).agentId, "tok-ts");
});

test("when the coordinator forgets the instance, the next heartbeat registers it again", async () => {
  await admin.deregister("lease-ts");
  assert.ok(!(await listed()));
  await waitUntil(listed, "lease-ts to register again");
  assert.ok(agent.isRegistered);
});

test("a coordinator that refuses connections fails listen() after its timeout", async () => {
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  const lost = new Agent({ id: "lost-ts", capabilities: ["lost.x"], coordinator: nowhere });
  await assert.rejects(lost.listen({ timeoutMs: 600 }), (error) => {
    assert.ok(error instanceof ReachError);
    assert.equal(error.code, "coordinator_unreachable");
    assert.match(error.message, /could not register .* within 600 ms/);
    return true;
  });
  assert.equal(lost.isRegistered, false);
});

test("a coordinator that accepts but never answers fails listen() too, not a hang", async () => {
  const held = [];
  const silent = net.createServer((socket) => held.push(socket)); // reads nothing, answers nothing
  await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
  try {
    const lost = new Agent({ id: "lost-ts", capabilities: ["lost.x"], coordinator: `http://127.0.0.1:${silent.address().port}` });
    await assert.rejects(lost.listen({ timeoutMs: 700 }), (error) => error.code === "coordinator_unreachable" && /no answer within the timeout/.test(error.message));
  } finally {
    for (const socket of held) socket.destroy();
    silent.close();
  }
});

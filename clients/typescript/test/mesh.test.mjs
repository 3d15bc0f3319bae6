// The mesh on the SDK: a delegation chain A -> B that B verifies, forged tokens refused,
// one key fetch for concurrent first verifications, and the typed error of each refusal
// the coordinator answers.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { SignJWT, decodeJwt, decodeProtectedHeader, generateKeyPair } from "jose";
import * as sdk from "../dist/index.js";
import { shared } from "./coordinator.mjs";

const { Agent, DelegationVerifier, ReachClient } = sdk;


const coordinator = await shared();
const agents = [];
const received = []; // the tokens back-ts was delivered
const acted = { back: 0 };
let caller;
let backUrl;
let keys;

before(async () => {
  await coordinator.start();
  keys = {
    caller: await coordinator.key("shop-frontend", "caller", ["front.*", "back.*", "slow.*", "gone.*"]),
    front: await coordinator.key("front-agents", "agent", ["front.*", "slow.*", "gone.*"]),
    back: await coordinator.key("back-agents", "agent", ["back.*"]),
    limited: await coordinator.key("limited-caller", "caller", ["back.*"]),
  };
  caller = new ReachClient({ coordinator: coordinator.url, apiKey: keys.caller });
  const verifier = new DelegationVerifier({ coordinator: coordinator.url });
  const front = new Agent({ id: "front-ts", capabilities: ["front.ask"], coordinator: coordinator.url, apiKey: keys.front });
  front.handle("front.ask", async (req) => {
    const onward = req.payload.then;
    try {
      const handed = await req.delegate({ capability: onward.capability, payload: onward.payload ?? {} });
      return { handed: handed.result, agentId: handed.agentId };
    } catch (error) {
      return { refused: { cls: error.constructor.name, code: error.code, status: error.status, failed: error.details.failed ?? null } };
    }
  });
  const back = new Agent({ id: "back-ts", capabilities: ["back.verify"], coordinator: coordinator.url, apiKey: keys.back, delegation: true, cost: 1 });
  back.handle("back.verify", async (req) => {
    received.push(req.delegation.token);
    const seen = await verifier.verify(req.delegation.token); // throws Unauthorized: answered 401
    acted.back += 1;
    return { caller: seen.caller, chain: seen.chain, scope: seen.scope, depth: req.delegation.depth, budget: seen.budget ?? null };
  });
  const slow = new Agent({ id: "slow-ts", capabilities: ["slow.wait"], coordinator: coordinator.url, apiKey: keys.front });
  slow.handle("slow.wait", async (req) => {
    await new Promise((resolve) => setTimeout(resolve, req.payload.ms ?? 600));
    return { waited: true };
  });
  for (const agent of [front, back, slow]) agents.push(agent);
  await front.listen();
  ({ url: backUrl } = await back.listen());
  await slow.listen();
});

after(async () => {
  await Promise.all(agents.map((agent) => agent.close()));
  await coordinator.stop();
});

describe("delegation", () => {
  test("A hands a sub-task to B on the caller's behalf; B verifies the chain", async () => {
    const answer = await caller.invoke({ capability: "front.ask", payload: { then: { capability: "back.verify" } } });
    assert.equal(answer.result.agentId, "back-ts");
    const seen = answer.result.handed;
    assert.equal(seen.caller, "shop-frontend"); // on whose behalf: `sub`
    assert.deepEqual(seen.chain, [
      { agent: "front-agents", instance: "front-ts", capability: "front.ask" },
      { agent: "back-agents", instance: "back-ts", capability: "back.verify" },
    ]);
    assert.equal(seen.depth, 2);
  });

  test("a forged token is refused with 401 delegation_invalid, and nothing is acted on", async () => {
    await caller.invoke({ capability: "front.ask", payload: { then: { capability: "back.verify" } } });
    const genuine = received.at(-1);
    const [head, claims, signature] = genuine.split(".");
    const changed = { ...decodeJwt(genuine), sub: "someone-richer" };
    const tampered = `${head}.${Buffer.from(JSON.stringify(changed)).toString("base64url")}.${signature}`;
    const { privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
    const { kid } = decodeProtectedHeader(genuine);
    const foreign = await new SignJWT(decodeJwt(genuine)).setProtectedHeader({ alg: "EdDSA", kid, typ: "delegation+jwt" }).sign(privateKey);
    const expired = await new SignJWT({ ...decodeJwt(genuine), exp: 1 }).setProtectedHeader({ alg: "EdDSA", kid, typ: "delegation+jwt" }).sign(privateKey);
    const before = acted.back;
    for (const token of [tampered, genuine.slice(0, -4) + "AAAA", foreign, expired, "not-a-jwt"]) {
      const answer = await fetch(`${backUrl}/invoke`, {
        method: "POST",
        body: JSON.stringify({
          request_id: `forged-${Math.random()}`,
          capability: "back.verify",
          payload: {},
          trace_id: "0".repeat(32),
          hop: 3,
          delegation: { token, expires_at: 0, depth: 2 },
        }),
      });
      assert.equal(answer.status, 401, token);
      assert.equal(answer.headers.get("x-reach-retryable"), "false");
      assert.equal((await answer.json()).error.code, "delegation_invalid");
    }
    assert.equal(acted.back, before);
    // The verifier throws the typed error itself.
    const verifier = new DelegationVerifier({ coordinator: coordinator.url });
    await assert.rejects(verifier.verify(tampered), (e) => e instanceof sdk.Unauthorized && e.code === "delegation_invalid");
    assert.equal((await verifier.verify(genuine)).caller, "shop-frontend");
  });

  test("16 concurrent first verifications on a fresh verifier share one key fetch", async () => {
    const tokens = [];
    while (tokens.length < 16) {
      await caller.invoke({ capability: "front.ask", payload: { then: { capability: "back.verify" } } });
      tokens.push(received.at(-1));
    }
    assert.equal(new Set(tokens).size, 16);
    let fetched = 0; // counted where the keys are served: a proxy in front of the coordinator
    const proxy = http.createServer(async (req, res) => {
      fetched += 1;
      const answer = await fetch(coordinator.url + req.url);
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(await answer.text());
    });
    await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    try {
      const verifier = new DelegationVerifier({ coordinator: `http://127.0.0.1:${proxy.address().port}` });
      const seen = await Promise.all(tokens.map((token) => verifier.verify(token)));
      assert.equal(fetched, 1);
      assert.equal(verifier.fetches, 1);
      assert.ok(seen.every((s) => s.caller === "shop-frontend" && s.chain.length === 2));
    } finally {
      proxy.close();
    }
  });

  test("refusals of a delegation are typed: denied, cycle, budget", async () => {
    const refused = async (then, budget) =>
      (await caller.invoke({ capability: "front.ask", payload: { then }, ...(budget === undefined ? {} : { budget }) })).result.refused;
    assert.deepEqual(await refused({ capability: "slow.wait" }), { cls: "Forbidden", code: "delegation_denied", status: 403, failed: "delegate_rule" });
    assert.deepEqual((await refused({ capability: "front.ask" })).code, "delegation_cycle");
    const spent = await refused({ capability: "back.verify" }, 0.5);
    assert.deepEqual([spent.cls, spent.code, spent.status], ["Forbidden", "budget_exhausted", 403]);
  });
});

describe("typed errors", () => {
  async function thrown(promise) {
    try {
      await promise;
    } catch (error) {
      return error;
    }
    assert.fail("expected an error");
  }

  function expect(error, cls, code, status) {
    assert.ok(error instanceof cls, `${error?.constructor?.name}: ${error?.message}`);
    assert.ok(error instanceof sdk.ReachError);
    assert.equal(error.code, code);
    assert.equal(error.status, status);
  }

  test("each refusal the coordinator answers arrives as its class", async () => {
    const wrongKey = new ReachClient({ coordinator: coordinator.url, apiKey: "not-a-key-at-all-0123456789" });
    expect(await thrown(wrongKey.agents()), sdk.Unauthorized, "unauthorized", 401);
    expect(await thrown(caller.invoke({ capability: "secret.read" })), sdk.Forbidden, "forbidden", 403);
    const invalid = await thrown(caller.invoke({ payload: {} }));
    expect(invalid, sdk.ValidationFailed, "validation_error", 422);
    assert.ok(Array.isArray(invalid.details.problems));
    expect(await thrown(caller.invoke({ capability: "back.nothing" })), sdk.NoCapability, "no_capability", 404);
    const agentClient = new ReachClient({ coordinator: coordinator.url, apiKey: keys.front });
    expect(await thrown(agentClient.heartbeat("nobody-here")), sdk.UnknownAgent, "unknown_agent", 404);
    expect(await thrown(caller.task("no-such-task")), sdk.UnknownTask, "unknown_task", 404);
    const context = await caller.createContext({ document: { a: 1 } });
    await caller.patchContext(context.contextId, { a: 2 });
    expect(await thrown(caller.patchContext(context.contextId, { a: 3 }, { ifVersion: context.version })), sdk.Conflict, "version_conflict", 409);
    const reused = `reused-${Date.now()}`;
    await caller.invoke({ capability: "slow.wait", payload: { ms: 1 }, requestId: reused });
    expect(await thrown(caller.invoke({ capability: "slow.wait", payload: { ms: 2 }, requestId: reused })), sdk.KeyReused, "idempotency_key_reused", 422);
    const running = `running-${Date.now()}`;
    const first = caller.invoke({ capability: "slow.wait", payload: { ms: 800 }, requestId: running });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await thrown(caller.invoke({ capability: "slow.wait", payload: { ms: 800 }, requestId: running, onDuplicate: "reject" })), sdk.InProgress, "in_progress", 409);
    await first;
    expect(await thrown(caller.invoke({ capability: "slow.wait", payload: {}, maxHop: 0 })), sdk.HopLimit, "hop_limit", 508);
    expect(await thrown(caller.invoke({ capability: "slow.wait", payload: { ms: 1500 }, deadlineMs: 200 })), sdk.AgentTimeout, "agent_timeout", 504);
    const tooBig = await thrown(caller.invoke({ capability: "slow.wait", payload: { blob: "x".repeat(2 << 20) } }));
    expect(tooBig, sdk.PayloadTooLarge, "payload_too_large", 413);
    const limited = new ReachClient({ coordinator: coordinator.url, apiKey: keys.limited });
    await limited.invoke({ capability: "back.verify", payload: {} }).catch(() => undefined);
    let quota;
    for (let i = 0; i < 3 && quota === undefined; i++) {
      const error = await thrown(limited.invoke({ capability: "back.verify", payload: {} }));
      if (error instanceof sdk.QuotaExceeded) quota = error;
    }
    expect(quota, sdk.QuotaExceeded, "quota_exceeded", 429);
    assert.ok(quota.retryAfter > 0);
    assert.equal(quota.retryable, true);
  });

  test("no instance: a capability whose only instance left", async () => {
    const gone = new Agent({ id: "gone-ts", capabilities: ["gone.away"], coordinator: coordinator.url, apiKey: keys.front });
    gone.handle(() => ({}));
    await gone.listen();
    await gone.close();
    const error = await thrown(caller.invoke({ capability: "gone.away", payload: {}, suspend: false }));
    assert.ok(error instanceof sdk.NoInstance || error instanceof sdk.NoCapability, error.message);
  });
});

// The lease: renewed while the agent runs, taken again after the coordinator restarts
// or forgets the instance; and a coordinator that does not answer fails listen().
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import { Agent, ReachClient, ReachError } from "../dist/index.js";
import { Coordinator, freePort, waitUntil } from "./coordinator.mjs";

const coordinator = new Coordinator();
let admin;
let agent;
let runs = 0;

before(async () => {
  await coordinator.start();
  admin = new ReachClient({ coordinator: coordinator.url, apiKey: coordinator.adminKey });
  // The admin key: on memory a restart forgets every key made through the API.
  agent = new Agent({ id: "lease-ts", capabilities: ["lease.ping"], coordinator: coordinator.url, apiKey: coordinator.adminKey, ttl: 1.5, log: () => undefined });
  agent.handle("lease.ping", () => ({ pong: ++runs }));
  await agent.listen();
});

after(async () => {
  await agent?.close();
  await coordinator.stop();
});

const listed = async () => {
  try {
    return (await admin.agents()).some((a) => a.id === "lease-ts");
  } catch {
    return false; // restarting
  }
};

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

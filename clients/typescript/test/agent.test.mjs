// An agent and a caller on the SDK against the real coordinator: registration, invoke by
// name and by text, the request-id guard, the context, streaming, negotiation, reported
// costs, and what the agent answers for handlers that fail.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Agent, AgentFailed, Conflict, NotFound, NotMine, ReachClient, RetryLater } from "../dist/index.js";
import { shared, waitUntil } from "./coordinator.mjs";

const coordinator = await shared();
let agentKey;
let caller;
const agents = [];

async function started(options, setup) {
  const agent = new Agent({ coordinator: coordinator.url, apiKey: agentKey, ...options });
  setup(agent);
  const { url } = await agent.listen();
  agents.push(agent);
  return { agent, url };
}

function deliver(url, delivery, headers = {}) {
  return fetch(`${url}/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ trace_id: "0".repeat(32), hop: 3, payload: {}, ...delivery }),
  });
}

before(async () => {
  await coordinator.start();
  agentKey = await coordinator.key("shop-agents", "agent", ["stock.*", "order.*", "chat.*", "quote.*", "faulty.*"]);
  const callerKey = await coordinator.key("shop-frontend", "caller", ["stock.*", "order.*", "chat.*", "quote.*", "faulty.*"]);
  caller = new ReachClient({ coordinator: coordinator.url, apiKey: callerKey });
});

after(async () => {
  await Promise.all(agents.map((agent) => agent.close()));
  await coordinator.stop();
});

describe("an agent and a caller", () => {
  let stockRuns = 0;
  let stockUrl;

  before(async () => {
    ({ url: stockUrl } = await started(
      {
        id: "stock-ts",
        capabilities: ["stock.check"],
        description: "spare parts left in the warehouse",
        examples: ["how many bolts are left"],
        contextFields: ["product"],
      },
      (agent) =>
        agent.handle("stock.check", async (req) => {
          stockRuns += 1;
          await new Promise((resolve) => setTimeout(resolve, 50)); // a repeat arrives mid-run
          return { sku: req.payload?.sku ?? null, text: req.text ?? null, hops: req.hopsLeft, run: stockRuns };
        }),
    ));
    await started(
      {
        id: "logistics-ts",
        capabilities: ["order.track"],
        description: "物流查询、快递到哪了、买的东西怎么还没到 where is my parcel delivery tracking",
        examples: ["我的快递到哪了", "where is my parcel"],
      },
      (agent) => agent.handle("order.track", (req) => ({ order: req.payload.order, status: "shipped" })),
    );
  });

  test("registers: the coordinator lists it, with its registration", async () => {
    const listed = await caller.agents();
    const mine = listed.find((a) => a.id === "stock-ts");
    assert.ok(mine, JSON.stringify(listed));
    assert.deepEqual(mine.capabilities, ["stock.check"]);
    assert.equal(mine.spec?.idempotent ?? mine.idempotent ?? true, true);
    const capabilities = await caller.capabilities();
    assert.deepEqual(capabilities["stock.check"], ["stock-ts"]);
  });

  test("invoke by name", async () => {
    const answer = await caller.invoke({ capability: "stock.check", payload: { sku: "X5-BLUE-256" } });
    assert.equal(answer.status, "ok");
    assert.equal(answer.agentId, "stock-ts");
    assert.equal(answer.result.sku, "X5-BLUE-256");
    assert.match(answer.traceId, /^[0-9a-f]{32}$/);
    assert.equal(answer.attempts.length, 1);
    assert.equal(answer.route.capability, "stock.check");
  });

  test("invoke by text: routed by the words, which reach the agent", async () => {
    // The router refits its matchers in the background when cards change (other test
    // files register theirs on the same coordinator): wait for the fit that has ours.
    const text = "我买的东西怎么还没到";
    await waitUntil(async () => (await caller.route({ text })).capability === "order.track", "the router to fit order.track");
    const answer = await caller.invoke({ text: "我买的东西怎么还没到", payload: { order: "A1001" } });
    assert.equal(answer.route.capability, "order.track");
    assert.deepEqual(answer.result, { order: "A1001", status: "shipped" });
    const decision = await caller.route({ text: "我买的东西怎么还没到", topK: 1 });
    assert.equal(decision.capability, "order.track");
    assert.deepEqual(decision.ranked.map((r) => r.capability), ["order.track"]);
    assert.equal((await caller.route({ text: "我买的东西怎么还没到", topK: 2 })).ranked.length, 2);
  });

  test("the request-id guard: a repeated request id runs the handler once", async () => {
    const before = stockRuns;
    const requestId = `guard-${Date.now()}`;
    const [first, second] = await Promise.all([
      caller.invoke({ capability: "stock.check", payload: { sku: "A" }, requestId }),
      caller.invoke({ capability: "stock.check", payload: { sku: "A" }, requestId }),
    ]);
    assert.deepEqual(second.result, first.result);
    assert.equal(stockRuns, before + 1);
    // Delivered straight to the agent, twice at once and once after: one run.
    const delivery = { request_id: `direct-${Date.now()}`, capability: "stock.check", payload: { sku: "B" } };
    const answers = await Promise.all([deliver(stockUrl, delivery), deliver(stockUrl, delivery)]);
    const again = await deliver(stockUrl, delivery);
    const bodies = await Promise.all([...answers, again].map((a) => a.json()));
    assert.equal(stockRuns, before + 2);
    assert.deepEqual(bodies[1], bodies[0]);
    assert.deepEqual(bodies[2], bodies[0]);
  });

  test("asynchronous invocations: submit, task, waitTask", async () => {
    const task = await caller.submit({ capability: "stock.check", payload: { sku: "T" } });
    assert.match(task.taskId, /\S/);
    const done = await caller.waitTask(task.taskId);
    assert.equal(done.result.sku, "T");
    const seen = await caller.task(task.taskId);
    assert.equal(seen.httpStatus, 200);
  });

  test("feedback: a rating counts once", async () => {
    const answer = await caller.invoke({ capability: "stock.check", payload: { sku: "F" } });
    const rated = await caller.feedback({ requestId: answer.requestId, rating: "good" });
    assert.deepEqual(rated.rated, { request_id: answer.requestId, agent_id: "stock-ts", rating: "good" });
    await assert.rejects(caller.feedback({ requestId: answer.requestId, rating: "bad" }), (e) => e instanceof Conflict && e.code === "already_rated");
  });

  test("answers probes, and refuses a body that is not a delivery", async () => {
    const health = await fetch(`${stockUrl}/health`);
    assert.deepEqual(await health.json(), { status: "ok", id: "stock-ts" });
    const bad = await fetch(`${stockUrl}/invoke`, { method: "POST", body: "{not json" });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, "invalid_delivery");
  });
});

describe("the context", () => {
  test("a handler reads its projection and patches it; a stale version is refused", async () => {
    await started({ id: "quote-ts", capabilities: ["quote.make"], contextFields: ["quote"] }, (agent) =>
      agent.handle("quote.make", async (req) => {
        const seen = await req.context.get();
        const version = req.context.version;
        const written = await req.context.patch({ quote: { price: 42 } }, { ifVersion: version });
        let stale = null;
        try {
          await req.context.patch({ quote: { price: 1 } }, { ifVersion: version });
        } catch (error) {
          stale = { cls: error.constructor.name, code: error.code, status: error.status, conflict: error instanceof Conflict };
        }
        return { seen, version, written, stale, contextId: req.context.id };
      }),
    );
    const context = await caller.createContext({ document: { product: "X5", user: { secret: "s" }, quote: null } });
    const answer = await caller.invoke({ capability: "quote.make", payload: {}, contextId: context.contextId });
    const { seen, version, written, stale, contextId } = answer.result;
    assert.equal(contextId, context.contextId);
    assert.deepEqual(seen, { quote: null }); // its own field only
    assert.equal(version, context.version);
    assert.equal(written, version + 1);
    assert.deepEqual(stale, { cls: "Conflict", code: "version_conflict", status: 409, conflict: true });
    const now = await caller.getContext(context.contextId);
    assert.deepEqual(now.document.quote, { price: 42 }); // the stale patch changed nothing
    assert.equal(now.version, written);
    await assert.rejects(caller.patchContext(context.contextId, { product: "Y" }, { ifVersion: version }), (error) => error instanceof Conflict);
    await caller.deleteContext(context.contextId);
    await assert.rejects(caller.getContext(context.contextId), (error) => error instanceof NotFound);
  });
});

describe("streaming", () => {
  test("an async generator streams its events; a caller reads them as they come", async () => {
    await started({ id: "chat-ts", capabilities: ["chat.reply"] }, (agent) =>
      agent.handle("chat.reply", async function* (req) {
        yield "Hel";
        yield { event: "token", data: "lo", id: "2" };
        yield { words: req.payload.n };
      }),
    );
    const events = [];
    for await (const event of caller.invokeStream({ capability: "chat.reply", payload: { n: 2 } })) events.push(event);
    assert.deepEqual(
      events.slice(0, 3).map(({ event, data, id }) => ({ event, data, id })),
      [
        { event: "message", data: "Hel", id: undefined },
        { event: "token", data: "lo", id: "2" },
        { event: "message", data: '{"words":2}', id: undefined },
      ],
    );
    const end = events[3];
    assert.equal(end.event, "reach.end");
    assert.equal(end.answer.agentId, "chat-ts");
    assert.equal(end.answer.result.text, 'Hello{"words":2}');
    // A caller who did not ask for a stream gets it assembled.
    const whole = await caller.invoke({ capability: "chat.reply", payload: { n: 1 } });
    assert.equal(whole.normalized, "sse");
    assert.equal(whole.result.events.length, 3);
  });
});

test("a stream that fails after its first event ends unfinished; a repeat gets the whole stream", async () => {
  let runs = 0;
  const { url } = await started({ id: "broken-ts", capabilities: ["chat.broken", "chat.twice"] }, (agent) =>
    agent
      .handle("chat.broken", async function* () {
        yield "first";
        throw new Error("the model went away");
      })
      .handle("chat.twice", async function* () {
        runs += 1;
        yield "a";
        await new Promise((resolve) => setTimeout(resolve, 100));
        yield "b";
      }),
  );
  const seen = [];
  await assert.rejects(
    (async () => {
      for await (const event of caller.invokeStream({ capability: "chat.broken", payload: {} })) seen.push(event.data);
    })(),
    (error) => error instanceof AgentFailed && error.code === "agent_stream_broken",
  );
  assert.deepEqual(seen, ["first"]);
  const delivery = { request_id: `twice-${Date.now()}`, capability: "chat.twice" };
  const answers = await Promise.all([deliver(url, delivery), deliver(url, delivery)]);
  const bodies = await Promise.all(answers.map((a) => a.text()));
  assert.equal(runs, 1);
  assert.deepEqual(answers.map((a) => a.headers.get("content-type")), ["text/event-stream", "text/event-stream"]);
  assert.equal(bodies[1], bodies[0]);
  assert.equal(bodies[0], "event: message\ndata: a\n\nevent: message\ndata: b\n\n");
});

test("a caller that leaves mid-stream closes the agent's generator", async () => {
  let closed = false;
  await started({ id: "endless-ts", capabilities: ["chat.endless"] }, (agent) =>
    agent.handle("chat.endless", async function* () {
      try {
        for (let i = 0; ; i++) {
          yield `t${i}`;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        closed = true;
      }
    }),
  );
  const seen = [];
  for await (const event of caller.invokeStream({ capability: "chat.endless", payload: {} })) {
    seen.push(event.data);
    if (seen.length === 2) break; // closes the connection
  }
  assert.deepEqual(seen, ["t0", "t1"]);
  await waitUntil(() => closed, "the generator to be closed");
});

describe("negotiation", () => {
  test("the coordinator asks for offers first; a decline gets no delivery", async () => {
    const asked = [];
    const delivered = { yes: 0, no: 0 };
    for (const [name, accept] of [["yes", true], ["no", false]]) {
      // 200 ms, the default wait for an offer, is short for a loaded test machine.
      const options = { id: `offer-${name}`, capabilities: ["order.offer"], negotiate: { timeoutMs: 3000 } };
      await started({ ...options, ...(name === "no" ? { weight: 100 } : {}) }, (agent) =>
        agent
          .offer((req) => {
            asked.push({ name, ...req });
            return accept ? { accept: true, etaMs: 20, confidence: 0.9 } : false;
          })
          .handle("order.offer", () => {
            delivered[name] += 1;
            return { by: name };
          }),
      );
    }
    for (let i = 0; i < 3; i++) {
      const answer = await caller.invoke({ capability: "order.offer", payload: { secret: "never in an offer" } });
      assert.deepEqual(answer.result, { by: "yes" });
      assert.ok(answer.route.negotiation, JSON.stringify(answer.route));
    }
    assert.deepEqual(delivered, { yes: 3, no: 0 });
    assert.ok(asked.some((a) => a.name === "no"));
    for (const offer of asked) {
      assert.equal(offer.capability, "order.offer");
      assert.equal(typeof offer.deadlineMs, "number");
      assert.ok(!("payload" in offer));
    }
  });
});

describe("answers that are not results", () => {
  let url;
  const runs = { boom: 0 };
  before(async () => {
    ({ url } = await started({ id: "faulty-ts", capabilities: ["faulty.boom", "faulty.bigint", "faulty.busy", "faulty.costly", "faulty.notmine"] }, (agent) =>
      agent
        .handle("faulty.boom", () => {
          runs.boom += 1;
          throw new Error("the warehouse is on fire");
        })
        .handle("faulty.bigint", () => ({ count: 10n }))
        .handle("faulty.busy", () => {
          throw new RetryLater("queue full");
        })
        .handle("faulty.notmine", () => {
          throw new NotMine();
        })
        .handle("faulty.costly", (req) => {
          req.reportCost(2.5);
          return { done: true };
        }),
    ));
  });

  test("a handler that throws answers 500 with its message and no stack", async () => {
    const answer = await deliver(url, { request_id: "boom-1", capability: "faulty.boom" });
    assert.equal(answer.status, 500);
    assert.equal(answer.headers.get("x-reach-retryable"), "false");
    const text = await answer.text();
    assert.deepEqual(JSON.parse(text), { error: { code: "handler_error", message: "the warehouse is on fire" } });
    assert.doesNotMatch(text, /at .*\.js|agent\.js|node:/);
    // Through the coordinator: an agent_error, not tried again anywhere.
    const before = runs.boom;
    await assert.rejects(caller.invoke({ capability: "faulty.boom", payload: {} }), (error) => {
      assert.ok(error instanceof AgentFailed);
      assert.equal(error.code, "agent_error");
      assert.equal(error.details.http_status, 500);
      assert.equal(error.details.agent_answer.error.message, "the warehouse is on fire");
      return true;
    });
    assert.equal(runs.boom, before + 1);
  });

  test("an answer JSON cannot hold is a 500 naming the capability", async () => {
    const answer = await deliver(url, { request_id: "big-1", capability: "faulty.bigint" });
    assert.equal(answer.status, 500);
    const { error } = await answer.json();
    assert.equal(error.code, "answer_not_json");
    assert.match(error.message, /faulty\.bigint/);
    assert.match(error.message, /not JSON-serializable/);
  });

  test("RetryLater answers 503, NotMine 421, a reported cost X-Reach-Cost", async () => {
    const busy = await deliver(url, { request_id: "busy-1", capability: "faulty.busy" });
    assert.equal(busy.status, 503);
    assert.equal(busy.headers.get("x-reach-retryable"), null); // another instance may take it
    assert.equal((await busy.json()).error.message, "queue full");
    const notMine = await deliver(url, { request_id: "nm-1", capability: "faulty.notmine" });
    assert.equal(notMine.status, 421);
    const costly = await deliver(url, { request_id: "cost-1", capability: "faulty.costly" });
    assert.equal(costly.headers.get("x-reach-cost"), "2.5");
    const answer = await caller.invoke({ capability: "faulty.costly", payload: {} });
    assert.equal(answer.attempts[0].cost, 2.5);
  });

  test("a failed run is forgotten: the same request id runs again", async () => {
    const before = runs.boom;
    await deliver(url, { request_id: "boom-again", capability: "faulty.boom" });
    await deliver(url, { request_id: "boom-again", capability: "faulty.boom" });
    assert.equal(runs.boom, before + 2);
  });
});

test("the registration: what the options say, and `safe` only when set", () => {
  const options = { id: "r-ts", capabilities: ["order.r"], coordinator: "http://127.0.0.1:1", endpointUrl: "http://127.0.0.1:2/invoke" };
  const plain = new Agent(options).registration();
  assert.deepEqual(plain, {
    id: "r-ts",
    capabilities: ["order.r"],
    transport: { type: "http", endpoint: "http://127.0.0.1:2/invoke", health_endpoint: "http://127.0.0.1:2/health" },
    idempotent: true,
  });
  const full = new Agent({
    ...options,
    safe: false,
    idempotent: false,
    delegation: true,
    cost: 2,
    timeoutClass: "reasoning",
    ttl: 30,
    contextFields: ["a"],
    skills: [{ capability: "order.r", description: "d", inputSchema: { type: "object" } }],
    negotiate: { timeoutMs: 500 },
  }).registration();
  assert.equal(full.safe, false);
  assert.equal(full.idempotent, false);
  assert.deepEqual([full.delegation, full.cost, full.timeout_class, full.ttl, full.context_fields], [true, 2, "reasoning", 30, ["a"]]);
  assert.deepEqual(full.skills, [{ capability: "order.r", description: "d", input_schema: { type: "object" } }]);
  assert.deepEqual(full.negotiate, { endpoint: "http://127.0.0.1:2/offer", timeout_ms: 500 });
});

test("close() deregisters", async () => {
  const { agent } = await started({ id: "leaving-ts", capabilities: ["order.leave"] }, (a) => a.handle(() => ({})));
  assert.ok((await caller.agents()).some((a) => a.id === "leaving-ts"));
  await agent.close();
  agents.splice(agents.indexOf(agent), 1);
  await waitUntil(async () => !(await caller.agents()).some((a) => a.id === "leaving-ts"), "leaving-ts to be gone");
});

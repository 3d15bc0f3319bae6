// The TypeScript examples of docs/sdk-typescript.md and of the README's tour, as
// written: compiled with tsc against the package, run against a real coordinator.
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { ReachClient } from "../dist/index.js";
import { REPO, freePort, shared, waitUntil } from "./coordinator.mjs";

const PACKAGE = path.join(REPO, "clients", "typescript");
const BLOCK = /^```ts\n(.*?)^```$/gms;
const coordinator = await shared();
const children = [];
let work;
let env;

/** The `ts` blocks of a Markdown text whose first line is `// <name>.ts`, by name. */
function blocks(markdown) {
  const found = {};
  for (const [, code] of markdown.matchAll(BLOCK)) {
    const name = /^\/\/ (\S+\.ts)\n/.exec(code)?.[1];
    if (name) found[name] = code;
  }
  return found;
}

const DOCUMENTS = [path.join(REPO, "README.md"), ...readdirSync(path.join(REPO, "docs")).filter((n) => n.endsWith(".md")).map((n) => path.join(REPO, "docs", n))];

function run(file) {
  const child = spawn(process.execPath, [path.join(work, file)], { env, stdio: ["ignore", "pipe", "pipe"] });
  child.output = "";
  child.stdout.on("data", (chunk) => (child.output += chunk));
  child.stderr.on("data", (chunk) => (child.output += chunk));
  children.push(child);
  return child;
}

function ended(child) {
  return child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once("exit", resolve));
}

before(async () => {
  await coordinator.start();
  env = {
    PATH: process.env.PATH,
    AGENT_KEY: await coordinator.key("docs-agents", "agent", ["inventory.*"]),
    CALLER_KEY: await coordinator.key("docs-frontend", "caller", ["inventory.*"]),
  };
  work = mkdtempSync(path.join(os.tmpdir(), "ar-ts-docs-"));
  mkdirSync(path.join(work, "node_modules", "@agent-reach"), { recursive: true });
  symlinkSync(PACKAGE, path.join(work, "node_modules", "@agent-reach", "sdk"));
  const sources = {
    ...blocks(readFileSync(path.join(REPO, "docs", "sdk-typescript.md"), "utf8")),
    ...blocks(readFileSync(path.join(REPO, "README.md"), "utf8").split("\n## Quick tour\n")[1].split("\n## ")[0]),
  };
  assert.deepEqual(Object.keys(sources).sort(), ["agent.ts", "caller.ts", "inventory_agent.ts"]);
  const ports = { 9040: await freePort(), 9042: await freePort() };
  for (const [name, code] of Object.entries(sources)) {
    let local = code.replaceAll("http://127.0.0.1:8500", coordinator.url);
    for (const [old, port] of Object.entries(ports)) local = local.replaceAll(`port: ${old}`, `port: ${port}`);
    writeFileSync(path.join(work, name), local);
  }
  writeFileSync(path.join(work, "package.json"), JSON.stringify({ type: "module" }));
  const compilerOptions = {
    module: "NodeNext",
    moduleResolution: "NodeNext",
    target: "ES2022",
    strict: true,
    skipLibCheck: true,
    typeRoots: [path.join(PACKAGE, "node_modules", "@types")],
    types: ["node"],
  };
  writeFileSync(path.join(work, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["*.ts"] }));
  execFileSync(process.execPath, [path.join(PACKAGE, "node_modules", "typescript", "bin", "tsc"), "-p", work], { stdio: "inherit" });
});

after(async () => {
  for (const child of children) child.kill("SIGKILL");
  await coordinator.stop();
});

test("every TypeScript block of the README and docs/ is run here, or says it is illustrative", () => {
  const unmarked = [];
  for (const document of DOCUMENTS) {
    for (const [, code] of readFileSync(document, "utf8").matchAll(BLOCK)) {
      if (!/^\/\/ (\S+\.ts|illustrative: \S)/.test(code)) unmarked.push(`${path.basename(document)}: ${code.split("\n")[0]}`);
    }
  }
  assert.deepEqual(unmarked, []);
});

test("the page's agent and caller", async () => {
  const agent = run("agent.js");
  await waitUntil(() => agent.output.includes("inventory-ts serving at") || agent.exitCode !== null, "the agent to serve");
  // The router refits in the background when cards change: wait for the fit with ours.
  const router = new ReachClient({ coordinator: coordinator.url, apiKey: env.CALLER_KEY });
  await waitUntil(async () => (await router.route({ text: "这款手机有蓝色256G吗" })).capability === "inventory.check", "the router to fit inventory.check");
  const caller = run("caller.js");
  assert.equal(await ended(caller), 0, caller.output);
  assert.deepEqual(caller.output.trim().split("\n"), [
    'inventory-ts {"sku":"X5-BLUE-256","in_stock":true,"asked":null}',
    "inventory.check inventory-ts",
    "refused: no_capability (HTTP 404)",
  ]);
  agent.kill("SIGTERM"); // close(): deregisters
  const admin = new ReachClient({ coordinator: coordinator.url, apiKey: coordinator.adminKey });
  await waitUntil(async () => !(await admin.agents()).some((a) => a.id === "inventory-ts"), "the agent to deregister");
});

test("the README tour's TypeScript agent", async () => {
  const agent = run("inventory_agent.js");
  const caller = new ReachClient({ coordinator: coordinator.url, apiKey: env.CALLER_KEY });
  await waitUntil(async () => agent.exitCode !== null || (await caller.agents()).some((a) => a.id === "inventory-ts"), "the agent to register");
  const answer = await caller.invoke({ capability: "inventory.check", payload: { sku: "X5-BLUE-256" } });
  assert.deepEqual([answer.agentId, answer.result], ["inventory-ts", { sku: "X5-BLUE-256", in_stock: true }]);
});

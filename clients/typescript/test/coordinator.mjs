// The real coordinator for the tests: `agent-reach serve` from the repository's .venv on
// 127.0.0.1 and a free port, security on (an admin key; keys made through the API).
// AR_TS_TEST_BACKEND=redis runs it on Redis (AR_TS_TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0) under a random key prefix.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const SERVE = path.join(REPO, ".venv/bin/agent-reach");
const STARTUP_MS = 60_000; // a cold Python start on a busy 2-core machine
// The default `query` class gives a request 2 s; on a busy shared machine a two-hop
// delegation chain can take longer, and a test would fail for the machine's load.
const BASE_POLICY = `
[timeout_classes.query]
timeout_s = 10.0
`;
export const BACKEND = process.env.AR_TS_TEST_BACKEND === "redis" ? "redis" : "memory";

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export class Coordinator {
  /** `policy`: TOML text added to the base policy (AR_POLICY_FILE); `env`: more settings. */
  constructor({ policy, env = {} } = {}) {
    this.adminKey = `ts-sdk-admin-${randomBytes(12).toString("hex")}`;
    this.env = { ...env };
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), "ar-ts-")), "policy.toml");
    writeFileSync(file, BASE_POLICY + (policy ?? ""));
    this.env.AR_POLICY_FILE = file;
    if (BACKEND === "redis") {
      this.env.AR_REGISTRY_BACKEND = "redis";
      this.env.AR_REDIS_URL = process.env.AR_TS_TEST_REDIS_URL ?? "redis://127.0.0.1:6379/0";
      this.env.AR_REDIS_PREFIX = `ts-sdk-${randomBytes(6).toString("hex")}`;
    }
    this.process = null;
    this.log = "";
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    if (!existsSync(SERVE)) throw new Error(`${SERVE} is missing: run bash scripts/setup-venv.sh test`);
    this.port ??= await freePort();
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("AR_")));
    const env = { ...inherited, AR_ADMIN_KEY: this.adminKey, AR_LOG_LEVEL: "warning", ...this.env };
    this.process = spawn(SERVE, ["serve", "--host", "127.0.0.1", "--port", String(this.port)], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const keep = (chunk) => {
      this.log = (this.log + chunk.toString()).slice(-8000);
    };
    this.process.stdout.on("data", keep);
    this.process.stderr.on("data", keep);
    const deadline = Date.now() + STARTUP_MS;
    while (Date.now() < deadline) {
      if (this.process.exitCode !== null) break;
      try {
        const answer = await fetch(`${this.url}/healthz`);
        if (answer.ok) return this;
      } catch {
        // not up yet
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await this.stop();
    throw new Error(`the coordinator did not start:\n${this.log}`);
  }

  async stop() {
    const child = this.process;
    this.process = null;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }

  /** Stop it and start it again on the same port: on memory it forgets every
   * registration (and every key made through the API; the admin key stays). */
  async restart() {
    await this.stop();
    return this.start();
  }

  /** Create an API key: `{key, principal}`. */
  async key(principal, role, capabilities) {
    const answer = await this.admin("POST", "/v1/keys", { principal, role, capabilities });
    if (answer.status !== 201) throw new Error(`key for ${principal}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body.key;
  }

  /** A call with the admin key: `{status, body}`. */
  async admin(method, route, body) {
    const headers = { authorization: `Bearer ${this.adminKey}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const answer = await fetch(this.url + route, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await answer.text();
    return { status: answer.status, body: text ? JSON.parse(text) : null };
  }
}

/** Poll `check` until it is truthy (every 50 ms, up to `ms`). */
export async function waitUntil(check, what, ms = 20_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// The policy of the shared coordinator: front-agents may hand back.* on; a quota that
// one call spends.
export const SHARED_POLICY = `
[[access.delegate]]
principals = ["name:front-agents"]
capabilities = ["back.*"]

[[quotas]]
principals = ["name:limited-caller"]
capabilities = ["back.*"]
rate_per_s = 0.01
burst = 1
`;

/** The coordinator the test files share, started once by test/run.mjs (its URL and
 * admin key in AR_TS_TEST_SHARED); a file run alone starts one of its own. `start` and
 * `stop` of the shared one do nothing: run.mjs owns it. */
export async function shared() {
  const given = process.env.AR_TS_TEST_SHARED;
  if (!given) return new Coordinator({ policy: SHARED_POLICY });
  const { port, adminKey } = JSON.parse(given);
  const coordinator = new Coordinator();
  coordinator.port = port;
  coordinator.adminKey = adminKey;
  coordinator.start = async () => coordinator;
  coordinator.stop = async () => undefined;
  return coordinator;
}

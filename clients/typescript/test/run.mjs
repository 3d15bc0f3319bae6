// `npm test`: one coordinator shared by the test files that need no coordinator of their
// own (started here, stopped at the end), then Node's test runner over test/.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Coordinator, SHARED_POLICY } from "./coordinator.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const coordinator = await new Coordinator({ policy: SHARED_POLICY }).start();
const shared = JSON.stringify({ port: coordinator.port, adminKey: coordinator.adminKey });
// Files named on the command line, else every test file here.
const named = process.argv.slice(2).map((file) => path.resolve(file));
const files = named.length > 0 ? named : readdirSync(here).filter((name) => name.endsWith(".test.mjs")).map((name) => path.join(here, name));
const runner = spawn(process.execPath, ["--test", "--test-concurrency=2", "--test-reporter=spec", ...files], {
  stdio: "inherit",
  env: { ...process.env, AR_TS_TEST_SHARED: shared },
});
const code = await new Promise((resolve) => runner.once("exit", (status, signal) => resolve(status ?? (signal ? 1 : 0))));
await coordinator.stop();
process.exit(code);

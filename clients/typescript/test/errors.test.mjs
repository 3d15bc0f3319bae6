// The error table is errors.py's: every code, its class name and status, and how an
// error body becomes an error; SSE bodies read as the coordinator writes them.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import * as sdk from "../dist/index.js";
import { REPO } from "./coordinator.mjs";

test("the table holds exactly errors.py's codes, classes and statuses", () => {
  // errors.py alone (it imports nothing of the package): no need to import all of agent_reach.
  const script = [
    "import importlib.util, json, sys",
    "spec = importlib.util.spec_from_file_location('errors', sys.argv[1])",
    "errors = importlib.util.module_from_spec(spec)",
    "spec.loader.exec_module(errors)",
    "print(json.dumps({c: [k.__name__, k.status, k.retryable, [b.__name__ for b in k.__mro__]] for c, k in errors.ERROR_CLASSES.items()}))",
  ].join("\n");
  const python = JSON.parse(execFileSync(path.join(REPO, ".venv/bin/python"), ["-c", script, path.join(REPO, "src/agent_reach/errors.py")], {
      encoding: "utf8",
    }));
  const ours = Object.fromEntries(
    Object.entries(sdk.ERROR_CLASSES).map(([code, cls]) => [code, [cls.name, cls.status, cls.retryable]]),
  );
  assert.deepEqual(ours, Object.fromEntries(Object.entries(python).map(([code, [name, status, retryable]]) => [code, [name, status, retryable]])));
  for (const [code, [, , , bases]] of Object.entries(python)) {
    const error = sdk.errorFromBody(500, { error: { code, message: "m" } });
    for (const base of bases.filter((name) => name in sdk)) assert.ok(error instanceof sdk[base], `${code} is a ${base}`);
  }
});

test("an error body becomes its class, with its status, fields and Retry-After", () => {
  const error = sdk.errorFromBody(429, { error: { code: "quota_exceeded", message: "slow down", request_id: "r1" } }, "3");
  assert.ok(error instanceof sdk.QuotaExceeded && error instanceof sdk.ReachError && error instanceof Error);
  assert.deepEqual([error.code, error.status, error.message, error.retryAfter, error.details.request_id], ["quota_exceeded", 429, "slow down", 3, "r1"]);
  const unknown = sdk.errorFromBody(403, { error: { code: "delegation_denied", message: "no", failed: "caller" } });
  assert.ok(unknown instanceof sdk.Forbidden);
  assert.equal(unknown.code, "delegation_denied");
  assert.equal(unknown.details.failed, "caller");
  const shapeless = sdk.errorFromBody(502, "<html>");
  assert.deepEqual([shapeless.constructor.name, shapeless.code, shapeless.status], ["ReachError", "unexpected_answer", 502]);
  assert.ok(sdk.errorFromBody(504, { error: { code: "something_new" } }) instanceof sdk.AgentTimeout);
});

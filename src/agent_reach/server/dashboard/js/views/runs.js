// Recent workflow runs, newest first; each opens as a graph of its steps.
import { getJSON } from "../api.js";
import { badge, clockTime, empty, h, ms, sync, table } from "../dom.js";

export const LIMIT = 100;

export function mount(root) {
  const rows = h("tbody");
  const none = empty("No workflow run yet. POST /v1/workflows/run, or a text with mode fanout, leaves one here.");
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Workflow runs")),
    table([["time"], ["run"], ["workflow"], ["status"], ["steps", 1], ["duration", 1]], rows, { id: "runs" }),
    none,
  );
  return {
    intervalMs: 2000,
    async refresh() {
      const answer = await getJSON("/v1/workflows", { limit: LIMIT });
      none.hidden = answer.runs.length > 0;
      sync(rows, answer.runs.map((run) => ({ key: run.run_id, sig: JSON.stringify(run), build: () => runRow(run) })));
    },
  };
}

export function runDuration(run) {
  const ends = run.steps.map((s) => s.ended_ms).filter((v) => v !== null && v !== undefined);
  return ends.length ? Math.max(...ends) : null;
}

function runRow(run) {
  const done = run.steps.filter((s) => s.status === "ok" || s.status === "fallback").length;
  return h("tr", { "data-run": run.run_id },
    h("td", { class: "mono" }, clockTime(run.created_at)),
    h("td", {}, h("a", { href: `#/run/${encodeURIComponent(run.run_id)}`, class: "mono", title: run.run_id },
      run.run_id.slice(0, 16) + (run.run_id.length > 16 ? "…" : ""))),
    h("td", {}, run.name || run.intent || "–"),
    h("td", {}, badge(run.status)),
    h("td", { class: "num" }, `${done}/${run.steps.length}`),
    h("td", { class: "num" }, ms(runDuration(run))),
  );
}

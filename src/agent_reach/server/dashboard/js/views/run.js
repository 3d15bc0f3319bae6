// One workflow run as a picture: its steps as an SVG graph, laid out by dependency depth,
// each node coloured by status with its capability, agent and timing; edges run from a
// step to the steps that depend on it.
import { getJSON } from "../api.js";
import { badge, h, ms, traceLink } from "../dom.js";
import { LIMIT, runDuration } from "./runs.js";

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 210;
const NODE_H = 64;
const GAP_X = 70;
const GAP_Y = 18;
const PAD = 12;

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs ?? {})) el.setAttribute(name, String(value));
  for (const child of children.flat()) if (child !== null && child !== undefined) el.append(child);
  return el;
}

function text(x, y, cls, content) {
  const el = s("text", { x, y, class: cls });
  el.textContent = content; // text, never markup
  return el;
}

// Depth of each step: 0 without dependencies, else one more than its deepest dependency.
export function layers(steps) {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const depth = new Map();
  const of = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    const deps = (byId.get(id)?.depends_on ?? []).filter((d) => byId.has(d));
    const d = id === "_aggregate" ? -1 : deps.length ? 1 + Math.max(...deps.map((x) => of(x, seen))) : 0;
    depth.set(id, d);
    return d;
  };
  steps.forEach((step) => of(step.id));
  const deepest = Math.max(0, ...[...depth.values()]);
  if (depth.has("_aggregate")) depth.set("_aggregate", deepest + 1); // the summarizer comes last
  return depth;
}

function graph(run) {
  const depth = layers(run.steps);
  const columns = new Map();
  for (const step of run.steps) {
    const d = depth.get(step.id);
    if (!columns.has(d)) columns.set(d, []);
    columns.get(d).push(step);
  }
  const place = new Map();
  for (const [d, column] of columns) {
    column.forEach((step, i) => place.set(step.id, { x: PAD + d * (NODE_W + GAP_X), y: PAD + i * (NODE_H + GAP_Y) }));
  }
  const width = PAD * 2 + (Math.max(...columns.keys()) + 1) * (NODE_W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(...[...columns.values()].map((c) => c.length)) * (NODE_H + GAP_Y) - GAP_Y;
  const edges = [];
  for (const step of run.steps) {
    const deps = step.id === "_aggregate" ? run.steps.filter((x) => x.id !== "_aggregate").map((x) => x.id) : step.depends_on ?? [];
    for (const dep of deps) {
      const from = place.get(dep);
      const to = place.get(step.id);
      if (!from || !to) continue;
      const x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      edges.push(s("path", { class: "edge", d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
        "marker-end": "url(#arrow)", "data-from": dep, "data-to": step.id }));
    }
  }
  const nodes = run.steps.map((step) => {
    const { x, y } = place.get(step.id);
    const took = step.started_ms !== null && step.ended_ms !== null ? ms(step.ended_ms - step.started_ms) : "–";
    const at = step.started_ms !== null ? `+${ms(step.started_ms)}` : "not started";
    const title = s("title");
    title.textContent = [step.id, step.capability, step.agent_id, step.status, step.reason].filter(Boolean).join(" · ");
    return s("g", { class: `node ${step.status}`, "data-step": step.id, transform: `translate(${x},${y})` },
      title,
      s("rect", { width: NODE_W, height: NODE_H, rx: 7 }),
      text(10, 18, "node-id", step.id),
      text(NODE_W - 10, 18, "node-status", step.fallback_used ? `${step.status} ↪` : step.status),
      text(10, 36, "node-cap", (step.capability ?? "–") + (step.agent_id ? ` → ${step.agent_id}` : "")),
      text(10, 54, "node-time", `${at} · ${took}`));
  });
  return s("svg", { id: "run-graph", class: "run-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `steps of run ${run.run_id}` },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))),
    edges, nodes);
}

export function mount(root, route) {
  const id = route.arg ?? "";
  const summary = h("div", { class: "summary-line", id: "run-summary" });
  const picture = h("div", { class: "panel graph-panel" });
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Run "), h("code", { id: "run-id" }, id),
      h("span", { class: "spacer" }), h("a", { href: "#/runs" }, "← all runs")),
    summary, picture);
  let drawn = "";
  return {
    intervalMs: 1000,
    async refresh() {
      const answer = await getJSON("/v1/workflows", { limit: LIMIT });
      const run = answer.runs.find((r) => r.run_id === id);
      if (!run) {
        summary.replaceChildren(h("span", { class: "muted" }, "This run is not among the recent runs you may read."));
        picture.replaceChildren();
        return;
      }
      summary.replaceChildren(
        h("span", { class: "big" }, ms(runDuration(run))),
        badge(run.status),
        h("span", {}, run.name || run.intent || "workflow"),
        h("span", { class: "muted" }, `${run.steps.length} steps`),
        h("span", {}, "trace ", traceLink(run.trace_id)),
      );
      const sig = JSON.stringify(run.steps);
      if (sig !== drawn) {
        picture.replaceChildren(graph(run));
        drawn = sig;
      }
    },
  };
}

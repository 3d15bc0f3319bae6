// One instance: its registration and numbers, the traces it served, the decisions that weighed it.
import { getJSON } from "../api.js";
import { ago, empty, h, healthStatus, ms, pct, sync, table } from "../dom.js";
import { decisionItem } from "./decisions.js";
import { traceRow } from "./traces.js";

const LIMIT = 20;

export function mount(root, route) {
  const id = route.arg ?? "";
  const details = h("div", { class: "panel", id: "agent-details" });
  const traces = h("tbody");
  const noTraces = empty("No trace on this coordinator involves this agent yet.");
  const decisions = h("div");
  const noDecisions = empty("No recent decision weighed this agent.");
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Agent "), h("code", {}, id),
      h("span", { class: "spacer" }), h("a", { href: "#/registry" }, "← registry")),
    details,
    h("h3", {}, "Recent traces it took part in"),
    table([["time"], ["trace"], ["capability"], ["outcome"], ["duration", 1], ["spans", 1], ["attempts", 1],
      ["answered by"]], traces),
    noTraces,
    h("h3", {}, "Recent decisions that weighed it"),
    decisions,
    noDecisions,
  );
  return {
    intervalMs: 1000,
    async refresh() {
      const [agent, recent, decided] = await Promise.all([
        getJSON(`/v1/agents/${encodeURIComponent(id)}`),
        getJSON("/v1/traces", { agent_id: id, limit: LIMIT }),
        getJSON("/v1/decisions", { agent_id: id, limit: LIMIT }),
      ]);
      drawDetails(details, agent);
      noTraces.hidden = recent.traces.length > 0;
      sync(traces, recent.traces.map((t) => ({ key: t.trace_id, sig: JSON.stringify(t), build: () => traceRow(t) })));
      noDecisions.hidden = decided.decisions.length > 0;
      sync(decisions, decided.decisions.map((entry) => ({
        key: `${entry.request_id}/${entry.time}`, sig: "", build: () => decisionItem(entry),
      })));
    },
  };
}

function drawDetails(panel, a) {
  const s = a.stats;
  const pairs = [
    ["status", healthStatus(a.status)],
    ["display name", a.display_name || "–"],
    ["capabilities", a.capabilities.map((c) => h("span", { class: "chip" }, c))],
    ["endpoint", h("code", {}, a.transport.endpoint)],
    ["domain · class · weight", `${a.domain} · ${a.timeout_class} · ${a.weight}`],
    ["generic", a.generic ? "yes: catches what its capabilities' instances fail" : "no"],
    ["idempotent", a.idempotent ? "yes: re-sent when an earlier delivery's outcome is unknown" : "no: never re-sent after an unknown outcome"],
    ["safe", a.safe ? "yes: no side effects; may be answered from memory (degraded)" : "no: never answered from memory"],
    ...Object.entries(a.semantics || {}).map(([c, d]) => [`${c}`, `safe ${d.safe ? "yes" : "no"} · idempotent ${d.idempotent ? "yes" : "no"}`]),
    ["load", `${s.in_flight} in flight of ${s.capacity}`],
    ["success · calls", `${pct(s.success_rate)} of ${s.calls}`],
    ["latency p50 · p90", `${ms(s.latency_ms_p50)} · ${ms(s.latency_ms_p90)}`],
    ["registered", ago(a.registered_at)],
    ["lease", `expires in ${Math.max(0, a.lease_expires_in_s).toFixed(0)} s`],
  ];
  panel.replaceChildren(h("dl", { class: "kv" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
}

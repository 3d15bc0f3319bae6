// One instance: its registration and numbers, what the router matches it by (its card),
// the traces it served, the decisions that weighed it.
import { getJSON } from "../api.js";
import { ago, empty, h, healthStatus, ms, pct, sync, table } from "../dom.js";
import { decisionItem } from "./decisions.js";
import { traceHeaders, traceRow } from "./traces.js";

const LIMIT = 20;

export function mount(root, route) {
  const id = route.arg ?? "";
  const details = h("div", { class: "panel", id: "agent-details" });
  const card = h("div", { class: "panel", id: "agent-card" });
  const traces = h("tbody");
  const noTraces = empty("No trace on this coordinator involves this agent yet.");
  const decisions = h("div");
  const noDecisions = empty("No recent decision weighed this agent.");
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Agent "), h("code", {}, id),
      h("span", { class: "spacer" }), h("a", { href: "#/registry" }, "← registry")),
    details,
    h("h3", {}, "What it is routed by"),
    card,
    h("h3", {}, "Recent traces it took part in"),
    table(traceHeaders("answered by"), traces),
    noTraces,
    h("h3", {}, "Recent decisions that weighed it"),
    decisions,
    noDecisions,
  );
  let cardOf = null; // the registration the card was read for: read again when it changes
  return {
    intervalMs: 1000,
    async refresh() {
      const [agent, recent, decided] = await Promise.all([
        getJSON(`/v1/agents/${encodeURIComponent(id)}`),
        getJSON("/v1/traces", { agent_id: id, limit: LIMIT }),
        getJSON("/v1/decisions", { agent_id: id, limit: LIMIT }),
      ]);
      drawDetails(details, agent);
      if (cardOf !== agent.registered_at) {
        drawCard(card, await getJSON(`/v1/agents/${encodeURIComponent(id)}/card`));
        cardOf = agent.registered_at;
      }
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

// What a skill declares about repeating a request (docs/delivery.md), when it declares it.
function semantics(skill) {
  return ["safe", "idempotent"].filter((name) => skill[name] !== undefined && skill[name] !== null)
    .map((name) => `${name}: ${skill[name] ? "yes" : "no"}`);
}

function examples(list) {
  return list.length ? h("ul", { class: "examples" }, list.map((text) => h("li", {}, text))) : h("span", { class: "muted" }, "none");
}

// The agent-wide description and examples, then each capability's own skill text.
function drawCard(panel, c) {
  const pairs = [
    ["description", c.description || h("span", { class: "muted" }, c.complete ? "none" : "hidden: this key sees only some of its capabilities")],
    ["examples", c.complete ? examples(c.examples) : h("span", { class: "muted" }, "hidden")],
  ];
  const skills = c.skills.length ? table([["skill"], ["description"], ["examples"], ["declares"]],
    c.skills.map((s) => h("tr", {},
      h("td", { class: "mono" }, s.capability),
      h("td", {}, s.description || h("span", { class: "muted" }, "–")),
      h("td", {}, examples(s.examples)),
      h("td", {}, semantics(s).map((said) => h("div", {}, said))))),
    { id: "agent-skills" }) : h("p", { class: "hint" }, "No skill of its own: every capability is matched on the description and examples above.");
  panel.replaceChildren(h("dl", { class: "kv" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])), skills);
}

// Recent traces, newest first, filtered by capability, outcome and duration.
import { getJSON } from "../api.js";
import { agentLink, badge, clockTime, empty, h, ms, plural, sync, table, traceLink } from "../dom.js";

const LIMIT = 100;
const OUTCOMES = ["", "error", "ok", "fallback", "suspended", "queued", "degraded", "agent_timeout",
  "agent_error", "agent_unreachable", "no_instance", "no_capability", "hop_limit"];

export function mount(root, route) {
  const fields = {
    capability: h("input", { type: "search", placeholder: "capability", "aria-label": "capability" }),
    status: h("select", { "aria-label": "outcome" },
      OUTCOMES.map((o) => h("option", { value: o }, o || "any outcome"))),
    min_ms: h("input", { type: "number", min: "0", placeholder: "min ms", "aria-label": "minimum duration in ms" }),
  };
  for (const [name, input] of Object.entries(fields)) {
    input.value = route.query.get(name) ?? "";
    input.addEventListener("input", () => {
      const query = new URLSearchParams(Object.entries(filters()));
      history.replaceState(null, "", `#/traces${[...query].length ? `?${query}` : ""}`);
    });
  }
  const filters = () => Object.fromEntries(
    Object.entries(fields).map(([name, input]) => [name, input.value.trim()]).filter(([, v]) => v));
  const rows = h("tbody");
  const none = empty("No trace matches. Every request through /v1/invoke leaves one here.");
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Traces"), fields.capability, fields.status, fields.min_ms,
      h("span", { class: "spacer" }), h("span", { class: "hint", id: "stored" })),
    table(traceHeaders(), rows, { id: "traces" }),
    none,
  );
  return {
    intervalMs: 2000,
    async refresh() {
      const answer = await getJSON("/v1/traces", { ...filters(), limit: LIMIT });
      const node = answer.traces[0]?.node;
      root.querySelector("#stored").textContent =
        `${answer.stored} traces kept on this coordinator${node ? ` (node ${node})` : ""}`;
      none.hidden = answer.traces.length > 0;
      sync(rows, answer.traces.map((t) => ({ key: t.trace_id, sig: JSON.stringify(t), build: () => traceRow(t) })));
    },
  };
}

// The columns of `traceRow`, one header each; `agent` names the column of who answered.
export function traceHeaders(agent = "agent") {
  return [["time"], ["trace"], ["capability"], ["outcome"], ["duration", 1], ["spans", 1], ["attempts", 1],
    [agent], ["node"]];
}

export function traceRow(t) {
  return h("tr", {},
    h("td", { class: "mono" }, clockTime(t.start_s)),
    h("td", {}, traceLink(t.trace_id)),
    h("td", { class: "mono" }, t.capability || "–"),
    h("td", {}, badge(t.status)),
    h("td", { class: "num" }, ms(t.duration_ms)),
    h("td", { class: "num" }, String(t.spans)),
    h("td", { class: "num" }, String(t.attempts),
      t.retries ? h("span", { class: "badge warn" }, plural(t.retries, "retry", "retries")) : null),
    h("td", {}, agentLink(t.agent_id)),
    h("td", { class: "mono node" }, t.node || "–"),
  );
}

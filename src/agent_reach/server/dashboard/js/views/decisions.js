// Recent routing decisions: the choice and rule at a glance, candidates and factor scores on open.
import { getJSON } from "../api.js";
import { agentLink, badge, clockTime, empty, h, said, sync, table, traceLink } from "../dom.js";

const LIMIT = 100;

export function mount(root) {
  const list = h("div", { id: "decisions" });
  const none = empty("No routing decision yet: they appear here as requests arrive.");
  const hint = h("span", { class: "hint", id: "decisions-node" }, `newest ${LIMIT} on this coordinator · open one for its candidates`);
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Routing decisions"), hint),
    list, none,
  );
  return {
    intervalMs: 1000,
    async refresh() {
      const { decisions, node } = await getJSON("/v1/decisions", { limit: LIMIT });
      hint.textContent = `newest ${LIMIT} on coordinator ${node} · open one for its candidates`;
      none.hidden = decisions.length > 0;
      sync(list, decisions.map((entry) => ({
        key: `${node}/${entry.request_id}/${entry.time}`, sig: "", build: () => decisionItem(entry, { node }),
      })));
    },
  };
}

// `node`: the coordinator that made the decision (each lists its own).
export function decisionItem(entry, { open = false, node = null } = {}) {
  const d = entry.decision;
  return h("details", { class: "decision", open },
    h("summary", {},
      h("span", { class: "mono" }, clockTime(entry.time)),
      h("span", { class: "muted" }, entry.kind),
      h("span", { class: "mono" }, d.capability ?? "–"),
      h("span", {}, "→ ", agentLink(d.agent_id)),
      h("span", {}, badge(d.rule), d.refused_by ? h("span", { class: "muted" }, ` (${d.refused_by})`) : null),
      h("span", { class: "mono muted" }, d.margin === null ? "" : `margin ${d.margin.toFixed(3)}`),
      h("span", { class: "muted" }, `${d.candidates.length} candidate${d.candidates.length === 1 ? "" : "s"}`),
      node ? h("span", { class: "mono muted node" }, `node ${node}`) : null,
      traceLink(entry.trace_id, "trace"),
      entry.text ? h("span", { class: "summary-said", title: entry.text }, said(entry.text)) : null),
    h("div", { class: "inner" },
      entry.text ? h("p", { class: "routed-text" }, h("span", { class: "muted" }, "text "), said(entry.text)) : null,
      candidatesTable(d), d.text ? textMatch(d) : null,
      h("p", { class: "hint" }, `policy ${d.policy_version} · request ${entry.request_id}`)),
  );
}

// How a text was matched: the matchers asked (and pending), each threshold with the comparison
// that held (the server's statement, shown as it is), a learned example that matched,
// capabilities that said "not mine", the params.
function textMatch(d) {
  const t = d.text;
  const row = (label, value) => h("tr", {}, h("th", {}, label), h("td", { class: "mono" }, value));
  return h("table", { class: "text-match" },
    row("matchers", t.matchers.join(" + ") + (t.pending.length ? ` (pending: ${t.pending.join(", ")})` : "")),
    row("confidences", t.calibrated ? "calibrated on the registered catalog (match column)" : "raw (too few cards to calibrate)"),
    ...(d.thresholds ?? []).map((check) => row(check.name, check.statement)),
    t.learned ? row("learned example", `${t.learned.id} → ${t.learned.capability}`) : null,
    t.not_mine.length ? row("said not mine", t.not_mine.join(", ")) : null,
    t.params ? row("params", JSON.stringify(t.params)) : null,
  );
}

// Every candidate with each factor (weight in the header) and its score; the choice highlighted.
export function candidatesTable(d) {
  const weights = d.weights ?? {};
  const extra = new Set(d.candidates.flatMap((c) => Object.keys(c.factors)));
  for (const name of Object.keys(weights)) extra.delete(name);
  const factors = [...Object.keys(weights), ...[...extra].sort()];
  if (!d.candidates.length) return empty("No candidate: no live instance offers a matching capability.");
  return table(
    [[""], ["capability"], ["agent"],
      ...factors.map((f) => [weights[f] === undefined ? f : `${f} ×${weights[f].toFixed(2)}`, 1]),
      ["score", 1]],
    d.candidates.map((c) => {
      const chosen = c.agent_id === d.agent_id && c.capability === d.capability;
      return h("tr", { class: chosen ? "chosen" : null },
        h("td", {}, chosen ? "→" : ""),
        h("td", { class: "mono" }, c.capability),
        h("td", {}, agentLink(c.agent_id)),
        factors.map((f) => h("td", { class: "num" }, c.factors[f] === undefined ? "–" : c.factors[f].toFixed(3))),
        h("td", { class: "num" }, h("b", {}, c.score.toFixed(3))));
    }),
    { cls: "candidates" },
  );
}

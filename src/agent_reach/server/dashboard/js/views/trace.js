// One trace as a timeline: every hop (invoke, route, attempts, nested calls) on one time scale.
import { getJSON } from "../api.js";
import { agentLink, badge, clockTime, h, ms, plural, said, sync } from "../dom.js";
import { decisionItem } from "./decisions.js";

const VIA = { resend: "retry · re-send", next_instance: "retry · next instance", generic: "fallback · generic agent" };
const INDENT_PX = 18;

export function mount(root, route) {
  const id = route.arg ?? "";
  const summary = h("div", { class: "summary-line" });
  const rows = h("div", { class: "rows" });
  const decisions = h("div", { id: "trace-decisions" });
  const noDecision = h("p", { class: "hint", hidden: true }, "No decision of this trace is still in memory.");
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Trace "), h("code", { id: "trace-id" }, id),
      h("span", { class: "spacer" }), h("a", { href: "#/traces" }, "← all traces")),
    summary,
    h("div", { class: "timeline", id: "timeline" },
      h("div", { class: "span-row head" }, h("span", {}, "hop"), h("span", { id: "scale" }), h("span", { class: "num" }, "duration")),
      rows),
    h("h3", {}, "Routing decisions in this trace"),
    decisions,
    noDecision,
  );
  return {
    intervalMs: 1000,
    async refresh() {
      const [trace, decided] = await Promise.all([
        getJSON(`/v1/traces/${encodeURIComponent(id)}`),
        getJSON("/v1/decisions", { trace_id: id, limit: 20 }),
      ]);
      drawSummary(summary, trace.summary, trace.node);
      const total = Math.max(trace.summary.duration_ms, 0.001);
      root.querySelector("#scale").textContent = `0 … ${ms(total)}`;
      sync(rows, inTreeOrder(trace.spans).map(([span, depth]) => ({
        key: span.span_id, sig: JSON.stringify([span, total]), build: () => spanRow(span, depth, total),
      })));
      sync(decisions, decided.decisions.map((entry) => ({
        key: `${entry.request_id}/${entry.time}`, sig: "",
        build: () => decisionItem(entry, { open: true, node: decided.node }),
      })));
      noDecision.hidden = decided.decisions.length > 0;
    },
  };
}

function drawSummary(line, s, node) {
  line.replaceChildren(
    h("span", { class: "big" }, ms(s.duration_ms)),
    badge(s.status),
    h("span", { class: "mono" }, s.capability || "–"),
    h("span", {}, "answered by ", agentLink(s.agent_id)),
    node ? h("span", { id: "trace-node" }, "served by coordinator ", h("b", { class: "mono" }, node)) : null,
    h("span", { class: "muted" }, [plural(s.spans, "span", "spans"), plural(s.attempts, "attempt", "attempts"),
      plural(s.retries, "retry", "retries")].join(" · ")),
    s.request_id ? h("a", { class: "mono", id: "trace-request", href: `#/request/${encodeURIComponent(s.request_id)}` },
      `request ${s.request_id} · why?`) : null,
    h("span", { class: "muted" }, `started ${clockTime(s.start_s)}`),
  );
}

// Depth-first from the roots, children by start time: [span, depth] pairs.
function inTreeOrder(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map();
  for (const span of spans) {
    const parent = ids.has(span.parent_id) ? span.parent_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(span);
  }
  const ordered = [];
  const visit = (parent, depth) => {
    for (const span of (children.get(parent) ?? []).sort((a, b) => a.offset_ms - b.offset_ms)) {
      ordered.push([span, depth]);
      visit(span.span_id, depth + 1);
    }
  };
  visit(null, 0);
  return ordered;
}

function spanRow(span, depth, total) {
  const label = h("div", { class: "span-label", style: { paddingLeft: `${depth * INDENT_PX}px` } },
    h("span", { class: "span-kind" }, span.kind),
    span.name ? h("span", { class: "mono" }, span.name) : null,
    span.agent_id ? agentLink(span.agent_id) : null,
    span.kind === "attempt" ? h("span", { class: "muted" }, `attempt ${span.attempt}`) : null,
    span.kind === "attempt" && VIA[span.note] ? h("span", { class: "badge warn" }, VIA[span.note]) : null,
    span.kind === "route" && span.note ? h("span", { class: "muted" }, `rule ${span.note}`) : null,
    span.text !== undefined ? said(span.text, span.text_chars) : null,
    span.on_behalf_of ? h("span", { class: "muted span-chain" }, // a delegated call (docs/mesh.md)
      `on behalf of ${span.on_behalf_of} via ${span.via.join(" → ")}`) : null,
    span.cost !== undefined ? h("span", { class: "muted" }, `cost ${span.cost}`) : null,
    badge(span.status),
  );
  const bar = h("span", {
    class: `bar ${span.kind} ${span.is_error ? "error" : ""}`,
    style: { left: `${(span.offset_ms / total) * 100}%`, width: `${Math.max((span.duration_ms / total) * 100, 0.3)}%` },
    title: `${span.kind} ${span.name} · ${ms(span.duration_ms)} · starts at +${ms(span.offset_ms)}`,
  });
  return h("div", { class: `span-row span-${span.kind}`, "data-status": span.status },
    label, h("div", { class: "track" }, bar), h("span", { class: "num" }, ms(span.duration_ms)));
}

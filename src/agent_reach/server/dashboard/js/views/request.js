// One request walked in the operators' order: routing, registry, context, delivery,
// with the first step that looks wrong marked (GET /v1/requests/{id}/why); for a
// delegated request, on whose behalf and through whom, and the calls handed on under it.
import { getJSON } from "../api.js";
import { agentLink, badge, clockTime, empty, h, ms, pct, said, table, traceLink } from "../dom.js";
import { candidatesTable } from "./decisions.js";

const VERDICT_TONE = { ok: "ok", suspect: "warn", unreachable: "bad", failed: "bad", not_reached: "info" };

export function mount(root, route) {
  const id = route.arg ?? "";
  const input = h("input", { type: "search", placeholder: "request id", "aria-label": "request id", value: id });
  const form = h("form", { class: "key-form" }, input, h("button", { type: "submit" }, "Why?"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/request/${encodeURIComponent(input.value.trim())}`;
  });
  const summary = h("div", { class: "summary-line", id: "why-summary" });
  const text = h("p", { class: "routed-text", id: "why-text", hidden: true });
  const steps = h("div", { id: "why-steps" });
  const chain = h("div", { id: "why-chain" });
  root.append(h("div", { class: "toolbar" }, h("h2", {}, "Request"), form), summary, text, chain, steps);
  if (!id) {
    steps.append(empty("Give a request id: its routing, registry, context and delivery are walked in that order."));
    return { intervalMs: 0, async refresh() {} };
  }
  let drawn = "";
  return {
    intervalMs: 2000,
    async refresh() {
      const [doc, here] = await Promise.all([getJSON(`/v1/requests/${encodeURIComponent(id)}/why`), getJSON("/healthz")]);
      // the text is in the trace of the coordinator that answered: read it there only
      const trace = !doc.node || doc.node === here.node
        ? await getJSON(`/v1/traces/${encodeURIComponent(doc.trace_id)}`).catch(() => null) : null;
      const route = trace ? routeSpan(trace.spans, doc.request_id ?? id) : null;
      const sig = JSON.stringify([doc, route]);
      if (sig === drawn) return;
      drawn = sig;
      text.hidden = !route;
      text.replaceChildren(...(route ? [h("span", { class: "muted" }, "routed by the text "), said(route.text, route.text_chars)] : []));
      summary.replaceChildren(
        h("span", { class: "big" }, ms(doc.duration_ms)),
        badge(doc.status ?? String(doc.http_status)),
        h("span", { class: "mono" }, `HTTP ${doc.http_status}`),
        traceLink(doc.trace_id, "trace"),
        h("span", { class: "muted" }, `at ${clockTime(doc.time)}`),
        doc.node ? h("span", { id: "why-node" }, "answered by coordinator ", h("b", { class: "mono" }, doc.node)) : null,
        h("b", { id: "why-verdict" }, doc.summary),
      );
      chain.replaceChildren(...chainBlock(doc));
      steps.replaceChildren(...doc.steps.map((step, i) => stepBox(step, i + 1, step.step === doc.first_wrong_step)));
    },
  };
}

// The route span that kept the text, under the request's own invoke span (noted with its
// id), while the trace is held; a trace may hold other requests (calls handed on).
function routeSpan(spans, requestId) {
  const invokes = new Set(spans.filter((s) => s.kind === "invoke" && s.note === requestId).map((s) => s.span_id));
  return spans.find((s) => s.kind === "route" && s.text !== undefined && invokes.has(s.parent_id)) ?? null;
}

// "on behalf of <caller>: caller → agent → …" and one row per call handed on under it.
function chainBlock(doc) {
  const parts = [];
  const d = doc.delegation;
  if (d) {
    const path = [d.on_behalf_of, ...d.via.map((hop) => `${hop.instance} (${hop.agent})`)].join(" → ");
    parts.push(h("p", { class: "summary-line", id: "why-delegation" },
      h("span", { class: "muted" }, "delegated on behalf of "), h("b", { class: "mono" }, d.on_behalf_of),
      h("span", { class: "mono" }, ` · ${path}`)));
  }
  const handed = doc.handed_on ?? [];
  if (handed.length) {
    parts.push(table([["handed on"], ["request"], ["capability"], ["status"], ["answered by"], ["duration", 1]],
      handed.map((hop) => h("tr", {},
        h("td", { class: "mono" }, [hop.on_behalf_of, ...hop.via].join(" → ")),
        h("td", {}, h("a", { href: `#/request/${encodeURIComponent(hop.request_id)}`, class: "mono" }, hop.request_id)),
        h("td", {}, hop.capability), h("td", {}, badge(hop.status)),
        h("td", {}, ...hop.attempts.map((a) => h("span", {}, agentLink(a.agent_id), ` ${a.outcome}`,
          a.cost === null || a.cost === undefined ? "" : ` · cost ${a.cost} `))),
        h("td", { class: "num" }, ms(hop.duration_ms)))),
      { id: "why-handed-on" }));
  }
  return parts;
}

function stepBox(step, number, isFirstWrong) {
  return h("section", { class: `why-step${isFirstWrong ? " first-wrong" : ""}`, "data-step": step.step, "data-verdict": step.verdict },
    h("h3", {}, `${number}. ${step.step} `, badge(step.verdict, VERDICT_TONE[step.verdict]),
      isFirstWrong ? h("span", { class: "badge bad" }, "first wrong step") : null),
    h("p", { class: "finding" }, step.finding),
    DETAILS[step.step](step));
}

const DETAILS = {
  routing: (step) => (step.decision ? candidatesTable(step.decision) : null),
  registry: (step) => (step.instances.length ? table(
    [["agent"], ["role"], ["health"], ["lease left", 1], ["in flight", 1], ["calls", 1], ["success", 1], ["p50", 1]],
    step.instances.map((i) => {
      const s = i.at_the_time;
      return h("tr", { class: i.role === "chosen" ? "chosen" : null },
        h("td", {}, agentLink(i.agent_id)), h("td", {}, i.role),
        h("td", {}, s ? s.health : "–"), h("td", { class: "num" }, s ? `${s.lease_left_s.toFixed(1)} s` : "–"),
        h("td", { class: "num" }, s ? String(s.in_flight) : "–"), h("td", { class: "num" }, s ? String(s.calls) : "–"),
        h("td", { class: "num" }, s ? pct(s.success_rate) : "–"), h("td", { class: "num" }, s ? ms(s.latency_ms_p50) : "–"));
    }), { id: "why-instances" }) : null),
  context: (step) => (step.reads.length ? table(
    [["read at"], ["granted"], ["fields (bytes)"], ["values"]],
    step.reads.map((r) => h("tr", {},
      h("td", { class: "mono" }, clockTime(r.time)), h("td", { class: "mono" }, r.granted.join(", ")),
      h("td", { class: "mono" }, Object.entries(r.sizes).map(([k, v]) => `${k} ${v}`).join(", ")),
      h("td", { class: "mono" }, r.values === undefined ? "hidden" : JSON.stringify(r.values)))),
    { id: "why-context" }) : null),
  delivery: (step) => h("div", {},
    step.attempts.length ? table([["#", 1], ["agent"], ["outcome"], ["duration", 1], ["cost", 1], ["detail"]],
      step.attempts.map((a) => h("tr", {}, h("td", { class: "num" }, String(a.number)), h("td", {}, agentLink(a.agent_id)),
        h("td", {}, badge(a.outcome)), h("td", { class: "num" }, ms(a.duration_ms)),
        h("td", { class: "num" }, a.cost === null || a.cost === undefined ? "–" : String(a.cost)), h("td", {}, a.error ?? ""))),
      { id: "why-attempts" }) : null,
    step.result !== undefined ? h("pre", { class: "mono" }, JSON.stringify(step.result, null, 2)) : null),
};

// Queues: asynchronous work, suspended requests (with their traces), dead letters.
import { getJSON } from "../api.js";
import { clockTime, empty, h, sync, table, tile, traceLink } from "../dom.js";
import { traceHeaders, traceRow } from "./traces.js";

const LIMIT = 100;

export function mount(root) {
  const tiles = h("div", { class: "tiles" });
  const suspended = h("tbody");
  const noSuspended = empty("No suspended request in this coordinator's recent traces.");
  const letters = h("tbody");
  const noLetters = empty("The dead-letter queue is empty.");
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Queues"),
      h("span", { class: "hint" }, "depths are shared by every coordinator on the backend")),
    tiles,
    h("h3", {}, "Suspended requests (waiting for an instance)"),
    table(traceHeaders(), suspended, { id: "suspended" }),
    noSuspended,
    h("h3", {}, "Dead letters (refused for good, never delivered again)"),
    table([["time"], ["reason"], ["capability"], ["request"], ["hop", 1], ["trace"]], letters, { id: "deadletters" }),
    noLetters,
  );
  return {
    intervalMs: 2000,
    async refresh() {
      const [depths, parked, dead] = await Promise.all([
        getJSON("/v1/queues"),
        getJSON("/v1/traces", { status: "suspended", limit: LIMIT }),
        getJSON("/v1/deadletters", { limit: LIMIT }),
      ]);
      tiles.replaceChildren(
        tile("async work", depths.work),
        tile("suspended", depths.suspended, { kind: depths.suspended ? "warn" : "" }),
        tile("dead letters", depths.deadletters, { kind: depths.deadletters ? "bad" : "" }),
      );
      noSuspended.hidden = parked.traces.length > 0;
      sync(suspended, parked.traces.map((t) => ({ key: t.trace_id, sig: JSON.stringify(t), build: () => traceRow(t) })));
      noLetters.hidden = dead.items.length > 0;
      sync(letters, dead.items.map((d) => ({
        key: `${d.request_id}/${d.time}`, sig: "", build: () => h("tr", {},
          h("td", { class: "mono" }, clockTime(d.time)),
          h("td", {}, h("span", { class: "badge bad" }, d.reason)),
          h("td", { class: "mono" }, d.request?.capability ?? d.request?.text ?? "–"),
          h("td", { class: "mono" }, d.request_id),
          h("td", { class: "num" }, String(d.hop)),
          h("td", {}, traceLink(d.trace_id))),
      })));
    },
  };
}

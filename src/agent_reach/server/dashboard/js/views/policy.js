// The policy in force: version, source, reload errors, weights, classes, everything else.
import { getJSON } from "../api.js";
import { ago, h, table } from "../dom.js";

export function mount(root) {
  const head = h("div", { class: "panel", id: "policy-head" });
  const body = h("div", { class: "columns" });
  const raw = h("pre", { class: "json", id: "policy-json" });
  root.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Policy in force"),
      h("span", { class: "hint" }, "from its file (hot-reloaded) or PUT /v1/policy by an admin; a bad edit keeps the last good policy")),
    head, h("h3", {}, "Settings"), body, h("h3", {}, "As JSON"), raw,
  );
  let shown = "";
  return {
    intervalMs: 2000,
    async refresh() {
      const status = await getJSON("/v1/policy");
      const text = JSON.stringify(status.policy, null, 2);
      head.replaceChildren(h("dl", { class: "kv" },
        h("dt", {}, "version"), h("dd", { class: "mono" }, status.version),
        h("dt", {}, "revision"), h("dd", { class: "mono" }, String(status.revision)),
        h("dt", {}, "source"), h("dd", { class: "mono" }, status.source),
        h("dt", {}, "changed by"), h("dd", { class: "mono" }, status.changed_by ?? "-"),
        h("dt", {}, "loaded"), h("dd", {}, ago(status.loaded_at)),
        h("dt", {}, "last reload error"),
        h("dd", { class: status.last_error ? "error-box" : "muted" }, status.last_error ?? "none")));
      if (text === shown) return;
      shown = text;
      raw.textContent = text;
      const { weights, timeout_classes: classes, ...rest } = status.policy;
      body.replaceChildren(
        h("div", {}, h("h3", {}, "Timeout classes"), table(
          [["class"], ["timeout", 1], ["retries", 1], ["async"], ["deadline", 1]],
          Object.entries(classes).map(([name, c]) => h("tr", {},
            h("td", { class: "mono" }, name), h("td", { class: "num" }, `${c.timeout_s} s`),
            h("td", { class: "num" }, String(c.retries)), h("td", {}, c.asynchronous ? "yes" : "no"),
            h("td", { class: "num" }, c.deadline_s === null ? "–" : `${c.deadline_s} s`))))),
        h("div", {}, h("h3", {}, "Scoring weights"), Object.keys(weights).length
          ? table([["factor"], ["weight", 1]], Object.entries(weights).map(([k, v]) => h("tr", {},
            h("td", {}, k), h("td", { class: "num" }, String(v)))))
          : h("p", { class: "hint" }, `the ${rest.preset} preset's weights`)),
        h("div", { class: "panel" }, settings(rest)),
      );
    },
  };
}

// Nested settings as nested definition lists; lists of plain values on one line.
function settings(value) {
  if (Array.isArray(value) && value.every((v) => typeof v !== "object" || v === null)) {
    return h("span", { class: "mono" }, value.length ? value.join(", ") : "none");
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (!entries.length) return h("span", { class: "muted" }, "none");
    return h("dl", { class: "kv" }, entries.map(([k, v]) => [h("dt", {}, k), h("dd", {}, settings(v))]));
  }
  return h("span", { class: "mono" }, String(value));
}

// DOM building and formatting. Every string becomes a text node or an attribute
// value, never markup: names and payloads that contain tags are shown as text.

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "style") Object.assign(el.style, value); // CSSOM: allowed by the CSP
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) el.append(child);
  }
  return el;
}

// Keep `container`'s children in the order of `items` ({key, sig, build}), rebuilding
// only the ones whose signature changed, so open rows, scroll and selections survive polling.
export function sync(container, items) {
  const existing = new Map();
  for (const child of container.children) existing.set(child.dataset.key, child);
  items.forEach((item, i) => {
    let node = existing.get(item.key);
    existing.delete(item.key);
    if (!node || node.dataset.sig !== item.sig) {
      const fresh = item.build();
      fresh.dataset.key = item.key;
      fresh.dataset.sig = item.sig;
      if (node) node.replaceWith(fresh);
      node = fresh;
    }
    const at = container.children[i];
    if (at !== node) container.insertBefore(node, at ?? null);
  });
  for (const stale of existing.values()) stale.remove();
}

const agentHref = (id) => `#/agent/${encodeURIComponent(id)}`;
const traceHref = (id) => `#/trace/${encodeURIComponent(id)}`;

export function agentLink(id) {
  return id ? h("a", { href: agentHref(id), class: "mono" }, id) : h("span", { class: "muted" }, "none");
}

export function traceLink(id, label) {
  return h("a", { href: traceHref(id), class: "mono", title: id }, label ?? id.slice(0, 12) + "…");
}

export function ms(value) {
  if (value === null || value === undefined) return "–";
  if (value >= 1000) return `${(value / 1000).toFixed(2)} s`;
  if (value >= 100) return `${value.toFixed(0)} ms`;
  return `${value.toFixed(value >= 1 ? 1 : 2)} ms`;
}

export function pct(value) {
  return value === null || value === undefined ? "–" : `${Math.round(value * 100)}%`;
}

// A success rate, coloured once it is low enough to matter at a glance.
export function successRate(value) {
  const kind = value === null || value === undefined || value >= 0.95 ? "" : value >= 0.8 ? "warn" : "bad";
  return h("span", { class: `rate ${kind}` }, pct(value));
}

export function plural(count, one, many) {
  return `${count} ${count === 1 ? one : many}`;
}

export function clockTime(epochS) {
  return new Date(epochS * 1000).toLocaleTimeString([], { hour12: false });
}

export function ago(epochS) {
  const s = Math.max(0, Date.now() / 1000 - epochS);
  if (s < 60) return `${s.toFixed(0)} s ago`;
  if (s < 3600) return `${(s / 60).toFixed(0)} min ago`;
  return `${(s / 3600).toFixed(1)} h ago`;
}

const GOOD = new Set(["ok", "healthy", "exact", "best"]);
const WARN = new Set(["fallback", "degraded", "suspended", "queued", "suspect", "replayed", "generic", "margin",
  "partial", "parked", "running", "pending", "cancelled"]);

function tone(status) {
  if (GOOD.has(status)) return "ok";
  if (WARN.has(status)) return "warn";
  return "bad";
}

export function badge(text, kind) {
  return h("span", { class: `badge ${kind ?? tone(text)}` }, text);
}

export function healthStatus(status) {
  return h("span", { class: `status ${status}` }, status);
}

export function tile(label, value, { kind, href } = {}) {
  return h(href ? "a" : "div", { class: `tile ${kind ?? ""}`, href },
    h("div", { class: "value" }, String(value)),
    h("div", { class: "label" }, label));
}

// `rows`: an array of <tr>, or a <tbody> the caller keeps to update in place.
export function table(headers, rows, { id, cls } = {}) {
  const body = rows instanceof HTMLElement ? rows : h("tbody", {}, rows);
  return h("table", { class: `grid ${cls ?? ""}`, id },
    h("thead", {}, h("tr", {}, headers.map(([text, num]) => h("th", { class: num ? "num" : null }, text)))),
    body);
}

// The user's words a request was routed by, as kept (a trace keeps the first 500
// characters and says how many there were).
export function said(text, chars) {
  const cut = chars !== undefined && chars > text.length;
  return h("span", { class: "said-line" }, h("q", { class: "said" }, text),
    cut ? h("span", { class: "muted" }, ` (the first ${text.length} of ${chars} characters)`) : null);
}

export function empty(text) {
  return h("p", { class: "empty" }, text);
}

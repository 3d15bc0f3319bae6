// The dashboard shell: hash routes to views, polls the active view, shows the connection.
import { ApiError, getJSON, setKey } from "./api.js";
import { h } from "./dom.js";
import * as agent from "./views/agent.js";
import * as decisions from "./views/decisions.js";
import * as policy from "./views/policy.js";
import * as queues from "./views/queues.js";
import * as registry from "./views/registry.js";
import * as run from "./views/run.js";
import * as runs from "./views/runs.js";
import * as trace from "./views/trace.js";
import * as traces from "./views/traces.js";

const VIEWS = { registry, decisions, traces, trace, agent, queues, policy, runs, run };
const NAV_OF = { trace: "traces", agent: "registry", run: "runs" }; // detail views light up their list's tab
const HIDDEN_RECHECK_MS = 1000;

const root = document.getElementById("view");
const connection = document.getElementById("connection");
let generation = 0;
let timer = null;
let active = null;

// "#/trace/abc?x=1" -> {name: "trace", arg: "abc", query: URLSearchParams}
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const [name, ...rest] = path.split("/");
  return {
    name: VIEWS[name] ? name : "registry",
    arg: rest.length ? decodeURIComponent(rest.join("/")) : null,
    query: new URLSearchParams(query),
  };
}

function show() {
  generation += 1;
  clearTimeout(timer);
  const route = parseHash();
  const errorBox = h("p", { class: "error-box", hidden: true });
  const body = h("div");
  root.replaceChildren(errorBox, body);
  active = { view: VIEWS[route.name].mount(body, route), errorBox };
  const tab = NAV_OF[route.name] ?? route.name;
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.view === tab);
  }
  tick(generation);
}

async function tick(gen) {
  if (gen !== generation) return;
  if (!document.hidden) {
    const { view, errorBox } = active;
    try {
      const [health] = await Promise.all([getJSON("/healthz"), view.refresh()]);
      if (gen !== generation) return;
      errorBox.hidden = true;
      connection.className = "connection live";
      connection.textContent = `live · node ${health.node} · ${health.backend}`;
    } catch (error) {
      if (gen !== generation) return;
      if (error instanceof ApiError && error.status === 401) {
        errorBox.replaceChildren(keyForm());
        errorBox.hidden = false;
      } else if (error instanceof ApiError) {
        errorBox.textContent = `${error.code}: ${error.message}`;
        errorBox.hidden = false;
      } else {
        connection.className = "connection down";
        connection.textContent = "coordinator unreachable · retrying";
      }
    }
  }
  const wait = document.hidden ? HIDDEN_RECHECK_MS : active.view.intervalMs;
  if (gen === generation && wait) timer = setTimeout(() => tick(gen), wait);
}

// Security is on: ask for an API key (any role can read), then look again.
function keyForm() {
  const input = h("input", { type: "password", placeholder: "API key", autocomplete: "off" });
  const form = h("form", { class: "key-form" }, "This coordinator needs an API key: ", input, h("button", { type: "submit" }, "Use key"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setKey(input.value);
    show();
  });
  return form;
}

window.addEventListener("hashchange", show);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) {
    clearTimeout(timer);
    tick(generation);
  }
});
show();

// The dashboard shell: hash routes to views, polls the active view, shows the connection.
import { ApiError, getJSON, setKey } from "./api.js";
import { h } from "./dom.js";
import { redrawWhenFontsArrive } from "./fonts.js";
import * as agent from "./views/agent.js";
import * as decisions from "./views/decisions.js";
import * as policy from "./views/policy.js";
import * as queues from "./views/queues.js";
import * as registry from "./views/registry.js";
import * as request from "./views/request.js";
import * as run from "./views/run.js";
import * as runs from "./views/runs.js";
import * as trace from "./views/trace.js";
import * as traces from "./views/traces.js";
import * as traffic from "./views/traffic.js";

const VIEWS = { registry, traffic, decisions, traces, trace, agent, queues, policy, request, runs, run };
const VIEWER_ROLES = new Set(["observer", "admin"]); // who may see every principal's traffic
const NAV_OF = { trace: "traces", agent: "registry", request: "traces", run: "runs" }; // detail views light up their list's tab
const HIDDEN_RECHECK_MS = 1000;

const root = document.getElementById("view");
const connection = document.getElementById("connection");
let generation = 0;
let timer = null;
let active = null;
let viewer = null; // who the key in use stands for (GET /v1/keys/self), asked once per key

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
  active = { view: VIEWS[route.name].mount(body, route), errorBox, body };
  const tab = NAV_OF[route.name] ?? route.name;
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.view === tab);
  }
  tick(generation);
}

async function tick(gen) {
  if (gen !== generation) return;
  if (!document.hidden) {
    const { view, errorBox, body } = active;
    try {
      viewer ??= await getJSON("/v1/keys/self");
      if (!VIEWER_ROLES.has(viewer.role)) {
        askForKey(errorBox, body, wrongRole(viewer));
        return; // nothing to poll until another key is given
      }
      const [health] = await Promise.all([getJSON("/healthz"), view.refresh()]);
      if (gen !== generation) return;
      errorBox.hidden = true;
      body.hidden = false;
      connection.className = "connection live";
      connection.textContent = `live · node ${health.node} · ${health.backend}`;
    } catch (error) {
      if (gen !== generation) return;
      if (error instanceof ApiError && error.status === 401) {
        askForKey(errorBox, active.body, "This coordinator needs an observer or admin API key: ");
        return;
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

// Security is on: ask for an observer or admin key (the dashboard shows every
// principal's requests), say why when the key in use is another role's, then look again.
// The view stays hidden meanwhile: it has read nothing, and its "nothing yet" would mislead.
function askForKey(errorBox, body, why) {
  body.hidden = true;
  const input = h("input", { type: "password", placeholder: "API key", autocomplete: "off" });
  const hint = h("span", { class: "key-hint" },
    "Make one with: agent-reach keys create --principal ops --role observer. ",
    "Or open /ui/#key=<your key> (or /ui/#/traffic?key=<your key> for a view): ",
    "the key stays in this tab and leaves the address bar at once.");
  const form = h("form", { class: "key-form" }, why, input, h("button", { type: "submit" }, "Use key"), hint);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setKey(input.value);
    viewer = null;
    show();
  });
  errorBox.replaceChildren(form);
  errorBox.hidden = false;
  connection.className = "connection down";
  connection.textContent = "needs an observer key";
}

function wrongRole(who) {
  return `This key is ${who.principal}'s, a ${who.role} key. The dashboard shows every principal's requests, decisions and traces, so it needs an observer or admin key (a ${who.role} key sees only its own, through the API): `;
}

// "/ui/#key=<key>", or "/ui/#/<view>?key=<key>" to open a view with it: take the key for
// this tab and drop it from the address bar and history; the view (and its other
// parameters) stay.
function takeKeyFromHash() {
  const legacy = location.hash.match(/^#key=([^&]+)/);
  if (legacy) {
    setKey(decodeURIComponent(legacy[1]));
    history.replaceState(null, "", location.pathname + location.search);
    return;
  }
  const [path, query] = location.hash.split("?");
  const params = new URLSearchParams(query ?? "");
  if (!params.has("key")) return;
  setKey(params.get("key"));
  params.delete("key");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + path + (rest ? `?${rest}` : ""));
}

window.addEventListener("hashchange", () => {
  takeKeyFromHash();
  show();
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) {
    clearTimeout(timer);
    tick(generation);
  }
});
redrawWhenFontsArrive();
takeKeyFromHash();
show();

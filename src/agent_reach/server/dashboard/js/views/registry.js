// Registry: every instance with health, load, success rate, quality and latency; problems first.
import { getJSON } from "../api.js";
import { agentLink, empty, h, healthStatus, ms, successRate, sync, table, tile } from "../dom.js";

const SEVERITY = { offline: 0, suspect: 1, unknown: 2, healthy: 3 };
const HOT_LOAD = 0.8;

export function mount(root) {
  const tiles = h("div", { class: "tiles", id: "registry-tiles" });
  const filter = h("input", {
    type: "search", class: "filter", placeholder: "filter: id, name or capability", "aria-label": "filter agents",
  });
  const rows = h("tbody");
  const grid = table(
    [["status"], ["agent"], ["name"], ["capabilities"], ["load"], ["success", 1], ["quality", 1],
      ["p50 / p90", 1],
      ["calls", 1], ["lease", 1]],
    rows, { id: "registry" },
  );
  const none = empty("No instance matches. Agents appear here as soon as they register.");
  root.append(
    tiles,
    h("div", { class: "toolbar" }, h("h2", {}, "Registry"), filter,
      h("span", { class: "hint" }, "live · every second")),
    grid, none,
  );
  let agents = [];
  filter.addEventListener("input", draw);

  function draw() {
    const needle = filter.value.trim().toLowerCase();
    const shown = agents.filter((a) => !needle || [a.id, a.display_name, ...a.capabilities]
      .some((text) => text.toLowerCase().includes(needle)));
    shown.sort((a, b) => SEVERITY[a.status] - SEVERITY[b.status] || a.id.localeCompare(b.id));
    none.hidden = shown.length > 0;
    // The lease ticks every second: it is updated in place, not part of a row's signature.
    sync(rows, shown.map((a) => ({ key: a.id, sig: JSON.stringify({ ...a, lease_expires_in_s: 0 }), build: () => row(a) })));
    shown.forEach((a, i) => {
      rows.children[i].querySelector(".lease").textContent = `${Math.max(0, a.lease_expires_in_s).toFixed(0)} s`;
    });
  }

  return {
    intervalMs: 1000,
    async refresh() {
      const [list, depths] = await Promise.all([getJSON("/v1/agents"), getJSON("/v1/queues")]);
      agents = list.agents;
      drawTiles(tiles, agents, depths);
      draw();
    },
  };
}

function drawTiles(tiles, agents, depths) {
  const count = (status) => agents.filter((a) => a.status === status).length;
  const capabilities = new Set(agents.flatMap((a) => a.capabilities));
  const suspect = count("suspect");
  const offline = count("offline");
  tiles.replaceChildren(
    tile("instances", agents.length),
    tile("healthy", count("healthy"), { kind: "ok" }),
    tile("unknown", count("unknown")),
    tile("suspect", suspect, { kind: suspect ? "warn" : "" }),
    tile("offline", offline, { kind: offline ? "bad" : "" }),
    tile("capabilities", capabilities.size),
    tile("suspended", depths.suspended, { kind: depths.suspended ? "warn" : "", href: "#/queues" }),
    tile("dead letters", depths.deadletters, { kind: depths.deadletters ? "bad" : "", href: "#/queues" }),
  );
}

function row(agent) {
  const s = agent.stats;
  const load = Math.min(1, s.load);
  return h("tr", { class: `row-${agent.status}`, "data-agent": agent.id },
    h("td", {}, healthStatus(agent.status)),
    h("td", {}, agentLink(agent.id), agent.generic ? h("span", { class: "badge info" }, "generic") : null),
    h("td", { class: "name" }, agent.display_name || h("span", { class: "muted" }, "–")),
    h("td", {}, agent.capabilities.map((c) => h("span", { class: "chip" }, c))),
    h("td", { class: "num" },
      h("span", { class: `meter ${load >= HOT_LOAD ? "hot" : ""}` }, h("span", { style: { width: `${load * 100}%` } })),
      `${s.in_flight}/${s.capacity}`),
    h("td", { class: "num" }, successRate(s.success_rate)),
    h("td", { class: "num quality", title: outcomes(agent.quality) }, quality(agent.quality)),
    h("td", { class: "num" }, `${ms(s.latency_ms_p50)} / ${ms(s.latency_ms_p90)}`),
    h("td", { class: "num" }, String(s.calls)),
    h("td", { class: "num lease" }),
  );
}

// The quality factor (0-1, the Beta estimate over the window's outcomes), coloured as a
// success rate is; its counts (completed, bounced, rated bad...) in the cell's title.
function quality(q) {
  if (!q) return h("span", { class: "muted" }, "–");
  const kind = q.factor >= 0.9 ? "" : q.factor >= 0.6 ? "warn" : "bad";
  return h("span", { class: `rate ${kind}` }, q.factor.toFixed(2));
}

function outcomes(q) {
  const counts = Object.entries((q && q.outcomes) || {}).map(([kind, n]) => `${kind.replace("_", " ")} ${n}`);
  return counts.length ? counts.join(" · ") : "no outcome in the window yet: nothing against it";
}

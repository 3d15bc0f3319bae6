// Traffic: this coordinator's last 15 minutes per capability (requests) or per instance
// (delivery attempts) — rate, p50/p99 latency, errors, refusals — and how confident text
// routing was against the policy's thresholds. Polled every 2 s; a bucket is drawn once
// it is complete, so every point is a whole bucket's average.
import { getJSON } from "../api.js";
import { PALETTE, histogram, timeChart } from "../charts.js";
import { h, ms, tile } from "../dom.js";

const MAX_LINES = 8; // the busiest series get a line each
const BY = { capability: "capabilities", instance: "instances" };

const perSecond = (v) => (v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2));

export function mount(root, route) {
  const by = BY[route.query.get("by")] ? route.query.get("by") : "capability";
  const tiles = h("div", { class: "tiles", id: "traffic-tiles" });
  const hint = h("span", { class: "hint", id: "traffic-node" }, "last 15 minutes");
  const switcher = h("span", { class: "switch" }, Object.keys(BY).map((name) =>
    h("a", { href: `#/traffic?by=${name}`, class: name === by ? "active" : null, "data-by": name }, `by ${name}`)));
  const panel = (name, title) => {
    const el = h("div", { class: "chart", "data-chart": name });
    return [el, h("section", { class: "panel chart-panel" }, h("h3", {}, title), el)];
  };
  const noun = by === "instance" ? "Attempts" : "Requests";
  const [requestsEl, requestsPanel] = panel("requests", `${noun} per second`);
  const [latencyEl, latencyPanel] = panel("latency", "Latency: p99 (solid), p50 (dashed)");
  const [errorsEl, errorsPanel] = panel("errors", "Errors per second");
  const [refusalsEl, refusalsPanel] = panel("refusals", "Refusals per second");
  const [confidenceEl, confidencePanel] = panel("confidence", "Text routing: best confidence");
  const [marginEl, marginPanel] = panel("margin", "Text routing: margin to the runner-up");
  root.append(
    tiles,
    h("div", { class: "toolbar" }, h("h2", {}, "Traffic"), switcher, hint),
    h("div", { class: "charts" }, requestsPanel, latencyPanel, errorsPanel, refusalsPanel, confidencePanel, marginPanel),
  );
  const charts = {
    requests: timeChart(requestsEl, "requests", perSecond),
    latency: timeChart(latencyEl, "latency", ms, { dots: true }),
    errors: timeChart(errorsEl, "errors", perSecond),
    refusals: timeChart(refusalsEl, "refusals", perSecond),
    confidence: histogram(confidenceEl, "confidence"),
    margin: histogram(marginEl, "margin"),
  };

  return {
    intervalMs: 2000,
    async refresh() {
      const [traffic, registry] = await Promise.all([
        getJSON("/v1/traffic", { by }), by === "instance" ? getJSON("/v1/agents") : null,
      ]);
      const labels = new Map((registry?.agents ?? []).map((a) => [a.id, a.display_name ? `${a.id} · ${a.display_name}` : a.id]));
      hint.textContent = `coordinator ${traffic.node} · last ${traffic.window_s / 60} min · ${traffic.bucket_s} s buckets · every 2 s`;
      drawTiles(tiles, traffic);
      drawTimeCharts(charts, traffic, BY[by], (name) => labels.get(name) ?? name);
      drawRouting(charts, traffic.routing);
    },
  };
}

const sum = (values) => values.reduce((a, b) => a + (b ?? 0), 0);

function drawTiles(tiles, traffic) {
  const total = traffic.total;
  const last = total.requests.length - 2; // the newest complete bucket
  const errors = sum(total.errors);
  const refusals = sum(total.refusals);
  tiles.replaceChildren(
    tile("requests · 15 min", sum(total.requests)),
    tile("requests/s · last bucket", perSecond(total.requests[last] / traffic.bucket_s)),
    tile("errors · 15 min", errors, { kind: errors ? "bad" : "" }),
    tile("refusals · 15 min", refusals, { kind: refusals ? "warn" : "" }),
    tile("text decisions · 15 min", sum(traffic.routing.confidence)),
  );
}

// Every series but the newest (still filling) bucket; the busiest MAX_LINES series.
// `labelOf`: a series' name in the legend (an instance's display name beside its id).
function drawTimeCharts(charts, traffic, kind, labelOf) {
  const times = traffic.times.slice(0, -1);
  const complete = (values) => values.slice(0, -1);
  const rate = (values) => complete(values).map((v) => v / traffic.bucket_s);
  const names = Object.entries(traffic[kind])
    .sort(([a, x], [b, y]) => sum(y.requests) - sum(x.requests) || a.localeCompare(b))
    .slice(0, MAX_LINES)
    .map(([name]) => name);
  const line = (label, i, extra) => ({ label, stroke: PALETTE[i % PALETTE.length], ...extra });
  const series = names.map((name, i) => line(labelOf(name), i));
  const of = (field) => names.map((name) => rate(traffic[kind][name][field]));
  charts.requests.draw(series, [times, ...of("requests")]);
  charts.errors.draw(series, [times, ...of("errors")]);
  charts.refusals.draw(series, [times, ...of("refusals")]);
  charts.latency.draw(
    names.flatMap((name, i) => [line(`${labelOf(name)} p99`, i), line(`${labelOf(name)} p50`, i, { dash: [5, 4] })]),
    [times, ...names.flatMap((name) => [complete(traffic[kind][name].p99_ms), complete(traffic[kind][name].p50_ms)])],
  );
}

function drawRouting(charts, routing) {
  const half = 0.5 / routing.bins.length;
  const centers = routing.bins.map((b) => Number((b + half).toFixed(4)));
  charts.confidence.draw(
    [{ axis: "confidence", label: "decisions", stroke: PALETTE[0], half,
      threshold: routing.min_confidence, thresholdLabel: "min_confidence" }],
    [centers, routing.confidence],
  );
  charts.margin.draw(
    [{ axis: "margin", label: "decisions", stroke: PALETTE[4], half,
      threshold: routing.margin_threshold, thresholdLabel: "margin" }],
    [centers, routing.margin],
  );
}

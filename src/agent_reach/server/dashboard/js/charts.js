// Charts drawn by uPlot (vendor/uplot, loaded by index.html before the modules): lines over
// time, and histograms with threshold lines. Each chart is kept in `window.dashboardCharts`
// by name, so what it draws can be read back (the browser tests compare it with what was sent).
const uPlot = window.uPlot;
const AXIS_TEXT = "#8e9ab0";
const GRID = "#2b3447";
const THRESHOLD = "#f4c152";
export const PALETTE = ["#7aa2ff", "#4fd1a5", "#f4c152", "#ff6b6b", "#b59cff", "#5ed3f3", "#ff9f68", "#e78ac3"];
const HEIGHT = 220;

const charts = {};
window.dashboardCharts = charts;

const COUNTS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6]; // whole ticks

// The legend's value: at the cursor, else (no cursor) the newest value or the total.
function shown(value, format) {
  return value === null || value === undefined ? "–" : format(value);
}

function latest(values) {
  for (let i = values.length - 1; i >= 0; i -= 1) if (values[i] !== null && values[i] !== undefined) return values[i];
  return null;
}

function lone(u, i) {
  const values = u.data[i];
  const gap = (k) => values[k] === null || values[k] === undefined;
  return values.flatMap((v, k) => (!gap(k) && gap(k - 1) && gap(k + 1) ? [k] : []));
}

function axis(format) {
  return {
    stroke: AXIS_TEXT,
    grid: { stroke: GRID, width: 1 },
    ticks: { stroke: GRID, width: 1 },
    ...(format ? { size: 70, values: (u, ticks) => ticks.map(format) } : {}),
  };
}

function widthOf(el) {
  return Math.max(240, el.clientWidth || 480);
}

// One uPlot in `el`, rebuilt when its series (or thresholds) change, else given new data.
export class Chart {
  constructor(el, name, options) {
    this.el = el;
    this.name = name;
    this.options = options; // (series, width) -> uPlot options
    this.plot = null;
    this.signature = null;
  }

  draw(series, data) {
    const signature = JSON.stringify(series);
    if (this.plot && signature === this.signature) {
      this.plot.setData(data);
      return;
    }
    this.plot?.destroy();
    if (charts[this.name] !== this.plot) charts[this.name]?.destroy(); // a view left behind
    this.signature = signature;
    this.plot = new uPlot(this.options(series, widthOf(this.el)), data, this.el);
    charts[this.name] = this.plot;
  }
}

// Lines over time: `series` [{label, stroke, dash}], x in wall seconds. `dots`: mark the
// values with no neighbour (latencies have gaps where nothing ran: a lone bucket draws no line).
export function timeChart(el, name, format, { dots = false } = {}) {
  return new Chart(el, name, (series, width) => ({
    width,
    height: HEIGHT,
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    series: [
      {},
      ...series.map((s) => ({
        label: s.label,
        stroke: s.stroke,
        dash: s.dash,
        width: 1.5,
        points: { show: dots, size: 5, fill: s.stroke, filter: lone },
        value: (u, v, i, idx) => shown(idx === null ? latest(u.data[i]) : v, format),
      })),
    ],
    axes: [axis(null), axis(format)],
  }));
}

// Bars over [0, 1] with a dashed vertical line at `series[0].threshold`, named on the chart.
export function histogram(el, name) {
  return new Chart(el, name, ([s], width) => ({
    width,
    height: HEIGHT,
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false, range: [0, 1] }, y: { range: (u, min, max) => [0, Math.max(1, max ?? 0)] } },
    series: [
      { label: s.axis, value: (u, v) => shown(v, (x) => `${(x - s.half).toFixed(2)}–${(x + s.half).toFixed(2)}`) },
      { label: s.label, stroke: s.stroke, fill: `${s.stroke}99`, width: 1,
        paths: uPlot.paths.bars({ size: [0.92, 64], align: 0 }), points: { show: false },
        value: (u, v, i, idx) => String(idx === null ? u.data[i].reduce((a, b) => a + b, 0) : v) },
    ],
    axes: [axis((v) => v.toFixed(2)), { ...axis((v) => String(v)), incrs: COUNTS }],
    hooks: { draw: [(u) => threshold(u, s.threshold, s.thresholdLabel)] },
  }));
}

function threshold(u, value, label) {
  if (value === null || value === undefined) return;
  const { ctx, bbox } = u;
  const x = Math.round(u.valToPos(value, "x", true));
  u.threshold = { value, label, x: x / devicePixelRatio }; // what was drawn, and where
  ctx.save();
  ctx.strokeStyle = THRESHOLD;
  ctx.fillStyle = THRESHOLD;
  ctx.lineWidth = 2 * devicePixelRatio;
  ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
  ctx.beginPath();
  ctx.moveTo(x, bbox.top);
  ctx.lineTo(x, bbox.top + bbox.height);
  ctx.stroke();
  ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
  ctx.textAlign = value > 0.7 ? "right" : "left";
  ctx.fillText(`${label} ${value}`, x + (value > 0.7 ? -6 : 6) * devicePixelRatio, bbox.top + 14 * devicePixelRatio);
  ctx.restore();
}

// Charts follow the window's width; charts of a view that was left are forgotten.
window.addEventListener("resize", () => {
  for (const [name, plot] of Object.entries(charts)) {
    const el = plot.root.parentElement;
    if (!el || !el.isConnected) {
      delete charts[name];
      continue;
    }
    plot.setSize({ width: widthOf(el), height: HEIGHT });
  }
});

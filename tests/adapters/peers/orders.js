// An Express JSON order service, unchanged by Agent-Reach; counts the calls it serves.
const express = require("express");

const app = express();
app.use(express.json());
const calls = { status: 0, cancel: 0 };
const orders = { "A-100": { id: "A-100", state: "shipped", eta: "2026-12-03" } };

app.get("/health", (req, res) => res.json({ ok: true }));
app.get("/calls", (req, res) => res.json(calls));
app.get("/api/orders/:id", (req, res) => {
  calls.status += 1;
  const order = orders[req.params.id];
  if (!order) return res.status(404).json({ message: `no order ${req.params.id}` });
  res.json({ data: { order, served_by: "express" } });
});
app.post("/api/orders/:id/cancel", (req, res) => {
  calls.cancel += 1;
  res.json({ data: { id: req.params.id, cancelled: true, reason: req.body.reason } });
});

const server = app.listen(0, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));

// A streaming agent on Node's own `http`: answers each delivery with server-sent events.
// The events after the first wait until the test opens the request's gate, so a caller
// that sees the first event early proves forwarding without any timing. `/ledger` says
// which deliveries ran and which streams were closed before they ended.
const http = require("http");

const ledger = { executions: [], disconnected: [] };
const gates = new Map(); // request_id -> resolve, or true once opened early

function gate(id) {
  if (gates.get(id) === true) return Promise.resolve();
  return new Promise((resolve) => gates.set(id, resolve));
}

function open(id) {
  const waiting = gates.get(id);
  gates.set(id, true);
  if (typeof waiting === "function") waiting();
}

function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", async () => {
    const url = req.url;
    if (req.method === "GET" && url === "/health") return json(res, 200, { ok: true });
    if (req.method === "GET" && url === "/ledger") return json(res, 200, ledger);
    if (req.method === "POST" && url.startsWith("/gate/")) {
      open(decodeURIComponent(url.slice("/gate/".length)));
      return json(res, 200, { opened: true });
    }
    if (req.method !== "POST" || url !== "/invoke") return json(res, 404, { error: "no such path" });
    const delivery = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const id = delivery.request_id;
    ledger.executions.push(id);
    const words = (delivery.payload && delivery.payload.words) || ["first", "second", "third"];
    if (delivery.payload && delivery.payload.plain) {
      return json(res, 200, { words });
    }
    res.on("close", () => {
      if (!res.writableEnded) ledger.disconnected.push(id);
    });
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write(`event: token\nid: 1\ndata: ${words[0]}\n\n`);
    if (delivery.payload && delivery.payload.break) {
      res.write("event: token\ndata: half an ev");
      setImmediate(() => res.socket.destroy()); // the chunk goes out, then the connection dies
      return;
    }
    await gate(id);
    if (res.destroyed) return;
    words.slice(1).forEach((word, n) => res.write(`event: token\nid: ${n + 2}\ndata: ${word}\n\n`));
    res.end();
  });
});

server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));

// An agent on Node's `http` module: every answer shape of the interop suite by path.
// Prints "PORT <n>" once listening on 127.0.0.1; GET /stats -> {"acted", "closed"}.
"use strict";
const http = require("http");
const zlib = require("zlib");

const idleMs = Number(process.argv[2] || 5000);
const stats = { acted: 0, closed: 0 };
const big = Buffer.alloc(17 * 1024 * 1024, 0x61);

function answer(req, res, body) {
  const delivery = JSON.parse(body);
  const result = JSON.stringify({ peer: "node", echo: delivery.payload });
  switch (req.url) {
    case "/json":
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(result) });
      return res.end(result);
    case "/chunked":
      res.writeHead(200, { "content-type": "application/json" });
      res.write(result.slice(0, 5));
      return res.end(result.slice(5));
    case "/empty":
      res.writeHead(204);
      return res.end();
    case "/gzip":
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      return res.end(zlib.gzipSync(result));
    case "/deflate":
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "deflate" });
      return res.end(zlib.deflateSync(result));
    case "/text":
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      return res.end("done: 已发货");
    case "/xml":
      res.writeHead(200, { "content-type": "application/xml" });
      return res.end("<ok>1</ok>");
    case "/notjson":
      res.writeHead(200, { "content-type": "application/json" });
      return res.end("<html>oops</html>");
    case "/big":
      res.writeHead(200, { "content-type": "application/json", "content-length": big.length });
      return res.end(big);
    case "/slow":
      return setTimeout(() => { res.writeHead(200, { "content-type": "application/json" }); res.end(result); }, 1500);
    default:
      res.writeHead(404);
      return res.end();
  }
}

const server = http.createServer((req, res) => {
  if (req.method === "GET") {
    const body = req.url === "/stats" ? JSON.stringify(stats) : "{}";
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(body);
  }
  stats.acted += 1;
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => answer(req, res, Buffer.concat(chunks).toString()));
});
server.keepAliveTimeout = idleMs;
server.on("connection", (socket) => socket.on("close", () => { stats.closed += 1; }));
server.listen(0, "127.0.0.1", () => console.log(`PORT ${server.address().port}`));

// An MCP server built with the official TypeScript SDK (@modelcontextprotocol/sdk),
// served over streamable HTTP with sessions: `node mcp_tools_server.mjs PORT LEDGER`.
// The same tools as tests/adapters/peers/mcp_tools_server.py; every execution appends
// `<tool> <arguments as JSON>` to LEDGER before it answers. `charge` records its
// execution, then exits: its answer is lost after the call was received.
import fs from "node:fs";
import http from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const [port, ledger] = process.argv.slice(2);
const sessions = new Map(); // session id -> {transport, server}
let grown = false;

function record(tool, args) {
  fs.appendFileSync(ledger, `${tool} ${JSON.stringify(args)}\n`);
}

function addTranslate(server) {
  server.registerTool(
    "translate",
    {
      description: "Translate a sentence into shouting capitals",
      inputSchema: { sentence: z.string() },
    },
    async ({ sentence }) => {
      record("translate", { sentence });
      return { content: [{ type: "text", text: sentence.toUpperCase() }] };
    },
  );
}

function build() {
  const server = new McpServer({ name: "typescript-tools", version: "1.0.0" });
  server.registerTool(
    "order_status",
    {
      description: "Track a parcel: where is my order, delivery status of an order number",
      inputSchema: { order_id: z.string().regex(/ORD-[0-9]{4,}/) },
      outputSchema: { order_id: z.string(), status: z.string() },
    },
    async ({ order_id }) => {
      record("order_status", { order_id });
      const answer = { order_id, status: "shipped" };
      return { content: [{ type: "text", text: JSON.stringify(answer) }], structuredContent: answer };
    },
  );
  server.registerTool(
    "echo",
    { description: "Repeat a sentence back, word for word", inputSchema: { sentence: z.string() } },
    async ({ sentence }) => {
      record("echo", { sentence });
      return { content: [{ type: "text", text: `you said: ${sentence}` }] };
    },
  );
  server.registerTool(
    "refund",
    { description: "Refund a payment (always refused)", inputSchema: { payment_id: z.string() } },
    async ({ payment_id }) => {
      record("refund", { payment_id });
      return {
        content: [{ type: "text", text: `payment ${payment_id} cannot be refunded` }],
        isError: true,
      };
    },
  );
  server.registerTool(
    "charge",
    { description: "Charge a card, then lose the answer", inputSchema: { amount: z.number().int() } },
    async ({ amount }) => {
      record("charge", { amount });
      process.exit(0); // the call was received and acted on; no answer ever leaves
    },
  );
  server.registerTool(
    "grow",
    { description: "Add the translate tool to this server", inputSchema: {} },
    async () => {
      record("grow", {});
      grown = true;
      // Every open session's server gets the tool (and sends its list_changed).
      for (const entry of sessions.values()) addTranslate(entry.server);
      return { content: [{ type: "text", text: "grown" }] };
    },
  );
  if (grown) addTranslate(server);
  return server;
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

function refuse(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

const httpServer = http.createServer(async (req, res) => {
  if (!req.url.startsWith("/mcp")) return refuse(res, 404, "not found");
  const body = req.method === "POST" ? await readBody(req) : undefined;
  const sessionId = req.headers["mcp-session-id"];
  let entry = sessionId ? sessions.get(sessionId) : undefined;
  if (entry === undefined) {
    if (sessionId) return refuse(res, 404, "Session not found");
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      return refuse(res, 400, "Bad Request: no session id");
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, entry),
    });
    transport.onclose = () => sessions.delete(transport.sessionId);
    entry = { transport, server: build() };
    await entry.server.connect(transport);
  }
  await entry.transport.handleRequest(req, res, body);
});

// Port 0 picks a free one: the line says which (the test kit reads it).
httpServer.listen(Number(port), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${httpServer.address().port}`);
});

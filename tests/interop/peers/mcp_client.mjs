// The official TypeScript MCP SDK as a client of the coordinator's /mcp.
//
// node mcp_client.mjs <mcp url> <api key or ""> <tool> [<tool> ...]
//
// Connects (initialize handshake), pings, lists the tools, then calls every tool named
// on the command line at once (several concurrent streams in one session) with
// {"payload": {"tag": <tool>}}, and prints one JSON line: the negotiated protocol
// version, the server's name, the listed tools and, per tool called, its result or the
// JSON-RPC error it was refused with.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, ...tools] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "agent-reach-interop", version: "1.0.0" });

await client.connect(transport);
await client.ping();
const listed = (await client.listTools()).tools;
const outcomes = await Promise.all(
  tools.map(async (name) => {
    try {
      const result = await client.callTool({ name, arguments: { payload: { tag: name } } });
      return [name, { isError: Boolean(result.isError), structured: result.structuredContent ?? null }];
    } catch (error) {
      return [name, { error: { code: error.code, message: error.message } }];
    }
  }),
);
console.log(
  JSON.stringify({
    protocolVersion: transport.protocolVersion,
    sessionId: transport.sessionId ?? null,
    server: client.getServerVersion()?.name,
    tools: listed.map((tool) => tool.name),
    calls: Object.fromEntries(outcomes),
  }),
);
await transport.terminateSession();
await client.close();

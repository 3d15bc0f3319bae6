// The TypeScript SDK agent of bench/sdk_agents.py: one capability, a small fixed answer.
//
//   node bench/ts_agent.mjs <coordinator URL> <API key> <agent id> <capability>
//
// Prints "PORT <n>" once registered. Needs the SDK built (cd clients/typescript && npm
// install && npm run build).
import { Agent } from "../clients/typescript/dist/index.js";

const [coordinator, apiKey, id, capability] = process.argv.slice(2);
const agent = new Agent({ id, capabilities: [capability], coordinator, apiKey });
agent.handle(capability, async () => ({ echo: "pong", ok: true }));
const { url } = await agent.listen();
console.log(`PORT ${new URL(url).port}`);
process.on("SIGTERM", () => agent.close().then(() => process.exit(0)));

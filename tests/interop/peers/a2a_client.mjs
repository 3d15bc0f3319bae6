// Drives the coordinator's A2A face with the official JavaScript SDK (@a2a-js/sdk).
// Usage: node a2a_client.mjs <coordinator URL> <JSONRPC|HTTP+JSON>
// Prints one JSON object: what each call answered (or the error it raised).
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";
import { randomUUID } from "node:crypto";

const [url, binding] = process.argv.slice(2);
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    preferredTransports: [binding],
  }),
);
const client = await factory.createFromUrl(url);

function message(text, capability, extra = {}) {
  return {
    messageId: randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: capability ? { capability } : undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}

const texts = (parts) => (parts || []).filter((p) => p.content?.$case === "text").map((p) => p.content.value);
const state = (task) => TaskState[task.status.state];
async function attempt(call) {
  try {
    return await call();
  } catch (error) {
    return { error: error.constructor.name, message: String(error.message) };
  }
}

const out = {};
const reply = await client.sendMessage({ message: message("hi", "echo.say") });
out.reply = { state: state(reply), texts: texts(reply.artifacts?.[0]?.parts) };
const asked = await client.sendMessage({ message: message("hi", undefined, { metadata: { capability: "echo.say", reply: "message" } }) });
out.asked = texts(asked.parts);
const declined = await client.sendMessage({ message: message("hi", "no.such.skill") });
out.declined = { state: state(declined), why: texts(declined.status.message?.parts) };
const read = await client.getTask({ id: declined.id, historyLength: 1 });
out.read = { state: state(read), history: read.history.length };
const listed = await client.listTasks({ pageSize: 10 });
out.listed = { ids: listed.tasks.map((t) => t.id), totalSize: listed.totalSize, mine: [declined.id, reply.id] };
out.cancel = await attempt(() => client.cancelTask({ id: declined.id }));
out.unknown = await attempt(() => client.getTask({ id: "never-made" }));
out.streamed = [];
for await (const event of client.sendMessageStream({ message: message("streamed", "echo.say") })) {
  const payload = event.payload ?? event;
  out.streamed.push(payload.$case ?? Object.keys(event).join(","));
  if (payload.$case === "task") out.streamedText = texts(payload.value.artifacts?.[0]?.parts);
}
console.log(JSON.stringify(out));

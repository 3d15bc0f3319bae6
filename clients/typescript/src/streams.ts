/**
 * Server-sent events, both ways: reading a streamed invoke answer on the caller's side
 * (`ReachClient.invokeStream`), and encoding a streaming handler's events on the agent's.
 */
import { errorFromBody, isObject } from "./errors.js";
import type { InvokeResult } from "./results.js";
import { invokeResult } from "./results.js";

export const END_EVENT = "reach.end";
export const ERROR_EVENT = "reach.error";
export const STREAM_MEDIA_TYPE = "text/event-stream";
export const DEFAULT_EVENT = "message"; // the type an SSE reader gives data with no `event:` line

/** One event: `event` (`message` when the agent named none), `data`, `id` if any;
 * `answer` is set on the coordinator's last one (`reach.end`). */
export interface StreamEvent {
  event: string;
  data: string;
  id?: string;
  answer?: InvokeResult;
}

// The HTTP status each mid-stream error would have had as a whole answer: what
// `errorFromBody` needs to pick the class when the code alone does not.
const ERROR_STATUS: Record<string, number> = { deadline_exceeded: 504, disconnected: 400 };

/** The events of an SSE body (WHATWG field rules, comments skipped); `reach.error` throws. */
export async function* readEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<StreamEvent> {
  const decoder = new TextDecoder();
  let buffered = "";
  let data: string[] = [];
  let name = "";
  let id: string | undefined;
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffered.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + (buffered.startsWith("\r\n", end) ? 2 : 1));
      if (line) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") name = value;
        else if (field === "id") id = value;
        continue;
      }
      if (data.length > 0) yield toEvent(name || DEFAULT_EVENT, data.join("\n"), id);
      data = [];
      name = "";
      id = undefined;
    }
  }
}

function toEvent(name: string, data: string, id: string | undefined): StreamEvent {
  const event: StreamEvent = { event: name, data };
  if (id !== undefined) event.id = id;
  if (name === ERROR_EVENT) {
    const body: unknown = JSON.parse(data);
    const error = isObject(body) ? body["error"] : undefined;
    const code = isObject(error) ? String(error["code"]) : "";
    throw errorFromBody(ERROR_STATUS[code] ?? 502, body);
  }
  if (name === END_EVENT) event.answer = invokeResult(JSON.parse(data));
  return event;
}

/** What a streaming handler yields: a string is one event's data, a `StreamEvent`-like
 * `{event, data, id?}` names it, anything else is sent as JSON. */
export function encodeEvent(item: unknown): string {
  let name = DEFAULT_EVENT;
  let data: string;
  let id: string | undefined;
  if (typeof item === "string") data = item;
  else if (isObject(item) && typeof item["event"] === "string" && typeof item["data"] === "string") {
    name = item["event"];
    data = item["data"];
    if (typeof item["id"] === "string") id = item["id"];
  } else data = JSON.stringify(item);
  let text = `event: ${oneLine(name)}\n`;
  if (id !== undefined) text += `id: ${oneLine(id)}\n`;
  for (const line of data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
  return text + "\n";
}

function oneLine(value: string): string {
  return value.replace(/[\r\n]/g, " ");
}

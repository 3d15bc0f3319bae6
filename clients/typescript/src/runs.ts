/** The request-id guard: one run per request id, its answer kept for a repeat; and a
 * streaming handler's run, relayed live to the delivery that started it. */
import type http from "node:http";
import { STREAM_MEDIA_TYPE, encodeEvent } from "./streams.js";

/** A handler's finished answer (JSON text and the cost it reported), or its stream. */
export type Outcome = { body: string; cost: number | undefined } | LiveStream;

/** request id -> its run, so a repeated delivery awaits or replays it instead of running
 * again. A run that failed is forgotten once it ends (its waiters still get its error),
 * so the coordinator's retry of a failed request runs the handler again. */
export class RunOnce {
  readonly size: number;
  readonly #runs = new Map<string, Promise<Outcome>>();

  constructor(size: number) {
    this.size = size;
  }

  run(requestId: string, start: () => Promise<Outcome>): Promise<Outcome> {
    let run = this.#runs.get(requestId);
    if (run === undefined) {
      const started = start();
      run = started;
      this.#runs.set(requestId, started);
      started.catch(() => {
        if (this.#runs.get(requestId) === started) this.#runs.delete(requestId);
      });
      // A Map iterates in insertion order: the first key is the oldest run.
      while (this.#runs.size > this.size) this.#runs.delete(this.#runs.keys().next().value as string);
    }
    return run;
  }
}

/** One run of a streaming handler: relayed as it comes to the delivery that started it,
 * kept whole for a repeat of the same request. A failure after the first event ends the
 * response unfinished (the coordinator reports a broken stream and never re-sends it);
 * when the connection closes the generator is closed at its next `yield`. */
export class LiveStream {
  readonly whole: Promise<string>;
  readonly #events: AsyncIterator<unknown>;
  readonly #sent: string[];
  readonly #ended: boolean;
  #taken = false;
  #settle!: (whole: string) => void;
  #fail!: (error: unknown) => void;

  private constructor(events: AsyncIterator<unknown>, first: string, ended: boolean) {
    this.#events = events;
    this.#sent = [first];
    this.#ended = ended;
    this.whole = new Promise<string>((resolve, reject) => {
      this.#settle = resolve;
      this.#fail = reject;
    });
    this.whole.catch(() => undefined); // nobody may be waiting for a repeat
  }

  /** Wait for the first event, so a handler failing at once fails like any other. */
  static async open(events: AsyncIterator<unknown>): Promise<LiveStream> {
    const first = await events.next();
    return new LiveStream(events, first.done ? "" : encodeEvent(first.value), first.done === true);
  }

  /** True for the first delivery only: it relays the stream as it comes. */
  take(): boolean {
    const taken = this.#taken;
    this.#taken = true;
    return !taken;
  }

  /** Write the stream to the delivery that started the run. */
  async relay(res: http.ServerResponse): Promise<void> {
    res.writeHead(200, { "content-type": STREAM_MEDIA_TYPE, "cache-control": "no-cache" });
    await write(res, this.#sent[0] as string);
    if (this.#ended) {
      res.end();
      this.#settle(this.#sent.join(""));
      return;
    }
    try {
      for (;;) {
        if (res.destroyed) throw new Error("the stream was closed before it ended");
        const next = await this.#events.next();
        if (next.done) break;
        const chunk = encodeEvent(next.value);
        this.#sent.push(chunk);
        await write(res, chunk);
      }
    } catch (error) {
      this.#fail(error);
      await this.#events.return?.().catch(() => undefined);
      // Unfinished: the connection ends without the body's last chunk (a FIN after what
      // was written, not a reset that could drop it), and the coordinator tells the
      // caller `agent_stream_broken`.
      if (res.socket && !res.socket.destroyed) res.socket.end();
      else res.destroy();
      return;
    }
    res.end();
    this.#settle(this.#sent.join(""));
  }
}

/** Write one chunk, waiting for the socket when its buffer is full. */
function write(res: http.ServerResponse, chunk: string): Promise<void> {
  if (res.destroyed) return Promise.reject(new Error("the connection closed"));
  if (!chunk || res.write(chunk)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      if (res.destroyed) reject(new Error("the connection closed"));
      else resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

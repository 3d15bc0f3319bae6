/** A task as the SDK gives it: its own module, so that the answers (`results.ts`) and the
 * errors that carry a task (`errors.ts`) both name it without importing each other. */
export interface TaskView {
  taskId: string;
  requestId: string;
  traceId: string;
  /** `queued`, `running`, `suspended`, then `ok`, `fallback`, `degraded` or `error`. */
  status: string;
  /** Set once finished: the status of its answer. */
  httpStatus: number | null;
  /** Set once finished: the invoke answer or the error body. */
  answer: unknown;
  /** Who could have taken a suspended request, and why not. */
  instances: Record<string, unknown>[] | null;
  raw: Record<string, unknown>;
}

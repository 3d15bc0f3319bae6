// The coordinator's JSON API, read-only: the dashboard never sends anything but GET.
// With security on, calls carry the operator's API key, kept for this tab only.
const KEY_SLOT = "agent-reach-key";

export function setKey(key) {
  sessionStorage.setItem(KEY_SLOT, key.trim());
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function getJSON(path, params) {
  const query = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null)) : null;
  const url = query && [...query].length ? `${path}?${query}` : path;
  const headers = { accept: "application/json" };
  const key = sessionStorage.getItem(KEY_SLOT);
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(url, { cache: "no-store", headers });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body?.error ?? {};
    throw new ApiError(response.status, error.code ?? "http_error", error.message ?? `HTTP ${response.status}`);
  }
  return body;
}

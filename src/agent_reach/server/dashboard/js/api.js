// The coordinator's JSON API, read-only: the dashboard never sends anything but GET.

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
  const response = await fetch(url, { cache: "no-store", headers: { accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body?.error ?? {};
    throw new ApiError(response.status, error.code ?? "http_error", error.message ?? `HTTP ${response.status}`);
  }
  return body;
}

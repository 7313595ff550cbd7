// The public API, called with the signed-in key (kept in sessionStorage, sent only as a Bearer
// header, never in a URL, never logged).

const KEY = 'pgcld.console.key';
const ROLE = 'pgcld.console.role';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  key: () => sessionStorage.getItem(KEY),
  role: () => sessionStorage.getItem(ROLE),
  set(key, role) {
    sessionStorage.setItem(KEY, key);
    sessionStorage.setItem(ROLE, role);
  },
  clear() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(ROLE);
  },
};

/** Calls METHOD path (query: object of non-empty values; body: JSON) with the key given or the
 * session's. Resolves to the parsed JSON answer; rejects with ApiError carrying the API's error
 * code and message. */
export async function api(method, path, {query, body, key} = {}) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) if (v !== undefined && v !== null && v !== '') qs.set(k, v);
  const url = path + (qs.toString() ? `?${qs}` : '');
  const headers = {Authorization: `Bearer ${key || session.key() || ''}`};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(url, {method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer'});
  } catch (e) {
    throw new ApiError(0, 'network', `the daemon could not be reached (${e.message})`);
  }
  let data = null;
  try {
    data = await resp.json();
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const err = data && data.error ? data.error : {code: 'http_' + resp.status, message: resp.statusText};
    throw new ApiError(resp.status, err.code, err.message);
  }
  return data;
}

/** GET /metrics as text (no key needed). */
export async function metricsText() {
  const resp = await fetch('/metrics', {cache: 'no-store', credentials: 'omit'});
  if (!resp.ok) throw new ApiError(resp.status, 'metrics', `GET /metrics answered ${resp.status}`);
  return resp.text();
}

/** The role of a key, found by probing read-only endpoints: 'reviewer', 'admin' or 'scorer'.
 * Rejects with ApiError 401 for an unknown or revoked key. */
export async function probeRole(key) {
  try {
    await api('GET', '/v1/decisions', {query: {limit: 1}, key});
    return 'reviewer';
  } catch (e) {
    if (e.status !== 403) throw e;
  }
  try {
    await api('GET', '/v1/admin/keys', {key});
    return 'admin';
  } catch (e) {
    if (e.status !== 403) throw e;
  }
  return 'scorer';
}

// The one way the console talks to the server: every call carries the key from sessionStorage (never
// localStorage: the key must die with the browser session), and a 401 anywhere logs out and returns to the login.
import { reactive } from 'vue';

const STORAGE_KEY = 'code-exec-mcp.key';

export const session = reactive({
  key: sessionStorage.getItem(STORAGE_KEY),
  tenant: null,
  admin: false,
  // Set when a 401 ended the session, so the login can say why it is shown again.
  expired: false,
});

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && typeof body.error === 'string') code = body.error;
    if (body && typeof body.message === 'string') message = body.message;
  } catch {
    // not a JSON error body: the status line is all there is to say
  }
  return new ApiError(response.status, code, message);
}

/** Checks a key with /api/auth/verify; on success it becomes the session's key. */
export async function login(key) {
  const r = await fetch('/api/auth/verify', { headers: { Authorization: `Bearer ${key}` } });
  if (r.status === 401) throw new ApiError(401, 'unauthorized', 'This key was refused.');
  if (!r.ok) throw await errorOf(r);
  const who = await r.json();
  sessionStorage.setItem(STORAGE_KEY, key);
  Object.assign(session, { key, tenant: who.tenant, admin: who.admin === true, expired: false });
  return who;
}

/** Restores tenant/admin for a key kept from earlier in this browser session (a reload). */
export async function resume() {
  if (!session.key) return false;
  try {
    await login(session.key);
    return true;
  } catch (e) {
    if (e.status === 401) logout(true);
    throw e;
  }
}

export function logout(expired = false) {
  sessionStorage.removeItem(STORAGE_KEY);
  Object.assign(session, { key: null, tenant: null, admin: false, expired });
}

/** fetch with the key; a 401 logs out. Returns the Response when ok, else throws ApiError. */
export async function request(path, { method = 'GET', body, headers = {}, signal } = {}) {
  const r = await fetch(path, {
    method, body, signal, headers: { Authorization: `Bearer ${session.key}`, ...headers },
  });
  if (r.status === 401) {
    logout(true);
    throw new ApiError(401, 'unauthorized', 'The key is no longer accepted.');
  }
  if (!r.ok) throw await errorOf(r);
  return r;
}

/**
 * POST a body with upload progress (fetch cannot report it): XMLHttpRequest with the key; `onProgress(sent, total)`
 * while the body goes out. Resolves with the parsed JSON answer; a 401 logs out; other errors throw ApiError.
 */
export function upload(path, body, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    xhr.setRequestHeader('Authorization', `Bearer ${session.key}`);
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) onProgress(e.loaded, e.total); };
    xhr.onerror = () => reject(new ApiError(0, 'network', 'The upload failed: the connection was lost.'));
    xhr.onload = () => {
      let json = null;
      try {
        json = JSON.parse(xhr.responseText);
      } catch {
        // not JSON: the status says enough
      }
      if (xhr.status === 401) {
        logout(true);
        reject(new ApiError(401, 'unauthorized', 'The key is no longer accepted.'));
      } else if (xhr.status < 200 || xhr.status >= 300) {
        reject(new ApiError(xhr.status, json?.error || `http_${xhr.status}`,
          json?.message || `${xhr.status} ${xhr.statusText}`));
      } else {
        resolve(json);
      }
    };
    xhr.send(body);
  });
}

/** A JSON call: the parsed body, or null for 204. */
export async function api(path, options = {}) {
  const init = { ...options };
  if (init.json !== undefined) {
    init.body = JSON.stringify(init.json);
    init.headers = { 'Content-Type': 'application/json', ...(init.headers || {}) };
    delete init.json;
  }
  const r = await request(path, init);
  return r.status === 204 ? null : r.json();
}

/** Saves a fetched body under `name` through a blob: URL (a plain link could not send the key). */
export async function saveAs(url, name) {
  const blob = await (await request(url)).blob();
  const href = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 10_000);
}

/**
 * Reads a server-sent event stream with the key (EventSource cannot send an Authorization header, nor POST): fetch,
 * then the body parsed as it arrives. `onEvent(name, data)` per event (`data` parsed as JSON when it is JSON).
 * `json` makes it a POST of that body. Resolves when the server ends the stream; an abort through `signal` rejects
 * with an AbortError; an error status before the stream throws ApiError.
 */
export async function streamEvents(path, onEvent, { signal, json } = {}) {
  const init = { signal, headers: { Accept: 'text/event-stream' } };
  if (json !== undefined) {
    Object.assign(init, { method: 'POST', body: JSON.stringify(json) });
    init.headers['Content-Type'] = 'application/json';
  }
  const r = await request(path, init);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let name = '';
  let data = [];
  const line = (l) => {
    if (l === '') {
      if (data.length) {
        const text = data.join('\n');
        let value = text;
        try {
          value = JSON.parse(text);
        } catch {
          // not JSON: handed over as text
        }
        onEvent(name || 'message', value);
      }
      name = '';
      data = [];
      return;
    }
    if (l.startsWith(':')) return; // a comment (keep-alive)
    const colon = l.indexOf(':');
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? '' : l.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') name = value;
    else if (field === 'data') data.push(value);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let m;
    // A line ends at \n, \r\n or \r; a lone \r at the end may be the first half of \r\n, so it waits for more.
    while ((m = /\r\n|\n|\r(?=[^\n])/.exec(buffer))) {
      line(buffer.slice(0, m.index));
      buffer = buffer.slice(m.index + m[0].length);
    }
  }
  if (buffer) line(buffer.replace(/\r$/, ''));
  line('');
}

/** A query string from the defined, non-empty values of `params` ("" when none). */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function formatBytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return '–';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

/** Local time; `short` drops the date for today (tables, where width is scarce on a phone). */
export function formatTime(iso, short = false) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  if (short && d.toDateString() === new Date().toDateString()) return d.toLocaleTimeString();
  return short ? d.toLocaleDateString() : d.toLocaleString();
}

export const LANGUAGES = ['python', 'nodejs', 'typescript', 'go', 'java', 'bash', 'shell'];
/** The outcome filter: the run outcomes, plus the history's own `running`, `rejected` and `failed` (any failure). */
export const OUTCOMES = ['exited', 'timeout', 'cancelled', 'memory_limit', 'cpu_limit', 'output_limit',
  'workspace_limit', 'killed_by_signal', 'failed_to_start', 'worker_lost', 'rejected', 'running', 'failed'];

/** A run's outcome as a pill class: a clean exit ok, a non-zero exit or timeout a warning, anything else an error. */
export function outcomeClass(outcome, exitCode) {
  if (outcome === 'running') return 'info';
  if (outcome === 'exited' && exitCode === 0) return 'ok';
  if (outcome === 'exited' || outcome === 'timeout') return 'warn';
  return 'bad'; // worker_lost included: the service failed the run, not the program
}

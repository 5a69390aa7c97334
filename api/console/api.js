// The console's one way to the service: the HTTP API with the session cookie, and writes
// with the session's CSRF token.

let csrf = '';

/** Sets the CSRF token writes carry (from the sign-in or GET /console/session). */
export function setCsrf(token) { csrf = token || ''; }

/** The session ended (or never began): the page goes back to sign-in. */
export class SignedOut extends Error {}

/** A refusal of the service: RFC 9457 problem details. */
export class Problem extends Error {
  constructor(status, body) {
    super((body && body.detail) || `the service answered ${status}`);
    this.status = status;
    this.code = body && body.code;
  }
}

/** One request; JSON in and out. */
export async function request(method, path, body) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrf;
  const response = await fetch(path, {
    method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401 && !path.startsWith('/console/session')) throw new SignedOut();
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  if (!response.ok) throw new Problem(response.status, json);
  return json;
}

export const get = (path) => request('GET', path);

/** `get`, answering `null` for a 404 (a conversation without a session yet); every other
 * failure — signed out, the service away — is the caller's. */
export async function getIfAny(path) {
  try {
    return await get(path);
  } catch (e) {
    if (e instanceof Problem && e.status === 404) return null;
    throw e;
  }
}
export const post = (path, body) => request('POST', path, body ?? {});

/** Every item of a list (following `next_cursor`, at most `max`). */
export async function all(path, max = 1000) {
  const items = [];
  let cursor = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await get(`${path}${sep}limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < max);
  return items;
}

/** Who is signed in: `{role, expires_at, csrf}`; throws SignedOut when nobody. */
export async function session() {
  try {
    return await request('GET', '/console/session');
  } catch (e) {
    if (e instanceof Problem && e.status === 401) throw new SignedOut();
    throw e;
  }
}

export const signIn = (token) => request('POST', '/console/session', { token });
export const signOut = () => request('DELETE', '/console/session');

/**
 * Follows the log over Server-Sent Events from the head, calling `onEvent(cloudEvent)`;
 * after a dropped connection it reconnects with `Last-Event-ID` (so it resumes from its
 * last position, missing nothing). `onStatus(text)` says whether it is live;
 * `onSignedOut()` when the session ended. Returns a function that stops it.
 */
export function follow({ onEvent, onStatus, onSignedOut }) {
  let stopped = false;
  let last = null;
  let controller = null;
  let wait = 500;
  (async () => {
    while (!stopped) {
      try {
        if (last === null) {
          const ready = await fetch('/readyz', { headers: { accept: 'application/json' } });
          last = String((await ready.json()).head ?? '0');
        }
        controller = new AbortController();
        const response = await fetch('/v1/events', {
          headers: { accept: 'text/event-stream', 'last-event-id': last },
          credentials: 'same-origin', signal: controller.signal,
        });
        if (response.status === 401) { onSignedOut(); return; }
        if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
        onStatus('live');
        wait = 500;
        await read(response.body, (id, type, data) => {
          if (id) last = id;
          if (type === 'lagged') throw new Error('lagged');
          if (data) onEvent(JSON.parse(data));
        });
        throw new Error('stream ended');
      } catch (e) {
        if (stopped) return;
        onStatus('reconnecting…');
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, 10000);
      }
    }
  })();
  return () => { stopped = true; if (controller) controller.abort(); };
}

/** Parses an SSE body: calls `each(id, event, data)` per event. */
async function read(body, each) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = null; let type = 'message'; const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') id = text;
        else if (field === 'event') type = text;
        else if (field === 'data') data.push(text);
      }
      if (id !== null || data.length) each(id, type, data.join('\n'));
    }
  }
}

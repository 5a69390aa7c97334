// The operator console in a real browser (issue 19): Playwright drives Debian's headless
// Chromium against a running service. tests/tests/console/main.rs starts the service and
// runs this with PM_URL, the tokens (PM_ADMIN, PM_ANALYST, PM_INGRESS, PM_LLM) and
// SCREENSHOTS (a directory). Exits non-zero on the first failed check.
//
// Sign in (a wrong token refused); an ingress command makes a session appear without a
// reload; a tool call needing approval appears in the queue, is approved there and the
// turn resumes; a pause shows the new state; a refused control shows the problem's
// detail; an analyst reads but cannot steer; the keyboard reaches the controls; an
// expired session goes back to sign-in; screenshots of every page, checked not blank.

import assert from 'node:assert/strict';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.PM_URL;
const tokens = {
  admin: process.env.PM_ADMIN, analyst: process.env.PM_ANALYST,
  ingress: process.env.PM_INGRESS, llm: process.env.PM_LLM,
};
const shots = process.env.SCREENSHOTS;
mkdirSync(shots, { recursive: true });
const step = (text) => console.log(`- ${text}`);

// The harness (tests/tests/console/main.rs) stops and starts the service on request.
const replies = (async function* () {
  let buffer = '';
  for await (const chunk of process.stdin) {
    buffer += chunk;
    let end;
    while ((end = buffer.indexOf('\n')) >= 0) { yield buffer.slice(0, end); buffer = buffer.slice(end + 1); }
  }
})();
async function harness(command) {
  console.log(`@${command}`);
  const { value } = await replies.next();
  assert.equal(value, 'ok', `the harness answered ${value} to ${command}`);
}

/** The HTTP API as another service (not the page) uses it. */
async function api(role, method, path, body, headers = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${tokens[role]}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const json = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return json;
}

async function until(what, check, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A screenshot, checked not blank: a blank 1280×800 page compresses to a few KiB. */
async function screenshot(page, name) {
  const path = join(shots, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  const size = statSync(path).size;
  assert.ok(size > 15000, `${name}.png is ${size} bytes: blank?`);
  const text = await page.evaluate(() => document.body.innerText.trim().length);
  assert.ok(text > 50, `${name}: the page shows almost no text`);
  step(`screenshot ${name}.png (${size} bytes)`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let failed = false;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => { console.error(`page error: ${e.message}`); failed = true; });

  await page.goto(`${base}/console`);
  const token = page.getByLabel('Token');
  await token.fill('not-a-token-at-all');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('unknown token').waitFor();
  step('a wrong token is refused');
  await screenshot(page, 'sign-in');
  await token.fill(tokens.llm);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('the console signs in admin and analyst tokens').waitFor();
  step('an llm token is refused');
  await token.fill(tokens.admin);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const nav = page.getByRole('navigation', { name: 'Console' });
  await nav.getByRole('link', { name: 'Overview' }).waitFor();
  // The browser stores a cookie a moment after the answer that set it (its network
  // service writes the store asynchronously): ask until it is there.
  const cookie = await until('the session cookie', async () =>
    (await context.cookies()).find((c) => c.name === 'pm_console'), 5000).catch(() => null);
  const cookies = await context.cookies();
  assert.ok(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', JSON.stringify(cookies));
  assert.ok(!cookie.value.includes(tokens.admin), 'the token is not in the cookie');
  step('signed in: an HttpOnly, SameSite=Strict cookie');

  // An ingress command: the session appears without a reload.
  const sessions = page.getByRole('region', { name: 'Sessions' });
  await sessions.waitFor();
  const title = `Console check ${Date.now()}`;
  const human = await api('ingress', 'POST', '/v1/actors', { kind: 'human', display_name: 'Hana' });
  const ai = await api('ingress', 'POST', '/v1/actors', { kind: 'ai', display_name: 'Lin' });
  const conv = await api('ingress', 'POST', '/v1/conversations', { actor_ids: [human.id, ai.id], title });
  const row = sessions.getByRole('row').filter({ hasText: title });
  await row.waitFor({ timeout: 15000 });
  await row.getByText('created', { exact: true }).waitFor();
  step('the new session appeared live');

  // A tool call that needs approval because the service's policy says so, not the
  // worker: the operator sets the policy, the human asks, the worker claims and reports
  // the call as needing none.
  await api('admin', 'PUT', '/v1/tool-policies/checks', {
    tools: 'run_*', action: 'require_approval', reason: 'runs commands on the build host',
  });
  await api('ingress', 'POST', `/v1/conversations/${conv.id}/messages`, { actor_id: human.id, content: 'run the checks' });
  const session = await until('the root agent', async () => {
    const s = await api('admin', 'GET', `/v1/sessions/${conv.id}`).catch(() => null);
    return s && s.root_agent_id ? s : null;
  });
  const claim = await until('a claim', async () => {
    const r = await fetch(`${base}/v1/turns/claim`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.llm}`, 'content-type': 'application/json' },
      body: JSON.stringify({ worker: 'console-test', agent_id: session.root_agent_id, wait_ms: 1000 }),
    });
    return r.status === 200 ? r.json() : null;
  });
  const fence = { 'pm-turn-id': claim.turn.id, 'pm-turn-epoch': String(claim.turn_epoch) };
  await api('llm', 'POST', `/v1/turns/${claim.turn.id}/tool-calls`, {
    calls: [{ call_id: 'c1', tool_name: 'run_checks', arguments: { command: 'cargo test' }, requires_approval: false }],
  }, fence);
  await nav.getByRole('link', { name: 'Approvals' }).click();
  const card = page.getByRole('article', { name: 'Tool call run_checks' });
  await card.getByText('runs commands on the build host').waitFor();
  await card.getByText('cargo test').waitFor();
  // The policy that asked, and who reported the call.
  const policy = card.getByLabel('Policy');
  await policy.getByText('checks', { exact: true }).waitFor();
  await policy.getByText('llm', { exact: true }).waitFor();
  await screenshot(page, 'approvals');
  // A live update that lands between the press and the release of a click does not
  // swallow it: the page is re-rendered only once the button is released.
  await card.getByRole('button', { name: 'Approve' }).hover();
  await page.mouse.down();
  await api('ingress', 'POST', '/v1/actors', { kind: 'human', display_name: 'Passer-by' });
  await page.waitForTimeout(800);
  await page.mouse.up();
  await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click({ timeout: 5000 });
  step('a click held across a live update is delivered');
  await card.waitFor({ state: 'detached' });
  const call = await api('admin', 'GET', `/v1/turns/${claim.turn.id}/tool-calls/c1`);
  assert.equal(call.state, 'executing');
  assert.equal(call.approver, 'admin');
  await api('llm', 'POST', `/v1/turns/${claim.turn.id}/tool-calls/c1/result`, { status: 'success', output: { passed: 12 } });
  const resumed = await until('the resumed turn', async () => {
    const r = await fetch(`${base}/v1/turns/claim`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.llm}`, 'content-type': 'application/json' },
      body: JSON.stringify({ worker: 'console-test', agent_id: session.root_agent_id, wait_ms: 1000 }),
    });
    return r.status === 200 ? r.json() : null;
  });
  assert.equal(resumed.turn.id, claim.turn.id);
  assert.ok(resumed.turn_epoch > claim.turn_epoch);
  step('approved in the queue; the turn resumed under a new claim');

  // The conversation's page: its timeline, turns and tool calls.
  await nav.getByRole('link', { name: 'Overview' }).click();
  await row.getByRole('link', { name: title }).click();
  await page.getByRole('heading', { name: title, level: 1 }).waitFor();
  const timeline = page.getByRole('region', { name: 'Timeline' });
  await timeline.getByText('tool.approved').waitFor();
  // Who caused each event: the approval was the console's admin, the message the ingress.
  await timeline.getByRole('listitem').filter({ hasText: 'tool.approved' }).getByText('by admin').waitFor();
  await timeline.getByRole('listitem').filter({ hasText: 'project_manager.message.added' }).first()
    .getByText('by ingress').waitFor();
  await page.getByRole('region', { name: 'Tool calls' }).getByText('run_checks').waitFor();
  await page.getByRole('region', { name: 'Turns' }).getByRole('button', { name: 'Interrupt' }).waitFor();
  await screenshot(page, 'conversation');
  step('the conversation page shows its timeline (who caused each event), turns and calls');

  // Pause from the overview: the new state shows; a second pause is refused with the detail.
  await nav.getByRole('link', { name: 'Overview' }).click();
  await row.getByRole('button', { name: 'Pause' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Reason').fill('maintenance window');
  await dialog.getByRole('button', { name: 'Confirm' }).click();
  await row.getByText('paused', { exact: true }).waitFor();
  await row.getByText('maintenance window').waitFor();
  step('a pause shows the new state and its reason');
  await row.getByRole('button', { name: 'Pause' }).click();
  await dialog.getByRole('button', { name: 'Confirm' }).click();
  const alert = page.getByRole('alert').filter({ hasText: 'Refused' });
  await alert.waitFor();
  assert.match(await alert.innerText(), /not allowed|paused/i);
  step(`a refused control shows the detail: ${await alert.innerText()}`);
  // Cancelling changes nothing.
  await row.getByRole('button', { name: 'Archive' }).click();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  assert.equal((await api('admin', 'GET', `/v1/sessions/${conv.id}`)).state, 'paused');
  await screenshot(page, 'overview');

  // The keyboard reaches the controls.
  await page.keyboard.press('Tab');
  let reached = false;
  for (let i = 0; i < 80 && !reached; i += 1) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement && document.activeElement.textContent === 'Resume');
  }
  assert.ok(reached, 'Tab reaches a Resume button');
  await page.keyboard.press('Enter');
  await dialog.getByRole('button', { name: 'Confirm' }).waitFor();
  await page.keyboard.press('Enter');
  await row.getByText('active', { exact: true }).waitFor();
  step('resumed with the keyboard alone');

  // The service restarts under the open page: the page says so, reconnects with the last
  // id it saw (not from the head again) and shows what happens next; the cookie still
  // holds (it is signed, not stored).
  const streams = [];
  let heads = 0;
  page.on('request', (r) => {
    if (r.url().endsWith('/v1/events')) streams.push(r.headers()['last-event-id']);
    if (r.url().endsWith('/readyz')) heads += 1;
  });
  await harness('stop');
  await page.getByText('Reconnecting…').waitFor();
  await harness('start');
  const later = `Console later ${Date.now()}`;
  await api('ingress', 'POST', '/v1/conversations', { actor_ids: [human.id, ai.id], title: later });
  await page.getByText('Live', { exact: true }).waitFor();
  await sessions.getByRole('row').filter({ hasText: later }).waitFor();
  assert.equal(heads, 0, 'a reconnect does not start from the head again');
  const ids = streams.map(Number);
  assert.ok(ids.length >= 1 && ids.every((id) => id > 0), `reconnected with Last-Event-ID: ${JSON.stringify(streams)}`);
  step(`the service restarted; the page reconnected with Last-Event-ID ${streams.join(', ')}`);

  // A narrow window still reads.
  await page.setViewportSize({ width: 420, height: 800 });
  await screenshot(page, 'overview-narrow');
  await page.setViewportSize({ width: 1280, height: 800 });

  // An expired session (its cookie gone) goes back to sign-in at the next request.
  await context.clearCookies();
  await nav.getByRole('link', { name: 'Approvals' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.getByText('Your session ended').waitFor();
  step('an expired session goes back to sign-in');

  // An analyst reads but cannot steer; sign-out clears the cookie.
  await page.getByLabel('Token').fill(tokens.analyst);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('Signed in as analyst (read only)').waitFor();
  await nav.getByRole('link', { name: 'Overview' }).click();
  const analystRow = page.getByRole('region', { name: 'Sessions' }).getByRole('row').filter({ hasText: title });
  await analystRow.waitFor();
  assert.ok(await analystRow.getByRole('button', { name: 'Pause' }).isDisabled());
  const csrfless = await page.evaluate(async (id) => {
    const r = await fetch(`/v1/sessions/${id}/pause`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    return [r.status, (await r.json()).code];
  }, conv.id);
  assert.deepEqual(csrfless, [403, 'csrf_token_invalid'], 'a cookie write without the CSRF token is refused');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await until('the cookie cleared', async () =>
    (await context.cookies()).every((c) => c.name !== 'pm_console'), 5000);
  step('analyst: read only; signed out');
} catch (e) {
  console.error(e);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);

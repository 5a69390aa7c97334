// The console's shell: sign-in and sign-out, the hash router, the live stream that
// re-renders the current page, the confirmation dialog and the alert that shows a
// refusal's detail.

import { follow, Problem, session, setCsrf, signIn, signOut, SignedOut } from './api.js';
import { approvals, conversation, overview } from './views.js';

const $ = (id) => document.getElementById(id);
let ctx = null;
let stopFollowing = null;
let pending = null;
let rendering = false;
let again = false;

// A pointer pressed on the page: the view is not replaced until it is released, since a
// click whose button is swapped out between press and release is never delivered (a live
// update landing mid-click swallowed the operator's Approve).
let pressed = false;
let onRelease = [];
document.addEventListener('pointerdown', () => { pressed = true; }, true);
for (const type of ['pointerup', 'pointercancel']) {
  document.addEventListener(type, () => {
    pressed = false;
    // After the click this release completes has been dispatched.
    const waiting = onRelease;
    onRelease = [];
    setTimeout(() => waiting.forEach((resolve) => resolve()), 0);
  }, true);
}
/** Resolves once no pointer is pressed (at most a second later: a release outside the
 * window may never be seen). */
function released() {
  if (!pressed) return Promise.resolve();
  return new Promise((resolve) => {
    onRelease.push(resolve);
    setTimeout(resolve, 1000);
  });
}

function route() {
  const hash = location.hash || '#/overview';
  const match = hash.match(/^#\/conversations\/([0-9a-f-]{36})$/);
  if (match) return { name: 'conversation', render: (c) => conversation(c, match[1]), conversation: match[1] };
  if (hash === '#/approvals') return { name: 'approvals', render: approvals };
  return { name: 'overview', render: overview };
}

function showAlert(text) {
  $('alert').textContent = text;
  $('alert').hidden = !text;
}

/** Renders the current page; keeps the focused control focused across re-renders. */
async function render() {
  if (!ctx) return;
  if (rendering) { again = true; return; }
  rendering = true;
  const current = route();
  for (const link of document.querySelectorAll('#nav a')) {
    if (link.getAttribute('href') === `#/${current.name}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  try {
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.key : undefined;
    const node = await current.render(ctx);
    await released();
    $('view').replaceChildren(node);
    if (focused) {
      const back = $('view').querySelector(`[data-key="${CSS.escape(focused)}"]`);
      if (back) back.focus();
    }
  } catch (e) {
    if (e instanceof SignedOut) { toSignIn('Your session ended; sign in again.'); return; }
    showAlert(e.message);
  } finally {
    rendering = false;
  }
  if (again) { again = false; render(); }
}

/** Re-render soon (many events arrive together). */
function soon() {
  clearTimeout(pending);
  pending = setTimeout(render, 250);
}

function toSignIn(message) {
  ctx = null;
  if (stopFollowing) { stopFollowing(); stopFollowing = null; }
  for (const id of ['nav', 'who', 'live', 'sign-out']) $(id).hidden = true;
  $('view').replaceChildren();
  $('sign-in').hidden = false;
  $('sign-in-error').textContent = message || '';
  $('token').value = '';
  $('token').focus();
}

function start(signedIn) {
  setCsrf(signedIn.csrf);
  ctx = {
    role: signedIn.role,
    canWrite: signedIn.role !== 'analyst',
    confirm: ask,
    act: async (write) => {
      try {
        await write();
        showAlert('');
      } catch (e) {
        if (e instanceof SignedOut) { toSignIn('Your session ended; sign in again.'); return; }
        showAlert(e instanceof Problem ? `Refused: ${e.message}` : e.message);
      }
      await render();
    },
  };
  $('sign-in').hidden = true;
  $('nav').hidden = false;
  $('who').hidden = false;
  $('who').textContent = `Signed in as ${signedIn.role}${signedIn.role === 'analyst' ? ' (read only)' : ''}`;
  $('sign-out').hidden = signedIn.role === 'open';
  $('live').hidden = false;
  stopFollowing = follow({
    onEvent: (event) => {
      const current = route();
      if (current.name !== 'conversation' || event.conversationid === current.conversation) soon();
    },
    onStatus: (text) => { $('live').textContent = text === 'live' ? 'Live' : 'Reconnecting…'; if (text === 'live') soon(); },
    onSignedOut: () => toSignIn('Your session ended; sign in again.'),
  });
  render();
  $('main').focus();
}

/** The confirmation dialog: resolves to the field's value ('' without one), or null. */
function ask({ title, text, field }) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text || '';
  const input = $('confirm-input');
  $('confirm-field').hidden = !field;
  if (field) {
    $('confirm-label').textContent = field.label;
    input.type = field.type || 'text';
    input.value = field.value || '';
    input.required = Boolean(field.required);
    if (field.min) input.min = field.min; else input.removeAttribute('min');
  } else {
    input.required = false;
  }
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      resolve(dialog.returnValue === 'ok' ? (field ? input.value : '') : null);
    }, { once: true });
    dialog.returnValue = '';
    dialog.showModal();
    (field ? input : $('confirm-ok')).focus();
  });
}

$('sign-in-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('sign-in-error').textContent = '';
  try {
    start(await signIn($('token').value));
  } catch (e) {
    $('sign-in-error').textContent = e instanceof Problem ? e.message : 'The service cannot be reached.';
  }
});

$('sign-out').addEventListener('click', async () => {
  try {
    await signOut();
  } catch (e) {
    // The service answers every sign-out 204 (clearing the cookie); a failure means the
    // cookie may still be valid: say so rather than claim a sign-out.
    showAlert(e instanceof Problem ? e.message : 'The service cannot be reached: not signed out.');
    return;
  }
  showAlert('');
  toSignIn('Signed out.');
});

window.addEventListener('hashchange', () => { showAlert(''); render(); });
// A tab that comes back after a while re-checks its session (it may have expired).
document.addEventListener('visibilitychange', () => { if (!document.hidden && ctx) render(); });
// Relative times move on.
setInterval(() => { if (ctx && !document.querySelector('dialog[open]')) render(); }, 30000);

session().then(start).catch((e) => toSignIn(e instanceof SignedOut ? '' : e.message));

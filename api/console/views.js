// The console's pages. Each is an async function of the context that fetches what it
// shows and returns a node; the app re-renders the current page when the log moves.

import { all, get, getIfAny, post } from './api.js';
import { h, section, shortId, state, table, time } from './dom.js';

const RUNNING = ['dispatched', 'streaming', 'tool_executing'];

/** A conversation's title as shown: a forgotten one's reads `null`, and says so. */
function titleOf(c) {
  return c.title ?? '(forgotten)';
}

/** `{id: title}` of the conversations (the read model's). */
async function titles() {
  const conversations = await all('/v1/conversations', 2000);
  return Object.fromEntries(conversations.map((c) => [c.id, titleOf(c)]));
}

function conversationLink(id, names) {
  return h('a', { href: `#/conversations/${id}` }, names[id] || id.slice(0, 8));
}

/** The latest `session.paused` / `session.suspended` rune's reason, per conversation. */
async function reasons(sessions) {
  const held = sessions.filter((s) => s.state === 'paused' || s.state === 'suspended');
  const found = await Promise.all(held.map(async (s) => {
    const page = await get(`/v1/events?conversation_id=${s.conversation_id}&types=session.paused,session.suspended&limit=500`);
    const last = page.items[page.items.length - 1];
    return [s.conversation_id, last && last.data ? last.data.reason : null];
  }));
  return Object.fromEntries(found);
}

/** A control button: asks for confirmation, then writes; refusals show their detail. */
function control(ctx, label, key, ask, write, cls) {
  return h('button', {
    type: 'button', class: cls, 'data-key': key, disabled: !ctx.canWrite,
    onclick: async () => {
      const answer = await ctx.confirm(ask);
      if (answer !== null) await ctx.act(() => write(answer));
    },
  }, label);
}

function sessionControls(ctx, s, title) {
  const id = s.conversation_id;
  const base = `/v1/sessions/${id}`;
  return h('div', { class: 'controls' },
    control(ctx, 'Pause', `pause:${id}`,
      { title: `Pause “${title}”?`, text: 'No new turns are dispatched until it is resumed.', field: { label: 'Reason', value: 'operator' } },
      (reason) => post(`${base}/pause`, { reason: reason || 'operator' })),
    control(ctx, 'Resume', `resume:${id}`,
      { title: `Resume “${title}”?`, text: 'Queued turns are dispatched again.' },
      () => post(`${base}/resume`, {})),
    control(ctx, 'Archive', `archive:${id}`,
      { title: `Archive “${title}”?`, text: 'Its agents are terminated and the session is sealed. This cannot be undone.' },
      () => post(`${base}/archive`, {}), 'danger'),
    control(ctx, 'Add budget', `budget:${id}`,
      { title: `Add tokens to “${title}”`, text: 'Tokens added to the session’s budget.', field: { label: 'Tokens', type: 'number', value: '10000', min: '1' } },
      (n) => post(`${base}/budget`, { add_tokens: Number(n) })));
}

function killButton(ctx, agent) {
  return control(ctx, 'Kill', `kill:${agent.id}`,
    { title: `Kill agent ${agent.id.slice(0, 8)}?`, text: 'Its turns end and it takes no more work.' },
    () => post(`/v1/agents/${agent.id}/kill`, {}), 'danger');
}

function interruptButton(ctx, turn) {
  return control(ctx, 'Interrupt', `interrupt:${turn.id}`,
    { title: `Interrupt turn ${turn.id.slice(0, 8)}?`, text: 'The worker’s claim ends; the turn is interrupted.', field: { label: 'Reason', value: 'operator' } },
    (reason) => post(`/v1/turns/${turn.id}/interrupt`, { reason: reason || 'operator' }), 'danger');
}

function sessionsTable(ctx, sessions, names, why) {
  return table('Sessions', ['Conversation', 'State', 'Conversation state', 'Waiting since', 'Reason', 'Tokens', 'Controls'],
    sessions.map((s) => [
      conversationLink(s.conversation_id, names),
      state(s.state),
      state(s.conversation_state),
      s.conversation_state === 'waiting_user' ? time(s.waiting_since) : '—',
      why[s.conversation_id] || '—',
      `${s.tokens_used}${s.token_budget === null ? '' : ` / ${s.token_budget}`}`,
      sessionControls(ctx, s, names[s.conversation_id] || s.conversation_id),
    ]), 'No sessions yet.');
}

function agentsTable(ctx, agents, names) {
  return table('Agents', ['Agent', 'Conversation', 'Role', 'State', 'Head', 'Active turn', 'Tokens', 'Controls'],
    agents.map((a) => [shortId(a.id), conversationLink(a.conversation_id, names), a.role, state(a.state),
      state(a.head_status), shortId(a.active_turn_id), String(a.tokens_used),
      a.state === 'terminated' ? '—' : killButton(ctx, a)]), 'No agents.');
}

function turnsTable(ctx, turns, names) {
  return table('Turns', ['Turn', 'Conversation', 'Kind', 'State', 'Worker', 'Lease until', 'Epoch', 'Controls'],
    turns.map((t) => [shortId(t.id), conversationLink(t.conversation_id, names), t.kind, state(t.state),
      t.lease ? t.lease.worker : '—', t.lease ? time(t.lease.lease_expires_at) : '—', String(t.turn_epoch ?? '—'),
      RUNNING.includes(t.state) ? interruptButton(ctx, t) : '—']), 'No turns.');
}

/** The overview: sessions by state, agents by head status, running turns, processors, anomalies. */
export async function overview(ctx) {
  const [sessions, names, agents, turns, anomalies, processors] = await Promise.all([
    all('/v1/sessions'), titles(), all('/v1/agents'),
    Promise.all(RUNNING.map((s) => all(`/v1/turns?state=${s}`))).then((lists) => lists.flat()),
    get('/v1/anomalies?limit=50'),
    ctx.role === 'analyst' ? null : get('/v1/admin/processors'),
  ]);
  const why = await reasons(sessions);
  const count = (items, key) => Object.entries(items.reduce((m, i) => ({ ...m, [i[key]]: (m[i[key]] || 0) + 1 }), {}))
    .map(([k, n]) => `${k}: ${n}`).join(' · ') || 'none';
  const live = agents.filter((a) => a.state !== 'terminated');
  return h('div', {},
    h('h1', {}, 'Overview'),
    section('Sessions', h('p', { class: 'meta' }, count(sessions, 'state')), sessionsTable(ctx, sessions, names, why)),
    h('div', { class: 'grid' },
      section('Agents', h('p', { class: 'meta' }, `By head status — ${count(live, 'head_status')}`), agentsTable(ctx, live, names)),
      section('Running turns', turnsTable(ctx, turns, names))),
    h('div', { class: 'grid' },
      section('Processors', processors === null
        ? h('p', { class: 'empty' }, 'Admin only.')
        : table('Processors', ['Processor', 'Position', 'Lag (events)', 'Owner'],
          processors.processors.map((p) => [p.name, p.position, String(p.lag_events), p.lease_owner || '—']), 'None.')),
      section('Anomalies', table('Anomalies', ['When', 'Conversation', 'Fact', 'State', 'Reason'],
        anomalies.items.map((a) => [time(a.created_at), conversationLink(a.conversation_id, names), a.fact, a.state, a.reason]),
        'No anomalies.'))));
}

/** The approvals queue: calls awaiting approval, approved or denied here. */
export async function approvals(ctx) {
  const [calls, names] = await Promise.all([all('/v1/tool-calls?state=awaiting_approval'), titles()]);
  const card = (c) => {
    const path = `/v1/turns/${c.turn_id}/tool-calls/${encodeURIComponent(c.call_id)}`;
    const key = `${c.turn_id}:${c.call_id}`;
    return h('article', { class: 'card', 'aria-label': `Tool call ${c.tool_name}` },
      h('h3', {}, c.tool_name),
      h('p', { class: 'meta' }, 'In ', conversationLink(c.conversation_id, names), ' · turn ', shortId(c.turn_id),
        ' · call ', h('code', {}, c.call_id), ' · requested ', time(c.created_at)),
      h('p', {}, h('strong', {}, 'Why approval: '), c.policy_reason || '—'),
      h('p', { class: 'meta', 'aria-label': 'Policy' }, 'Policy ', h('code', {}, c.policy || '—'),
        ' · reported by ', h('strong', {}, c.reported_by || '—'),
        ' · approvers ', (c.approvers || []).join(', ') || '—'),
      h('pre', { 'aria-label': 'Arguments' }, JSON.stringify(c.arguments, null, 2)),
      h('div', { class: 'controls' },
        control(ctx, 'Approve', `approve:${key}`,
          { title: `Approve ${c.tool_name}?`, text: 'The call runs with these arguments; you are recorded as its approver.' },
          () => post(`${path}/approve`, {}), 'primary'),
        control(ctx, 'Deny', `deny:${key}`,
          { title: `Deny ${c.tool_name}?`, text: 'The call does not run; the model reads the reason.', field: { label: 'Reason', value: 'denied', required: true } },
          (reason) => post(`${path}/deny`, { reason: reason || 'denied' }), 'danger')));
  };
  return h('div', {},
    h('h1', {}, 'Approvals'),
    section('Awaiting approval', calls.length ? calls.map(card) : h('p', { class: 'empty' }, 'Nothing waits for approval.')));
}

/** A conversation: its session and controls, agents, turns, tool calls and timeline. */
export async function conversation(ctx, id) {
  const [conv, session, agents, turns, calls, events] = await Promise.all([
    getIfAny(`/v1/conversations/${id}`),
    getIfAny(`/v1/sessions/${id}`),
    all(`/v1/agents?conversation_id=${id}`),
    all(`/v1/turns?conversation_id=${id}`),
    all(`/v1/tool-calls?conversation_id=${id}`),
    lastEvents(id),
  ]);
  const title = conv ? titleOf(conv) : id;
  const names = { [id]: title };
  return h('div', {},
    h('h1', {}, title),
    section('Session', session
      ? h('div', {}, h('p', {}, 'State ', state(session.state), ' · conversation ', state(session.conversation_state),
        ' · updated ', time(session.updated_at)), sessionControls(ctx, session, title))
      : h('p', { class: 'empty' }, 'No session yet.')),
    h('div', { class: 'grid' },
      section('Agents', agentsTable(ctx, agents, names)),
      section('Turns', turnsTable(ctx, turns, names))),
    section('Tool calls', table('Tool calls', ['Call', 'Tool', 'State', 'Policy', 'Reported by', 'Approver', 'Result', 'Requested'],
      calls.map((c) => [h('code', {}, c.call_id), c.tool_name, state(c.state), c.policy || '—', c.reported_by || '—', c.approver || '—',
        c.result ? `${c.result.status}${c.result.error ? `: ${c.result.error}` : ''}` : '—', time(c.created_at)]),
      'No tool calls.')),
    section('Timeline', events.length
      ? h('ol', { class: 'timeline', reversed: true }, events.map((e) => h('li', {},
        time(e.time), ' ', h('strong', {}, e.type), ' ', h('span', { class: 'meta' }, `#${e.position}`), ' ',
        h('span', { class: 'principal', title: 'who caused it' }, `by ${e.principal || '—'}`), ' ',
        h('code', {}, summary(e.data)))))
      : h('p', { class: 'empty' }, 'No events yet.')));
}

/** The conversation's newest 200 facts and runes, newest first. */
async function lastEvents(id) {
  const items = [];
  let cursor = '0';
  for (let i = 0; i < 50; i += 1) {
    const page = await get(`/v1/events?conversation_id=${id}&limit=500&cursor=${cursor}`);
    items.push(...page.items);
    if (page.items.length < 500 || !page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return items.slice(-200).reverse();
}

function summary(data) {
  const text = JSON.stringify(data ?? {});
  return text.length > 160 ? `${text.slice(0, 157)}…` : text;
}

// DOM helpers: elements are built, never parsed from strings, so data from the service
// cannot inject markup.

/** An element: h('a', {href: '#'}, 'text', child, …); attributes `on*` are listeners. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (name === 'class') {
      el.className = value;
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A time shown relative ("3 min ago") and exact (UTC), machine-readable in `datetime`. */
export function time(iso) {
  if (!iso) return h('span', { class: 'empty' }, '—');
  const at = new Date(iso);
  const exact = at.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  return h('time', { datetime: iso, title: exact }, relative(at), h('span', { class: 'exact' }, `(${exact})`));
}

/** "12 s ago", "3 min ago", "in 2 h". */
export function relative(at, now = Date.now()) {
  const seconds = Math.round((now - at.getTime()) / 1000);
  const abs = Math.abs(seconds);
  const [n, unit] = abs < 60 ? [abs, 's'] : abs < 3600 ? [Math.round(abs / 60), 'min']
    : abs < 86400 ? [Math.round(abs / 3600), 'h'] : [Math.round(abs / 86400), 'd'];
  return seconds >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
}

/** A state as a labelled badge (its text is the state: screen readers read it). */
export function state(value) {
  return h('span', { class: `state ${value || 'none'}` }, value || '—');
}

/** A short id with the full one in its title. */
export function shortId(id) {
  return id ? h('code', { title: id }, id.slice(0, 8)) : h('span', { class: 'empty' }, '—');
}

/** A table with a caption-less header; `rows` are arrays of cells. */
export function table(label, headers, rows, empty) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'scroll' },
    h('table', { 'aria-label': label },
      h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c) => h('td', {}, c)))))));
}

/** A section with a heading, labelled by it (a landmark screen readers list). */
export function section(title, ...children) {
  const id = `s-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

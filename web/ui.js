// DOM helpers. Every piece of text goes into the page as a text node (or an attribute value set
// with setAttribute), never as HTML: whatever a user wrote is shown as the characters they typed.

/** Create an element: `h('a', {href: '#/'}, 'Feed')`. `on<event>` props add listeners. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'value') el.value = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  add(el, children);
  return el;
}

/** Append children: nodes as they are, anything else as text; null/false are skipped. */
export function add(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** Replace the children of `el`. */
export function put(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

/** A date as the reader's locale shows it, in a <time> element. */
export function when(iso) {
  const d = new Date(iso);
  const text = Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
  return h('time', { datetime: iso }, text);
}

/** `n thing(s)`. */
export function count(n, one, many = one + 's') {
  return `${n} ${n === 1 ? one : many}`;
}

/** A link to a route of the client; ids are URL-encoded into the fragment. */
export function link(route, ...parts) {
  return '#/' + [route, ...parts.map(encodeURIComponent)].filter(Boolean).join('/');
}

/**
 * A labelled form field. `multiline` makes a textarea. Returns {field, input}.
 */
export function field(id, label, { multiline = false, ...attrs } = {}) {
  const input = h(multiline ? 'textarea' : 'input', { id, name: id, ...attrs });
  return { field: h('div', { class: 'field' }, h('label', { for: id }, label), input), input };
}

/** How long a message stays on the page's status line. */
const SAY_MS = 8000;
let sayTimer = 0;

/**
 * Tell the reader what just happened, on the page's one status line (screen readers announce
 * it): the newest message replaces the one before, and it clears itself after a few seconds.
 * It stays across screens, so a message about what a click did survives the navigation it
 * caused.
 */
export function say(message) {
  const line = document.getElementById('status');
  if (!line) return;
  clearTimeout(sayTimer);
  put(line, message);
  sayTimer = setTimeout(() => put(line, ''), SAY_MS);
}

/** A status line that screen readers announce when it changes. */
export function status(cls = 'status') {
  return h('p', { class: cls, role: 'status', 'aria-live': 'polite' });
}

/** Show an error (an ApiError's problem detail, or any message) in `el`. */
export function showError(el, err) {
  el.hidden = false;
  put(el, err && err.message ? err.message : String(err));
}

/**
 * A form whose submit runs `action` with its button disabled meanwhile; errors go to an alert
 * line under the form. `action` returns nothing or a promise.
 */
export function form(label, fields, submitText, action) {
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const button = h('button', { type: 'submit' }, submitText);
  const el = h('form', { 'aria-label': label }, fields, h('div', { class: 'actions' }, button), error);
  el.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    error.hidden = true;
    button.disabled = true;
    try {
      await action();
    } catch (e) {
      showError(error, e);
    } finally {
      button.disabled = false;
    }
  });
  return el;
}

/**
 * A list that pages with continuation tokens: `fetchPage(token)` answers {items, continuationToken};
 * `render(item)` makes one <li>. A "Load more" button appears while there is a next page.
 */
export function pagedList(label, fetchPage, render, emptyText) {
  const list = h('ol', { class: 'items', 'aria-label': label });
  const more = h('button', { type: 'button', class: 'more', hidden: true }, 'Load more');
  const note = status('muted');
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  let token = null;
  let loaded = 0;
  /** Load the next page; answers its items (null when it failed: the error is shown). */
  async function load() {
    more.disabled = true;
    error.hidden = true;
    try {
      const page = await fetchPage(token);
      for (const item of page.items) list.append(render(item));
      loaded += page.items.length;
      token = page.continuationToken;
      more.hidden = !token;
      put(note, loaded === 0 ? emptyText : '');
      return page.items;
    } catch (e) {
      showError(error, e);
      return null;
    } finally {
      more.disabled = false;
    }
  }
  /** Add an item at the end, when the end is loaded (else it is on a later page). */
  function append(item) {
    if (token) return false;
    list.append(render(item));
    loaded += 1;
    put(note, '');
    return true;
  }
  more.addEventListener('click', load);
  const el = h('div', { class: 'paged' }, list, note, error, more);
  return { el, list, load, append };
}

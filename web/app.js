// The client's entry point: find out who is signed in, then route on the URL fragment
// (#/, #/post/<id>, #/user/<id>, #/following, #/saved, #/search/<words>, #/write, #/me,
// #/tag/<tag>, #/tags), so the page works at any path it is served from.

import { api } from './api.js';
import { init, session } from './auth.js';
import { follow } from './live.js';
import { h, put } from './ui.js';
import { feed, following, saved, search } from './feed.js';
import { me } from './me.js';
import { post } from './post.js';
import { tag, tags } from './tags.js';
import { user } from './user.js';
import { write } from './write.js';

const main = document.getElementById('main');
const notice = document.getElementById('notice');
const whoami = document.getElementById('whoami');
const badge = document.getElementById('badge');
let generation = 0;
let watched = null;

// The badge: new followers since you last opened your account page, from your `user:` stream
// (or from your follower count every 15 s without one).
function showBadge(n) {
  badge.hidden = !n;
  put(badge, String(n));
  badge.setAttribute('aria-label', `${n} new follower${n === 1 ? '' : 's'}`);
}
function watch() {
  const id = session.user?.id;
  if (watched?.id === id) return;
  if (watched) watched.on = false;
  watched = id && { id, on: true, n: 0 };
  showBadge(0);
  if (!id) return;
  const w = watched;
  const bump = (by) => showBadge((w.n += by));
  let last = null;
  follow({ alive: () => w.on }, [`user:${id}`], (kind) => kind === 'follower' && bump(1), async () => {
    try {
      const n = (await api('GET', `users/${encodeURIComponent(id)}`)).data.followerCount || 0;
      if (last !== null && n > last) bump(n - last);
      last = n;
    } catch {}
  });
}

function updateHeader() {
  let label = 'Sign in';
  if (session.user) label = session.user.username;
  else if (session.mode === 'none') label = 'Choose user';
  else if (session.signedIn) label = 'Choose your name';
  put(whoami, label);
  whoami.setAttribute('aria-label', session.user ? `Signed in as ${session.user.username}: your account` : label);
  watch();
}

function showNotice(e) {
  notice.hidden = false;
  put(notice, e.message || String(e));
}

function parse(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  switch (parts[0]) {
    case '':
      return [feed];
    case 'post':
      return parts[1] ? [post, parts[1]] : null;
    case 'user':
      return parts[1] ? [user, parts[1]] : null;
    case 'following':
      return [following];
    case 'saved':
      return [saved];
    case 'search':
      return [search, parts.slice(1).join('/')];
    case 'write':
      return [write];
    case 'me':
      return [me];
    case 'tag':
      return parts[1] ? [tag, parts[1]] : null;
    case 'tags':
      return [tags];
    default:
      return null;
  }
}

async function route({ focus = true } = {}) {
  const mine = ++generation;
  const found = parse(location.hash);
  const ctx = {
    alive: () => mine === generation,
    render: (...nodes) => {
      if (mine !== generation) return;
      put(main, ...nodes);
      const h1 = main.querySelector('h1');
      if (focus && h1) h1.focus();
      document.title = h1 ? `${h1.textContent} · blog` : 'blog';
    },
    refresh: () => route({ focus: false }),
    go: (hash) => {
      location.hash = hash;
    },
    updateHeader,
  };
  if (!found) {
    ctx.render(h('h1', { tabindex: -1 }, 'Not found'), h('p', {}, h('a', { href: '#/' }, 'Back to the feed')));
    return;
  }
  const [view, ...params] = found;
  if (view === me && watched) showBadge((watched.n = 0));
  try {
    await view(ctx, ...params);
  } catch (e) {
    ctx.render(h('h1', { tabindex: -1 }, 'Something went wrong'), h('p', { class: 'error', role: 'alert' }, e.message || String(e)));
  }
}

document.querySelector('.skip').addEventListener('click', (ev) => {
  ev.preventDefault();
  main.focus();
});
window.addEventListener('hashchange', () => route());

await init();
updateHeader();
if (session.problem) showNotice(session.problem);
route({ focus: false });

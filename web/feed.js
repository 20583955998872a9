// The screens of lists of posts: the feed of everyone's newest (Q6), the timeline of the
// people one follows, the posts one saved, and search. Each screen is `async (ctx, ...params)` and draws into ctx.render(...);
// ctx.alive() turns false once the reader has moved on (polling stops then).

import { api, listPath, seg } from './api.js';
import { arriving, forgetArrived, GIVE_UP_MS, setArriving, watchFeed } from './arriving.js';
import { reader, session } from './auth.js';
import { follow } from './live.js';
import { heading, needUser, postCard } from './parts.js';
import { field, form, h, link, pagedList, put } from './ui.js';

// --- the feed (Q6) --------------------------------------------------------------------------

export async function feed(ctx) {
  const list = pagedList('Newest posts', async (t) => (await api('GET', listPath('feed', t))).data, postCard, 'No posts yet.');
  const box = h('div', { class: 'arriving', 'aria-live': 'polite' });
  ctx.render(
    heading('Feed'),
    h('p', { class: 'muted' }, 'The newest posts, copied here by the change feed. ', h('a', { href: '#/write' }, 'Write one')),
    box,
    list.el,
  );
  const first = await list.load();
  if (!first) return;
  const inFeed = new Set(first.map((p) => p.id));
  forgetArrived(inFeed);
  const pending = arriving().filter((p) => Date.now() - p.at < GIVE_UP_MS);
  setArriving(pending);
  if (!pending.length) return;
  put(
    box,
    pending.map((p) =>
      h('p', { class: 'card pending' }, h('a', { href: link('post', p.id) }, p.title), ' — arriving… (the change feed is copying it here)'),
    ),
  );
  watchFeed(
    ctx,
    pending,
    () => ctx.refresh(),
    () => put(box, h('p', { class: 'card pending' }, 'Not in the feed yet: it appears once the change feed has copied it. Reload later.')),
  );
}

export async function following(ctx) {
  if (!session.user) return ctx.render(heading('Following'), needUser('read the posts of the people you follow'));
  const list = pagedList(
    'Posts by people you follow',
    async (t) => (await api('GET', listPath(`users/${seg(session.user.id)}/timeline`, t, 20, reader()))).data,
    postCard,
    'Nothing here yet: follow people from their page, and their newest posts come here.',
  );
  const news = h('div', { class: 'arriving', id: 'timeline-news', 'aria-live': 'polite' });
  ctx.render(
    heading('Following'),
    h('p', { class: 'muted' }, 'The newest posts of the people you follow, copied here by the change feed.'),
    news,
    list.el,
  );
  const first = await list.load();
  if (!first) return;
  // "N new posts" without reloading: the stream names the posts that came; Show reads them.
  const shown = new Set(first.map((p) => p.id));
  const fresh = new Set();
  let changed = false;
  const tell = () => {
    if (!fresh.size && !changed) return;
    const n = fresh.size;
    const b = h('button', { type: 'button', id: 'show-new', class: 'secondary' }, n ? `${n} new post${n > 1 ? 's' : ''} — show` : 'The list has changed — show');
    b.addEventListener('click', () => ctx.refresh());
    put(news, h('p', { class: 'card pending' }, b));
  };
  const mine = `users/${seg(session.user.id)}/timeline`;
  follow(
    ctx,
    [`timeline:${session.user.id}`],
    (kind, { postId }) => {
      if (kind === 'post') shown.has(postId) || fresh.add(postId);
      else changed ||= kind !== 'removed' || shown.has(postId);
      tell();
    },
    async () => {
      const { data } = await api('GET', listPath(mine, null)).catch(() => ({ data: { items: [] } }));
      for (const p of data.items) shown.has(p.id) || fresh.add(p.id);
      tell();
    },
  );
}

/** `#/saved`: the posts the caller bookmarked, newest bookmark first (read with the caller's token: the list is its owner's alone). */
export async function saved(ctx) {
  if (!session.user) return ctx.render(heading('Saved'), needUser('save posts to read later'));
  const list = pagedList(
    'Posts you saved',
    async (t) => (await api('GET', listPath(`users/${seg(session.user.id)}/bookmarks`, t))).data,
    postCard,
    'Nothing saved yet: press Save on a post, and it comes here.',
  );
  ctx.render(heading('Saved'), h('p', { class: 'muted' }, 'The posts you saved, newest first.'), list.el);
  await list.load();
}

// --- search ---------------------------------------------------------------------------------

/** `#/search/<words>`: a search box, and the posts holding every word, newest first. */
export async function search(ctx, q = '') {
  const box = field('search-q', 'Words to find', { type: 'search', maxlength: 200, required: true, value: q });
  const searchForm = form('Search posts', [box.field], 'Search', () => {
    const words = box.input.value.trim();
    if (words === q) ctx.refresh();
    else ctx.go(`#/search/${seg(words)}`);
  });
  const intro = h(
    'p',
    { class: 'muted' },
    'Posts whose title, content or tags hold every word, newest first. Case, accents and word endings do not matter.',
  );
  if (!q.trim()) return ctx.render(heading('Search'), intro, searchForm);
  const list = pagedList(
    `Posts with the words ${q}`,
    async (t) => (await api('GET', listPath('search', t, 20, { q }))).data,
    postCard,
    'No post holds all of these words.',
  );
  ctx.render(heading('Search'), intro, searchForm, list.el);
  await list.load();
}

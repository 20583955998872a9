// An author's page (Q1, Q3) with Follow / Unfollow, drawn as the screens in feed.js are.

import { api, ApiError, listPath, seg } from './api.js';
import { session } from './auth.js';
import { heading, notFound, postCard } from './parts.js';
import { count, h, pagedList, put, status } from './ui.js';

// --- an author's page (Q1, Q3) --------------------------------------------------------------

export async function user(ctx, id) {
  let u;
  try {
    u = (await api('GET', `users/${seg(id)}`)).data;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return notFound(ctx, 'user');
    throw e;
  }
  const list = pagedList(
    `Posts by ${u.username}`,
    async (t) => (await api('GET', listPath(`users/${seg(id)}/posts`, t))).data,
    postCard,
    'No posts yet (a new post shows here once the change feed has copied it).',
  );
  const mine = session.user && session.user.id === u.id;
  const counts = h('p', { class: 'muted', id: 'follow-counts' }, `${count(u.followerCount || 0, 'follower')} · following ${u.followingCount || 0}`);
  ctx.render(
    heading(u.username),
    counts,
    session.user && !mine ? followButton(u) : null,
    h('p', { class: 'muted' }, 'Posts by this author, newest first. ', mine ? h('a', { href: '#/me' }, 'Rename yourself') : null),
    list.el,
  );
  await list.load();
}

// --- follows and the timeline ---------------------------------------------------------------

/** Follow / Unfollow `u` as the signed-in user; whether they follow is read from their list. */
function followButton(u) {
  const path = `users/${seg(session.user.id)}/following/${seg(u.id)}`;
  const b = h('button', { type: 'button', id: 'follow', 'aria-pressed': 'false', disabled: true }, 'Follow');
  const note = status();
  let following = false;
  const show = () => {
    b.setAttribute('aria-pressed', String(following));
    put(b, following ? 'Unfollow' : 'Follow');
  };
  (async () => {
    try {
      const { data } = await api('GET', listPath(`users/${seg(session.user.id)}/following`, null, 100));
      following = data.items.some((f) => f.id === u.id);
      show();
      b.disabled = false;
    } catch (e) {
      put(note, e.message);
    }
  })();
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await api(following ? 'DELETE' : 'PUT', path);
      following = !following;
      show();
      put(note, following ? `Following ${u.username}: their posts come to your timeline.` : `No longer following ${u.username}.`);
    } catch (e) {
      put(note, e.message);
    } finally {
      b.disabled = false;
    }
  });
  return h('div', {}, b, note);
}

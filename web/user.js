// An author's page (Q1, Q3) with Follow / Unfollow and Mute / Unmute, drawn as the screens in
// feed.js are.

import { api, ApiError, listPath, seg } from './api.js';
import { session } from './auth.js';
import { heading, notFound, postCard } from './parts.js';
import { count, h, pagedList, put, say } from './ui.js';

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
  let followers = u.followerCount || 0;
  const counts = h('p', { class: 'muted', id: 'follow-counts' });
  const showCounts = () => put(counts, `${count(followers, 'follower')} · following ${u.followingCount || 0}`);
  showCounts();
  // The stored count follows a moment later (the change feed recounts it); the page moves it at
  // once with the button.
  const moved = (by) => {
    followers = Math.max(0, followers + by);
    showCounts();
  };
  ctx.render(
    heading(u.username),
    counts,
    session.user && !mine ? h('div', { class: 'actions' }, followButton(u, moved), muteButton(u)) : null,
    h('p', { class: 'muted' }, 'Posts by this author, newest first. ', mine ? h('a', { href: '#/me' }, 'Rename yourself') : null),
    list.el,
  );
  await list.load();
}

// --- follows and the timeline ---------------------------------------------------------------

/**
 * Follow / Unfollow `u` as the signed-in user; whether they follow is one read of their follow
 * (its id is derived from `u`), however many users they follow. `moved(±1)` after each change.
 */
function followButton(u, moved) {
  const path = `users/${seg(session.user.id)}/following/${seg(u.id)}`;
  const b = h('button', { type: 'button', id: 'follow', 'aria-pressed': 'false', disabled: true }, 'Follow');
  let following = false;
  const show = () => {
    b.setAttribute('aria-pressed', String(following));
    put(b, following ? 'Unfollow' : 'Follow');
  };
  (async () => {
    try {
      await api('GET', path);
      following = true;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) {
        say(e.message);
        return;
      }
    }
    show();
    b.disabled = false;
  })();
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await api(following ? 'DELETE' : 'PUT', path);
      following = !following;
      show();
      moved(following ? 1 : -1);
      say(following ? `Following ${u.username}: their posts come to your timeline.` : `No longer following ${u.username}.`);
    } catch (e) {
      say(e.message);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

/**
 * Mute / Unmute `u` as the signed-in user: their posts and comments leave what you read (your
 * timeline, every post's comments). Whether you muted them is read from your own list (at most
 * 100 users, one page).
 */
function muteButton(u) {
  const path = `users/${seg(session.user.id)}/mutes`;
  const b = h('button', { type: 'button', id: 'mute', class: 'secondary', 'aria-pressed': 'false', disabled: true }, 'Mute');
  let muted = false;
  const show = () => {
    b.setAttribute('aria-pressed', String(muted));
    put(b, muted ? 'Unmute' : 'Mute');
  };
  (async () => {
    try {
      muted = (await api('GET', path)).data.items.some((m) => m.id === u.id);
      show();
      b.disabled = false;
    } catch (e) {
      say(e.message);
    }
  })();
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await api(muted ? 'DELETE' : 'PUT', `${path}/${seg(u.id)}`);
      muted = !muted;
      show();
      say(muted ? `Muted ${u.username}: their posts and comments are hidden from you.` : `${u.username} unmuted.`);
    } catch (e) {
      say(e.message);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// Posts on their way to the feed, kept in the tab's session storage.

import { api, listPath } from './api.js';

// A new post is read back from its own partition at once, but the feed (and the author's list)
// show copies that the change feed makes a moment later. Posts written here wait in this list
// until the feed has them; the feed shows them as "arriving", never as if they were there.

const ARRIVING_KEY = 'blog.arriving';
const POLL_MS = 500;
export const GIVE_UP_MS = 60000;

export function arriving() {
  try {
    const list = JSON.parse(sessionStorage.getItem(ARRIVING_KEY)) || [];
    return Array.isArray(list) ? list.filter((p) => p && typeof p.id === 'string') : [];
  } catch {
    return [];
  }
}

export function setArriving(list) {
  sessionStorage.setItem(ARRIVING_KEY, JSON.stringify(list));
}

export function markArriving(post) {
  setArriving([{ id: post.id, title: post.title, at: Date.now() }, ...arriving().filter((p) => p.id !== post.id)]);
}

export function forgetArrived(ids) {
  setArriving(arriving().filter((p) => !ids.has(p.id)));
}

async function feedIds() {
  const { data } = await api('GET', listPath('feed', null, 20));
  return new Set(data.items.map((p) => p.id));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll the feed until one of `pending` is in it (→ onArrived) or it is time to give up. */
export async function watchFeed(ctx, pending, onArrived, onLate) {
  while (ctx.alive()) {
    await sleep(POLL_MS);
    if (!ctx.alive()) return;
    let ids;
    try {
      ids = await feedIds();
    } catch {
      continue;
    }
    const came = new Set(pending.filter((p) => ids.has(p.id)).map((p) => p.id));
    if (came.size) {
      forgetArrived(came);
      onArrived(came);
      return;
    }
    if (pending.every((p) => Date.now() - p.at > GIVE_UP_MS)) {
      onLate();
      return;
    }
  }
}

// The screens. Each is `async (ctx, ...params)` and draws into ctx.render(...); ctx.alive()
// turns false once the reader has moved on (polling stops then).

import { api, ApiError, listPath, seg } from './api.js';
import { chooseUser, createUser, eraseAccount, knownUsers, rename, session, signIn, signOut, writer } from './auth.js';
import { count, field, form, h, link, pagedList, put, status, when } from './ui.js';

// --- posts on their way to the feed -------------------------------------------------------
// A new post is read back from its own partition at once, but the feed (and the author's list)
// show copies that the change feed makes a moment later. Posts written here wait in this list
// until the feed has them; the feed shows them as "arriving", never as if they were there.

const ARRIVING_KEY = 'blog.arriving';
const POLL_MS = 500;
const GIVE_UP_MS = 60000;

function arriving() {
  try {
    const list = JSON.parse(sessionStorage.getItem(ARRIVING_KEY)) || [];
    return Array.isArray(list) ? list.filter((p) => p && typeof p.id === 'string') : [];
  } catch {
    return [];
  }
}

function setArriving(list) {
  sessionStorage.setItem(ARRIVING_KEY, JSON.stringify(list));
}

function markArriving(post) {
  setArriving([{ id: post.id, title: post.title, at: Date.now() }, ...arriving().filter((p) => p.id !== post.id)]);
}

function forgetArrived(ids) {
  setArriving(arriving().filter((p) => !ids.has(p.id)));
}

async function feedIds() {
  const { data } = await api('GET', listPath('feed', null, 20));
  return new Set(data.items.map((p) => p.id));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll the feed until one of `pending` is in it (→ onArrived) or it is time to give up. */
async function watchFeed(ctx, pending, onArrived, onLate) {
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

// --- shared pieces --------------------------------------------------------------------------

function heading(text) {
  return h('h1', { tabindex: -1 }, text);
}

function authorLink(item) {
  return h('a', { class: 'author', href: link('user', item.userId) }, item.userUsername);
}

function postCard(p) {
  return h(
    'li',
    { class: 'card post-summary', 'data-id': p.id },
    h('h2', {}, h('a', { href: link('post', p.id) }, p.title)),
    h('p', { class: 'meta' }, 'by ', authorLink(p), ' · ', when(p.creationDate)),
    h('p', { class: 'summary' }, p.content),
    h('p', { class: 'meta' }, count(p.likeCount, 'like'), ' · ', count(p.commentCount, 'comment')),
  );
}

function needUser(what) {
  const words = session.mode === 'none' ? 'Choose or create a user' : 'Sign in';
  return h('p', { class: 'muted' }, h('a', { href: '#/me' }, words), ` to ${what}.`);
}

function notFound(ctx, what) {
  ctx.render(heading(`No such ${what}`), h('p', {}, h('a', { href: '#/' }, 'Back to the feed')));
}

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

// --- a post (Q2, Q4, Q5; C2 edit, C3, C4) ---------------------------------------------------

export async function post(ctx, id) {
  let current;
  try {
    current = await api('GET', `posts/${seg(id)}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return notFound(ctx, 'post');
    throw e;
  }
  let p = current.data;
  let etag = current.etag;

  const title = heading('');
  const byline = h('p', { class: 'meta' });
  const body = h('div', { class: 'content', id: 'post-content-view' });
  const likeCount = h('span', { id: 'like-count' });
  const commentCount = h('span', { id: 'comment-count' });
  const feedState = status('muted');
  feedState.id = 'feed-state';
  function show() {
    put(title, p.title);
    put(byline, 'by ', authorLink(p), ' · ', when(p.creationDate));
    put(body, p.content);
    put(likeCount, count(p.likeCount, 'like'));
    put(commentCount, count(p.commentCount, 'comment'));
  }
  async function reload() {
    const r = await api('GET', `posts/${seg(id)}`);
    p = r.data;
    etag = r.etag;
    show();
  }
  show();

  // Likes: who liked, and a like button (a second like is answered with the first one); pressed,
  // it takes the like back.
  const likedBy = h('p', { class: 'liked-by' });
  const likeNote = status();
  const likeButton = h('button', { type: 'button', id: 'like', 'aria-pressed': 'false' }, 'Like');
  let liked = false;
  async function loadLikes() {
    const { data } = await api('GET', listPath(`posts/${seg(id)}/likes`, null, 100));
    liked = Boolean(session.user && data.items.some((l) => l.userId === session.user.id));
    likeButton.setAttribute('aria-pressed', String(liked));
    put(likeButton, liked ? 'Liked' : 'Like');
    put(likedBy, data.items.length ? ['Liked by ', data.items.map((l) => l.userUsername).join(', '), data.continuationToken ? ' and others' : ''] : 'No likes yet.');
  }
  likeButton.addEventListener('click', async () => {
    likeButton.disabled = true;
    try {
      if (liked) {
        await api('DELETE', `posts/${seg(id)}/likes/${seg(session.user.id)}`);
        put(likeNote, 'Like taken back.');
      } else {
        const r = await api('POST', `posts/${seg(id)}/likes`, { body: writer() });
        put(likeNote, r.status === 201 ? 'Liked.' : 'You had already liked this post: the count stays the same.');
      }
      await Promise.all([reload(), loadLikes()]);
    } catch (e) {
      put(likeNote, e.message);
    } finally {
      likeButton.disabled = false;
    }
  });

  // Comments, oldest first, and a form to add one. Their author and the post's may delete one.
  const mayDelete = (c) => session.user && (session.user.id === c.userId || session.user.id === p.userId);
  function deleteButton(c, li) {
    const b = h('button', { type: 'button', class: 'secondary delete', 'aria-label': `Delete the comment of ${when(c.creationDate)}` }, 'Delete');
    b.addEventListener('click', async () => {
      if (!confirm('Delete this comment?')) return;
      b.disabled = true;
      try {
        await api('DELETE', `posts/${seg(id)}/comments/${seg(c.id)}`);
        put(li, h('p', { class: 'muted' }, 'Comment deleted.'));
        await reload();
      } catch (e) {
        put(likeNote, e.message);
        b.disabled = false;
      }
    });
    return b;
  }
  const comments = pagedList(
    'Comments',
    async (t) => (await api('GET', listPath(`posts/${seg(id)}/comments`, t))).data,
    (c) => {
      const li = h('li', { class: 'comment' }, h('p', { class: 'meta' }, authorLink(c), ' · ', when(c.creationDate)), h('p', { class: 'text' }, c.content));
      if (mayDelete(c)) li.append(deleteButton(c, li));
      return li;
    },
    'No comments yet.',
  );
  let commentForm = needUser('comment');
  if (session.user) {
    const { field: f, input } = field('comment-content', 'Your comment', { multiline: true, required: true, maxlength: 2000, rows: 3 });
    const added = status();
    commentForm = h(
      'div',
      {},
      form('Add a comment', f, 'Comment', async () => {
        const { data } = await api('POST', `posts/${seg(id)}/comments`, { body: { content: input.value, ...writer() } });
        input.value = '';
        put(added, comments.append(data) ? 'Comment added.' : 'Comment added at the end of the list.');
        await reload();
      }),
      added,
    );
  }

  // Editing and deleting, for the author: If-Match with the ETag the post was read with.
  const editArea = h('div');
  let editButton = null;
  let deletePost = null;
  if (session.user && session.user.id === p.userId) {
    deletePost = h('button', { type: 'button', id: 'delete-post', class: 'secondary' }, 'Delete');
    deletePost.addEventListener('click', async () => {
      if (!confirm('Delete this post with its comments and likes?')) return;
      deletePost.disabled = true;
      try {
        await api('DELETE', `posts/${seg(id)}`);
        location.hash = '#/';
      } catch (e) {
        put(likeNote, e.message);
        deletePost.disabled = false;
      }
    });
    editButton = h('button', { type: 'button', id: 'edit' }, 'Edit');
    editButton.addEventListener('click', () => {
      editButton.hidden = true;
      const t = field('edit-title', 'Title', { required: true, maxlength: 200, value: p.title });
      const c = field('edit-content', 'Content', { multiline: true, required: true, maxlength: 20000, rows: 8 });
      c.input.value = p.content;
      const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
      const close = () => {
        put(editArea);
        editButton.hidden = false;
        editButton.focus();
      };
      cancel.addEventListener('click', close);
      const f = form('Edit the post', [t.field, c.field], 'Save', async () => {
        try {
          await api('PUT', `posts/${seg(id)}`, { body: { title: t.input.value, content: c.input.value, ...writer() }, ifMatch: etag });
        } catch (e) {
          if (e instanceof ApiError && e.status === 412) {
            await reload();
            throw new Error('The post changed since you opened it; the page now shows that version. Your text is still here: save again to replace it.');
          }
          throw e;
        }
        await reload();
        close();
      });
      f.querySelector('.actions').append(cancel);
      put(editArea, f);
      t.input.focus();
    });
  }

  ctx.render(
    h(
      'article',
      { class: 'post' },
      title,
      byline,
      feedState,
      body,
      h('p', { class: 'meta counts' }, likeCount, ' · ', commentCount),
      h('div', { class: 'actions' }, session.user ? likeButton : null, editButton, deletePost),
      session.user ? null : needUser('like'),
      likeNote,
      editArea,
    ),
    h('section', { 'aria-labelledby': 'likes-h' }, h('h2', { id: 'likes-h' }, 'Likes'), likedBy),
    h('section', { 'aria-labelledby': 'comments-h' }, h('h2', { id: 'comments-h' }, 'Comments'), comments.el, commentForm),
  );
  await Promise.all([loadLikes(), comments.load()]);

  const pending = arriving().filter((a) => a.id === id);
  if (pending.length) {
    put(feedState, 'Saved. Arriving in the feed… (the change feed copies it there)');
    watchFeed(
      ctx,
      pending,
      () => put(feedState, 'Now in the feed.'),
      () => put(feedState, 'Not in the feed yet: the change feed copies it there shortly.'),
    );
  }
}

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

export async function following(ctx) {
  if (!session.user) return ctx.render(heading('Following'), needUser('read the posts of the people you follow'));
  const list = pagedList(
    'Posts by people you follow',
    async (t) => (await api('GET', listPath(`users/${seg(session.user.id)}/timeline`, t))).data,
    postCard,
    'Nothing here yet: follow people from their page, and their newest posts come here.',
  );
  ctx.render(
    heading('Following'),
    h('p', { class: 'muted' }, 'The newest posts of the people you follow, copied here by the change feed.'),
    list.el,
  );
  await list.load();
}

// --- writing a post (C2) --------------------------------------------------------------------

export async function write(ctx) {
  if (!session.user) return ctx.render(heading('Write a post'), needUser('write'));
  const t = field('post-title', 'Title', { required: true, maxlength: 200 });
  const c = field('post-content', 'Content', { multiline: true, required: true, maxlength: 20000, rows: 10 });
  ctx.render(
    heading('Write a post'),
    form('Write a post', [t.field, c.field], 'Publish', async () => {
      const { data } = await api('POST', 'posts', { body: { title: t.input.value, content: c.input.value, ...writer() } });
      markArriving(data);
      ctx.go(link('post', data.id));
    }),
  );
}

// --- who am I: choose, create, sign in, rename (C1) -----------------------------------------

export async function me(ctx) {
  const parts = [heading(session.user ? session.user.username : session.mode === 'none' ? 'Choose a user' : 'Sign in')];
  const done = async () => {
    ctx.updateHeader();
    await ctx.refresh();
  };

  if (session.user) {
    const r = field('rename-username', 'New name', { required: true, maxlength: 64, value: session.user.username });
    const note = status();
    parts.push(
      h('p', {}, 'You are ', h('a', { href: link('user', session.user.id) }, session.user.username), ' ', h('code', {}, session.user.id)),
      form('Rename yourself', r.field, 'Rename', async () => {
        const u = await rename(r.input.value);
        ctx.updateHeader();
        put(note, `Renamed to ${u.username}. Your posts, comments and likes show the new name once the change feed has carried it to them.`);
      }),
      note,
    );
    const out = h('button', { type: 'button', class: 'secondary', id: 'sign-out' }, session.mode === 'none' ? 'Switch user' : 'Sign out');
    out.addEventListener('click', async () => {
      await signOut();
      await done();
    });
    // Erasing (DELETE /api/users/{id}): the name and texts go at once, the rest as the change
    // feed carries the deletion to the copies.
    const erase = h('button', { type: 'button', class: 'secondary', id: 'erase-account' }, 'Erase my account');
    const eraseNote = h('p', { class: 'error', role: 'alert', hidden: true });
    erase.addEventListener('click', async () => {
      if (!confirm('Erase your account? Your name, posts, comments and likes are removed, and this cannot be undone.')) return;
      erase.disabled = true;
      try {
        await eraseAccount();
        ctx.updateHeader();
        location.hash = '#/';
      } catch (e) {
        eraseNote.hidden = false;
        put(eraseNote, e.message);
        erase.disabled = false;
      }
    });
    parts.push(h('div', { class: 'actions' }, out, erase), eraseNote);
  } else if (session.mode !== 'none' && !session.signedIn) {
    const b = h('button', { type: 'button', id: 'sign-in' }, 'Sign in');
    const err = h('p', { class: 'error', role: 'alert', hidden: true });
    b.addEventListener('click', () =>
      signIn().catch((e) => {
        err.hidden = false;
        put(err, e.message);
      }),
    );
    parts.push(h('p', {}, 'Reading needs no account; writing does.'), b, err);
  }

  if (!session.user && (session.mode === 'none' || session.signedIn)) {
    const n = field('new-username', 'Name', { required: true, maxlength: 64 });
    parts.push(
      h('h2', {}, session.mode === 'none' ? 'Create a user' : 'Choose your name'),
      form('Create a user', n.field, 'Create', async () => {
        await createUser(n.input.value);
        await done();
      }),
    );
  }

  if (session.mode === 'none') {
    const others = knownUsers().filter((u) => !session.user || u.id !== session.user.id);
    if (others.length) {
      parts.push(
        h('h2', {}, 'Users from this browser'),
        h(
          'ul',
          { class: 'plain' },
          others.map((u) => {
            const b = h('button', { type: 'button', class: 'secondary' }, `Use ${u.username}`);
            b.addEventListener('click', async () => {
              try {
                await chooseUser(u.id);
                await done();
              } catch (e) {
                alertIn(b, e);
              }
            });
            return h('li', {}, b, ' ', h('code', {}, u.id));
          }),
        ),
      );
    }
    const x = field('existing-id', 'User id', { required: true, maxlength: 128 });
    parts.push(
      h('h2', {}, 'Use an existing user'),
      form('Use an existing user', x.field, 'Use', async () => {
        await chooseUser(x.input.value);
        await done();
      }),
      h('p', { class: 'muted' }, 'This server runs without sign-in (BLOG_AUTH=none): for local development only.'),
    );
  }
  ctx.render(...parts);
}

function alertIn(el, e) {
  el.after(h('span', { class: 'error', role: 'alert' }, ` ${e.message}`));
}

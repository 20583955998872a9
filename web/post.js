// The screen of a post (Q2, Q4, Q5; C2 edit, C3, C4, a bookmark), drawn as the screens in feed.js are.

import { api, ApiError, listPath, seg } from './api.js';
import { arriving, watchFeed } from './arriving.js';
import { follow } from './live.js';
import { reader, session, writer } from './auth.js';
import { authorLink, heading, needUser, notFound, tagLinks, tagsOf } from './parts.js';
import { count, field, form, h, pagedList, put, say, status, when } from './ui.js';

/** How many of the users who liked a post its page names ("Liked by a, b, c and 98 others"). */
const NAMED_LIKES = 3;

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
  const saveCount = h('span', { id: 'save-count' });
  const tagsLine = h('div', { id: 'post-tags' });
  const feedState = status('muted');
  feedState.id = 'feed-state';
  function show() {
    put(title, p.title);
    put(byline, 'by ', authorLink(p), ' · ', when(p.creationDate));
    put(body, p.content);
    showCounts();
    put(tagsLine, tagLinks(p));
  }
  function showCounts() {
    put(likeCount, count(p.likeCount, 'like'));
    put(commentCount, count(p.commentCount, 'comment'));
    put(saveCount, count(p.bookmarkCount ?? 0, 'save'));
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
  const likeButton = h('button', { type: 'button', id: 'like', 'aria-pressed': 'false' }, 'Like');
  let liked = false;
  // Whether the caller likes the post is one read of their own like (its id is derived from
  // theirs), however many others liked it; the list only names who liked.
  async function likedByMe() {
    if (!session.user) return false;
    try {
      await api('GET', `posts/${seg(id)}/likes/${seg(session.user.id)}`);
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return false;
      throw e;
    }
  }
  async function loadLikes() {
    const [{ data }, mine] = await Promise.all([api('GET', listPath(`posts/${seg(id)}/likes`, null, NAMED_LIKES)), likedByMe()]);
    liked = mine;
    likeButton.setAttribute('aria-pressed', String(liked));
    put(likeButton, liked ? 'Liked' : 'Like');
    put(likedBy, likedByText(data.items.map((l) => l.userUsername), p.likeCount));
  }
  likeButton.addEventListener('click', async () => {
    likeButton.disabled = true;
    try {
      if (liked) {
        await api('DELETE', `posts/${seg(id)}/likes/${seg(session.user.id)}`);
        say('Like taken back.');
      } else {
        const r = await api('POST', `posts/${seg(id)}/likes`, { body: writer() });
        say(r.status === 201 ? 'Liked.' : 'You had already liked this post: the count stays the same.');
      }
      // The count first: the names line says how many others there are besides those named.
      await reload();
      await loadLikes();
    } catch (e) {
      say(e.message);
    } finally {
      likeButton.disabled = false;
    }
  });

  // Bookmarks: Save puts the post in the caller's Saved list; pressed, it takes it back. Whether
  // it is saved is read from the newest 100 of their bookmarks (one query).
  const saveButton = h('button', { type: 'button', id: 'save', class: 'secondary', 'aria-pressed': 'false' }, 'Save');
  let saved = false;
  function showSaved() {
    saveButton.setAttribute('aria-pressed', String(saved));
    put(saveButton, saved ? 'Saved' : 'Save');
  }
  async function loadSaved() {
    if (!session.user) return;
    const { data } = await api('GET', listPath(`users/${seg(session.user.id)}/bookmarks`, null, 100));
    saved = data.items.some((b) => b.id === id);
    showSaved();
  }
  saveButton.addEventListener('click', async () => {
    saveButton.disabled = true;
    try {
      await api(saved ? 'DELETE' : 'PUT', `users/${seg(session.user.id)}/bookmarks/${seg(id)}`);
      saved = !saved;
      showSaved();
      say(saved ? 'Saved: the post is in your Saved list in a moment.' : 'Taken out of your Saved list.');
    } catch (e) {
      say(e.message);
    } finally {
      saveButton.disabled = false;
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
        say(e.message);
        b.disabled = false;
      }
    });
    return b;
  }
  const comments = pagedList(
    'Comments',
    async (t) => (await api('GET', listPath(`posts/${seg(id)}/comments`, t, 20, reader()))).data,
    (c) => {
      const li = h('li', { class: 'comment', 'data-comment': c.id }, h('p', { class: 'meta' }, authorLink(c), ' · ', when(c.creationDate)), h('p', { class: 'text' }, c.content));
      if (mayDelete(c)) li.append(deleteButton(c, li));
      return li;
    },
    'No comments yet.',
  );
  let commentForm = needUser('comment');
  if (session.user) {
    const { field: f, input } = field('comment-content', 'Your comment', { multiline: true, required: true, maxlength: 2000, rows: 3 });
    commentForm = form('Add a comment', f, 'Comment', async () => {
      const { data } = await api('POST', `posts/${seg(id)}/comments`, { body: { content: input.value, ...writer() } });
      input.value = '';
      say(comments.append(data) ? 'Comment added.' : 'Comment added at the end of the list.');
      await reload();
    });
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
        say(`Post deleted with its comments and likes: “${p.title}”.`);
        location.hash = '#/';
      } catch (e) {
        say(e.message);
        deletePost.disabled = false;
      }
    });
    editButton = h('button', { type: 'button', id: 'edit' }, 'Edit');
    editButton.addEventListener('click', () => {
      editButton.hidden = true;
      const t = field('edit-title', 'Title', { required: true, maxlength: 200, value: p.title });
      const c = field('edit-content', 'Content', { multiline: true, required: true, maxlength: 20000, rows: 8 });
      c.input.value = p.content;
      const g = field('edit-tags', 'Tags (separated by spaces or commas)', { value: (p.tags || []).join(' ') });
      const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
      const close = () => {
        put(editArea);
        editButton.hidden = false;
        editButton.focus();
      };
      cancel.addEventListener('click', close);
      const f = form('Edit the post', [t.field, c.field, g.field], 'Save', async () => {
        try {
          const body = { title: t.input.value, content: c.input.value, tags: tagsOf(g.input.value), ...writer() };
          await api('PUT', `posts/${seg(id)}`, { body, ifMatch: etag });
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
      tagsLine,
      h('p', { class: 'meta counts' }, likeCount, ' · ', commentCount, ' · ', saveCount),
      h('div', { class: 'actions' }, session.user ? likeButton : null, session.user ? saveButton : null, editButton, deletePost),
      session.user ? null : needUser('like'),
      editArea,
    ),
    h('section', { 'aria-labelledby': 'likes-h' }, h('h2', { id: 'likes-h' }, 'Likes'), likedBy),
    h('section', { 'aria-labelledby': 'comments-h' }, h('h2', { id: 'comments-h' }, 'Comments'), comments.el, commentForm),
  );
  await Promise.all([loadLikes(), loadSaved(), comments.load()]);
  // New comments and counts while the page is open, read through the API (an edit under way
  // keeps the version it was opened with).
  const update = async () => {
    const [{ data: now }, { data: list }] = await Promise.all([api('GET', `posts/${seg(id)}`), api('GET', listPath(`posts/${seg(id)}/comments`, null, 100))]);
    for (const k of ['likeCount', 'commentCount', 'bookmarkCount']) p[k] = now[k];
    showCounts();
    for (const c of list.items) if (!comments.list.querySelector(`[data-comment="${CSS.escape(c.id)}"]`)) comments.append(c);
  };
  const quietly = () => update().catch(() => {});
  follow(ctx, [`post:${id}`], (kind) => (kind === 'deleted' ? put(feedState, 'This post has been deleted.') : /comment|changed|reset/.test(kind) && quietly()), quietly);

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

/**
 * "Liked by a, b, c and 98 others": the first few names the list gave (oldest likes first) and
 * how many more the post's count says there are.
 */
function likedByText(names, total) {
  if (!names.length) return 'No likes yet.';
  const others = Math.max(0, total - names.length);
  if (others === 0) {
    const last = names[names.length - 1];
    return names.length === 1 ? `Liked by ${last}` : `Liked by ${names.slice(0, -1).join(', ')} and ${last}`;
  }
  return `Liked by ${names.join(', ')} and ${count(others, 'other')}`;
}

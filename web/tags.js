// The screens of tags: a tag's posts (`#/tag/<tag>`) and the most used tags (`#/tags`), drawn
// as the screens in feed.js are.

import { api, listPath, seg } from './api.js';
import { heading, postCard } from './parts.js';
import { h, link, pagedList } from './ui.js';

/** `#/tag/<tag>`: the posts carrying the tag, newest first. */
export async function tag(ctx, name) {
  const t = name.toLowerCase();
  const list = pagedList(
    `Posts tagged ${t}`,
    async (token) => (await api('GET', listPath(`tags/${seg(t)}/posts`, token))).data,
    postCard,
    'No post carries this tag (a post just tagged shows here once the change feed has copied it).',
  );
  ctx.render(
    heading(`#${t}`),
    h('p', { class: 'muted' }, 'The posts carrying this tag, newest first. ', h('a', { href: link('tags') }, 'All tags')),
    list.el,
  );
  await list.load();
}

/** `#/tags`: the tags in use, the most used first, with their numbers of posts. */
export async function tags(ctx) {
  const list = pagedList(
    'Tags',
    async (token) => (await api('GET', listPath('tags', token, 50))).data,
    (t) => h('li', { class: 'card tag-count' }, h('a', { class: 'tag', href: link('tag', t.tag) }, `#${t.tag}`), ` · ${t.postCount} ${t.postCount === 1 ? 'post' : 'posts'}`),
    'No tags yet: give a post tags when you write or edit it.',
  );
  ctx.render(heading('Tags'), h('p', { class: 'muted' }, 'The most used tags first.'), list.el);
  await list.load();
}

// Pieces every screen draws with.

import { session } from './auth.js';
import { count, h, link, when } from './ui.js';

export function heading(text) {
  return h('h1', { tabindex: -1 }, text);
}

export function authorLink(item) {
  return h('a', { class: 'author', href: link('user', item.userId) }, item.userUsername);
}

export function postCard(p) {
  return h(
    'li',
    { class: 'card post-summary', 'data-id': p.id },
    h('h2', {}, h('a', { href: link('post', p.id) }, p.title)),
    h('p', { class: 'meta' }, 'by ', authorLink(p), ' · ', when(p.creationDate)),
    h('p', { class: 'summary' }, p.content),
    h('p', { class: 'meta' }, count(p.likeCount, 'like'), ' · ', count(p.commentCount, 'comment')),
    tagLinks(p),
  );
}

/** A post's tags, each a link to its page (nothing when it has none). */
export function tagLinks(p) {
  const tags = p.tags || [];
  if (!tags.length) return null;
  return h('p', { class: 'tags' }, ...tags.map((t) => h('a', { class: 'tag', href: link('tag', t) }, `#${t}`)));
}

/** The words of a tags field (`rust, cosmos-db` or `rust cosmos-db`) as the API takes them. */
export function tagsOf(text) {
  return text
    .split(/[\s,]+/)
    .map((t) => t.replace(/^#/, ''))
    .filter(Boolean);
}

export function needUser(what) {
  const words = session.mode === 'none' ? 'Choose or create a user' : 'Sign in';
  return h('p', { class: 'muted' }, h('a', { href: '#/me' }, words), ` to ${what}.`);
}

export function notFound(ctx, what) {
  ctx.render(heading(`No such ${what}`), h('p', {}, h('a', { href: '#/' }, 'Back to the feed')));
}

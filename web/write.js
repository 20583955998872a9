// Writing a post (C2), drawn as the screens in feed.js are.

import { api } from './api.js';
import { markArriving } from './arriving.js';
import { session, writer } from './auth.js';
import { heading, needUser, tagsOf } from './parts.js';
import { field, form, link } from './ui.js';

// --- writing a post (C2) --------------------------------------------------------------------

export async function write(ctx) {
  if (!session.user) return ctx.render(heading('Write a post'), needUser('write'));
  const t = field('post-title', 'Title', { required: true, maxlength: 200 });
  const c = field('post-content', 'Content', { multiline: true, required: true, maxlength: 20000, rows: 10 });
  const g = field('post-tags', 'Tags (up to 10, separated by spaces or commas: letters, digits, - and _)', {});
  ctx.render(
    heading('Write a post'),
    form('Write a post', [t.field, c.field, g.field], 'Publish', async () => {
      const body = { title: t.input.value, content: c.input.value, tags: tagsOf(g.input.value), ...writer() };
      const { data } = await api('POST', 'posts', { body });
      markArriving(data);
      ctx.go(link('post', data.id));
    }),
  );
}

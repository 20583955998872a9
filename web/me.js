// Who am I: choose, create, sign in (or sign up, with local accounts), rename (C1), erase; drawn
// as the screens in feed.js are.

import { chooseUser, createUser, eraseAccount, knownUsers, rename, session, signIn, signInLocal, signOut, signUp } from './auth.js';
import { heading } from './parts.js';
import { field, form, h, link, put, say } from './ui.js';

// --- who am I: choose, create, sign in, rename (C1) -----------------------------------------

export async function me(ctx) {
  const parts = [heading(session.user ? session.user.username : session.mode === 'none' ? 'Choose a user' : 'Sign in')];
  const done = async () => {
    ctx.updateHeader();
    await ctx.refresh();
  };

  if (session.user) {
    const r = field('rename-username', 'New name', { required: true, maxlength: 64, value: session.user.username });
    parts.push(
      h('p', {}, 'You are ', h('a', { href: link('user', session.user.id) }, session.user.username), ' ', h('code', {}, session.user.id)),
      form('Rename yourself', r.field, 'Rename', async () => {
        const u = await rename(r.input.value);
        ctx.updateHeader();
        say(`Renamed to ${u.username}. Your posts, comments and likes show the new name once the change feed has carried it to them.`);
      }),
    );
    const out = h('button', { type: 'button', class: 'secondary', id: 'sign-out' }, session.mode === 'none' ? 'Switch user' : 'Sign out');
    out.addEventListener('click', async () => {
      await signOut();
      await done();
    });
    // Erasing (DELETE /api/users/{id}): the name and texts go at once, the rest as the change
    // feed carries the deletion to the copies.
    const erase = h('button', { type: 'button', class: 'danger', id: 'erase-account' }, 'Erase my account');
    const eraseNote = h('p', { class: 'error', role: 'alert', hidden: true });
    erase.addEventListener('click', async () => {
      if (!confirm('Erase your account? Your name, posts, comments and likes are removed, and this cannot be undone.')) return;
      erase.disabled = true;
      const { username } = session.user;
      try {
        await eraseAccount();
        ctx.updateHeader();
        say(`Account ${username} erased: your name, posts, comments and likes are gone. Copies elsewhere (the feed, timelines) disappear as the change feed removes them, within seconds.`);
        location.hash = '#/';
      } catch (e) {
        eraseNote.hidden = false;
        put(eraseNote, e.message);
        erase.disabled = false;
      }
    });
    parts.push(
      h('div', { class: 'actions' }, out),
      h(
        'section',
        { class: 'danger-zone', 'aria-labelledby': 'erase-h' },
        h('h2', { id: 'erase-h' }, 'Erase your account'),
        h('p', {}, 'Removes your name, your posts with their comments and likes, and your comments and likes on other posts. This cannot be undone.'),
        erase,
        eraseNote,
      ),
    );
  } else if (session.mode === 'local' && !session.signedIn) {
    parts.push(h('p', {}, 'Reading needs no account; writing does.'), ...localForms(done));
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

/** local: sign in with email and password, or create an account (username, email, password). */
function localForms(done) {
  const email = field('signin-email', 'Email', { type: 'email', required: true, autocomplete: 'email', maxlength: 254 });
  const password = field('signin-password', 'Password', { type: 'password', required: true, autocomplete: 'current-password' });
  const name = field('signup-username', 'Name', { required: true, maxlength: 64, autocomplete: 'username' });
  const newEmail = field('signup-email', 'Email', { type: 'email', required: true, autocomplete: 'email', maxlength: 254 });
  const newPassword = field('signup-password', 'Password (at least 8 characters)', {
    type: 'password',
    required: true,
    minlength: 8,
    maxlength: 256,
    autocomplete: 'new-password',
  });
  return [
    h('h2', {}, 'Sign in'),
    form('Sign in', [email.field, password.field], 'Sign in', async () => {
      await signInLocal(email.input.value, password.input.value);
      say(`Signed in as ${session.user ? session.user.username : email.input.value}.`);
      await done();
    }),
    h('h2', {}, 'Create an account'),
    form('Create an account', [name.field, newEmail.field, newPassword.field], 'Create account', async () => {
      await signUp(name.input.value, newEmail.input.value, newPassword.input.value);
      say(`Account ${session.user ? session.user.username : name.input.value} created; you are signed in.`);
      await done();
    }),
  ];
}

function alertIn(el, e) {
  el.after(h('span', { class: 'error', role: 'alert' }, ` ${e.message}`));
}

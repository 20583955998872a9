// Who is using the client. The handler says how it identifies callers at GET /api/config
// (404: an older handler, taken as "none"):
// - none: the user is chosen or created here and remembered in localStorage; writes name it
//   with `userId`.
// - jwt: sign in with the configured OpenID Connect issuer (authorization code + PKCE, no client
//   secret); the access token lives in sessionStorage and goes out as `Authorization: Bearer`.
// - easyauth: App Service authentication signs in (/.auth/login/aad) and keeps its own cookie.
// - local: accounts of this service. Sign up (username, email, password) and sign in (email,
//   password) through the Conduit API (/api/conduit/api/users, …/users/login); the token it
//   answers lives in sessionStorage and goes out as `Authorization: Bearer`.
// In jwt, easyauth and local the user is GET /api/me; 404 there means "signed in, no user yet".

import { api, ApiError, seg, useToken } from './api.js';

const USER_KEY = 'blog.userId';
const KNOWN_KEY = 'blog.knownUsers';
const TOKEN_KEY = 'blog.token';
const LOGIN_KEY = 'blog.login';

export const session = {
  mode: 'none',
  config: {},
  /** The signed-in user {id, username}, or null. */
  user: null,
  /** jwt/easyauth/local: signed in (with the identity provider the user may not exist yet). */
  signedIn: false,
  /** A problem met while finding out who is signed in, to show once. */
  problem: null,
};

function readJson(storage, key, fallback) {
  try {
    const v = JSON.parse(storage.getItem(key));
    return v ?? fallback;
  } catch {
    return fallback;
  }
}

/** Users created or chosen in this browser (none mode), newest first. */
export function knownUsers() {
  const list = readJson(localStorage, KNOWN_KEY, []);
  return Array.isArray(list) ? list.filter((u) => u && typeof u.id === 'string') : [];
}

function remember(user) {
  const list = knownUsers().filter((u) => u.id !== user.id);
  list.unshift({ id: user.id, username: user.username });
  localStorage.setItem(KNOWN_KEY, JSON.stringify(list.slice(0, 20)));
}

/** The `userId` a write body carries: required in none mode, the caller's own otherwise. */
export function writer() {
  return session.user ? { userId: session.user.id } : {};
}

/** The `viewerId` a timeline or comments read carries: whose muted users it leaves out. */
export function reader() {
  return session.user ? { viewerId: session.user.id } : {};
}

export async function init() {
  try {
    const { data } = await api('GET', 'config');
    session.config = data || {};
  } catch (e) {
    session.config = { auth: 'none' };
    if (!(e instanceof ApiError && e.status === 404)) session.problem = e;
  }
  const mode = session.config.auth;
  session.mode = mode === 'jwt' || mode === 'easyauth' || mode === 'local' ? mode : 'none';
  try {
    if (session.mode === 'none') await loadChosenUser();
    else {
      if (session.mode === 'jwt') await finishSignIn();
      await loadMe();
    }
  } catch (e) {
    session.problem = e;
  }
}

async function loadChosenUser() {
  const id = localStorage.getItem(USER_KEY);
  if (!id) return;
  try {
    session.user = (await api('GET', `users/${seg(id)}`)).data;
    remember(session.user);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) localStorage.removeItem(USER_KEY);
    else throw e;
  }
}

/** The modes whose token this client keeps (sessionStorage) and sends as `Bearer`. */
function keepsToken() {
  return session.mode === 'jwt' || session.mode === 'local';
}

async function loadMe() {
  if (keepsToken()) {
    const t = readJson(sessionStorage, TOKEN_KEY, null);
    if (!t || !t.accessToken || t.expiresAt < Date.now()) {
      sessionStorage.removeItem(TOKEN_KEY);
      return;
    }
    useToken(t.accessToken);
  }
  try {
    session.user = (await api('GET', 'me')).data;
    session.signedIn = true;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (e.status === 404) session.signedIn = true;
    else if (e.status === 401) {
      session.signedIn = false;
      sessionStorage.removeItem(TOKEN_KEY);
      useToken(null);
    } else throw e;
  }
}

/** none mode: act as an existing user from now on. */
export async function chooseUser(id) {
  const user = (await api('GET', `users/${seg(id.trim())}`)).data;
  localStorage.setItem(USER_KEY, user.id);
  remember(user);
  session.user = user;
}

/** Create the user (none: a new user to act as; jwt/easyauth: the caller's own user). */
export async function createUser(username) {
  const user = (await api('POST', 'users', { body: { username } })).data;
  if (session.mode === 'none') {
    localStorage.setItem(USER_KEY, user.id);
    remember(user);
  }
  session.user = user;
  return user;
}

export async function rename(username) {
  if (session.mode === 'local') {
    // Names are unique among local accounts: the Conduit API renames and keeps that rule.
    await api('PUT', 'conduit/api/user', { body: { user: { username } } });
    session.user = (await api('GET', 'me')).data;
    return session.user;
  }
  const user = (await api('PUT', `users/${seg(session.user.id)}`, { body: { username } })).data;
  session.user = user;
  if (session.mode === 'none') remember(user);
  return user;
}

/** Erase the signed-in user's account (its name, posts, comments and likes), then forget the user. */
export async function eraseAccount() {
  const { id } = session.user;
  await api('DELETE', `users/${seg(id)}`);
  session.user = null;
  if (session.mode === 'none') {
    localStorage.removeItem(USER_KEY);
    localStorage.setItem(KNOWN_KEY, JSON.stringify(knownUsers().filter((u) => u.id !== id)));
  }
}

export async function signIn() {
  if (session.mode === 'easyauth') {
    const back = location.pathname + location.hash;
    location.assign(`/.auth/login/aad?post_login_redirect_uri=${encodeURIComponent(back)}`);
    return;
  }
  if (session.mode !== 'jwt') return;
  const meta = await discover();
  const verifier = randomString(32);
  const state = randomString(16);
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  sessionStorage.setItem(LOGIN_KEY, JSON.stringify({ verifier, state, back: location.hash }));
  const scopes = Array.isArray(session.config.scopes) ? session.config.scopes.join(' ') : session.config.scopes || 'openid';
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: session.config.clientId || '',
    redirect_uri: redirectUri(),
    scope: scopes,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  location.assign(`${meta.authorization_endpoint}?${q}`);
}

export async function signOut() {
  session.user = null;
  if (session.mode === 'none') {
    localStorage.removeItem(USER_KEY);
    return;
  }
  session.signedIn = false;
  if (session.mode === 'easyauth') {
    location.assign(`/.auth/logout?post_logout_redirect_uri=${encodeURIComponent(location.pathname)}`);
    return;
  }
  sessionStorage.removeItem(TOKEN_KEY);
  useToken(null);
}

/** local: create an account (the Conduit API also creates its user) and sign in with it. */
export async function signUp(username, email, password) {
  const { data } = await api('POST', 'conduit/api/users', { body: { user: { username, email, password } } });
  await keepLocalToken(data);
}

/** local: sign in with an account's email and password. */
export async function signInLocal(email, password) {
  let answer;
  try {
    answer = await api('POST', 'conduit/api/users/login', { body: { user: { email, password } } });
  } catch (e) {
    // One answer for an unknown email and a wrong password, as the server gives.
    if (e instanceof ApiError && e.status === 401) throw new Error('That email and password do not match an account.');
    throw e;
  }
  await keepLocalToken(answer.data);
}

/** Keep the token a sign-up or sign-in answered, until it expires or the tab closes. */
async function keepLocalToken(data) {
  const token = data && data.user && data.user.token;
  if (!token) throw new Error('The server answered no token.');
  sessionStorage.setItem(TOKEN_KEY, JSON.stringify({ accessToken: token, expiresAt: expiryOf(token) }));
  await loadMe();
  if (!session.signedIn) throw new Error('The server refused the token it gave. Try again.');
}

/** When a JWT ends (its `exp`, less 30 s), in milliseconds; an hour from now when unreadable. */
function expiryOf(token) {
  try {
    const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const exp = Number(JSON.parse(atob(payload)).exp);
    if (exp > 0) return (exp - 30) * 1000;
  } catch {
    // Not a readable JWT: fall through.
  }
  return Date.now() + 3600 * 1000;
}

/** The page itself, without query or fragment: where the issuer sends the browser back. */
function redirectUri() {
  return location.origin + location.pathname;
}

async function discover() {
  const issuer = String(session.config.issuer || '').replace(/\/+$/, '');
  if (!issuer) throw new Error('The handler names no OpenID Connect issuer.');
  let r;
  try {
    r = await fetch(`${issuer}/.well-known/openid-configuration`, { credentials: 'omit' });
  } catch {
    throw new Error('The sign-in service could not be reached.');
  }
  if (!r.ok) throw new Error(`The sign-in service answered ${r.status}.`);
  return r.json();
}

/** Back from the issuer with ?code=…&state=…: trade the code for a token. */
async function finishSignIn() {
  const q = new URLSearchParams(location.search);
  if (!q.has('code') && !q.has('error')) return;
  const login = readJson(sessionStorage, LOGIN_KEY, null);
  sessionStorage.removeItem(LOGIN_KEY);
  history.replaceState(null, '', redirectUri() + (login && login.back ? login.back : ''));
  if (q.has('error')) throw new Error(`Sign-in failed: ${q.get('error_description') || q.get('error')}`);
  if (!login || q.get('state') !== login.state) throw new Error('Sign-in failed: the answer does not match the request. Try again.');
  const meta = await discover();
  const r = await fetch(meta.token_endpoint, {
    method: 'POST',
    credentials: 'omit',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: q.get('code'),
      redirect_uri: redirectUri(),
      client_id: session.config.clientId || '',
      code_verifier: login.verifier,
    }),
  });
  const t = await r.json().catch(() => ({}));
  if (!r.ok || !t.access_token) throw new Error(`Sign-in failed: ${t.error_description || t.error || r.status}`);
  const lifetime = Number(t.expires_in) > 0 ? Number(t.expires_in) : 3600;
  sessionStorage.setItem(TOKEN_KEY, JSON.stringify({ accessToken: t.access_token, expiresAt: Date.now() + (lifetime - 30) * 1000 }));
}

function randomString(bytes) {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

function base64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// The blog's HTTP API on the page's own origin (`/api/...` in both the standalone and the
// Functions shape). Errors become ApiError with the problem+json detail as the message.

let bearer = null;

/** Send `Authorization: Bearer <token>` with every request from now on (null: stop). */
export function useToken(token) {
  bearer = token;
}

/** A Conduit error body's `{"errors": {"email": ["has already been taken"]}}` as one line. */
function conduitErrors(body) {
  const errors = body && body.errors;
  if (!errors || typeof errors !== 'object') return null;
  return Object.entries(errors)
    .map(([field, messages]) => `${field} ${[messages].flat().join(', ')}`)
    .join('; ');
}

export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem && (problem.detail || problem.title || conduitErrors(problem));
    super(detail ? `${detail} (${status})` : status ? `The server answered ${status}.` : 'The server could not be reached.');
    this.status = status;
    this.problem = problem;
  }
}

/**
 * `api('GET', 'posts/p1')` → {status, data, etag}. `body` is sent as JSON; `ifMatch` as `If-Match`.
 * Anything but 2xx throws ApiError.
 */
export async function api(method, path, { body, ifMatch } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (ifMatch) headers['If-Match'] = ifMatch;
  let r;
  try {
    r = await fetch(`/api/${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, null);
  }
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!r.ok) throw new ApiError(r.status, data);
  return { status: r.status, data, etag: r.headers.get('ETag') };
}

/** A path segment (an id), URL-encoded. */
export const seg = encodeURIComponent;

/** A list request's path with `params`, `limit` and, when there is one, the continuation token. */
export function listPath(path, token, limit = 20, params = {}) {
  const q = new URLSearchParams({ ...params, limit: String(limit) });
  if (token) q.set('continuationToken', token);
  return `${path}?${q}`;
}

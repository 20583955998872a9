// Live updates (docs/live.md): one stream of hints per screen, the data read through the API.
// Without a stream (a cap reached) the screen polls every 15 s.

const KINDS = 'post removed follows comment commentRemoved like unliked changed deleted follower unfollowed reset';

/** Follow `topics` while `ctx` is shown: `onEvent(kind, data)` per hint, else `poll()`. */
export function follow(ctx, topics, onEvent, poll) {
  let source = null;
  let polling = null;
  const stop = () => {
    if (source) source.close();
    clearInterval(polling);
    clearInterval(watching);
  };
  const fallBack = () => {
    if (source) source.close();
    source = null;
    polling ??= setInterval(() => ctx.alive() && poll(), 15000);
  };
  const watching = setInterval(() => ctx.alive() || stop(), 1000);
  if (!window.EventSource) return fallBack();
  source = new EventSource(`/api/events?topics=${topics.map(encodeURIComponent).join(',')}`);
  for (const kind of KINDS.split(' ')) {
    source.addEventListener(kind, (ev) => {
      if (!ctx.alive()) return stop();
      let data = {};
      try {
        data = JSON.parse(ev.data || '{}');
      } catch {}
      onEvent(kind, data);
    });
  }
  // A refused stream (404, 429, 503) is closed for good; a broken one the browser resumes.
  source.addEventListener('error', () => source?.readyState === EventSource.CLOSED && fallBack());
}

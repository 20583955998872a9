// Live updates (docs/live.md): one stream of hints per screen, the data read through the API.
// Without a stream (the Functions host) the hints come over Web PubSub's WebSocket, from
// /api/events/negotiate; without either (a cap reached, no push service) the screen polls every 15 s.

const KINDS = 'post removed follows comment commentRemoved like unliked changed deleted follower unfollowed reset';

/** Follow `topics` while `ctx` is shown: `onEvent(kind, data)` per hint, else `poll()`. */
export function follow(ctx, topics, onEvent, poll) {
  let source = null;
  let socket = null;
  let polling = null;
  const q = topics.map(encodeURIComponent).join(',');
  const stop = () => {
    if (source) source.close();
    if (socket) socket.close();
    socket = null;
    clearInterval(polling);
    clearInterval(watching);
  };
  const fallBack = () => {
    if (source) source.close();
    source = null;
    polling ??= setInterval(() => ctx.alive() && poll(), 15000);
  };
  const watching = setInterval(() => ctx.alive() || stop(), 1000);
  // Web PubSub (json.webpubsub.azure.v1): each message's `data` is a hint with its `kind`. At most
  // once: when an open socket closes the screen refetches (`reset`) and negotiates again.
  const push = async () => {
    try {
      const r = await fetch(`/api/events/negotiate?topics=${q}`);
      if (!r.ok || !ctx.alive()) return fallBack();
      const ws = (socket = new WebSocket((await r.json()).url, 'json.webpubsub.azure.v1'));
      ws.onmessage = (ev) => {
        if (!ctx.alive()) return stop();
        let m = {};
        try {
          m = JSON.parse(ev.data);
        } catch {}
        const data = m.type === 'message' && m.data;
        if (data?.kind) onEvent(data.kind, data);
        // Whom a timeline's reader follows changed, so its groups did: negotiate again.
        if (data?.kind === 'follows') ws.close();
      };
      let opened = false;
      ws.onopen = () => (opened = true);
      // One that never opened (refused, blocked) is not tried again: the screen polls.
      ws.onclose = () => socket === ws && ctx.alive() && (opened ? (onEvent('reset', {}), setTimeout(push, 5000)) : fallBack());
    } catch {
      fallBack();
    }
  };
  if (!window.EventSource) return push();
  source = new EventSource(`/api/events?topics=${q}`);
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
  // A refused stream is closed for good (404 under the Functions host: Web PubSub instead; 429,
  // 503: polling); a broken one the browser resumes.
  source.addEventListener('error', () => {
    if (source?.readyState !== EventSource.CLOSED) return;
    source = null;
    push();
  });
}

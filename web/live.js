// Live updates (docs/live.md): hints per screen, the data read through the API. Where the server
// has Web PubSub (/api/events/negotiate) they come over its WebSocket, else over a stream
// (/api/events); without either (a cap reached) the screen polls every 15 s.

const KINDS = 'post removed follows comment commentRemoved like unliked changed deleted follower unfollowed reset';
// Negotiate answered 404 once: this server has no push service, so screens go to the stream.
let noPush = false;

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
  const stream = () => {
    if (!window.EventSource || !ctx.alive()) return fallBack();
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
    // A refused stream (429, 503) is closed for good; one that ends or breaks the browser resumes.
    source.addEventListener('error', () => source?.readyState === EventSource.CLOSED && fallBack());
    // One that never says `ready` is held back whole (a host that buffers answers): poll instead.
    const late = setTimeout(() => ctx.alive() && fallBack(), 10000);
    source.addEventListener('ready', () => clearTimeout(late));
  };
  // Web PubSub (json.webpubsub.azure.v1): each message's `data` is a hint with its `kind`. At most
  // once: when an open socket closes the screen refetches (`reset`) and negotiates again.
  const push = async () => {
    try {
      const r = await fetch(`/api/events/negotiate?topics=${q}`);
      if (r.status === 404) noPush = true;
      if (!r.ok || !ctx.alive()) return stream();
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
      // One that never opened (refused, blocked) is not tried again: the stream instead.
      ws.onclose = () => socket === ws && ctx.alive() && (opened ? (onEvent('reset', {}), setTimeout(push, 5000)) : stream());
    } catch {
      stream();
    }
  };
  noPush ? stream() : push();
}

// WebSockets in a browser: the global `WebSocket`, which can neither ping (the core's
// silence watchdog is off: `canPing: false`) nor stop reading. The second matters for the
// overflow rule, so this adapter carries its own bounded backlog (see `BrowserSocketOptions`).
import type { PoolHost, RelaySocket, SocketEvents, SocketLoss } from "../pool.js";

/**
 * Options of the browser sockets.
 *
 * The overflow rule. When the application lags, the pool asks its sockets to stop reading
 * (`pause(true)`). Node's `ws` stops reading the TCP stream and the relay is held back by
 * TCP; a browser `WebSocket` has no such switch and keeps firing `message`. So while paused,
 * this adapter keeps the frames it receives, in order, in a backlog and hands them to the
 * core when the pool resumes (before any newer frame, and a close that arrived meanwhile
 * after them, as TCP would order them). The backlog is bounded by `maxBufferedChars` of
 * text and `maxBufferedFrames` frames. Past either bound the adapter drops the backlog,
 * closes the socket and reports it lost (`network_error`): the core then reconnects with
 * its backoff and catches up from the last event it was handed, so memory stays bounded and
 * nothing is lost silently (what the backlog held comes again by catch-up, deduplicated).
 */
export interface BrowserSocketOptions {
  /** Most UTF-16 code units of text kept while paused (default 16 Mi, about 16-32 MiB). */
  maxBufferedChars?: number;
  /** Most frames kept while paused (default 10 000). */
  maxBufferedFrames?: number;
  /** Frames handed to the core per task when a backlog drains (default 256). */
  drainBatch?: number;
}

const DEFAULT_CHARS = 16 * 1024 * 1024;
const DEFAULT_FRAMES = 10_000;
const DEFAULT_BATCH = 256;

/** A {@link PoolHost} over the browser `WebSocket`, with `fetch` for NIP-11 documents. */
export function browserHost(options: BrowserSocketOptions = {}): PoolHost {
  return {
    canPing: false,
    // A page cannot resolve names, so `publicOnly` is left to the browser's own Private
    // Network Access rules.
    connect: (url, events) => connect(url, events, options),
    fetchInfo: async (url) => {
      // NIP-11: the relay's HTTP(S) URL with this Accept. `Accept` is a CORS-safelisted
      // header, so no preflight; a relay without `Access-Control-Allow-Origin` makes the
      // fetch reject, which the pool treats as no document.
      const http = url.replace(/^ws/, "http");
      const response = await fetch(http, { headers: { Accept: "application/nostr+json" } });
      if (!response.ok) return undefined;
      return response.text();
    },
  };
}

/** A frame kept while reading is paused: text, or a binary frame's length. */
type Held = string | number;

function connect(url: string, events: SocketEvents, options: BrowserSocketOptions): RelaySocket {
  const maxChars = options.maxBufferedChars ?? DEFAULT_CHARS;
  const maxFrames = options.maxBufferedFrames ?? DEFAULT_FRAMES;
  const batch = Math.max(1, options.drainBatch ?? DEFAULT_BATCH);

  let socket: WebSocket;
  let opened = false;
  /** Nothing more is reported: closed by the pool, or `closed` already sent. */
  let done = false;
  let paused = false;
  const backlog: Held[] = [];
  let head = 0;
  let heldChars = 0;
  /** A close that arrived behind the backlog, reported once the backlog is handed over. */
  let pendingClose: { loss: SocketLoss; code: number | undefined } | undefined;
  let drainScheduled = false;
  /** Set when the backlog passed its bound: the socket is given up as lost. */
  let overflowed = false;

  const end = (loss: SocketLoss, code?: number): void => {
    if (done) return;
    done = true;
    events.closed(loss, code);
  };

  const clearBacklog = (): void => {
    backlog.length = 0;
    head = 0;
    heldChars = 0;
  };

  const deliver = (frame: Held): void => {
    if (typeof frame === "string") events.text(frame);
    else events.binary(frame);
  };

  // Hands the backlog to the core a batch per task, so a long one does not block the page;
  // stops as soon as the pool pauses again (a frame just handed over may fill a queue).
  const drain = (): void => {
    drainScheduled = false;
    let handed = 0;
    while (!done && !paused && head < backlog.length && handed < batch) {
      const frame = backlog[head] as Held;
      head += 1;
      if (typeof frame === "string") heldChars -= frame.length;
      handed += 1;
      deliver(frame);
    }
    if (head >= backlog.length) clearBacklog();
    else if (head > 1024 && head * 2 > backlog.length) {
      backlog.splice(0, head);
      head = 0;
    }
    if (done || paused) return;
    if (head < backlog.length) {
      schedule();
      return;
    }
    if (pendingClose !== undefined) end(pendingClose.loss, pendingClose.code);
  };

  const schedule = (): void => {
    if (drainScheduled) return;
    drainScheduled = true;
    setTimeout(drain, 0);
  };

  const hold = (frame: Held): void => {
    backlog.push(frame);
    if (typeof frame === "string") heldChars += frame.length;
    if (heldChars > maxChars || backlog.length - head > maxFrames) {
      // Past the bound: give the socket up rather than memory. The core treats it as a
      // connection lost mid-stream and catches up once it is back.
      overflowed = true;
      clearBacklog();
      pendingClose = undefined;
      socket.close(1000);
      // Reported from a task of its own, as every socket event is.
      setTimeout(() => {
        end("network_error");
      }, 0);
    }
  };

  try {
    socket = new WebSocket(url);
  } catch {
    // A URL the browser refuses (bad scheme, a blocked port): as if nothing answered.
    const failed: RelaySocket = {
      send: () => undefined,
      ping: () => undefined,
      close: () => {
        done = true;
      },
      pause: () => undefined,
    };
    setTimeout(() => {
      end("connection_refused");
    }, 0);
    return failed;
  }
  // A binary frame's length is all the core takes: a Blob keeps its bytes out of the JS heap.
  socket.binaryType = "blob";

  socket.addEventListener("open", () => {
    if (done) return;
    opened = true;
    events.opened();
  });
  socket.addEventListener("message", (event: MessageEvent<unknown>) => {
    if (done || overflowed || pendingClose !== undefined) return;
    const frame = heldOf(event.data);
    if (paused || head < backlog.length) {
      hold(frame);
      return;
    }
    deliver(frame);
  });
  socket.addEventListener("close", (event: CloseEvent) => {
    if (done) return;
    if (overflowed) {
      end("network_error");
      return;
    }
    // A browser hides why a handshake failed (refused, TLS, HTTP status): all the same here.
    let loss: SocketLoss;
    let code: number | undefined;
    if (!opened) loss = "connection_refused";
    else if (event.code === 1006) loss = "network_error";
    else if (event.code === 1009) loss = "frame_too_large";
    else {
      loss = "closed_by_peer";
      code = event.code === 1005 ? undefined : event.code;
    }
    if (head < backlog.length) {
      pendingClose = { loss, code };
      return;
    }
    end(loss, code);
  });

  return {
    send: (text) => {
      if (!done && socket.readyState === WebSocket.OPEN) socket.send(text);
    },
    // No WebSocket ping in a browser; the core knows (`canPing: false`) and never asks.
    ping: () => undefined,
    close: () => {
      done = true;
      clearBacklog();
      if (socket.readyState === WebSocket.CONNECTING || socket.readyState === WebSocket.OPEN) {
        socket.close(1000);
      }
    },
    pause: (value) => {
      if (paused === value) return;
      paused = value;
      if (!paused && !done && (head < backlog.length || pendingClose !== undefined)) schedule();
    },
  };
}

function heldOf(data: unknown): Held {
  if (typeof data === "string") return data;
  if (data instanceof Blob) return data.size;
  if (data instanceof ArrayBuffer) return data.byteLength;
  return 0;
}

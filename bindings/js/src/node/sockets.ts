// WebSockets in Node: the `ws` package (Node 20 has no stable global WebSocket), which can
// ping, report pongs and pause reading (TCP then holds a flooding relay back).
import WebSocket from "ws";

import type { PoolHost, RelaySocket, SocketEvents, SocketLoss } from "../pool.js";

/** Options of the Node sockets. */
export interface NodeSocketOptions {
  /** Extra CA certificates (PEM) trusted for `wss://` relays. */
  ca?: string | Buffer;
  /** Largest frame accepted, in bytes (default 4 MiB, the core's `maxFrame`). */
  maxPayload?: number;
}

/** A {@link PoolHost} over `ws`, with `fetch` for NIP-11 documents. */
export function nodeHost(options: NodeSocketOptions = {}): PoolHost {
  return {
    canPing: true,
    connect: (url, events) => connect(url, events, options),
    fetchInfo: async (url) => {
      const http = url.replace(/^ws/, "http");
      const response = await fetch(http, { headers: { Accept: "application/nostr+json" } });
      if (!response.ok) return undefined;
      return response.text();
    },
  };
}

function connect(url: string, events: SocketEvents, options: NodeSocketOptions): RelaySocket {
  const socket = new WebSocket(url, {
    maxPayload: options.maxPayload ?? 4 * 1024 * 1024,
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    handshakeTimeout: 30_000,
    perMessageDeflate: false,
  });
  let opened = false;
  let done = false;
  let failure: SocketLoss | undefined;
  const end = (loss: SocketLoss, code?: number): void => {
    if (done) return;
    done = true;
    events.closed(loss, code);
  };
  socket.on("open", () => {
    opened = true;
    events.opened();
  });
  socket.on("message", (data, isBinary) => {
    if (done) return;
    if (isBinary) {
      events.binary(
        Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : byteLength(data),
      );
      return;
    }
    events.text(textOf(data));
  });
  socket.on("pong", () => {
    if (!done) events.pong();
  });
  socket.on("unexpected-response", (_request, response) => {
    failure = "handshake_failed";
    response.resume();
    socket.terminate();
  });
  socket.on("error", (error: NodeJS.ErrnoException) => {
    failure = lossOf(error, opened) ?? failure;
  });
  socket.on("close", (code) => {
    if (!opened) {
      end(failure ?? "connection_refused");
      return;
    }
    if (failure !== undefined && failure !== "network_error") {
      end(failure);
      return;
    }
    // 1006: no close frame arrived (a reset, a dropped connection).
    if (code === 1006) end("network_error");
    else end("closed_by_peer", code === 1005 ? undefined : code);
  });
  return {
    send: (text) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(text);
    },
    ping: () => {
      if (socket.readyState === WebSocket.OPEN) socket.ping();
    },
    close: () => {
      done = true;
      if (socket.readyState === WebSocket.CONNECTING) socket.terminate();
      else socket.close(1000);
    },
    pause: (paused) => {
      if (paused) socket.pause();
      else socket.resume();
    },
  };
}

function textOf(data: Buffer | ArrayBuffer | Buffer[]): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString();
  return data instanceof ArrayBuffer ? Buffer.from(data).toString() : data.toString();
}

function byteLength(data: Buffer | ArrayBuffer): number {
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

/** How a socket error reads in the core's words. */
function lossOf(error: NodeJS.ErrnoException, opened: boolean): SocketLoss | undefined {
  const code = error.code ?? "";
  if (code === "EMFILE" || code === "ENFILE") return "out_of_files";
  if (code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") return "frame_too_large";
  if (
    /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code) ||
    /certificate/i.test(error.message)
  ) {
    return "tls_rejected";
  }
  if (!opened) {
    if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EHOSTUNREACH") {
      return "connection_refused";
    }
    if (code.startsWith("WS_ERR") || /handshake|Unexpected server response/i.test(error.message)) {
      return "handshake_failed";
    }
  }
  return "network_error";
}

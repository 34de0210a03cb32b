// WebSockets in Node: the `ws` package (Node 20 has no stable global WebSocket), which can
// ping, report pongs and pause reading (TCP then holds a flooding relay back).
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";

import WebSocket from "ws";

import type { Dial, PoolHost, RelaySocket, SocketEvents, SocketLoss } from "../pool.js";
import { isPrivateIp } from "../wasm.js";

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
    connect: (url, events, dial) => connect(url, events, options, dial),
    fetchInfo: async (url) => {
      const http = url.replace(/^ws/, "http");
      const response = await fetch(http, { headers: { Accept: "application/nostr+json" } });
      if (!response.ok) return undefined;
      return response.text();
    },
  };
}

function connect(
  url: string,
  events: SocketEvents,
  options: NodeSocketOptions,
  dial: Dial,
): RelaySocket {
  const socket = new WebSocket(url, {
    maxPayload: options.maxPayload ?? 4 * 1024 * 1024,
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    ...(dial.publicOnly ? { lookup: publicLookup } : {}),
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

/** A text frame's UTF-8 bytes, as `ws` received them (checked as UTF-8 by `ws`). */
function textOf(data: Buffer | ArrayBuffer | Buffer[]): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  return data instanceof ArrayBuffer ? new Uint8Array(data) : data;
}

/**
 * The resolver of a relay that may be dialed at public addresses only: the check is on the
 * addresses then dialed (not a second lookup a rebinding name could answer differently), and
 * a name with any private address is refused as a whole, as that address in the URL would be.
 */
const publicLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error !== null) {
      callback(error, "", 0);
      return;
    }
    const inside = addresses.find((a) => isPrivateIp(a.address));
    if (inside !== undefined) {
      const refused: NodeJS.ErrnoException = new Error(
        `${hostname} resolves to ${inside.address}, a private address: a relay from a relay ` +
          "list is not dialed inside the network",
      );
      refused.code = "EACCES";
      callback(refused, "", 0);
      return;
    }
    const first = addresses[0];
    if (options.all === true) callback(null, addresses);
    else if (first === undefined)
      callback(Object.assign(new Error("no address"), { code: "ENOTFOUND" }), "", 0);
    else callback(null, first.address, first.family);
  });
};

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
    // EACCES: a public-only relay's name resolved into the network (publicLookup).
    if (["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "EACCES"].includes(code)) {
      return "connection_refused";
    }
    if (code.startsWith("WS_ERR") || /handshake|Unexpected server response/i.test(error.message)) {
      return "handshake_failed";
    }
  }
  return "network_error";
}

// The SSE driver shared by the browser and Node: one `text/event-stream` over `fetch` with a
// streamed body, so a POST and any header can be sent (the browser's EventSource can do
// neither). It owns the requests, one timer and the buffer, and feeds the wasm core every
// host fact with the host's `nowMs`. It decides nothing about the protocol: when to
// reconnect, what to resend (method, headers, body, Last-Event-ID), whether a redirect is
// followed and what a status means are the core's.
//
// Poll order after every input (the drain rule of the pool driver): `pollTransmit` until
// empty, then `pollEvent` while the reader's buffer has room, repeat while either yielded,
// then arm the one timer at `pollTimeout`. Events left in the core while the buffer is full
// are its backpressure: `handleBytes` then takes fewer bytes than given, the driver keeps
// the rest, stops reading the body (`handleReadPaused`) and offers it again once the
// application pulled.

import { nowMs, unixSecs } from "./clock.js";
import { core, TetherError } from "./errors.js";
import type { SseItem } from "./items.js";
import type { SocketLoss } from "./pool.js";
import { ItemQueue } from "./queue.js";
import { WasmSse } from "./wasm.js";

/** Header pairs, or a record of them. */
export type SseHeaders = Iterable<readonly [string, string]> | Record<string, string>;

/** The request of a stream; absent fields: a plain GET, the core's defaults. */
export interface SseRequest {
  /** The method (default GET). */
  method?: string;
  /** Headers sent with every attempt (the core adds `Accept`, `Cache-Control`,
   * `Accept-Encoding: identity` where these set none). */
  headers?: SseHeaders;
  /** The body (a POST's JSON, say). */
  body?: string;
  /** What to do once an opened stream is lost: `never`, `same`, `last-event-id[:METHOD]`
   * or `reissue[:N]` (default: `same` for a GET, `never` otherwise). */
  resume?: string;
  /** End cleanly on a message whose data is exactly this (`[DONE]`). */
  endData?: string;
  /** End cleanly on a message of this event type. */
  endEvent?: string;
  /** Fail on a message of this event type. */
  failEvent?: string;
  /** End once the JSON-RPC response to the body's request arrived (MCP). */
  endOnJsonrpcResponse?: boolean;
}

/** Which attempt a request is, as the core decided it (the `open` transmit's fields). */
export interface AttemptInfo {
  /** Requests sent since the session was created, this one included (a redirect hop
   * counts). */
  number: number;
  /** `original`, `resume` (with `Last-Event-ID`) or `reissue`. */
  attempt: "original" | "resume" | "reissue";
  /** Why the previous attempt since `connect` was lost (`eof`, `status`...); `null` for the
   * first. */
  after: string | null;
}

/** What a per-attempt builder adds to one attempt. */
export interface AttemptParts {
  /** Headers replacing the request's of the same name (case-insensitive) for this attempt. */
  headers?: SseHeaders;
  /** A body replacing the request's, where the core sends one (a new JSON-RPC id). */
  body?: string;
}

/**
 * Builds each attempt's own parts (a fresh token, MCP's new JSON-RPC id) before its request
 * goes; redirect hops of the attempt reuse them. A builder that throws or rejects fails the
 * stream as a local error (`failed` kind `invalid_request`), never retried.
 */
export type PerAttempt = (info: AttemptInfo) => AttemptParts | Promise<AttemptParts>;

/** The part of `fetch`'s init the driver sets. */
export interface SseFetchInit {
  method: string;
  headers: [string, string][];
  body?: string;
  redirect: "manual" | "follow";
  signal: AbortSignal;
}

/** A streamed body's reader, as `ReadableStream.getReader()` gives it. */
export interface SseBodyReader {
  read(): Promise<{ done: boolean; value?: Uint8Array | undefined }>;
  cancel(reason?: unknown): Promise<void>;
}

/** The part of a `fetch` response the driver reads. */
export interface SseResponse {
  readonly status: number;
  readonly type?: string;
  readonly headers: { get(name: string): string | null };
  readonly body: { getReader(): SseBodyReader } | null;
}

/** A `fetch`: the global one, or one with a proxy (`proxyFetch` in `tether-js/node`). */
export type SseFetch = (url: string, init: SseFetchInit) => Promise<SseResponse>;

/** The core's SSE settings (see tether-wasm's `SseOptions`). */
export interface SseCoreOptions {
  /** Seed for the reconnect jitter (a u64; default 0). */
  seed?: number | bigint;
  /** Reconnect after this long without a byte (default 90 000; 0: never). */
  idleTimeoutMs?: number;
  /** Cut a request whose head has not come this long after it was sent. */
  connectTimeoutMs?: number;
}

/** Settings of a stream: the core's, the request, and the driver's own. */
export interface SseOptions extends SseCoreOptions {
  /** The request (default: a plain GET). */
  request?: SseRequest;
  /** Called once per attempt before its request goes (see {@link PerAttempt}). */
  perAttempt?: PerAttempt;
  /** The `fetch` to use (default: the global one). */
  fetch?: SseFetch;
  /**
   * `manual` (default): every redirect head goes to the core, which follows or refuses it.
   * `follow`: the runtime follows redirects of a GET or HEAD itself, for a browser, whose
   * `manual` hides the status and `Location` (an opaque redirect); any other method stays
   * `manual` so a POST is never silently turned into a GET.
   */
  redirect?: "manual" | "follow";
  /** Items buffered before the driver stops reading the body (default 4 096). */
  bufferItems?: number;
  /** A checkpoint to resume from (`sse.checkpoint()` of an earlier run, same request). */
  checkpoint?: string;
  /** Ends the stream (as {@link TetherSse.close}). */
  signal?: AbortSignal;
}

const DEFAULT_BUFFER = 4096;

/** Headers the core sends that `fetch` computes itself from the body. */
const COMPUTED = new Set(["content-length"]);

interface OpenTransmit {
  type: "open";
  epoch: number;
  last_event_id: string | null;
  redirect: string | null;
  method: string;
  headers: [string, string][];
  body: string;
  withhold: string[];
  attempt: AttemptInfo["attempt"];
  number: number;
  after: string | null;
}

type Transmit = OpenTransmit | { type: "close"; epoch: number } | { type: "end" };

/** One request of an attempt: the attempt's first, or a redirect hop replacing it. */
interface Hop {
  readonly epoch: number;
  readonly controller: AbortController;
}

/** One attempt (an epoch): the parts built for it, kept for its redirect hops. */
interface Attempt {
  hop: Hop;
  headers?: [string, string][];
  body?: string | undefined;
}

/**
 * One SSE stream over `fetch`: iterate it for its items (the JSON lines of `tether sse`,
 * typed); `close()`, the signal or leaving the loop ends it. It connects when created.
 */
export class TetherSse implements AsyncIterable<SseItem> {
  private readonly wasm: WasmSse;
  private readonly url: string;
  private readonly queue: ItemQueue<SseItem>;
  private readonly fetch: SseFetch;
  private readonly perAttempt: PerAttempt | undefined;
  private readonly redirect: "manual" | "follow";
  private readonly attempts = new Map<number, Attempt>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt: number | undefined;
  private draining = false;
  /** The core said the stream is over (`end`): no request follows. */
  private over = false;
  private closed = false;
  /** Reading is paused: the reader's buffer is full, or the core took part of a chunk. */
  private paused = false;
  private resumeReading: (() => void) | undefined;
  private whenResumed: Promise<void> | undefined;
  /** Bytes the core has not taken yet, offered again once the application pulled. */
  private held: { hop: Hop; bytes: Uint8Array } | undefined;

  /**
   * A stream from `url` (http:// or https://, checked: a bad one throws `TetherError`
   * `InvalidArgument`). A request or options the core refuses throw the same.
   */
  constructor(url: string, options: SseOptions = {}) {
    this.url = checkSseUrl(url);
    const { request, perAttempt, fetch, redirect, bufferItems, checkpoint, signal } = options;
    const config = optionsJson(options);
    const req = requestJson(request);
    this.wasm = core(() =>
      checkpoint === undefined
        ? new WasmSse(config, req)
        : WasmSse.restore(config, req, checkpoint),
    );
    const global = globalThis.fetch as SseFetch | undefined;
    const chosen = fetch ?? global;
    if (chosen === undefined) throw new TetherError("InvalidArgument", "no fetch in this runtime");
    this.fetch = chosen;
    this.perAttempt = perAttempt;
    this.redirect = redirect ?? "manual";
    this.queue = new ItemQueue<SseItem>(
      bufferItems ?? DEFAULT_BUFFER,
      {
        full: () => {
          this.setPaused(true);
        },
        drained: () => {
          this.resume();
        },
      },
      () => {
        this.close();
      },
    );
    this.step((now) => {
      this.wasm.setWallClock(now, unixSecs());
      this.wasm.connect(now);
    });
    if (signal !== undefined) {
      if (signal.aborted) this.close();
      else
        signal.addEventListener(
          "abort",
          () => {
            this.close();
          },
          { once: true },
        );
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<SseItem> {
    return this.queue[Symbol.asyncIterator]();
  }

  /** The stream's durable state (the core's checkpoint JSON); `withBody` keeps a POST's body. */
  checkpoint(withBody = false): string {
    return this.wasm.checkpoint(withBody);
  }

  /** The id the next resumption sends as `Last-Event-ID` (empty: none). */
  lastEventId(): string {
    return this.wasm.lastEventId();
  }

  /** A lifecycle signal: the page or the process was suspended, resumed, went offline... */
  lifecycle(
    signal: "suspended" | "resumed" | "network_changed" | "network_gone" | "online" | "offline",
  ): void {
    if (this.over) return;
    this.step((now) => {
      this.wasm.lifecycle(now, signal);
    });
  }

  /**
   * End the stream for good: the request is aborted, the items already buffered are still
   * read, then a `closed` item (reason `closed`) and the iterator ends.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.over) return;
    this.step((now) => {
      this.wasm.disconnect(now);
    });
  }

  // ----- inputs ------------------------------------------------------------------------

  /** One input at `nowMs`, then the drain. Misuse throws; the core is unchanged by it. */
  private step(input: (now: number) => void): void {
    const now = nowMs();
    core(() => {
      input(now);
    });
    this.drain();
  }

  /** A host fact about a request: ignored once the core ended the stream or aborted it. */
  private hostInput(hop: Hop, input: (now: number) => void): void {
    if (this.over || hop.controller.signal.aborted) return;
    try {
      this.step(input);
    } catch (error) {
      // A stale request's report is the core's to ignore; anything else is a bug here,
      // reported where a host's callback cannot throw it.
      if (!(error instanceof TetherError)) throw error;
      console.warn(`tether: request input: ${error.message}`);
    }
  }

  private drain(): void {
    // An input given inside the drain (a builder that failed at once, a pause when the
    // buffer filled) loops here rather than recursing.
    if (this.draining) return;
    this.draining = true;
    try {
      for (;;) {
        let busy = false;
        for (let t = this.wasm.pollTransmit(); t !== undefined; t = this.wasm.pollTransmit()) {
          busy = true;
          this.transmit(JSON.parse(t) as Transmit);
        }
        // Events stay in the core while the reader's buffer is full: its own bound then
        // holds the body back (handleBytes takes fewer bytes).
        while (!this.full()) {
          const text = this.wasm.pollEvent();
          if (text === undefined) {
            if (this.over) this.queue.end();
            break;
          }
          busy = true;
          this.queue.push(JSON.parse(text) as SseItem);
        }
        if (!busy) break;
      }
    } finally {
      this.draining = false;
    }
    this.arm();
  }

  private full(): boolean {
    return this.queue.size >= this.queue.bound;
  }

  private transmit(t: Transmit): void {
    switch (t.type) {
      case "open":
        this.open(t);
        return;
      case "close": {
        const attempt = this.attempts.get(t.epoch);
        this.attempts.delete(t.epoch);
        attempt?.hop.controller.abort();
        return;
      }
      case "end":
        this.over = true;
        for (const attempt of this.attempts.values()) attempt.hop.controller.abort();
        this.attempts.clear();
        this.held = undefined;
        this.setPaused(false);
        return;
    }
  }

  private open(t: OpenTransmit): void {
    const hop: Hop = { epoch: t.epoch, controller: new AbortController() };
    const previous = this.attempts.get(t.epoch);
    // A redirect hop replaces the request before it (same epoch), whose late body and end
    // are no longer the core's business.
    previous?.hop.controller.abort();
    if (t.redirect !== null && previous?.headers !== undefined) {
      previous.hop = hop;
      this.send(hop, t, previous);
      return;
    }
    const attempt: Attempt = { hop };
    this.attempts.set(t.epoch, attempt);
    const builder = this.perAttempt;
    if (builder === undefined) {
      attempt.headers = t.headers;
      this.send(hop, t, attempt);
      return;
    }
    const info: AttemptInfo = { number: t.number, attempt: t.attempt, after: t.after };
    new Promise<AttemptParts>((resolve) => {
      resolve(builder(info));
    }).then(
      (parts) => {
        if (hop.controller.signal.aborted || this.over) return;
        attempt.headers = replace(t.headers, parts.headers);
        attempt.body = parts.body;
        this.send(hop, t, attempt);
      },
      (error: unknown) => {
        const detail = error instanceof Error ? error.message || error.name : String(error);
        this.hostInput(hop, (now) => {
          this.wasm.handleRequestInvalid(now, hop.epoch, detail);
        });
      },
    );
  }

  /** Send `t`'s request with the parts `attempt` built. */
  private send(hop: Hop, t: OpenTransmit, attempt: Attempt): void {
    // The core withholds some headers (credentials, on a redirect to another origin); which
    // id to resume from is the core's alone.
    const withhold = new Set(t.withhold.map((name) => name.toLowerCase()));
    const headers = (attempt.headers ?? t.headers).filter(([name]) => {
      const lower = name.toLowerCase();
      return !withhold.has(lower) && lower !== "last-event-id" && !COMPUTED.has(lower);
    });
    if (t.last_event_id !== null) headers.push(["Last-Event-ID", t.last_event_id]);
    const url = t.redirect ?? this.url;
    const method = t.method;
    const bodiless = method === "GET" || method === "HEAD";
    // A hop re-sends what its attempt sent; after a 303 the core sends no body. An empty
    // body is still one for a POST: `fetch` then says `Content-Length: 0` (a server answers
    // 411 to a POST without a length).
    const body = bodiless ? undefined : t.body === "" ? "" : (attempt.body ?? t.body);
    const redirect = this.redirect === "follow" && bodiless ? "follow" : "manual";
    const invalid = requestProblem(url, method, headers, body);
    if (invalid !== undefined) {
      this.hostInput(hop, (now) => {
        this.wasm.handleRequestInvalid(now, hop.epoch, invalid);
      });
      return;
    }
    const init: SseFetchInit = { method, headers, redirect, signal: hop.controller.signal };
    if (body !== undefined) init.body = body;
    let fetched: Promise<SseResponse>;
    try {
      fetched = this.fetch(url, init);
    } catch (error) {
      fetched = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    fetched.then(
      (response) => {
        this.response(hop, url, response);
      },
      (error: unknown) => {
        if (refusedLocally(error)) {
          // `fetch` itself refuses some ports (the spec's "bad port" list): the request never
          // left, and never will, so it is the local failure it is, not a loss to retry.
          this.hostInput(hop, (now) => {
            this.wasm.handleRequestInvalid(now, hop.epoch, `fetch refuses ${url}: bad port`);
          });
          return;
        }
        const loss = lossOf(error, false);
        this.hostInput(hop, (now) => {
          this.wasm.handleError(now, hop.epoch, loss);
        });
      },
    );
  }

  private response(hop: Hop, url: string, response: SseResponse): void {
    const reader = response.body?.getReader();
    if (hop.controller.signal.aborted || this.over) {
      reader?.cancel().catch(() => undefined);
      return;
    }
    if (response.type === "opaqueredirect") {
      // A browser's `manual` redirect hides its status and Location: the core cannot judge
      // it, and following it blind could turn a POST into a GET.
      reader?.cancel().catch(() => undefined);
      this.hostInput(hop, (now) => {
        this.wasm.handleRequestInvalid(
          now,
          hop.epoch,
          "the runtime hides this redirect (an opaque redirect)",
        );
      });
      return;
    }
    const header = (name: string): string | undefined => response.headers.get(name) ?? undefined;
    this.hostInput(hop, (now) => {
      this.wasm.handleHead(
        now,
        hop.epoch,
        response.status,
        header("content-type"),
        header("retry-after"),
        header("content-encoding"),
        header("location"),
        url,
      );
    });
    // Every body is the core's: a stream's events, or a refusal's first bytes. A redirect
    // the core follows or a status it gives up on aborts the hop, ending this read.
    if (reader === undefined) {
      this.hostInput(hop, (now) => {
        this.wasm.handleEof(now, hop.epoch);
      });
      return;
    }
    void this.read(hop, reader);
  }

  private async read(hop: Hop, reader: SseBodyReader): Promise<void> {
    const abandon = (): void => {
      reader.cancel().catch(() => undefined);
    };
    hop.controller.signal.addEventListener("abort", abandon, { once: true });
    try {
      for (;;) {
        while (this.whenResumed !== undefined && !hop.controller.signal.aborted) {
          await this.whenResumed;
        }
        if (this.stale(hop)) return;
        const { done, value } = await reader.read();
        if (this.stale(hop)) return;
        if (done) {
          this.hostInput(hop, (now) => {
            this.wasm.handleEof(now, hop.epoch);
          });
          return;
        }
        if (value !== undefined && value.length > 0) this.feed(hop, value);
      }
    } catch (error) {
      const loss = lossOf(error, true);
      this.hostInput(hop, (now) => {
        this.wasm.handleError(now, hop.epoch, loss);
      });
    } finally {
      hop.controller.signal.removeEventListener("abort", abandon);
    }
  }

  /** Offer `bytes` to the core until it takes them all, or hold the rest and pause. */
  private feed(hop: Hop, bytes: Uint8Array): void {
    let rest = bytes;
    let stalls = 0;
    while (rest.length > 0 && !hop.controller.signal.aborted && !this.over) {
      let taken = rest.length;
      const offered = rest;
      this.hostInput(hop, (now) => {
        taken = this.wasm.handleBytes(now, hop.epoch, offered);
      });
      rest = rest.subarray(taken);
      // The core's event queue is full and the reader's buffer too (the drain moves events
      // over while it has room): keep the rest until the application pulls.
      if (rest.length > 0 && this.full()) {
        this.held = { hop, bytes: rest };
        this.setPaused(true);
        return;
      }
      // The drain emptied the core's queue, so it takes more; a core that still takes
      // nothing would spin here forever.
      stalls = taken === 0 ? stalls + 1 : 0;
      if (stalls > 1) {
        console.warn("tether: the session took no bytes twice; the rest of the chunk is dropped");
        return;
      }
    }
  }

  /** The application pulled the buffer down to half: events, held bytes, then reading. */
  private resume(): void {
    this.drain();
    if (this.over) return;
    const held = this.held;
    this.held = undefined;
    if (held !== undefined) this.feed(held.hop, held.bytes);
    if (!this.holding() && !this.full()) this.setPaused(false);
  }

  /** Whether bytes wait for the core (a method: `feed` may have set them). */
  private holding(): boolean {
    return this.held !== undefined;
  }

  /** Whether a request's facts are no longer the core's business. */
  private stale(hop: Hop): boolean {
    return hop.controller.signal.aborted || this.over;
  }

  private setPaused(paused: boolean): void {
    if (paused === this.paused) return;
    this.paused = paused;
    if (paused) {
      this.whenResumed = new Promise((resolve) => {
        this.resumeReading = resolve;
      });
    } else {
      const wake = this.resumeReading;
      this.whenResumed = undefined;
      this.resumeReading = undefined;
      wake?.();
    }
    if (this.over) return;
    // Tells the core the silence is the driver's: its idle watchdog waits.
    this.step((now) => {
      this.wasm.handleReadPaused(now, paused);
    });
  }

  private arm(): void {
    const at = this.over ? undefined : this.wasm.pollTimeout();
    if (at === this.timerAt) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = at;
    if (at === undefined) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = undefined;
        if (this.over) return;
        this.step((now) => {
          this.wasm.handleTimeout(now);
        });
      },
      // setTimeout fires at once past 2^31 - 1 ms: a deadline further out waits in steps.
      Math.min(Math.max(0, at - nowMs()), 2_147_483_647),
    );
  }
}

// ----- the request ---------------------------------------------------------------------

/** The core's options as JSON; the seed is written as digits (a u64 is wider than a
 * number). */
function optionsJson(options: SseCoreOptions): string {
  const fields: string[] = [];
  if (options.seed !== undefined) {
    const seed = BigInt(options.seed);
    if (seed < 0n || seed >= 1n << 64n) {
      throw new TetherError("InvalidArgument", `seed ${seed}: expected 0 to 2^64 - 1`);
    }
    fields.push(`"seed":${seed.toString()}`);
  }
  if (options.idleTimeoutMs !== undefined) {
    fields.push(`"idleTimeoutMs":${JSON.stringify(options.idleTimeoutMs)}`);
  }
  if (options.connectTimeoutMs !== undefined) {
    fields.push(`"connectTimeoutMs":${JSON.stringify(options.connectTimeoutMs)}`);
  }
  return `{${fields.join(",")}}`;
}

function requestJson(request: SseRequest | undefined): string | undefined {
  if (request === undefined) return undefined;
  return JSON.stringify({
    method: request.method,
    headers: request.headers === undefined ? undefined : pairs(request.headers),
    body: request.body,
    resume: request.resume,
    endData: request.endData,
    endEvent: request.endEvent,
    failEvent: request.failEvent,
    endOnJsonrpcResponse: request.endOnJsonrpcResponse,
  });
}

function pairs(headers: SseHeaders): [string, string][] {
  if (Symbol.iterator in headers) {
    return [...(headers as Iterable<readonly [string, string]>)].map(([n, v]) => [n, v]);
  }
  return Object.entries(headers);
}

/** `headers` with each of `parts` replacing the headers of its name. */
function replace(headers: [string, string][], parts: SseHeaders | undefined): [string, string][] {
  if (parts === undefined) return [...headers];
  let built = [...headers];
  for (const [name, value] of pairs(parts)) {
    const lower = name.toLowerCase();
    built = built.filter(([n]) => n.toLowerCase() !== lower);
    built.push([name, value]);
  }
  return built;
}

/** Why `fetch` would refuse this request before sending it, or `undefined`. */
function requestProblem(
  url: string,
  method: string,
  headers: [string, string][],
  body: string | undefined,
): string | undefined {
  try {
    // The runtime's own rules (header names and values, methods, a GET with a body), checked
    // here so a refusal is the local failure it is, not a network error retried forever.
    new Request(url, { method, headers, ...(body === undefined ? {} : { body }) });
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

// ----- host facts ----------------------------------------------------------------------

/** The codes of an error and its causes (`fetch` wraps the host's error in `cause`). */
function codesOf(error: unknown): { codes: string[]; messages: string[] } {
  const codes: string[] = [];
  const messages: string[] = [];
  let at: unknown = error;
  for (let depth = 0; depth < 5 && typeof at === "object" && at !== null; depth += 1) {
    const e = at as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof e.code === "string") codes.push(e.code);
    if (typeof e.message === "string") messages.push(e.message);
    at = e.cause;
  }
  return { codes, messages };
}

/** Whether `fetch` refused the request before sending it (a blocked port). */
function refusedLocally(error: unknown): boolean {
  return codesOf(error).messages.includes("bad port");
}

/** How a request failed, in the core's words; `afterHead`: while reading the body. */
function lossOf(error: unknown, afterHead: boolean): SocketLoss {
  const { codes, messages } = codesOf(error);
  const has = (test: (code: string) => boolean): boolean => codes.some(test);
  if (has((c) => c === "EMFILE" || c === "ENFILE")) return "out_of_files";
  if (
    has((c) => /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY/.test(c)) ||
    messages.some((m) => /certificate/i.test(m))
  ) {
    return "tls_rejected";
  }
  if (afterHead) return "network_error";
  // Only a connection never made proves the server never saw the request: the core may
  // then send a POST again.
  const never = ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"];
  if (has((c) => never.includes(c) || c === "UND_ERR_CONNECT_TIMEOUT")) {
    return "connection_refused";
  }
  if (messages.some((m) => /Proxy response|tunnel/i.test(m))) return "handshake_failed";
  return "network_error";
}

// ----- URLs ------------------------------------------------------------------------------

/**
 * `url` if it passes tether's URL rule for SSE: http:// or https://, a host, and a port of
 * 1-65535 when one is written; else a `TetherError` (`InvalidArgument`) saying what is
 * wrong. Checked before a stream starts: a port out of range would only surface as
 * reconnects failing forever.
 */
export function checkSseUrl(url: string): string {
  const invalid = (why: string): TetherError =>
    new TetherError("InvalidArgument", `${url}: ${why}`);
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/.exec(url);
  const scheme = match?.[1]?.toLowerCase();
  if (match === null || (scheme !== "http" && scheme !== "https")) {
    throw invalid("expected http:// or https://");
  }
  const authority = match[2] ?? "";
  const at = authority.lastIndexOf("@");
  const hostPort = at < 0 ? authority : authority.slice(at + 1);
  let host = hostPort;
  let port: string | undefined;
  if (hostPort.startsWith("[")) {
    const close = hostPort.indexOf("]");
    host = close < 0 ? hostPort : hostPort.slice(0, close + 1);
    const after = close < 0 ? "" : hostPort.slice(close + 1);
    if (after.startsWith(":")) port = after.slice(1);
  } else {
    const colon = hostPort.lastIndexOf(":");
    if (colon >= 0) {
      host = hostPort.slice(0, colon);
      port = hostPort.slice(colon + 1);
    }
  }
  if (host === "") throw invalid("no host");
  if (port !== undefined) {
    if (port === "") throw invalid("empty port");
    if (!/^[0-9]+$/.test(port)) throw invalid(`port ${JSON.stringify(port)} is not a number`);
    const n = Number(port);
    if (n < 1 || n > 65535) throw invalid(`port ${port} is not in 1-65535`);
  }
  try {
    new URL(url);
  } catch (error) {
    throw invalid(error instanceof Error ? error.message : String(error));
  }
  return url;
}

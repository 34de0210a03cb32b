// The relay pool driver shared by the browser and Node: it owns the sockets, one timer and
// the buffers, and feeds the wasm core every input with the host's `nowMs`. It decides
// nothing about the protocol: which relay to dial, when to retry, what to send and what an
// answer means are the core's.
//
// Poll order after every input (the str0m rule: drain until only a timeout is left):
// 1. `verifyQueued` (queued copies are checked inside the wasm: every event of a verifying
//    pool, and always the relay lists routing by people reads);
// 2. `pollTransmit` until empty (open, send, ping, close, fetch_info);
// 3. `pollEvents`, each item to its subscription, its publish and the `items()` readers;
//    an `auth` item is answered here when the pool has a signer (the core's input again);
// 4. repeat while 1-3 yielded anything, then arm the one timer at `pollTimeout`.

import { nowMs, unixSecs } from "./clock.js";
import { core, TetherError } from "./errors.js";
import type { Filter, NostrEvent, PoolItem, PublishDone, SubscriptionItem } from "./items.js";
import { ItemQueue, type Pressure } from "./queue.js";
import { WasmPool, type Signer } from "./wasm.js";

/** How a socket ended, in the core's words. */
export type SocketLoss =
  | "connection_refused"
  | "tls_rejected"
  | "handshake_failed"
  | "closed_by_peer"
  | "frame_too_large"
  | "network_error"
  | "out_of_files";

/** What a host's socket reports; each call is one input to the core. */
export interface SocketEvents {
  /** The WebSocket opened. */
  opened(): void;
  /**
   * A text frame: a string, or its UTF-8 bytes as the socket holds them (Node's `ws` hands
   * over a `Buffer`; passing it on spares a decode here and an encode into the wasm).
   */
  text(frame: string | Uint8Array): void;
  /** A binary frame of `length` bytes. */
  binary(length: number): void;
  /** A pong answering `ping()`. */
  pong(): void;
  /** The socket ended (once; nothing follows). */
  closed(loss: SocketLoss, code?: number): void;
}

/** One WebSocket as the driver uses it. */
export interface RelaySocket {
  /** Send a text frame. */
  send(text: string): void;
  /** Send a WebSocket ping (a no-op where the host has none). */
  ping(): void;
  /** Close it; it reports nothing after this. */
  close(): void;
  /** Stop (or resume) reading while the application lags. */
  pause(paused: boolean): void;
}

/** How one socket may be dialed, as the core says. */
export interface Dial {
  /**
   * Only at public addresses: a relay routing opened from a stranger's relay list. A host
   * that resolves names refuses the socket (as `connection_refused`) when any address the
   * name resolves to is private by the core's rule (`isPrivateIp`); a browser, which cannot
   * resolve, leaves it to its own Private Network Access rules.
   */
  publicOnly: boolean;
}

/** What a runtime gives the pool driver. */
export interface PoolHost {
  /** Open a WebSocket to `url` and report its life to `events`, never synchronously. */
  connect(url: string, events: SocketEvents, dial: Dial): RelaySocket;
  /** A relay's NIP-11 document, or `undefined` when it has none. */
  fetchInfo?(url: string): Promise<string | undefined>;
  /** Whether sockets can send WebSocket pings (a browser's cannot). */
  readonly canPing: boolean;
}

/** The core's pool settings (see tether-wasm's `PoolOptions`), camelCase. */
export interface CoreOptions {
  seed?: number;
  gatePerSession?: boolean;
  maxSubscriptions?: number;
  maxFrame?: number;
  eoseTimeoutMs?: number;
  publishTimeoutMs?: number;
  infoRefreshMs?: number;
  verify?: boolean;
  maxUnverified?: number;
  eoseDeadlineMs?: number;
  afterFirstEoseMs?: number;
  publishDeadlineMs?: number;
  maxRelays?: number;
  maxPoolSubscriptions?: number;
  dedupCapacity?: number;
  seenOnMax?: number;
  maxConnecting?: number;
  outboxMaxRelays?: number;
  outboxRedundancy?: number;
  outboxIndexers?: string[];
}

/** Settings of a pool: the core's, and the driver's own. */
export interface PoolOptions extends CoreOptions {
  /** Answers relays' AUTH challenges (NIP-42); without it an `auth` item is only reported. */
  signer?: Signer;
  /**
   * Items a subscription (or an `items()` reader) buffers before the driver stops reading
   * sockets (default 4 096). See the overflow rule in docs/js.md.
   */
  bufferItems?: number;
  /** A checkpoint to resume from (`pool.checkpoint()` of an earlier run). */
  checkpoint?: string;
  /**
   * With `checkpoint`: the URL of each restored relay the application added, by relay id
   * (the order they were first added in). A checkpoint keeps no URL of those relays, and
   * the restored pool dials them at once.
   */
  relayUrls?: string[];
}

/** Options of one subscription. */
export interface SubscribeOptions {
  /** Ends the subscription (CLOSE on every relay) and its iterator. */
  signal?: AbortSignal;
}

/** Options of one publish. */
export interface PublishOptions {
  /** Relay URLs (default: every relay the application added). */
  relays?: string[];
}

const DEFAULT_BUFFER = 4096;
/** Encodes a string frame for the wasm (see `SocketEvents.text`). */
const utf8 = new TextEncoder();

/** A live subscription: iterate it for its items; `close()` or the signal ends it. */
export class Subscription implements AsyncIterable<SubscriptionItem> {
  constructor(
    /** The subscription id the items carry as `sub`. */
    readonly id: number,
    private readonly queue: ItemQueue<SubscriptionItem>,
  ) {}

  /** End the subscription: CLOSE where it is open; the iterator ends. */
  close(): void {
    this.queue.stop();
  }

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
    return this.queue[Symbol.asyncIterator]();
  }
}

interface Open {
  epoch: number;
  socket: RelaySocket;
}

type Transmit =
  | { type: "open"; relay: number; epoch: number; url?: string }
  | { type: "send"; relay: number; text: string }
  | { type: "ping"; relay: number }
  | { type: "close"; relay: number; epoch: number }
  | { type: "fetch_info"; relay: number };

/** A relay pool over a host's sockets. */
export class TetherPool {
  private readonly wasm: WasmPool;
  private readonly sockets = new Map<number, Open>();
  /** The application's relays, by id, as it spelt them. */
  private readonly given = new Map<number, string>();
  /** Relay id to URL, kept after a relay goes so its last items still name it. */
  private readonly urls = new Map<number, string>();
  private readonly subs = new Map<number, ItemQueue<SubscriptionItem>>();
  private readonly readers = new Set<ItemQueue<PoolItem>>();
  private readonly publishes = new Map<string, (done: PublishDone) => void>();
  private readonly signer: Signer | undefined;
  private readonly bound: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt: number | undefined;
  /** Queues at their bound: sockets stay paused while any is. */
  private full = 0;
  private closed = false;
  private draining = false;

  constructor(
    private readonly host: PoolHost,
    options: PoolOptions = {},
  ) {
    const { signer, bufferItems, checkpoint, relayUrls, ...coreOptions } = options;
    const json = JSON.stringify({ ...coreOptions, ...(host.canPing ? {} : { ping: false }) });
    const now = nowMs();
    this.wasm = core(() =>
      checkpoint === undefined
        ? new WasmPool(json)
        : WasmPool.restore(json, checkpoint, now, unixSecs()),
    );
    this.signer = signer;
    this.bound = bufferItems ?? DEFAULT_BUFFER;
    relayUrls?.forEach((url, id) => {
      // The checkpoint holds no application's URL (it may carry credentials): named again,
      // the relay is the one routing asks at that URL, not a second socket. A URL the core
      // refuses (past its rule, or another relay's) stays this driver's alone, as in addRelay.
      try {
        this.wasm.nameRelay(id, url);
      } catch {
        // Nothing to undo: the pool is as it was.
      }
      this.urls.set(id, url);
      this.given.set(id, url);
    });
    this.step((at) => {
      this.wasm.setWallClock(at, unixSecs());
    });
  }

  /** Add a relay by URL (one relay per normalised URL); returns its id. */
  addRelay(url: string): number {
    let relay = -1;
    this.step((now) => {
      relay = this.wasm.addRelay(now, url);
    });
    this.urls.set(relay, url);
    this.given.set(relay, url);
    return relay;
  }

  /** Remove a relay (by URL or id): its subscriptions there close, its socket goes. */
  removeRelay(relay: string | number): void {
    const id = typeof relay === "number" ? relay : this.idOf(relay);
    this.step((now) => {
      this.wasm.removeRelay(now, id);
    });
    this.given.delete(id);
  }

  /** Subscribe on every relay added, with `filters`. */
  subscribe(filters: Filter[], options: SubscribeOptions = {}): Subscription {
    const text = JSON.stringify(filters);
    return this.open(options, (now) => this.wasm.subscribe(now, text));
  }

  /**
   * Subscribe by people: `filter` (with `authors`, or `#p` for inboxes) goes to each
   * person's relays from their relay lists (routing by people).
   */
  subscribeOutbox(filter: Filter, options: SubscribeOptions = {}): Subscription {
    const text = JSON.stringify(filter);
    return this.open(options, (now) => this.wasm.subscribeOutbox(now, text));
  }

  /**
   * A subscription restored from the checkpoint, by its id (the `id` of a `subscribe` of the
   * earlier run): its items from now on, and `close()` ends it (CLOSE where it is open).
   */
  resumed(id: number, options: SubscribeOptions = {}): Subscription {
    if (this.closed) throw new TetherError("WrongState", "the pool is closed");
    if (this.subs.has(id)) throw new TetherError("WrongState", `subscription ${id} is taken`);
    return this.track(id, options);
  }

  /** Publish a signed event; resolves with its one outcome. */
  publish(event: NostrEvent | string, options: PublishOptions = {}): Promise<PublishDone> {
    const text = typeof event === "string" ? event : JSON.stringify(event);
    const relays = options.relays?.map((url) => this.idOf(url));
    return this.awaitDone((now) =>
      this.wasm.publish(now, text, relays === undefined ? undefined : Uint32Array.from(relays)),
    );
  }

  /** Publish by people: the author's write relays and the tagged people's read relays. */
  publishOutbox(event: NostrEvent | string): Promise<PublishDone> {
    const text = typeof event === "string" ? event : JSON.stringify(event);
    return this.awaitDone((now) => this.wasm.publishOutbox(now, text));
  }

  /** Every item of the pool, in order (what `tether-js req` prints). */
  items(options: SubscribeOptions = {}): AsyncIterable<PoolItem> {
    const queue: ItemQueue<PoolItem> = new ItemQueue(this.bound, this.pressure(), () => {
      this.readers.delete(queue);
    });
    this.readers.add(queue);
    this.whenAborted(options.signal, () => {
      queue.stop();
    });
    return queue;
  }

  /** A lifecycle signal: the page or the process was suspended, resumed, went offline... */
  lifecycle(
    signal: "suspended" | "resumed" | "network_changed" | "network_gone" | "online" | "offline",
  ): void {
    this.step((now) => {
      this.wasm.lifecycle(now, signal);
    });
  }

  /** A relay list (kind 10002 or 10050) the application learned elsewhere. */
  handleRelayList(event: NostrEvent | string): void {
    const text = typeof event === "string" ? event : JSON.stringify(event);
    this.step((now) => {
      this.wasm.handleRelayList(now, text);
    });
  }

  /** The pool's durable state (the core's checkpoint JSON), for the next run. */
  checkpoint(): string {
    return this.wasm.checkpoint();
  }

  /** A relay's counters. */
  relayStats(url: string): Record<string, number> {
    const id = this.idOf(url);
    return JSON.parse(core(() => this.wasm.relayStats(id))) as Record<string, number>;
  }

  /** The URL of relay `id`, if known. */
  urlOf(id: number): string | undefined {
    return this.urls.get(id) ?? this.wasm.relayUrl(id);
  }

  /**
   * End everything: each open subscription is closed on its relays (CLOSE frames go out),
   * then the sockets close and every iterator ends.
   */
  close(): void {
    if (this.closed) return;
    for (const queue of [...this.subs.values()]) queue.stop();
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    for (const open of this.sockets.values()) open.socket.close();
    this.sockets.clear();
    for (const queue of this.readers) queue.end();
    this.readers.clear();
    this.wasm.free();
  }

  // ----- inputs ------------------------------------------------------------------------

  private open(options: SubscribeOptions, make: (now: number) => number): Subscription {
    let made: Subscription | undefined;
    // Tracked inside the input, before its drain: items the call itself yields (the first
    // `routed` of a subscription by people) are its subscription's too.
    this.step((now) => {
      made = this.track(make(now), options);
    });
    return made as Subscription;
  }

  private track(id: number, options: SubscribeOptions): Subscription {
    const queue = new ItemQueue<SubscriptionItem>(this.bound, this.pressure(), () => {
      if (!this.subs.delete(id) || this.closed) return;
      this.step((now) => {
        this.wasm.unsubscribe(now, id);
      });
    });
    this.subs.set(id, queue);
    this.whenAborted(options.signal, () => {
      queue.stop();
    });
    return new Subscription(id, queue);
  }

  private awaitDone(make: (now: number) => string): Promise<PublishDone> {
    let resolve: (done: PublishDone) => void = () => undefined;
    const done = new Promise<PublishDone>((settle) => {
      resolve = settle;
    });
    // Registered inside the input, before its drain: a publish with no relay to go to is
    // done at once, in that drain.
    this.step((now) => {
      this.publishes.set(make(now), resolve);
    });
    return done;
  }

  private idOf(url: string): number {
    for (const [id, known] of this.urls) {
      if (known === url && this.wasm.relayUrl(id) !== undefined) return id;
    }
    throw new TetherError("UnknownId", `no relay ${url} in this pool`);
  }

  private whenAborted(signal: AbortSignal | undefined, stop: () => void): void {
    if (signal === undefined) return;
    if (signal.aborted) {
      stop();
      return;
    }
    signal.addEventListener("abort", stop, { once: true });
  }

  /** One input at `nowMs`, then the drain. Misuse throws; the core is unchanged by it. */
  private step(input: (now: number) => void): void {
    if (this.closed) throw new TetherError("WrongState", "the pool is closed");
    const now = nowMs();
    core(() => {
      input(now);
    });
    this.drain(now);
  }

  /** Input from a socket: the same as `step`, after the pool closed nothing. */
  private socketInput(input: (now: number) => void): void {
    if (this.closed) return;
    this.step(input);
  }

  private drain(now: number): void {
    // A signer's answer or a verdict given inside the drain is an input of its own; it
    // loops here rather than recursing.
    if (this.draining) return;
    this.draining = true;
    try {
      for (;;) {
        let busy = false;
        // Not only with `verify`: the core verifies the relay lists it routes by always.
        if (this.wasm.verifyQueued(now) > 0) busy = true;
        for (let t = this.wasm.pollTransmit(); t !== undefined; t = this.wasm.pollTransmit()) {
          busy = true;
          this.transmit(JSON.parse(t) as Transmit, now);
        }
        for (const text of this.wasm.pollEvents()) {
          busy = true;
          this.dispatch(JSON.parse(text) as PoolItem, now);
        }
        if (!busy) break;
      }
    } finally {
      this.draining = false;
    }
    this.arm();
  }

  private transmit(t: Transmit, now: number): void {
    switch (t.type) {
      case "open": {
        // The application's relay is dialed as the application spelt it (a relay may check
        // the URL in AUTH); the core's normalised URL is for the relays routing opened.
        const given = this.given.get(t.relay);
        if (given !== undefined) {
          this.connect(t.relay, t.epoch, given);
          return;
        }
        if (t.url !== undefined && this.urls.get(t.relay) !== t.url) {
          // Routing reuses the id of a relay it let go of. Transmits are drained before
          // events, so the events still queued (the last of the relay that held the id among
          // them) came before this open: they go out under that relay's URL first.
          for (const text of this.wasm.pollEvents()) {
            this.dispatch(JSON.parse(text) as PoolItem, now);
          }
        }
        const url = t.url ?? this.urls.get(t.relay);
        if (url === undefined) return;
        this.urls.set(t.relay, url);
        this.connect(t.relay, t.epoch, url);
        return;
      }
      case "send":
        this.sockets.get(t.relay)?.socket.send(t.text);
        return;
      case "ping":
        this.sockets.get(t.relay)?.socket.ping();
        return;
      case "close": {
        const open = this.sockets.get(t.relay);
        if (open?.epoch !== t.epoch) return;
        this.sockets.delete(t.relay);
        open.socket.close();
        return;
      }
      case "fetch_info":
        this.fetchInfo(t.relay);
        return;
    }
  }

  private connect(relay: number, epoch: number, url: string): void {
    const events: SocketEvents = {
      opened: () => {
        this.socketInput((now) => {
          this.wasm.handleOpen(now, relay, epoch);
        });
      },
      text: (frame) => {
        // Bytes cross into the wasm as one block copy; wasm-bindgen copies a string a
        // character at a time, slower in V8 than encoding it first (bench/event_cost.mjs).
        this.socketInput((now) => {
          const bytes = typeof frame === "string" ? utf8.encode(frame) : frame;
          this.wasm.handleFrameBytes(now, relay, epoch, bytes);
        });
      },
      binary: (length) => {
        this.socketInput((now) => {
          this.wasm.handleBinary(now, relay, epoch, length);
        });
      },
      pong: () => {
        this.socketInput((now) => {
          this.wasm.handlePong(now, relay, epoch);
        });
      },
      closed: (loss, code) => {
        if (this.sockets.get(relay)?.epoch === epoch) this.sockets.delete(relay);
        this.socketInput((now) => {
          this.wasm.handleClose(now, relay, epoch, loss, code);
        });
      },
    };
    const socket = this.host.connect(url, events, { publicOnly: this.wasm.publicOnly(relay) });
    this.sockets.set(relay, { epoch, socket });
    if (this.full > 0) {
      // Opened while the application lags: it starts paused, and the core knows its
      // silence is ours.
      socket.pause(true);
      core(() => {
        this.wasm.handleReadPaused(nowMs(), relay, true);
      });
    }
  }

  private fetchInfo(relay: number): void {
    const url = this.urls.get(relay);
    if (url === undefined || this.host.fetchInfo === undefined) return;
    this.host.fetchInfo(url).then(
      (document) => {
        if (document === undefined || this.closed || this.wasm.relayUrl(relay) === undefined) {
          return;
        }
        this.socketInput((now) => {
          this.wasm.applyRelayInfo(now, relay, document);
        });
      },
      () => undefined,
    );
  }

  private dispatch(item: PoolItem, now: number): void {
    if ("relay" in item && typeof item.relay === "number") {
      const url = this.urls.get(item.relay);
      if (url !== undefined) item.url = url;
    }
    for (const reader of this.readers) reader.push(item);
    if ("sub" in item) {
      const queue = this.subs.get(item.sub);
      if (queue !== undefined) {
        queue.push(item);
        if (item.type === "ended") {
          this.subs.delete(item.sub);
          queue.end();
        }
      }
    }
    if (item.type === "publish_done") {
      const resolve = this.publishes.get(item.id);
      this.publishes.delete(item.id);
      resolve?.(item);
    }
    if (item.type === "auth") this.answerAuth(item, now);
  }

  private answerAuth(item: Extract<PoolItem, { type: "auth" }>, now: number): void {
    const url = item.url;
    if (this.signer === undefined || item.id === undefined || item.relay === undefined) return;
    if (url === undefined) return;
    const signed = this.signer.signAuth(url, item.challenge, unixSecs());
    const relay = item.relay;
    const challenge = item.id;
    core(() => this.wasm.authenticate(now, relay, challenge, signed));
  }

  private arm(): void {
    if (this.closed) return;
    const at = this.wasm.pollTimeout();
    // A timer already set no later than the deadline stays: firing early is a timeout input
    // the core finds nothing due at, and it re-arms then, rather than a clearTimeout and a
    // setTimeout on every frame.
    if (at === undefined || (this.timerAt !== undefined && this.timerAt <= at)) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = undefined;
        this.socketInput((now) => {
          this.wasm.handleTimeout(now);
        });
      },
      // setTimeout fires at once past 2^31 - 1 ms: a deadline further out waits in steps.
      Math.min(Math.max(0, at - nowMs()), 2_147_483_647),
    );
  }

  private pressure(): Pressure {
    return {
      full: () => {
        this.full += 1;
        if (this.full === 1) this.pauseReading(true);
      },
      drained: () => {
        this.full -= 1;
        if (this.full === 0 && !this.closed) this.pauseReading(false);
      },
    };
  }

  private pauseReading(paused: boolean): void {
    const relays = [...this.sockets.entries()];
    for (const [, open] of relays) open.socket.pause(paused);
    this.step((now) => {
      for (const [relay] of relays) this.wasm.handleReadPaused(now, relay, paused);
    });
  }
}

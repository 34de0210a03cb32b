// `tether-js req`: the contract of `tether req` (adapters/cli/src/req.rs) over the Node pool
// driver. The relays are a pool, one relay a pool of one; what differs is only how lines are
// written (`Form`): one relay's lines carry no `relay` and no `complete` or `ended`, and its
// run ends with the socket's closing `disconnected`. Every protocol decision (dialing,
// retries, dedup, verdicts, outcomes, routing) is the wasm core's; this prints its items.
import { randomBytes } from "node:crypto";

import { createPool, type NodePoolOptions } from "../node/index.js";
import { TetherError } from "../errors.js";
import type { Filter, PoolItem } from "../items.js";
import type { Subscription, TetherPool } from "../pool.js";
import { normalizeRelayUrl } from "../wasm.js";
import { caBundle, checkUrl, exitCodeOf, Failed, JsonLines, StateFile, Usage } from "./common.js";
import { parseReqArgs, REQ_HELP, type ReqArgs } from "./req-args.js";
import { catchesUp, readSaved, restoredIds } from "./req-state.js";
import type { SavedPool } from "../wasm.js";
import { parseSecretKey } from "./req-keys.js";

/** The filter used when none is given. */
const DEFAULT_FILTER = '{"limit":10}';

/** How long a clean shutdown waits for the socket's closing `disconnected`. */
const SHUTDOWN_WAIT_MS = 2000;

/** How often `--state` is written while anything changes. */
const SAVE_EVERY_MS = 1000;

/** The pool's own deadline for a subscription's outcome when `--eose-timeout` is not given. */
const DEFAULT_EOSE_DEADLINE_S = 10;

/** Lines of publishing, which `req` never does. */
const PUBLISH = new Set(["published", "rejected", "publish_done"]);

/** One relay (`one`): no `relay` field, no `complete` or `ended`; else `pool`. */
type Form = "one" | "pool";

/** Whether the pool's relays are given or routed by people. */
type Mode = "relays" | "outbox";

/** A filter argument: what is sent, and the key a state file remembers it by. */
interface FilterArg {
  filter: Filter;
  key: string;
}

/** Run `req` with its arguments; resolves with the exit code. */
export async function runReq(argv: string[]): Promise<number> {
  try {
    const args = parseReqArgs(argv);
    if (args.help) {
      process.stdout.write(REQ_HELP);
      return 0;
    }
    return await (args.outbox ? runOutbox(args) : runRelays(args));
  } catch (error) {
    return exitCodeOf(error);
  }
}

async function runRelays(args: ReqArgs): Promise<number> {
  if (args.indexer.length > 0 || args.maxRelays !== undefined) {
    throw new Usage("--indexer and --max-relays go with --outbox");
  }
  if (args.url === undefined) throw new Usage("a relay URL is required (or --outbox)");
  let extra = 0;
  while (extra < args.filters.length && isRelayUrl(args.filters[extra] ?? "")) extra += 1;
  const relays = [args.url, ...args.filters.slice(0, extra)];
  // Every relay URL before anything starts: a port out of range would otherwise reach a
  // socket as the default port and be retried forever.
  for (const url of relays) checkUrl(url, "ws");
  const filters = parseFilters(args.filters.slice(extra));
  const options = poolOptions(args);
  const form: Form = relays.length === 1 && !args.verify ? "one" : "pool";
  return stream(args, options, relays, filters, form, "relays");
}

/** `req --outbox`: no relay given; the pool routes each filter by its people. */
async function runOutbox(args: ReqArgs): Promise<number> {
  const given = [...args.filters];
  if (args.url !== undefined) {
    if (isRelayUrl(args.url)) {
      throw new Usage("--outbox takes no relay URL: its relays come from the people's relay lists");
    }
    given.unshift(args.url);
  }
  if (given.length === 0) {
    throw new Usage("--outbox needs a filter naming people (`authors`, or one `#p` key)");
  }
  const filters = parseFilters(given);
  for (const url of args.indexer) {
    try {
      checkUrl(url, "ws");
    } catch (error) {
      throw new Usage(`--indexer: ${(error as Error).message}`);
    }
  }
  const options = poolOptions(args);
  if (args.indexer.length > 0) options.outboxIndexers = args.indexer;
  if (args.maxRelays !== undefined) {
    if (args.maxRelays === 0n) throw new Usage("--max-relays must be at least 1");
    options.outboxMaxRelays = safe(args.maxRelays);
  }
  // The state file is this run's: its targets name the mode and the indexers given.
  return stream(args, options, ["outbox", ...args.indexer], filters, "pool", "outbox");
}

function isRelayUrl(text: string): boolean {
  return text.startsWith("ws://") || text.startsWith("wss://");
}

/** A u64 argument as the JSON number the core takes (past 2^53 it saturates). */
function safe(value: bigint): number {
  return Number(value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : value);
}

/** The pool's settings from the arguments: the core's, the signer and the sockets'. */
function poolOptions(args: ReqArgs): NodePoolOptions {
  const options: NodePoolOptions = {
    // JSON numbers past 2^53 lose digits: a seed keeps its low 53 bits.
    seed: Number(BigInt.asUintN(53, args.seed ?? randomBytes(8).readBigUInt64LE())),
    verify: args.verify,
  };
  if (args.secretKey !== undefined) {
    try {
      options.signer = parseSecretKey(args.secretKey);
    } catch (error) {
      throw new Usage((error as Error).message);
    }
  }
  // Roots that cannot be used are the caller's to fix, before any relay is tried.
  const ca = caBundle(args.cacert, args.nativeRoots);
  if (ca !== undefined) options.sockets = { ca };
  if (args.maxSubscriptions !== undefined) options.maxSubscriptions = safe(args.maxSubscriptions);
  if (args.eoseTimeout !== undefined) {
    options.eoseDeadlineMs = Math.max(1, Math.floor(args.eoseTimeout * 1000));
  }
  return options;
}

/** Every filter argument, validated before connecting; `{"limit":10}` when there are none. */
function parseFilters(texts: string[]): FilterArg[] {
  const given = texts.length === 0 ? [DEFAULT_FILTER] : texts;
  return given.map((text, index) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new Usage(
        `filter ${index} is not a JSON object (${(error as Error).message}): ${text}`,
      );
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new Usage(`filter ${index} is not a JSON object (not an object): ${text}`);
    }
    // The core keeps a filter as sorted compact JSON; a state file remembers it so.
    const key = JSON.stringify(sorted(value));
    return { filter: JSON.parse(key) as Filter, key };
  });
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    out[key] = sorted((value as Record<string, unknown>)[key]);
  }
  return out;
}

/** Each distinct relay (by its normalised URL) as given, in order: the pool's relay ids. */
function distinct(relays: string[], pool: TetherPool | undefined): Map<number, string> {
  const out = new Map<number, string>();
  if (pool !== undefined) {
    for (const url of relays) {
      let id: number;
      try {
        id = pool.addRelay(url);
      } catch (error) {
        throw new Usage((error as Error).message);
      }
      if (!out.has(id)) out.set(id, url);
    }
    return out;
  }
  // Restored: ids were given in the order relays were first added, one per normalised URL.
  const seen = new Set<string>();
  for (const url of relays) {
    const key = normalized(url);
    if (seen.has(key)) continue;
    seen.add(key);
    out.set(out.size, url);
  }
  return out;
}

function normalized(url: string): string {
  try {
    return normalizeRelayUrl(url, true);
  } catch {
    return url;
  }
}

/** A promise with its resolver: what ends the run. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const STOP = Symbol("stop");

/** Longest delay a Node timer takes; a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Call `fire` after `ms`, in steps a Node timer takes; each timer joins `timers`. */
function after(ms: number, fire: () => void, timers: ReturnType<typeof setTimeout>[]): void {
  if (ms <= MAX_TIMER_MS) {
    timers.push(setTimeout(fire, ms));
    return;
  }
  timers.push(
    setTimeout(() => {
      after(ms - MAX_TIMER_MS, fire, timers);
    }, MAX_TIMER_MS),
  );
}

/** Subscribe with `filters` and write every line until the run ends. */
async function stream(
  args: ReqArgs,
  options: NodePoolOptions,
  targets: string[],
  filters: FilterArg[],
  form: Form,
  mode: Mode,
): Promise<number> {
  const state = args.state === undefined ? undefined : new StateFile(args.state, "req", targets);
  const loaded = state?.load();
  const relays = mode === "outbox" ? [] : targets;
  let restoredFrom: SavedPool | undefined;
  let given: Map<number, string> | undefined;
  if (loaded !== undefined) {
    given = distinct(relays, undefined);
    options.relayUrls = [...given.values()];
  }
  let pool: TetherPool;
  try {
    if (loaded !== undefined) {
      // A one-relay run saved by a relay session (tether-py's, or tether's before it ran
      // one relay as a pool of one) goes on as a pool of one.
      restoredFrom = readSaved(loaded.checkpoint, form === "one");
      options.checkpoint = restoredFrom.toJson();
    }
    pool = createPool([], options);
  } catch (error) {
    if (error instanceof TetherError && state !== undefined && loaded !== undefined) {
      throw state.refuse(error.message);
    }
    throw new Usage((error as Error).message);
  }
  const reader = pool.items()[Symbol.asyncIterator]();
  const run = new Run(pool, form, mode, args.untilEose);
  try {
    run.given = given ?? distinct(relays, pool);
    run.restoredFrom = restoredFrom;
    subscribe(
      run,
      filters,
      loaded === undefined || restoredFrom === undefined ? [] : restoredIds(restoredFrom, loaded),
    );
  } catch (error) {
    pool.close();
    throw error;
  }
  const stopped = deferred();
  run.stop = stopped.resolve;
  const out = new JsonLines(stopped.resolve);
  run.out = out;
  const signals = installSignals(pool, stopped.resolve);
  const timers: ReturnType<typeof setTimeout>[] = [];
  if (args.duration !== undefined) {
    after(args.duration * 1000, stopped.resolve, timers);
  }
  const save = (): void => {
    if (state === undefined) return;
    state.store(run.live(), pool.checkpoint());
  };
  if (state !== undefined) {
    timers.push(
      setInterval(() => {
        if (!run.dirty) return;
        run.dirty = false;
        try {
          save();
        } catch (error) {
          process.stderr.write(`tether: --state not written: ${(error as Error).message}\n`);
        }
      }, SAVE_EVERY_MS),
    );
  }
  // A restored pool subscription whose relays do not all answer (one never live before,
  // one down) is done at the outcome deadline, as a new one would be.
  if (form === "pool" && run.answered.some((a) => a !== undefined)) {
    const deadline = (args.eoseTimeout ?? DEFAULT_EOSE_DEADLINE_S) * 1000;
    after(
      deadline,
      () => {
        run.restoredDeadline();
      },
      timers,
    );
  }

  const stop = stopped.promise.then((): typeof STOP => STOP);
  let pending = reader.next();
  for (;;) {
    const next = await Promise.race([pending, stop]);
    if (next === STOP || next.done === true) break;
    pending = reader.next();
    run.item(next.value);
    if (run.finished()) break;
  }
  for (const timer of timers) clearTimeout(timer);
  // Before the shutdown unsubscribes: the state keeps the subscriptions.
  try {
    save();
  } catch (error) {
    pool.close();
    signals();
    throw new Failed(`--state not written: ${(error as Error).message}`);
  }
  await run.shutDown(pending, reader);
  signals();
  // Sockets close with their handshake; one that never answers does not hold the exit.
  setTimeout(() => {
    process.exit();
  }, SHUTDOWN_WAIT_MS).unref();
  return 0;
}

/** Open (or take back from the state) one subscription per filter. */
function subscribe(run: Run, filters: FilterArg[], remembered: { filter: string; id: number }[]) {
  const { pool, mode, form } = run;
  for (const [index, { filter, key }] of filters.entries()) {
    const at = remembered.findIndex((r) => r.filter === key);
    let sub: Subscription;
    let restored = false;
    if (at >= 0) {
      const [taken] = remembered.splice(at, 1);
      sub = pool.resumed(taken?.id ?? 0);
      restored = true;
    } else if (mode === "relays") {
      try {
        sub = pool.subscribe([filter]);
      } catch (error) {
        throw new Failed(`subscribe: ${(error as Error).message}`);
      }
    } else {
      try {
        sub = pool.subscribeOutbox(filter);
      } catch (error) {
        throw new Usage(`filter ${index}: ${(error as Error).message}`);
      }
    }
    // One relay is done by its own answer; in a pool a new subscription is done at its
    // outcome, and a restored one (its outcome was reported in an earlier run) once every
    // relay answered. A restored routed one is owed its outcome again: its relays are this
    // run's.
    const byAnswers = form === "one" || (restored && mode === "relays");
    run.add(sub, key, byAnswers);
  }
  // Remembered subscriptions whose filter is no longer given are dropped (unsubscribed).
  for (const { id } of remembered) {
    try {
      pool.resumed(id).close();
    } catch {
      // Not in the checkpoint after all: nothing to drop.
    }
  }
}

/** SIGINT and SIGTERM end the run; SIGTSTP and SIGCONT are the lifecycle. Returns an undo. */
function installSignals(pool: TetherPool, stop: () => void): () => void {
  const onStop = (): void => {
    stop();
  };
  // Ctrl-Z: the pool is told, then the process stops itself with SIGSTOP (the handler took
  // SIGTSTP's default action). SIGCONT is a resume, whose probe finds a socket that died
  // meanwhile.
  const onSuspend = (): void => {
    try {
      pool.lifecycle("suspended");
    } catch {
      // The pool closed meanwhile.
    }
    process.kill(process.pid, "SIGSTOP");
  };
  const onResume = (): void => {
    try {
      pool.lifecycle("resumed");
    } catch {
      // The pool closed meanwhile.
    }
  };
  process.on("SIGINT", onStop);
  process.on("SIGTERM", onStop);
  process.on("SIGTSTP", onSuspend);
  process.on("SIGCONT", onResume);
  return () => {
    // A second Ctrl-C during the shutdown still ends nothing abruptly: it is ignored.
    process.off("SIGTSTP", onSuspend);
    process.off("SIGCONT", onResume);
  };
}

/** What `tether-js req` is writing. */
class Run {
  out: JsonLines | undefined;
  stop: () => void = () => undefined;
  /** The relays given on the command line, by id, as given. */
  given = new Map<number, string>();
  /** The checkpoint the run was restored from: which relays catch which subscriptions up. */
  restoredFrom: SavedPool | undefined;
  /** Anything changed since `--state` was last written. */
  dirty = false;
  /** By filter index: the live subscription. */
  readonly subs: Subscription[] = [];
  /** By filter index: the filter key. */
  readonly keys: string[] = [];
  /** By filter index: done for `--until-eose`. */
  readonly complete: boolean[] = [];
  /**
   * By filter index, for a subscription done by its relays' answers: the relays that
   * answered (EOSE, or restored with a gap there its `caught_up`), or gave up.
   */
  readonly answered: (Set<number> | undefined)[] = [];
  /** By filter index: no relay serves it any more. */
  readonly ended: boolean[] = [];
  /** Subscription id to filter index. */
  private readonly index = new Map<number, number>();
  /** Relays the pool named in items (routing opens its own): each is let go at the end. */
  private readonly seen = new Set<number>();

  constructor(
    readonly pool: TetherPool,
    readonly form: Form,
    readonly mode: Mode,
    private readonly untilEose: boolean,
  ) {}

  /** The next subscription, by filter index. */
  add(sub: Subscription, key: string, byAnswers: boolean): void {
    this.index.set(sub.id, this.subs.length);
    this.subs.push(sub);
    this.keys.push(key);
    this.complete.push(false);
    this.answered.push(byAnswers ? new Set() : undefined);
    this.ended.push(false);
    // Its items are read from the pool's stream, in order with the relays'; its own queue
    // is drained so that it never holds the sockets back.
    void (async () => {
      const items = sub[Symbol.asyncIterator]();
      while ((await items.next()).done !== true);
    })();
  }

  /** The subscriptions still served, as a state file keeps them. */
  live(): { filter: string; id: number }[] {
    return this.subs
      .map((sub, i) => ({ filter: this.keys[i] ?? "", id: sub.id }))
      .filter((_, i) => this.ended[i] !== true);
  }

  /** Whether the run is over: every subscription done (`--until-eose`) or ended. */
  finished(): boolean {
    if (this.ended.every(Boolean)) return true;
    return this.untilEose && this.complete.every(Boolean);
  }

  /** The restored subscriptions' deadline passed: they are done as a new one would be. */
  restoredDeadline(): void {
    this.answered.forEach((answered, i) => {
      if (answered !== undefined) this.complete[i] = true;
    });
    if (this.finished()) this.stop();
  }

  /** One item of the pool: track it, write its line. */
  item(item: PoolItem): void {
    this.dirty = true;
    if ("relay" in item && typeof item.relay === "number") this.seen.add(item.relay);
    const sub = "sub" in item ? item.sub : undefined;
    const index = sub === undefined ? undefined : this.index.get(sub);
    // Another run's subscription, dropped at the start: not this run's to write.
    if (sub !== undefined && index === undefined) return;
    if (index !== undefined) this.track(index, item);
    const line = this.line(item, index);
    if (line !== undefined) this.out?.write(line);
  }

  private track(index: number, item: PoolItem): void {
    switch (item.type) {
      case "eose":
        if (!this.catchesUp(index, item.relay)) this.answeredBy(index, item.relay);
        break;
      case "caught_up":
      case "closed":
        this.answeredBy(index, item.relay);
        break;
      case "complete":
        if (this.form === "pool") this.complete[index] = true;
        break;
      case "ended":
        this.ended[index] = true;
        this.complete[index] = true;
        break;
      default:
        break;
    }
  }

  private answeredBy(index: number, relay: number | undefined): void {
    const answered = this.answered[index];
    if (answered === undefined || relay === undefined) return;
    answered.add(relay);
    if (answered.size >= this.given.size) this.complete[index] = true;
  }

  private catchesUp(index: number, relay: number | undefined): boolean {
    const sub = this.subs[index];
    if (this.restoredFrom === undefined || sub === undefined || relay === undefined) return false;
    return catchesUp(this.restoredFrom, sub.id, relay);
  }

  /**
   * The core's item as `tether req` writes it: a subscription by its filter argument's
   * index, a relay by its URL (none for one relay), without the handles only a host that
   * answers needs (the ids of `event` and `auth`).
   */
  private line(item: PoolItem, index: number | undefined): string | undefined {
    if (PUBLISH.has(item.type)) return undefined;
    if (this.form === "one" && (item.type === "complete" || item.type === "ended")) {
      return undefined;
    }
    const url = "url" in item ? item.url : undefined;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(item)) {
      if (key === "url") continue;
      if (key === "id" && (item.type === "event" || item.type === "auth")) continue;
      if (key === "sub") {
        out.sub = String(index);
      } else if (key === "relay") {
        if (this.form === "one") continue;
        out.relay = this.relayName(value as number, url);
      } else if (key === "missing" && Array.isArray(value)) {
        out.missing = (value as number[]).map((relay) => this.relayName(relay, undefined));
      } else {
        out[key] = value;
      }
    }
    return JSON.stringify(out);
  }

  /** A relay given on the command line as given; one routing opened by its URL then. */
  private relayName(relay: number, url: string | undefined): string {
    return this.given.get(relay) ?? url ?? this.pool.urlOf(relay) ?? "";
  }

  /**
   * Close every subscription still open (CLOSE frames go out) and every socket. One relay's
   * run then writes the socket's closing `disconnected` as its last line (bounded).
   */
  async shutDown(
    pending: Promise<IteratorResult<PoolItem>>,
    reader: AsyncIterator<PoolItem>,
  ): Promise<void> {
    this.subs.forEach((sub, i) => {
      if (this.ended[i] !== true) sub.close();
    });
    if (this.form === "pool") {
      this.pool.close();
      return;
    }
    for (const relay of new Set([...this.given.keys(), ...this.seen])) {
      try {
        this.pool.removeRelay(relay);
      } catch {
        // Already gone.
      }
    }
    const timeout = new Promise<typeof STOP>((resolve) => {
      setTimeout(resolve, SHUTDOWN_WAIT_MS, STOP).unref();
    });
    let next = pending;
    for (;;) {
      const result = await Promise.race([next, timeout]);
      if (result === STOP || result.done === true) break;
      next = reader.next();
      const item = result.value;
      // Only the relay's own lines: its subscriptions were closed by this run.
      if ("sub" in item) continue;
      const line = this.line(item, undefined);
      if (line !== undefined) this.out?.write(line);
      if (item.type === "disconnected" && item.reconnect_in_ms === null) break;
    }
    this.pool.close();
  }
}

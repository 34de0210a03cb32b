// tether in a browser: the wasm core fetched next to its glue, the global `WebSocket`,
// `fetch` for NIP-11, the page lifecycle as the core's lifecycle inputs and checkpoints to a
// store the application picks (IndexedDB here). The driver maps browser facts to core
// inputs; what they mean for the relays is the core's decision.
import { TetherPool, type PoolOptions } from "../pool.js";
import { TetherSse, type SseOptions } from "../sse.js";
import { loadWasm } from "../wasm.js";
import { browserHost, type BrowserSocketOptions } from "./sockets.js";

// Top-level await: a module that imports this one can use the core at once.
await loadWasm();

export * from "../index.js";
export { loadWasm } from "../wasm.js";
export { browserHost, type BrowserSocketOptions } from "./sockets.js";

/** Where a pool's checkpoint lives between page loads. */
export interface CheckpointStore {
  /** The saved checkpoint, or `undefined` when there is none yet. */
  load(): Promise<string | undefined>;
  /** Replace the saved checkpoint. */
  save(checkpoint: string): Promise<void>;
  /** Forget it (for example one the core refused to restore). */
  clear(): Promise<void>;
}

/** Options of a browser pool: the pool's, the sockets' and the page's. */
export interface BrowserPoolOptions extends PoolOptions {
  /** The sockets' settings (the overflow rule's bounds). */
  sockets?: BrowserSocketOptions;
  /**
   * Restore the pool from here at creation (unless `checkpoint` is given), and save its
   * checkpoint here every `saveEveryMs` while it changes and when the page is hidden or left
   * (`visibilitychange` to hidden, `pagehide`: the last moments a browser gives a page,
   * mobile ones included).
   */
  store?: CheckpointStore;
  /**
   * How often the checkpoint is saved while it changes (default 1 000 ms, as `tether req
   * --state`; 0: only when the page is hidden or left). A browser does not wait for an
   * IndexedDB write started while the page is being torn down, so the save at `pagehide` is
   * best effort; this one bounds what a lost one costs: at most the last interval's events
   * are delivered again after the restore.
   */
  saveEveryMs?: number;
  /**
   * Tell the core about the page's lifecycle (default true): hidden/visible as
   * `suspended`/`resumed`, `offline`/`online` events as themselves.
   */
  lifecycle?: boolean;
  /** A save to `store` failed (quota, private mode); by default ignored. */
  onStoreError?: (error: unknown) => void;
}

/**
 * A relay pool in a page: a {@link TetherPool} wired to the page's lifecycle and its
 * checkpoint store. `close()` unwires it.
 */
export class BrowserPool extends TetherPool {
  /** Whether the pool was restored from a checkpoint (its subscriptions then live on). */
  readonly restored: boolean;
  private readonly store: CheckpointStore | undefined;
  private readonly onStoreError: (error: unknown) => void;
  private readonly unwire: (() => void)[] = [];
  private ended = false;
  /** The checkpoint last handed to the store: an unchanged one is not written again. */
  private saved: string | undefined;

  constructor(options: BrowserPoolOptions = {}) {
    const { sockets, store, lifecycle, onStoreError, saveEveryMs, ...poolOptions } = options;
    super(browserHost(sockets), poolOptions);
    this.restored = poolOptions.checkpoint !== undefined;
    this.store = store;
    this.onStoreError = onStoreError ?? (() => undefined);
    if (lifecycle !== false) this.wireLifecycle();
    if (store !== undefined) this.wireSaves(saveEveryMs ?? 1000);
  }

  /** Save the checkpoint to the store now (resolves at once without a store). */
  async save(): Promise<void> {
    if (this.ended) return;
    await this.write(this.checkpoint());
  }

  private async write(checkpoint: string): Promise<void> {
    if (this.store === undefined) return;
    this.saved = checkpoint;
    await this.store.save(checkpoint);
  }

  /** Unwire the page's events, then close the pool (nothing is saved: see `save()`). */
  override close(): void {
    if (!this.ended) {
      this.ended = true;
      for (const remove of this.unwire.splice(0)) remove();
    }
    super.close();
  }

  private listen(target: EventTarget | undefined, type: string, handler: () => void): void {
    if (target === undefined) return;
    target.addEventListener(type, handler);
    this.unwire.push(() => {
      target.removeEventListener(type, handler);
    });
  }

  private wireLifecycle(): void {
    // A worker has no document but does have online/offline on its global scope.
    const doc = typeof document === "undefined" ? undefined : document;
    this.listen(doc, "visibilitychange", () => {
      if (doc === undefined || this.ended) return;
      this.lifecycle(doc.visibilityState === "hidden" ? "suspended" : "resumed");
    });
    this.listen(globalThis, "online", () => {
      if (!this.ended) this.lifecycle("online");
    });
    this.listen(globalThis, "offline", () => {
      if (!this.ended) this.lifecycle("offline");
    });
  }

  private wireSaves(every: number): void {
    const saveNow = (): void => {
      this.save().catch(this.onStoreError);
    };
    if (every > 0) {
      const timer = setInterval(() => {
        if (this.ended) return;
        const checkpoint = this.checkpoint();
        if (checkpoint !== this.saved) this.write(checkpoint).catch(this.onStoreError);
      }, every);
      this.unwire.push(() => {
        clearInterval(timer);
      });
    }
    const doc = typeof document === "undefined" ? undefined : document;
    // `pagehide` is the page's end (or its entry into the back-forward cache); a hidden
    // page may be discarded without another event, notably on mobile, so save then too.
    this.listen(globalThis, "pagehide", saveNow);
    this.listen(doc, "visibilitychange", () => {
      if (doc?.visibilityState === "hidden") saveNow();
    });
  }
}

/**
 * A relay pool over the browser's `WebSocket`, with `relays` added. With a `store` holding a
 * checkpoint, the pool is restored from it first (its subscriptions catch up and deliver
 * through `pool.items()`); a checkpoint the core refuses rejects with a `TetherError` of kind
 * `Checkpoint` or `CheckpointNewer` and is left in the store.
 */
export async function createPool(
  relays: string[] = [],
  options: BrowserPoolOptions = {},
): Promise<BrowserPool> {
  const checkpoint = options.checkpoint ?? (await options.store?.load());
  const pool = new BrowserPool(checkpoint === undefined ? options : { ...options, checkpoint });
  // A restored pool already holds its relays; adding one again adopts it, not a second one.
  for (const url of relays) pool.addRelay(url);
  return pool;
}

const OBJECTS = "checkpoints";

/**
 * A {@link CheckpointStore} in IndexedDB: the checkpoint under key `name` in database
 * `database` (one database can hold the checkpoints of several pools).
 */
export function indexedDbStore(name: string, database = "tether-js"): CheckpointStore {
  let opening: Promise<IDBDatabase> | undefined;
  /** The database once open: a save then starts synchronously (see `write`). */
  let open: IDBDatabase | undefined;
  const db = (): Promise<IDBDatabase> => {
    opening ??= new Promise<IDBDatabase>((resolve, reject) => {
      const request = indexedDB.open(database, 1);
      request.onupgradeneeded = () => {
        if (!request.result.objectStoreNames.contains(OBJECTS)) {
          request.result.createObjectStore(OBJECTS);
        }
      };
      request.onsuccess = () => {
        const opened = request.result;
        // Another tab upgrading the database: let it, and open again next time.
        opened.onversionchange = () => {
          opened.close();
          open = undefined;
          opening = undefined;
        };
        open = opened;
        resolve(opened);
      };
      request.onerror = () => {
        opening = undefined;
        reject(request.error ?? new Error(`cannot open IndexedDB ${database}`));
      };
    });
    return opening;
  };
  const write = (change: (objects: IDBObjectStore) => void): Promise<void> => {
    const run = (opened: IDBDatabase): Promise<void> => {
      const transaction = opened.transaction(OBJECTS, "readwrite");
      change(transaction.objectStore(OBJECTS));
      // Commit now rather than when the task ends: a page being left gets no later task.
      transaction.commit();
      // Resolved once durable: `complete`, not the request's `success`.
      return new Promise<void>((resolve, reject) => {
        transaction.oncomplete = () => {
          resolve();
        };
        transaction.onerror = transaction.onabort = () => {
          reject(transaction.error ?? new Error("IndexedDB transaction aborted"));
        };
      });
    };
    // Synchronous when the database is open: a save from `pagehide` is under way before the
    // handler returns, not a microtask later, which a page being unloaded may not reach.
    if (open !== undefined) {
      try {
        return run(open);
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    }
    return db().then(run);
  };
  return {
    load: async () => {
      const request = (await db()).transaction(OBJECTS, "readonly").objectStore(OBJECTS).get(name);
      return new Promise<string | undefined>((resolve, reject) => {
        request.onsuccess = () => {
          const value: unknown = request.result;
          resolve(typeof value === "string" ? value : undefined);
        };
        request.onerror = () => {
          reject(request.error ?? new Error("IndexedDB read failed"));
        };
      });
    },
    save: (checkpoint) =>
      write((objects) => {
        objects.put(checkpoint, name);
      }),
    clear: () =>
      write((objects) => {
        objects.delete(name);
      }),
  };
}

/**
 * An SSE stream from a page. A browser's `fetch` hides a redirect's status and `Location`
 * (an opaque redirect), so here a GET's redirects are followed by the browser itself
 * (`redirect: "follow"` unless given); any other method stays manual, so a POST is never
 * silently turned into a GET.
 */
export function createSse(url: string, options: SseOptions = {}): TetherSse {
  return new TetherSse(url, { redirect: "follow", ...options });
}

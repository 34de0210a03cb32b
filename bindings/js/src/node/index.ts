// tether in Node: the wasm core loaded from the package, `ws` sockets, `fetch` for SSE and
// NIP-11, checkpoints to a file.
import { readFile, rename, writeFile } from "node:fs/promises";

import { TetherPool, type PoolOptions } from "../pool.js";
import "./load.js";
import { nodeHost, type NodeSocketOptions } from "./sockets.js";

export * from "../index.js";
export { nodeHost, type NodeSocketOptions } from "./sockets.js";
// SSE through the environment's proxy (Node's own fetch reads none): `new TetherSse(url,
// { fetch: proxyFetch(Proxies.resolve({ kind: "env" })).fetch })`.
export { Proxies, ProxyError, proxyFetch, type ProxyConfig, type ProxyFetch } from "./proxy.js";

/** Options of a Node pool: the pool's and the sockets'. */
export interface NodePoolOptions extends PoolOptions {
  /** Sockets' settings (extra CA certificates, frame size). */
  sockets?: NodeSocketOptions;
}

/** A relay pool over `ws` sockets, with `relays` added. */
export function createPool(relays: string[] = [], options: NodePoolOptions = {}): TetherPool {
  const { sockets, ...poolOptions } = options;
  const pool = new TetherPool(nodeHost(sockets), poolOptions);
  for (const url of relays) pool.addRelay(url);
  return pool;
}

/** Read a checkpoint file; `undefined` when there is none yet. */
export async function readCheckpoint(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** Write a checkpoint file atomically (a crash leaves the old one or the new one). */
export async function writeCheckpoint(path: string, checkpoint: string): Promise<void> {
  const temporary = `${path}.tmp-${process.pid}`;
  await writeFile(temporary, checkpoint, "utf8");
  await rename(temporary, path);
}

// Goal 4: memory per live subscription. One pool with one relay (the testpeer relay:
// adapters/ffi/examples/testpeer, which answers each REQ with EOSE), K subscriptions opened
// and answered; the growth of V8's heap (after global.gc()) and of the wasm's linear memory,
// divided by K. The wasm memory only grows by 64 KiB pages and never shrinks: its figure is
// the pages the K subscriptions made it take (a resolution of 64 KiB / K).
//
// Each filter is distinct and about the size of the Rust figure's (bench/tests/memory.rs:
// 315 B per live subscription in a RelaySession, 94 B of it the filter's JSON).
//
// `node --expose-gc bench/subscriptions.mjs [K=1000]` (run.mjs adds the flag itself)
/* global WebAssembly */
import { readFileSync } from "node:fs";

import { count, loadTether, root, startServer, table } from "./lib.mjs";

const gc = globalThis.gc;

function settle() {
  for (let i = 0; i < 4; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** The wasm's exports: the glue's `initSync` hands back the instance already loaded. */
async function wasmExports() {
  const glue = await import(`${root()}/wasm/tether.js`);
  return glue.initSync({ module: readFileSync(`${root()}/wasm/tether_bg.wasm`) });
}

const filter = (i) => ({
  kinds: [1],
  authors: [i.toString(16).padStart(64, "0")],
  limit: 10,
});

/** Wait until every one of `subs` has its EOSE (or `complete`). */
async function answered(subs) {
  await Promise.all(
    subs.map(async (sub) => {
      const iterator = sub[Symbol.asyncIterator]();
      for (;;) {
        const { value, done } = await iterator.next();
        if (done || value.type === "eose" || value.type === "complete") return;
      }
    }),
  );
}

export async function measure(k = 1000) {
  if (gc === undefined) throw new Error("run with node --expose-gc");
  const { createPool } = await loadTether();
  const exports = await wasmExports();
  const memory = exports.memory;
  if (!(memory instanceof WebAssembly.Memory)) throw new Error("no wasm memory export");
  const relay = await startServer("testpeer");
  try {
    const pool = createPool([relay.url], {
      maxSubscriptions: k + 16,
      maxPoolSubscriptions: k + 16,
    });
    // One subscription first, so that the socket, the session and the JIT are there before.
    await answered([pool.subscribe([filter(0)])]);
    const heapBefore = settle();
    const wasmBefore = memory.buffer.byteLength;
    const subs = [];
    for (let i = 1; i <= k; i++) subs.push(pool.subscribe([filter(i)]));
    await answered(subs);
    const heapAfter = settle();
    const wasmAfter = memory.buffer.byteLength;
    const filterJson = JSON.stringify([filter(k)]).length;
    pool.close();
    return {
      k,
      heap: (heapAfter - heapBefore) / k,
      wasm: (wasmAfter - wasmBefore) / k,
      wasmTotal: wasmAfter,
      filterJson,
    };
  } finally {
    await relay.stop();
  }
}

export function report(result) {
  return (
    `${result.k} live subscriptions (answered) on one relay; filter JSON ${result.filterJson} B each\n` +
    table(
      ["memory", "bytes per subscription"],
      [
        ["V8 heap (heapUsed after gc)", result.heap.toFixed(0)],
        [
          `wasm linear memory (pages grown; ${(result.wasmTotal / 1048576).toFixed(1)} MiB in all)`,
          result.wasm.toFixed(0),
        ],
        [
          "Rust RelaySession, exact (bench/tests/memory.rs, docs/performance.md)",
          "315 (94 filter JSON)",
        ],
      ],
    )
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measure(count(process.argv[2], 1000));
  console.log(process.argv.includes("--json") ? JSON.stringify(result) : report(result));
  process.exit(0);
}

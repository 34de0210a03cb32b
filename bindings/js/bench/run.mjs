// Every benchmark of tether-js in one run, then a summary against the goals:
// 1. tether-js vs nostr-tools to EOSE on one relay with N notes, verifying (side_by_side.mjs);
// 2. the wasm's cost per EVENT frame vs the native Rust pool (event_cost.mjs);
// 3. the wasm's size gzipped (wasm_size.mjs);
// 4. memory per live subscription (subscriptions.mjs);
// and where a verified event's time goes (verify_cost.mjs).
// The package's dist/ and wasm/ are copied first, so a rebuild meanwhile changes nothing.
//
// `node bench/run.mjs [N=20000] [--rounds=3] [--frames=200000] [--subs=1000] [--no-verify-too]`
// (N also from TETHER_BENCH_N)
import { fileURLToPath } from "node:url";

import { count, runNode, snapshot, table } from "./lib.mjs";

function option(name, fallback) {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return count(arg?.slice(name.length + 3), fallback);
}

const positional = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const n = count(positional[0] ?? process.env.TETHER_BENCH_N, 20_000);
const rounds = option("rounds", 3);
const frames = option("frames", 200_000);
const subs = option("subs", 1000);

const copy = await snapshot();
try {
  // Imported after the snapshot: they load tether-js from it.
  const wasmSize = await import("./wasm_size.mjs");
  const eventCost = await import("./event_cost.mjs");
  const verifyCost = await import("./verify_cost.mjs");
  const sideBySide = await import("./side_by_side.mjs");
  const { startServer } = await import("./lib.mjs");
  const subscriptionsScript = fileURLToPath(new URL("subscriptions.mjs", import.meta.url));

  console.log("== 3. wasm size\n");
  const size = wasmSize.measure();
  console.log(wasmSize.report(size));

  console.log(`\n== 2. cost per EVENT frame, wasm vs native (${rounds} rounds)\n`);
  const cost = await eventCost.measure(frames, rounds);
  console.log(eventCost.report(cost));

  console.log(`\n== 4. memory per live subscription (${subs})\n`);
  const memoryRuns = [];
  for (let r = 0; r < rounds; r++) {
    memoryRuns.push(await runNode(subscriptionsScript, [String(subs), "--json"], ["--expose-gc"]));
  }
  const { median } = await import("./lib.mjs");
  const memory = {
    ...memoryRuns[0],
    heap: median(memoryRuns.map((m) => m.heap)),
    wasm: median(memoryRuns.map((m) => m.wasm)),
  };
  const subscriptions = await import("./subscriptions.mjs");
  console.log(subscriptions.report(memory));

  console.log("\n== per verified event: where the time goes (1 000 notes)\n");
  const relay = await startServer("notes_relay", ["1000"]);
  let verify;
  try {
    verify = verifyCost.measure(await verifyCost.fetchFrames(relay.url, 1000));
  } finally {
    await relay.stop();
  }
  console.log(verifyCost.report(verify));

  console.log(`\n== 1. tether-js vs nostr-tools, ${n} notes, ${rounds} rounds\n`);
  const side = await sideBySide.measure(n, rounds, process.argv.includes("--no-verify-too"));
  console.log(sideBySide.report(side));

  const kib = (bytes) => `${(bytes / 1024).toFixed(0)} KiB`;
  console.log("\n== summary (medians)\n");
  console.log(
    table(
      ["goal", "measured", "target", "met"],
      [
        [
          "1. events/s to EOSE, verifying: tether-js / nostr-tools",
          `${side.ratio.toFixed(2)}x (${side.summary.tether.eps.toFixed(0)} vs ${side.summary["nostr-tools"].eps.toFixed(0)}/s)`,
          ">= 10x",
          side.ratio >= 10 ? "yes" : "no",
        ],
        [
          "2. CPU per EVENT frame: wasm / native pool-rust",
          `${cost.ratio.toFixed(2)}x (${cost.wasm.toFixed(2)} vs ${cost.rust.toFixed(2)} us)`,
          "<= 2x",
          cost.ratio <= 2 ? "yes" : "no",
        ],
        ["3. wasm gzipped", kib(size.gzip), "<= 350 KiB", size.gzip <= 350 * 1024 ? "yes" : "no"],
        [
          "4. per live subscription: V8 heap + wasm memory",
          `${memory.heap.toFixed(0)} B + ${memory.wasm.toFixed(0)} B`,
          "(Rust session: 315 B)",
          "",
        ],
      ],
    ),
  );
} finally {
  copy.remove();
}
process.exit(0);

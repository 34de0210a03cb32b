// The wasm's cost per EVENT frame beside the native Rust API's, in instructions under
// valgrind's callgrind, which a busy machine cannot blur (event_cost.mjs's CPU times swing by
// 2x between rounds on a loaded 2-core machine).
//
// Each side runs twice, over WARM + N and WARM + 5N frames: the difference, over 4N frames,
// is a frame's cost in the steady state. WARM is past the pool's dedup capacity (10 000 ids),
// so every measured frame also evicts the oldest id, as on a long-lived subscription.
// - Native: `adapters/ffi/examples/event_cost.rs` (`pool-rust`: RelayPool::handle_frame +
//   poll_event; `pool-abi`: the same through the C ABI, which writes each event as a JSON
//   line) minus its `none` mode (which only makes the frames).
// - Wasm: this file's `--child` (tether-wasm's `Pool`: `handleFrameBytes` with the frame as a
//   `Buffer`, then `pollEvents`, whose string per event is the boundary's price) in Node,
//   minus the same loop that only makes the frames, each the least of three runs. V8's
//   `--predictable` and `--single-threaded` keep its compilers and collector on the measured
//   thread at the same points in every run, `--no-liftoff`
//   compiles the module with the optimising tier once, up front (where a long-lived page
//   ends up), and `setarch -R` fixes the addresses.
//
// `node bench/event_instructions.mjs [N=5000]` (needs valgrind and setarch; about ten minutes)
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

import { count, example, loadTether, table } from "./lib.mjs";

const WARM = 12_000;

/** event_cost.rs's `frame(n)`, for the subscription id `sub` (the native one is "0:1"). */
function frame(n, sub) {
  const id = n.toString(16).padStart(64, "0");
  const pk = "a".repeat(64);
  return (
    `["EVENT","${sub}",{"id":"${id}","pubkey":"${pk}","created_at":${1_700_000_000 + n},` +
    `"kind":1,"tags":[["e","${"b".repeat(64)}"],["p","${pk}"]],"content":"Just setting up my relay ` +
    `subscriptions; tether keeps them alive across drops.","sig":"${"c".repeat(128)}"}]`
  );
}

/** Make `frames` frames as `Buffer`s and, with `feed`, feed each to a pool of one open relay. */
async function child(frames, feed) {
  const { openPool } = await import("./event_cost.mjs");
  const { pool, relay, epoch, sub } = openPool();
  let sink = 0;
  for (let i = 1; i <= frames; i++) {
    const bytes = Buffer.from(frame(i, sub));
    if (!feed) {
      sink += bytes.length;
      continue;
    }
    pool.handleFrameBytes(0, relay, epoch, bytes);
    const items = pool.pollEvents();
    if (items.length !== 1) throw new Error(`frame ${i}: ${items.length} items`);
    sink += items[0].length;
  }
  if (sink === 0) throw new Error("nothing happened");
}

/** Instructions callgrind counted for `command args` (the whole process). */
function instructions(command, args, env = process.env) {
  // Without address randomisation: V8's heap layout, and with it the collector's work, moves
  // by several per cent between runs otherwise.
  const done = spawnSync(
    "setarch",
    [
      "-R",
      "valgrind",
      "--tool=callgrind",
      "--callgrind-out-file=/dev/null",
      "--smc-check=all-non-file",
      command,
      ...args,
    ],
    { encoding: "utf8", env, maxBuffer: 1 << 26 },
  );
  const collected = /Collected : (\d+)/.exec(done.stderr ?? "");
  if (done.status !== 0 || collected === null) {
    throw new Error(`valgrind ${command} ${args.join(" ")}: ${done.error ?? done.stderr}`);
  }
  return Number(collected[1]);
}

/** Instructions per frame: `{ rust, abi, wasm }` over `n` frames. */
export async function measure(n) {
  await loadTether(); // fails here, not under valgrind, when the package is not built
  const native = (mode, frames) => instructions(example("event_cost"), [mode, String(frames)]);
  const steady = (mode) => (native(mode, WARM + 5 * n) - native(mode, WARM + n)) / (4 * n);
  const none = steady("none");
  const rust = steady("pool-rust") - none;
  const abi = steady("pool-abi") - none;
  const script = fileURLToPath(import.meta.url);
  const node = (frames, feed) =>
    instructions(process.execPath, [
      "--predictable",
      "--single-threaded",
      "--wasm-num-compilation-tasks=0",
      "--no-liftoff",
      script,
      "--child",
      String(frames),
      feed ? "feed" : "none",
    ]);
  // The least of three: what varies between runs is how much JavaScript V8's optimising
  // compiler happens to recompile at start-up (tens of millions of instructions), which only
  // ever adds.
  const least = (frames, feed) => Math.min(...[0, 1, 2].map(() => node(frames, feed)));
  const made = (feed) => (least(WARM + 5 * n, feed) - least(WARM + n, feed)) / (4 * n);
  const fed = made(true);
  const making = made(false);
  return { n, rust, abi, wasm: fed - making, making, ratio: (fed - making) / rust };
}

export function report(result) {
  const row = (what, value) => [what, value.toFixed(0), (value / result.rust).toFixed(2)];
  return (
    `${4 * result.n} EVENT frames (event_cost.rs's) after ${WARM}, instructions per frame under callgrind\n` +
    table(
      ["way", "instructions", "x native"],
      [
        row("native pool-rust (RelayPool::handle_frame + poll_event)", result.rust),
        row("native pool-abi (the C ABI's, a JSON line per event)", result.abi),
        row("wasm Pool handleFrameBytes + pollEvents (a string per event)", result.wasm),
      ],
    )
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv[2] === "--child") {
    await child(Number(process.argv[3]), process.argv[4] === "feed");
  } else {
    console.log(report(await measure(count(process.argv[2], 5000))));
  }
}

// The wasm's cost per EVENT frame beside the native Rust API's, in instructions under
// valgrind's callgrind, which a busy machine cannot blur (event_cost.mjs's CPU times swing by
// 2x between rounds on a loaded 2-core machine).
//
// - Native: `adapters/ffi/examples/event_cost.rs` (`pool-rust`: RelayPool::handle_frame +
//   poll_event; `pool-abi`: the same through the C ABI, which writes each event as a JSON
//   line) minus its `none` mode (which only makes the frames), each run over WARM + N and
//   WARM + 5N frames: the difference, over 4N frames, is a frame in the steady state.
// - Wasm: this file's `--child` (tether-wasm's `Pool`: `handleFrameBytes` with the frame as a
//   `Buffer`, then `pollEvents`, whose string per event is the boundary's price) in Node,
//   minus the same loop that only makes the frames. Only N frames after WARM are counted:
//   the child waits on its stdin before and after them while `callgrind_control` zeroes and
//   then dumps the counters, so Node's start-up and V8's compiling of it (which varies by
//   tens of millions of instructions from run to run) stay out. `--predictable` and
//   `--single-threaded` keep V8's compilers and collector on the measured thread,
//   `--no-liftoff` compiles the module with the optimising tier once, up front (where a
//   long-lived page ends up), and `setarch -R` fixes the addresses: repeated runs agree to
//   within 1%.
// WARM is past the pool's dedup capacity (10 000 ids), so every measured frame also evicts
// the oldest id, as on a long-lived subscription.
//
// `node bench/event_instructions.mjs [N=4000]` (valgrind with callgrind_control, which
// attaches to the waiting child, so ptrace must be allowed; about three minutes)
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { count, example, loadTether, table } from "./lib.mjs";

/** Frames before the measured ones: past the dedup's 10 000 ids. */
export const WARM = 12_000;

/**
 * The child: WARM frames made (and, with `feed`, fed to a pool of one open relay), then
 * "ready" and a wait for a byte on stdin, then `n` more, then "done" and another wait.
 */
async function child(n, feed) {
  const { frame, openPool } = await import("./event_cost.mjs");
  const { pool, relay, epoch, sub } = openPool();
  let sink = 0;
  let next = 1;
  const run = (count) => {
    for (const end = next + count; next < end; next++) {
      const bytes = Buffer.from(frame(next, sub));
      if (!feed) {
        sink += bytes.length;
        continue;
      }
      pool.handleFrameBytes(0, relay, epoch, bytes);
      const items = pool.pollEvents();
      if (items.length !== 1) throw new Error(`frame ${next}: ${items.length} items`);
      sink += items[0].length;
    }
  };
  const byte = Buffer.alloc(1);
  run(WARM);
  writeSync(1, "ready\n");
  readSync(0, byte);
  run(n);
  writeSync(1, "done\n");
  readSync(0, byte);
  if (sink === 0) throw new Error("nothing happened");
}

/**
 * Calls from the wasm to V8's `memory.copy` helper in a callgrind dump: V8 runs every
 * variable-length copy of the wasm as a call out of its compiled code (Node 20's V8 11.3),
 * about a hundred instructions however short the copy, which native code does not pay.
 */
function copyCalls(dump) {
  const names = new Map();
  let callee = "";
  let calls = 0;
  for (const line of dump.split("\n")) {
    const named = /^c?fn=\((\d+)\)(?: (.*))?/.exec(line);
    if (named !== null) {
      if (named[2] !== undefined) names.set(named[1], named[2]);
      if (line.startsWith("cfn=")) callee = names.get(named[1]) ?? "";
    } else if (line.startsWith("calls=") && callee.includes("memory_copy_wrapper")) {
      calls += Number(line.slice(6).split(" ")[0]);
    }
  }
  return calls;
}

/**
 * Instructions of the child's `n` frames after WARM (`feed` or only made), under callgrind,
 * its `memory.copy` calls, the dump itself and the child's pid. `valgrindArgs` and `nodeArgs`
 * go to valgrind and to Node (`event_profile.mjs` asks for a cost per instruction and V8's
 * map of its compiled code).
 */
export async function counted(n, feed, { valgrindArgs = [], nodeArgs = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "tether-callgrind-"));
  try {
    const child = spawn(
      "setarch",
      [
        "-R",
        "valgrind",
        "--tool=callgrind",
        `--callgrind-out-file=${join(dir, "out")}`,
        ...valgrindArgs,
        process.execPath,
        "--predictable",
        "--single-threaded",
        "--no-liftoff",
        ...nodeArgs,
        fileURLToPath(import.meta.url),
        "--child",
        String(n),
        feed ? "feed" : "none",
      ],
      { stdio: ["pipe", "pipe", "ignore"] },
    );
    const exited = new Promise((resolve) => child.once("exit", resolve));
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const expect = async (word) => {
      const line = await lines.next();
      if (line.value !== word) throw new Error(`the child said ${line.value}, not ${word}`);
    };
    // `setarch` execs valgrind, which keeps its pid.
    const control = (flag) => execFileSync("callgrind_control", [flag, String(child.pid)]);
    await expect("ready");
    control("-z");
    child.stdin.write("x");
    await expect("done");
    control("-d");
    child.stdin.end("x");
    if ((await exited) !== 0) throw new Error("the child failed under callgrind");
    const dump = readFileSync(join(dir, "out.1"), "utf8");
    const total = /^(?:summary|totals): (\d+)/m.exec(dump);
    if (total === null) throw new Error("no total in callgrind's dump");
    return { instructions: Number(total[1]), copies: copyCalls(dump), dump, pid: child.pid };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Instructions callgrind counted in a native `command args` (the whole process). */
function instructions(command, args) {
  const done = spawnSync(
    "valgrind",
    ["--tool=callgrind", "--callgrind-out-file=/dev/null", command, ...args],
    { encoding: "utf8", maxBuffer: 1 << 26 },
  );
  const collected = /Collected : (\d+)/.exec(done.stderr ?? "");
  if (done.status !== 0 || collected === null) {
    throw new Error(`valgrind ${command} ${args.join(" ")}: ${done.error ?? done.stderr}`);
  }
  return Number(collected[1]);
}

/** Instructions per frame after WARM: `{ rust, abi, wasm }` (native over 4n frames, wasm n). */
export async function measure(n) {
  await loadTether(); // fails here, not under valgrind, when the package is not built
  const native = (mode, frames) => instructions(example("event_cost"), [mode, String(frames)]);
  const steady = (mode) => (native(mode, WARM + 5 * n) - native(mode, WARM + n)) / (4 * n);
  const none = steady("none");
  const rust = steady("pool-rust") - none;
  const abi = steady("pool-abi") - none;
  const fed = await counted(n, true);
  const made = await counted(n, false);
  const wasm = (fed.instructions - made.instructions) / n;
  const copies = (fed.copies - made.copies) / n;
  return { n, rust, abi, wasm, copies, ratio: wasm / rust };
}

export function report(result) {
  const row = (what, value) => [what, value.toFixed(0), (value / result.rust).toFixed(2)];
  return (
    `EVENT frames (event_cost.rs's) after ${WARM}, instructions per frame under callgrind ` +
    `(wasm: ${result.n} frames, native: ${4 * result.n})\n` +
    table(
      ["way", "instructions", "x native"],
      [
        row("native pool-rust (RelayPool::handle_frame + poll_event)", result.rust),
        row("native pool-abi (the C ABI's, a JSON line per event)", result.abi),
        row("wasm Pool handleFrameBytes + pollEvents (a string per event)", result.wasm),
      ],
    ) +
    `\nwasm: ${result.copies.toFixed(1)} memory.copy calls out of V8's compiled code a frame`
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv[2] === "--child") {
    await child(Number(process.argv[3]), process.argv[4] === "feed");
  } else {
    console.log(report(await measure(count(process.argv[2], 4000))));
  }
}

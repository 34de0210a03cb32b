// Where a verified event's time goes, per event, in one process: the frame's JSON.parse,
// tether's verification inside the wasm (`verifyEvent`: the same libsecp256k1 check
// `verifyQueued` runs), nostr-tools' `verifyEvent` (@noble/curves) and, when the C ABI
// library is built, the same check native (`tether_verify_event` through python3's ctypes).
//
// `node bench/verify_cost.mjs [EVENTS=1000]`
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { verifyEvent as nostrToolsVerify } from "nostr-tools/pure";
import WebSocket from "ws";

import { built, count, loadTether, startServer, table } from "./lib.mjs";

const { verifyEvent } = await loadTether();

/** The EVENT frames of every note of `url`, as the relay sent them. */
export async function fetchFrames(url, n) {
  const socket = new WebSocket(url, { perMessageDeflate: false });
  const frames = [];
  await new Promise((resolve, reject) => {
    socket.on("error", reject);
    socket.on("open", () => {
      socket.send(JSON.stringify(["REQ", "all", { kinds: [1], limit: n }]));
    });
    socket.on("message", (data) => {
      const text = data.toString();
      if (text.startsWith('["EOSE"')) resolve();
      else frames.push(text);
    });
  });
  socket.close();
  return frames;
}

function timePer(items, run, rounds = 3) {
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const started = performance.now();
    for (const item of items) run(item);
    best = Math.min(best, (performance.now() - started) / items.length);
  }
  return best * 1000;
}

const NATIVE = `
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
lib.tether_verify_event.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
events = [line.encode() for line in open(sys.argv[2]).read().splitlines()]
best = 1e9
for _ in range(3):
    started = time.perf_counter()
    for e in events:
        if lib.tether_verify_event(e, len(e)) != 0:
            raise SystemExit("invalid")
    best = min(best, (time.perf_counter() - started) / len(events))
print(best * 1e6)
`;

/** Native microseconds per check, or undefined without the library or python3. */
function native(texts) {
  const library = built("libtether_ffi.so");
  if (library === undefined) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "tether-verify-"));
  try {
    const file = join(dir, "events.jsonl");
    writeFileSync(file, texts.join("\n"));
    const done = spawnSync("python3", ["-c", NATIVE, library, file], { encoding: "utf8" });
    return done.status === 0 ? Number(done.stdout.trim()) : undefined;
  } finally {
    rmSync(dir, { recursive: true });
  }
}

/** Microseconds per event of each step; `frames` from `fetchFrames`. */
export function measure(frames) {
  const events = frames.map((frame) => JSON.parse(frame)[2]);
  const texts = events.map((event) => JSON.stringify(event));
  const parse = timePer(frames, (frame) => JSON.parse(frame));
  const wasm = timePer(texts, (text) => {
    if (verifyEvent(text) !== undefined) throw new Error("an event did not verify");
  });
  // nostr-tools marks an event verified on the object: a fresh copy each time.
  const sample = events.slice(0, Math.min(events.length, 300));
  const noble = timePer(sample, (event) => {
    if (!nostrToolsVerify({ ...event })) throw new Error("an event did not verify");
  });
  return { events: events.length, parse, wasm, noble, native: native(texts) };
}

export function report(result) {
  const us = (v) => (v === undefined ? "n/a" : v.toFixed(1));
  const rows = [
    ["JSON.parse of the EVENT frame (JS)", us(result.parse), ""],
    ["tether wasm verifyEvent (libsecp256k1 in wasm)", us(result.wasm), "1.00"],
    [
      "tether native tether_verify_event (C ABI)",
      us(result.native),
      result.native === undefined ? "" : (result.native / result.wasm).toFixed(2),
    ],
    [
      "nostr-tools verifyEvent (@noble/curves)",
      us(result.noble),
      (result.noble / result.wasm).toFixed(2),
    ],
  ];
  return table(["per event", "us", "x wasm"], rows);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const n = count(process.argv[2], 1000);
  const relay = await startServer("notes_relay", [String(n)]);
  try {
    const result = measure(await fetchFrames(relay.url, n));
    console.log(`${result.events} realistic notes, best of 3 passes`);
    console.log(report(result));
  } finally {
    await relay.stop();
  }
  process.exit(0);
}

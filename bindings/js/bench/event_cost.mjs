// The wasm's cost per EVENT frame, without verification, beside the native Rust API's, in
// one run: the frames of adapters/ffi/examples/event_cost.rs (the same text, byte for byte)
// go through tether-wasm's `Pool` (`handleFrameBytes`, then `pollEvents`) in a loop in this
// process, as UTF-8 bytes (a `Buffer`, what Node's `ws` hands the driver; `handleFrame` with the
// string is timed too), and through the native example (`pool-rust`, `pool-abi`) in its own process.
// Both are timed the same way, in CPU time (user + system): the loop minus the same loop that only makes the frames
// (the example's `none` mode), divided by N.
//
// Also: the same frames through the whole driver (`TetherPool` over a socket that is not
// one: `text(frame)` straight into its input), so the JS side's share is visible.
//
// `node bench/event_cost.mjs [N=200000]`
import { spawnSync } from "node:child_process";

import { count, cpuSeconds, example, loadTether, median, table } from "./lib.mjs";

const tether = await loadTether();
const { WasmPool, TetherPool } = tether;

const PK = "a".repeat(64);
const E = "b".repeat(64);
const SIG = "c".repeat(128);

/** event_cost.rs's `frame(n)`, for the subscription id `sub` (the native one is "0:1"). */
export function frame(n, sub) {
  const id = n.toString(16).padStart(64, "0");
  return (
    `["EVENT","${sub}",{"id":"${id}","pubkey":"${PK}","created_at":${1_700_000_000 + n},` +
    `"kind":1,"tags":[["e","${E}"],["p","${PK}"]],"content":"Just setting up my relay ` +
    `subscriptions; tether keeps them alive across drops.","sig":"${SIG}"}]`
  );
}

/** A wasm pool of one open relay with one subscription, drained; `{ pool, relay, epoch, sub }`. */
export function openPool() {
  const pool = new WasmPool(JSON.stringify({ seed: 7 }));
  const relay = pool.addRelay(0);
  pool.subscribe(0, JSON.stringify([{ kinds: [1] }]));
  let epoch;
  for (let t = pool.pollTransmit(); t !== undefined; t = pool.pollTransmit()) {
    const transmit = JSON.parse(t);
    if (transmit.type === "open") epoch = transmit.epoch;
  }
  pool.handleOpen(0, relay, epoch);
  let sub;
  for (let t = pool.pollTransmit(); t !== undefined; t = pool.pollTransmit()) {
    const transmit = JSON.parse(t);
    if (transmit.type === "send" && transmit.text.startsWith('["REQ"')) {
      sub = JSON.parse(transmit.text)[1];
    }
  }
  pool.pollEvents();
  return { pool, relay, epoch, sub };
}

/**
 * Seconds for frames `from..from+n`, each made as a `Buffer` (`string`: as a string): only made
 * (`none`, `none-string`), or made and fed (`wasm`, `parse`, `string`).
 */
export function loop(mode, state, from, n) {
  const { pool, relay, epoch, sub } = state;
  const asString = mode === "string" || mode === "none-string";
  let sink = 0;
  const started = process.cpuUsage();
  for (let i = from; i < from + n; i++) {
    const text = asString ? frame(i, sub) : Buffer.from(frame(i, sub));
    if (mode === "none" || mode === "none-string") {
      sink += text.length;
      continue;
    }
    if (asString) pool.handleFrame(0, relay, epoch, text);
    else pool.handleFrameBytes(0, relay, epoch, text);
    const items = pool.pollEvents();
    if (items.length !== 1) throw new Error(`frame ${i}: ${items.length} items`);
    if (mode === "parse") sink += JSON.parse(items[0]).event.created_at;
    else sink += items[0].length;
  }
  const seconds = cpuSeconds(process.cpuUsage(started));
  if (sink === 0) throw new Error("nothing happened");
  return seconds;
}

/** The whole driver: a TetherPool whose one socket is this loop. */
async function driverLoop(from, n, warm) {
  let events;
  const host = {
    canPing: true,
    connect(url, socketEvents) {
      events = socketEvents;
      return { send() {}, ping() {}, close() {}, pause() {} };
    },
  };
  const pool = new TetherPool(host, { seed: 7, bufferItems: n + warm + 16 });
  pool.addRelay("ws://127.0.0.1:1");
  const subscription = pool.subscribe([{ kinds: [1] }]);
  await new Promise((resolve) => setTimeout(resolve, 0));
  events.opened();
  // The REQ went out as sub "0:1" too (the pool's first subscription on its first relay).
  for (let i = from; i < from + warm; i++) events.text(Buffer.from(frame(i, "0:1")));
  const started = process.cpuUsage();
  for (let i = from + warm; i < from + warm + n; i++) events.text(Buffer.from(frame(i, "0:1")));
  const seconds = cpuSeconds(process.cpuUsage(started));
  let received = 0;
  for await (const item of subscription) {
    if (item.type === "event") received += 1;
    if (received === n + warm) break;
  }
  pool.close();
  return seconds;
}

/** Native: `[wall, cpu]` seconds of `event_cost MODE n`, from bash's `time`. */
function native(mode, n) {
  const done = spawnSync(
    "bash",
    ["-c", `TIMEFORMAT="%R %U %S"; time "${example("event_cost")}" ${mode} ${n} >/dev/null`],
    { encoding: "utf8" },
  );
  if (done.status !== 0) throw new Error(`event_cost ${mode}: ${done.stderr}`);
  const [wall, user, system] = done.stderr.trim().split("\n").pop().split(" ").map(Number);
  return [wall, user + system];
}

/** One round: microseconds per frame of each way. */
export async function round(n) {
  const state = openPool();
  const warm = Math.min(n, 20_000);
  loop("wasm", state, 1, warm);
  const base = loop("none", state, warm + 1, n);
  const wasm = loop("wasm", state, warm + 1, n) - base;
  const parse = loop("parse", state, warm + n + 1, n) - base;
  const string =
    loop("string", state, warm + 2 * n + 1, n) - loop("none-string", state, warm + 1, n);
  state.pool.free();
  const driver = (await driverLoop(1, n, warm)) - base;
  const [, none] = native("none", n);
  const [, rust] = native("pool-rust", n);
  const [, abi] = native("pool-abi", n);
  const us = (seconds) => (seconds / n) * 1e6;
  return {
    wasm: us(wasm),
    string: us(string),
    parse: us(parse),
    driver: us(driver),
    rust: us(rust - none),
    abi: us(abi - none),
  };
}

/** Medians of `rounds` rounds, and each round's ratio wasm / native (pool-rust). */
export async function measure(n, rounds = 3) {
  const all = [];
  for (let r = 0; r < rounds; r++) all.push(await round(n));
  const pick = (key) => median(all.map((row) => row[key]));
  return {
    n,
    rounds: all,
    wasm: pick("wasm"),
    string: pick("string"),
    parse: pick("parse"),
    driver: pick("driver"),
    rust: pick("rust"),
    abi: pick("abi"),
    ratio: median(all.map((row) => row.wasm / row.rust)),
  };
}

export function report(result) {
  const fmt = (v) => v.toFixed(2);
  const rows = [
    ["native pool-rust (RelayPool::handle_frame + poll_event)", fmt(result.rust), "1.00"],
    ["native pool-abi (the C ABI's)", fmt(result.abi), fmt(result.abi / result.rust)],
    ["wasm Pool handleFrameBytes + pollEvents", fmt(result.wasm), fmt(result.wasm / result.rust)],
    ["  handleFrame (a string) instead", fmt(result.string), fmt(result.string / result.rust)],
    ["  + JSON.parse of the item", fmt(result.parse), fmt(result.parse / result.rust)],
    [
      "whole driver (TetherPool, socket text to queue)",
      fmt(result.driver),
      fmt(result.driver / result.rust),
    ],
  ];
  return (
    `${result.n} EVENT frames (event_cost.rs's), CPU us per frame, medians of ${result.rounds.length}` +
    ` rounds; wasm / native per round: ${result.rounds.map((r) => (r.wasm / r.rust).toFixed(2)).join(", ")}\n` +
    table(["way", "us/frame", "x native"], rows)
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measure(count(process.argv[2], 200_000));
  console.log(report(result));
  process.exit(0);
}

// Where an EVENT frame's instructions go, in the wasm and natively, part by part: the
// measurement of `event_instructions.mjs` (the same frames, the same child, the same
// subtraction of the loop that only makes the frames), with callgrind's cost per instruction
// address. V8's map of its compiled code (`--perf-basic-prof`) names each address inside the
// wasm by the function it belongs to, from a copy of the package whose wasm keeps its function
// names (wasm-bindgen run again on cargo's module, without `--remove-name-section`); the
// native example's functions come with their symbols.
//
// A function's part follows its name (`PARTS`, first match). The two compilers inline
// differently (natively most of the frame's decoding is inlined into
// `RelaySession::handle_frame`, "session and pool" here), so the totals are exact and the
// split between neighbouring parts is approximate; the parts the native pool does not have
// at all (the event's JSON line, UTF-8 checks of bytes, wasm-bindgen, V8's glue) are not.
//
// `node bench/event_profile.mjs [N=2000] [--functions=K]` after `npm run build:wasm` (needs
// valgrind, setarch and wasm-bindgen, as `event_instructions.mjs` does; about two minutes)
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { WARM, counted } from "./event_instructions.mjs";
import { PACKAGE, copyPackage, count, example, table } from "./lib.mjs";
import { cargoModule, functionNames, section } from "./wasm_size.mjs";

/** What a function is part of, by its name; the first rule that matches. */
const PARTS = [
  ["copies (memcpy; V8's memory.copy)", /memory_copy|memcpy|memmove/],
  ["UTF-8 checks of bytes", /from_utf8|utf8_validation/],
  [
    "the event's JSON line",
    /serde_json::ser|serde_core::ser|Serialize|Appender|tether_core::line|Hex|itoa/,
  ],
  ["wasm-bindgen", /wasm_bindgen|__wbindgen|__externref|^pool_|tether_wasm/],
  ["dedup (B-tree, deque)", /dedup|btree|vec_deque/],
  [
    "frame decoding (serde_json, ids)",
    /serde_json|serde_core|Deserialize|Visitor|from_hex|message::|parse_wire_id|Atom/,
  ],
  [
    "allocation",
    /dlmalloc|__rdl_|__rust_(?:alloc|dealloc|realloc)|raw_vec|^(?:malloc|free|realloc|cfree|_int_\w+|malloc_consolidate|unlink_chunk\S*)$/,
  ],
  ["session and pool (the rest of tether-core)", /tether_core/],
];
const V8_GLUE = "V8 and the JS glue (typed arrays, strings, calls)";
const OTHER = "other (core, std; natively also the example's loop)";

/** A function's part: `compiled` says whether it is Rust's (natively or in the wasm), not V8's. */
function partOf(name, compiled) {
  if (!compiled) return /memory_copy|memcpy|memmove/.test(name) ? PARTS[0][0] : V8_GLUE;
  return PARTS.find(([, rule]) => rule.test(name))?.[0] ?? OTHER;
}

/**
 * Self cost per address range owner: callgrind's dump (`--dump-instr=yes --dump-line=no`)
 * read line by line; `name(address, fn)` says whom an instruction's cost belongs to.
 */
function costs(dump, name) {
  const fns = new Map();
  const out = new Map();
  let fn = "";
  let at = 0;
  let callCost = false;
  for (const line of dump.split("\n")) {
    const named = /^(c?)fn=\((\d+)\)(?: (.*))?$/.exec(line);
    if (named !== null) {
      if (named[3] !== undefined) fns.set(named[2], named[3]);
      if (named[1] === "") fn = fns.get(named[2]) ?? "";
      continue;
    }
    if (line.startsWith("calls=")) {
      callCost = true; // the next line is the call's inclusive cost, not this function's
      continue;
    }
    const cost = /^(0x[0-9a-f]+|[+-]\d+|\*) (\d+)/.exec(line);
    if (cost === null) continue;
    const [, position, ir] = cost;
    if (position.startsWith("0x")) at = Number.parseInt(position, 16);
    else if (position !== "*") at += Number(position);
    if (callCost) {
      callCost = false;
      continue;
    }
    const who = name(at, fn);
    out.set(who, (out.get(who) ?? 0) + Number(ir));
  }
  return out;
}

/** `a - b`, per key, over `n` frames. */
function perFrame(a, b, n) {
  const out = new Map();
  for (const key of new Set([...a.keys(), ...b.keys()])) {
    out.set(key, ((a.get(key) ?? 0) - (b.get(key) ?? 0)) / n);
  }
  return out;
}

/** The wasm's functions in V8's perf map of process `pid`: `[start, end, name]`, sorted. */
function wasmRanges(pid, names) {
  const path = `/tmp/perf-${pid}.map`;
  try {
    const ranges = [];
    for (const line of readFileSync(path, "utf8").split("\n")) {
      const entry = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
      if (entry === null) continue;
      // Node 20 writes a wasm function's name as it is; later Nodes as `JS:<name>-<index>-<tier>`.
      const name = entry[3].replace(/^JS:/, "").replace(/-\d+-(?:turbofan|liftoff)$/, "");
      if (!names.has(name)) continue;
      const start = Number.parseInt(entry[1], 16);
      ranges.push([start, start + Number.parseInt(entry[2], 16), name]);
    }
    return ranges.sort((a, b) => a[0] - b[0]);
  } finally {
    rmSync(path, { force: true });
  }
}

function owner(ranges, at) {
  let low = 0;
  let high = ranges.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (ranges[mid][0] <= at) low = mid + 1;
    else high = mid;
  }
  const range = ranges[low - 1];
  return range !== undefined && at < range[1] ? range[2] : undefined;
}

/**
 * A copy of the package whose wasm keeps its names: cargo's module through wasm-bindgen
 * again, refused unless its code is the package's, byte for byte. `{ root, names, remove }`.
 */
function namedPackage() {
  const module = cargoModule();
  const shippedPath = join(PACKAGE, "wasm", "tether_bg.wasm");
  if (!existsSync(module) || !existsSync(shippedPath)) {
    throw new Error(`no ${module} or ${shippedPath}: run npm run build:wasm first`);
  }
  const root = mkdtempSync(join(tmpdir(), "tether-js-profile-"));
  const args = ["--target", "web", "--out-dir", join(root, "wasm"), "--out-name", "tether"];
  execFileSync("wasm-bindgen", [...args, module]);
  const named = readFileSync(join(root, "wasm", "tether_bg.wasm"));
  const shipped = readFileSync(shippedPath);
  if (!section(named, 10).equals(section(shipped, 10))) {
    rmSync(root, { recursive: true, force: true });
    throw new Error(`${module} is not the package's wasm: run npm run build:wasm again`);
  }
  copyPackage(root);
  return {
    root,
    names: new Set(functionNames(named).values()),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

/**
 * The wasm's frame: cost per function name (wasm functions by name, the rest by symbol), and
 * the set of the wasm's names.
 */
async function wasmFrame(n) {
  const { root, names, remove } = namedPackage();
  const previous = process.env.TETHER_JS_ROOT;
  process.env.TETHER_JS_ROOT = root;
  try {
    const options = {
      valgrindArgs: ["--dump-instr=yes", "--dump-line=no"],
      nodeArgs: ["--perf-basic-prof"],
    };
    const run = async (feed) => {
      const { dump, pid } = await counted(n, feed, options);
      const ranges = wasmRanges(pid, names);
      return costs(dump, (at, fn) => owner(ranges, at) ?? fn);
    };
    return { frame: perFrame(await run(true), await run(false), n), names };
  } finally {
    if (previous === undefined) delete process.env.TETHER_JS_ROOT;
    else process.env.TETHER_JS_ROOT = previous;
    remove();
  }
}

/** A native mode's frame in the steady state, per symbol (as `event_instructions.mjs`). */
function nativeFrame(mode, n) {
  const dir = mkdtempSync(join(tmpdir(), "tether-callgrind-"));
  try {
    const run = (frames) => {
      const out = join(dir, `${mode}-${frames}`);
      const done = spawnSync(
        "valgrind",
        [
          "--tool=callgrind",
          "--dump-instr=yes",
          "--dump-line=no",
          `--callgrind-out-file=${out}`,
          example("event_cost"),
          mode,
          `${frames}`,
        ],
        { encoding: "utf8" },
      );
      if (done.status !== 0) throw new Error(`valgrind event_cost ${mode}: ${done.stderr}`);
      return costs(readFileSync(out, "utf8"), (_, fn) => fn);
    };
    return perFrame(run(WARM + 5 * n), run(WARM + n), 4 * n);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function minus(a, b) {
  const out = new Map(a);
  for (const [key, value] of b) out.set(key, (out.get(key) ?? 0) - value);
  return out;
}

function byPart(frame, compiled) {
  const parts = new Map();
  for (const [name, cost] of frame) {
    const part = partOf(name, compiled(name));
    parts.set(part, (parts.get(part) ?? 0) + cost);
  }
  return parts;
}

const sum = (map) => [...map.values()].reduce((total, value) => total + value, 0);

/**
 * `{ n, rust, abi, wasm, wasmNames }`: `Map`s of function name to instructions per frame, and
 * the names that are the wasm's own functions (the rest of `wasm` is V8's).
 */
export async function measure(n) {
  const none = nativeFrame("none", n);
  const rust = minus(nativeFrame("pool-rust", n), none);
  const abi = minus(nativeFrame("pool-abi", n), none);
  const { frame, names } = await wasmFrame(n);
  return { n, rust, abi, wasm: frame, wasmNames: names };
}

export function report(result, functions = 15) {
  const parts = {
    rust: byPart(result.rust, (name) => !/memcpy|memmove/.test(name)),
    abi: byPart(result.abi, (name) => !/memcpy|memmove/.test(name)),
    wasm: byPart(result.wasm, (name) => result.wasmNames.has(name)),
  };
  const order = [...PARTS.map(([part]) => part), OTHER, V8_GLUE];
  const cell = (value) => (Math.abs(value) < 0.5 ? "0" : value.toFixed(0));
  const rows = order.map((part) => [
    part,
    cell(parts.rust.get(part) ?? 0),
    cell(parts.abi.get(part) ?? 0),
    cell(parts.wasm.get(part) ?? 0),
  ]);
  const totals = { rust: sum(result.rust), abi: sum(result.abi), wasm: sum(result.wasm) };
  rows.push(["total", cell(totals.rust), cell(totals.abi), cell(totals.wasm)]);
  const top = [...result.wasm]
    .sort((a, b) => b[1] - a[1])
    .slice(0, functions)
    .map(([name, value]) => [
      cell(value),
      partOf(name, result.wasmNames.has(name)),
      name.replace(/::h[0-9a-f]{16}$/, "").slice(0, 100),
    ]);
  const heading = `\n\nthe wasm's ${functions} costliest functions (self)\n`;
  return (
    `EVENT frames, instructions per frame by part (wasm: ${result.n} frames, native: ` +
    `${4 * result.n}); wasm / native pool-rust ${(totals.wasm / totals.rust).toFixed(2)}x\n` +
    table(["part", "native pool-rust", "native pool-abi", "wasm"], rows) +
    (functions > 0 ? heading + table(["instructions", "part", "function"], top) : "")
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const functions = process.argv.find((arg) => arg.startsWith("--functions="));
  const n = count(
    process.argv.slice(2).find((arg) => !arg.startsWith("--")),
    2000,
  );
  console.log(report(await measure(n), functions ? Number(functions.slice(12)) : 15));
}

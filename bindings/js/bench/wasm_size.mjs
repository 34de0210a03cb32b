// Goal 3: the wasm's size, raw, gzipped (-9, what build-wasm.mjs prints) and brotli'd, and
// what its sections hold (code, data: libsecp256k1's tables, ...). With `--code`, where the
// code section goes, read from the function names of cargo's module before wasm-bindgen
// strips them (`$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm/tether_wasm.wasm`).
//
// `node bench/wasm_size.mjs [PATH=wasm/tether_bg.wasm]`
// `node bench/wasm_size.mjs --code [PATH=<cargo's tether_wasm.wasm>]`
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

import { REPO, root, table } from "./lib.mjs";

const NAMES = ["custom", "type", "import", "function", "table", "memory", "global", "export"];
NAMES.push("start", "element", "code", "data", "data count");

function leb(bytes, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if ((byte & 0x80) === 0) return [value, at];
  }
}

/** `[name, bytes]` of each section; custom sections by their own name. */
function sections(bytes) {
  const out = [];
  let at = 8;
  while (at < bytes.length) {
    const id = bytes[at];
    const [size, body] = leb(bytes, at + 1);
    let name = NAMES[id] ?? `#${id}`;
    if (id === 0) {
      const [length, start] = leb(bytes, body);
      name = `custom "${new TextDecoder().decode(bytes.subarray(start, start + length))}"`;
    }
    out.push([name, body + size - at]);
    at = body + size;
  }
  return out;
}

export function measure(path = `${root()}/wasm/tether_bg.wasm`) {
  const bytes = readFileSync(path);
  return {
    path,
    raw: bytes.length,
    gzip: gzipSync(bytes, { level: 9 }).length,
    brotli: brotliCompressSync(bytes, {
      params: { [constants.BROTLI_PARAM_QUALITY]: 11 },
    }).length,
    sections: sections(bytes),
  };
}

export function report(result) {
  const kib = (n) => (n / 1024).toFixed(1);
  const rows = result.sections
    .filter(([, size]) => size > 1024)
    .map(([name, size]) => [name, kib(size), ((100 * size) / result.raw).toFixed(1)]);
  return (
    `${result.path}: ${kib(result.raw)} KiB raw, ${kib(result.gzip)} KiB gzip -9, ` +
    `${kib(result.brotli)} KiB brotli 11 (goal: <= 350 KiB gzipped: ` +
    `${result.gzip <= 350 * 1024 ? "met" : "NOT met"})\n` +
    table(["section", "KiB", "%"], rows)
  );
}

/** What a function's (mangled) name says it is part of; the first rule that matches. */
const PARTS = [
  ["B-tree maps and sets (std)", /collections\.\.btree|collections5btree/],
  ["serde_json deserializing", /serde_json\.\.de|serde_json2de|SeqAccess|MapAccess/],
  ["sorts (std)", /slice\.\.sort|slice4sort/],
  ["libsecp256k1 (C)", /^rustsecp256k1|secp256k1/],
  ["url and IDNA", /^_ZN3url|idna|icu_/],
  ["serde and serde_json, other", /serde/],
  ["wasm-bindgen and js-sys", /wasm_bindgen|js_sys/],
  ["tether-core", /tether_core/],
  ["tether-wasm", /tether_wasm/],
];

/** The body of the module's first section `id` (empty if it has none). */
export function section(bytes, id) {
  let at = 8;
  while (at < bytes.length) {
    const [size, body] = leb(bytes, at + 1);
    if (bytes[at] === id) return bytes.subarray(body, body + size);
    at = body + size;
  }
  return bytes.subarray(0, 0);
}

/** The "name" section's function names, by function index (none: an empty map). */
export function functionNames(bytes) {
  const names = new Map();
  let at = 8;
  while (at < bytes.length) {
    const [size, body] = leb(bytes, at + 1);
    if (bytes[at] === 0) readNames(bytes, body, body + size, names);
    at = body + size;
  }
  return names;
}

/** The code section's bytes by [`PARTS`], from the "name" section's function names. */
export function codeParts(path) {
  const bytes = readFileSync(path);
  const imported = importedFunctions(section(bytes, 2));
  const code = section(bytes, 10);
  const bodies = [];
  let [count, p] = leb(code, 0);
  for (; count > 0; count--) {
    const [length, start] = leb(code, p);
    bodies.push(length);
    p = start + length;
  }
  const names = functionNames(bytes);
  if (names.size === 0) throw new Error(`${path} has no function names (wasm-bindgen strips them)`);
  const parts = new Map();
  bodies.forEach((length, i) => {
    const name = names.get(imported + i) ?? "";
    const part = PARTS.find(([, rule]) => rule.test(name))?.[0] ?? "other (core, alloc, std, ...)";
    parts.set(part, (parts.get(part) ?? 0) + length);
  });
  return [...parts].sort((a, b) => b[1] - a[1]);
}

/**
 * How many of the module's functions are imports (they come first in the index space), from
 * the import section's body `bytes`.
 */
function importedFunctions(bytes) {
  if (bytes.length === 0) return 0;
  let [count, p] = leb(bytes, 0);
  let functions = 0;
  for (; count > 0; count--) {
    for (let field = 0; field < 2; field++) {
      const [length, start] = leb(bytes, p);
      p = start + length;
    }
    const kind = bytes[p++];
    if (kind === 0) {
      functions++;
      [, p] = leb(bytes, p);
    } else if (kind === 1) {
      p++;
      const flags = bytes[p++];
      [, p] = leb(bytes, p);
      if (flags & 1) [, p] = leb(bytes, p);
    } else if (kind === 2) {
      const flags = bytes[p++];
      [, p] = leb(bytes, p);
      if (flags & 1) [, p] = leb(bytes, p);
    } else {
      p += 2;
    }
  }
  return functions;
}

/** The function names of a custom "name" section into `names` (any other section: none). */
function readNames(bytes, body, end, names) {
  const [length, start] = leb(bytes, body);
  if (new TextDecoder().decode(bytes.subarray(start, start + length)) !== "name") return;
  let p = start + length;
  while (p < end) {
    const kind = bytes[p];
    const [size, sub] = leb(bytes, p + 1);
    if (kind === 1) {
      let [count, q] = leb(bytes, sub);
      for (; count > 0; count--) {
        let index;
        let nameLength;
        [index, q] = leb(bytes, q);
        [nameLength, q] = leb(bytes, q);
        names.set(index, new TextDecoder().decode(bytes.subarray(q, q + nameLength)));
        q += nameLength;
      }
    }
    p = sub + size;
  }
}

/** cargo's module, before wasm-bindgen (`$CARGO_TARGET_DIR`, else the repository's `target/`). */
export function cargoModule() {
  const target = process.env.CARGO_TARGET_DIR ?? join(REPO, "target");
  return join(target, "wasm32-unknown-unknown", "wasm", "tether_wasm.wasm");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv[2] === "--code") {
    const path = process.argv[3] ?? cargoModule();
    if (!existsSync(path)) throw new Error(`no ${path}: run npm run build:wasm first`);
    const parts = codeParts(path);
    const total = parts.reduce((sum, [, n]) => sum + n, 0);
    console.log(`${path}: code section ${(total / 1024).toFixed(1)} KiB of function bodies`);
    console.log(
      table(
        ["part", "KiB", "%"],
        parts.map(([part, n]) => [part, (n / 1024).toFixed(1), ((100 * n) / total).toFixed(1)]),
      ),
    );
  } else {
    console.log(report(measure(process.argv[2])));
  }
}

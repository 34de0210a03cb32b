// Goal 3: the wasm's size, raw, gzipped (-9, what build-wasm.mjs prints) and brotli'd, and
// what its sections hold (code, data: libsecp256k1's tables, ...); whether binaryen's
// wasm-opt was available to the build (scripts/build-wasm.mjs skips it when it is not).
//
// `node bench/wasm_size.mjs [PATH=wasm/tether_bg.wasm]`
import { existsSync, readFileSync } from "node:fs";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

import { PACKAGE, root, table } from "./lib.mjs";

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
    wasmOpt: existsSync(`${PACKAGE}/node_modules/.bin/wasm-opt`),
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
    `binaryen's wasm-opt in node_modules: ${result.wasmOpt ? "yes" : "no (build-wasm.mjs skipped it)"}\n` +
    table(["section", "KiB", "%"], rows)
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(report(measure(process.argv[2])));
}

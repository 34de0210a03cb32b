// Builds wasm/ (the tether-wasm module and its wasm-bindgen glue) from the Rust workspace:
// cargo for wasm32, then wasm-bindgen (installed from crates.io at the crate's version).
// `npm pack` runs it through `prepack`.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "..");
const repo = resolve(pkg, "..", "..");
const target = process.env.CARGO_TARGET_DIR ?? join(repo, "target");
const out = join(pkg, "wasm");

function run(command, args, env = process.env) {
  execFileSync(command, args, { stdio: "inherit", cwd: repo, env });
}

// libsecp256k1 for wasm32: clang offers a 128-bit integer that wasm lacks, so the library's
// default 5x52 field arithmetic runs on emulated multiplies, several times slower than the
// 32-bit field with native 64-bit products at -O3 (bench/verify_cost.mjs measures the latter).
const cflags = "-O3 -DUSE_FORCE_WIDEMUL_INT64";

run(
  "cargo",
  [
    "build",
    "--quiet",
    "--profile",
    "wasm",
    "--target",
    "wasm32-unknown-unknown",
    "-p",
    "tether-wasm",
  ],
  { ...process.env, CFLAGS_wasm32_unknown_unknown: cflags },
);
const built = join(target, "wasm32-unknown-unknown", "wasm", "tether_wasm.wasm");
mkdirSync(out, { recursive: true });
run("wasm-bindgen", [
  "--target",
  "web",
  "--remove-name-section",
  "--remove-producers-section",
  "--out-dir",
  out,
  "--out-name",
  "tether",
  built,
]);
const wasm = join(out, "tether_bg.wasm");
// No wasm-opt: in a one-off trial binaryen 132's -O3, -Os and -Oz each made the gzipped
// module larger, for no measurable gain per event.
const size = statSync(wasm).size;
const gz = gzipSync(readFileSync(wasm), { level: 9 }).length;
console.log(
  `wasm/tether_bg.wasm: ${(size / 1024).toFixed(0)} KiB, ${(gz / 1024).toFixed(0)} KiB gzipped`,
);
if (!existsSync(join(out, "tether.js"))) {
  throw new Error("wasm-bindgen wrote no tether.js");
}

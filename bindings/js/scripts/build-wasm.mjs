// Builds wasm/ (the tether-wasm module and its wasm-bindgen glue) from the Rust workspace:
// cargo for wasm32, wasm-bindgen (installed from crates.io at the crate's version), then
// binaryen's wasm-opt from npm. `npm pack` runs it through `prepack`.
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

function run(command, args) {
  execFileSync(command, args, { stdio: "inherit", cwd: repo });
}

run("cargo", [
  "build",
  "--quiet",
  "--profile",
  "wasm",
  "--target",
  "wasm32-unknown-unknown",
  "-p",
  "tether-wasm",
]);
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
// binaryen from npm: a release that knows wasm-bindgen's reference types (Debian's 108
// breaks the externref table).
const wasmOpt = join(pkg, "node_modules", ".bin", "wasm-opt");
if (existsSync(wasmOpt)) {
  run(wasmOpt, [process.env.TETHER_WASM_OPT ?? "-O3", wasm, "-o", wasm]);
}
const size = statSync(wasm).size;
const gz = gzipSync(readFileSync(wasm), { level: 9 }).length;
console.log(
  `wasm/tether_bg.wasm: ${(size / 1024).toFixed(0)} KiB, ${(gz / 1024).toFixed(0)} KiB gzipped`,
);
if (!existsSync(join(out, "tether.js"))) {
  throw new Error("wasm-bindgen wrote no tether.js");
}

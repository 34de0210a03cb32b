/* global WebAssembly */
// Helpers shared by the benchmarks: paths, the relays (each in its own process), child
// processes measured by wall and CPU time, medians.
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** bindings/js */
export const PACKAGE = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
/** The repository's root. */
export const REPO = fileURLToPath(new URL("../../..", import.meta.url)).replace(/\/$/, "");

/**
 * The package the benchmarks load: `TETHER_JS_ROOT` (a snapshot, see `snapshot`) or this one.
 */
export function root() {
  return process.env.TETHER_JS_ROOT ?? PACKAGE;
}

/** tether-js's Node entry, from `root()`. */
export function loadTether() {
  return import(`${root()}/dist/node/index.js`);
}

/**
 * A copy of the package's dist/ and wasm/ in a temporary directory (its node_modules linked),
 * so that a rebuild of wasm/ by someone else during a long run changes nothing mid-run; the
 * wasm must compile. Sets `TETHER_JS_ROOT` for this process's children; returns
 * `{ root, remove }`.
 */
export async function snapshot() {
  const root = mkdtempSync(join(tmpdir(), "tether-js-bench-"));
  for (let attempt = 0; ; attempt++) {
    cpSync(join(PACKAGE, "wasm"), join(root, "wasm"), { recursive: true });
    const bytes = readFileSync(join(root, "wasm", "tether_bg.wasm"));
    if (bytes.length > 0 && WebAssembly.validate(bytes)) break;
    if (attempt === 30) throw new Error("wasm/tether_bg.wasm does not compile (being rebuilt?)");
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  copyPackage(root);
  process.env.TETHER_JS_ROOT = root;
  return {
    root,
    remove: () => {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * The package's dist/ and package.json copied into `root`, its node_modules linked: all of a
 * loadable package but wasm/, which the caller puts there.
 */
export function copyPackage(root) {
  cpSync(join(PACKAGE, "dist"), join(root, "dist"), { recursive: true });
  cpSync(join(PACKAGE, "package.json"), join(root, "package.json"));
  symlinkSync(join(PACKAGE, "node_modules"), join(root, "node_modules"));
}

/** Where cargo put `release/<path>` (CARGO_TARGET_DIR, else ~/.cache/tether/target, else target/). */
export function built(path) {
  const dirs = [
    process.env.CARGO_TARGET_DIR,
    `${homedir()}/.cache/tether/target`,
    `${REPO}/target`,
  ].filter((dir) => dir !== undefined);
  for (const dir of dirs) {
    const full = `${dir}/release/${path}`;
    if (existsSync(full)) return full;
  }
  return undefined;
}

/** A release example of tether-ffi, built once by cargo. */
export function example(name) {
  const path = built(`examples/${name}`);
  if (path !== undefined) return path;
  throw new Error(
    `no ${name} example: CARGO_TARGET_DIR=$HOME/.cache/tether/target ` +
      `cargo build --release -p tether-ffi --example ${name}`,
  );
}

/**
 * Start a server example that prints its URL on its first stdout line and serves until its
 * stdin closes; resolves with `{ url, stop }`.
 */
export function startServer(name, args = []) {
  const child = spawn(example(name), args, { stdio: ["pipe", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    const onData = (chunk) => {
      out += chunk;
      const newline = out.indexOf("\n");
      if (newline < 0) return;
      child.stdout.off("data", onData);
      child.stdout.resume();
      resolve({
        url: out.slice(0, newline).trim(),
        stop: () =>
          new Promise((done) => {
            child.once("exit", () => done());
            child.stdin.end();
          }),
      });
    };
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", onData);
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`${name} exited (${code}) before its URL`)));
  });
}

/**
 * Run `node script args` and resolve with the JSON object its last stdout line holds, plus
 * `processWall` (seconds from spawn to exit, measured here).
 */
export function runNode(script, args = [], nodeFlags = []) {
  const started = performance.now();
  const child = spawn(process.execPath, [...nodeFlags, script, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => {
      if (code !== 0) {
        reject(new Error(`${script} exited ${code}: ${out.slice(-2000)}`));
        return;
      }
      const lines = out.trim().split("\n");
      const result = JSON.parse(lines[lines.length - 1]);
      resolve({ ...result, processWall: (performance.now() - started) / 1000 });
    });
  });
}

/** Run a program to its end; resolves with its stdout. */
export function runProgram(path, args = []) {
  const child = spawn(path, args, { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${path} exited ${code}`));
    });
  });
}

/** The median of numbers. */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Seconds of CPU (user + system) in a `process.cpuUsage()` difference. */
export function cpuSeconds(usage) {
  return (usage.user + usage.system) / 1e6;
}

/** A positive integer from the command line or the environment, else `fallback`. */
export function count(text, fallback) {
  if (text === undefined || text === "") return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`not a positive integer: ${text}`);
  return n;
}

/** A table: `rows` of strings, columns padded (the first left, the rest right). */
export function table(header, rows) {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((row) => String(row[i]).length)));
  const line = (row) =>
    row
      .map((cell, i) =>
        i === 0 ? String(cell).padEnd(widths[i]) : String(cell).padStart(widths[i]),
      )
      .join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

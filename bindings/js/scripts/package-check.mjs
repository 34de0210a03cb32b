// The package as a user gets it: pack it (or take a tarball already packed), install it
// into a fresh project with its dependencies from the registry, and run its Node tests from
// there, where `tether-js/node` resolves to the installed copy. Prints the wasm's size
// gzipped. Exits non-zero on any failure.
//
//   node scripts/package-check.mjs [path/to/tether-js-x.y.z.tgz]
//
// Without a tarball it runs `npm pack`, whose `prepack` rebuilds the wasm and the
// TypeScript; after `npx tsc` a local run can pack with `npm pack --ignore-scripts` and pass
// the tarball. The tests find the repository's data through TETHER_REPO (default: this
// checkout) and the testpeer relay through TETHER_TESTPEER (passed through when set);
// the browser tests are not run here.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const PACKAGE = resolve(fileURLToPath(new URL("..", import.meta.url)));
const REPO = resolve(PACKAGE, "..", "..");

/** Run `command` in `cwd`; resolves with its stdout (also echoed when `echo`). */
function run(command, args, { cwd, env = process.env, echo = false } = {}) {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (echo) process.stdout.write(chunk);
    });
    child.on("error", fail);
    child.on("close", (code, signal) => {
      if (code === 0) done(out);
      else fail(new Error(`${command} ${args.join(" ")} failed (${signal ?? code})`));
    });
  });
}

async function pack() {
  console.log("packing (npm pack runs prepack: the wasm and TypeScript builds)...");
  const out = await run("npm", ["pack", "--json"], { cwd: PACKAGE });
  const [{ filename }] = JSON.parse(out.slice(out.indexOf("[")));
  return join(PACKAGE, filename);
}

function kib(bytes) {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

async function main() {
  const given = process.argv[2];
  const tarball = given === undefined ? await pack() : resolve(given);
  if (!existsSync(tarball)) throw new Error(`no tarball at ${tarball}`);
  console.log(`tarball: ${tarball} (${kib(statSync(tarball).size)})`);

  const project = mkdtempSync(join(tmpdir(), "tether-js-package-check-"));
  try {
    await run("npm", ["init", "-y"], { cwd: project });
    await run("npm", ["install", "--no-audit", "--no-fund", tarball], { cwd: project, echo: true });
    const installed = join(project, "node_modules", "tether-js");

    // What a user imports is there, and the wasm with it.
    for (const file of ["dist/index.js", "dist/node/index.js", "wasm/tether.js"]) {
      if (!existsSync(join(installed, file))) throw new Error(`the package has no ${file}`);
    }
    const wasm = readFileSync(join(installed, "wasm", "tether_bg.wasm"));
    const gzipped = gzipSync(wasm, { level: 9 }).length;
    console.log(`wasm: ${kib(wasm.length)}, ${kib(gzipped)} gzipped (${gzipped} bytes)`);
    // The Node entry loads from the installed copy (`ws` resolved from the registry).
    await run(
      "node",
      [
        "--input-type=module",
        "-e",
        'const t = await import("tether-js/node"); if (typeof t.createPool !== "function") ' +
          'throw new Error("no createPool"); t.createPool([]).close();',
      ],
      { cwd: project },
    );

    const testDir = join(installed, "test");
    const tests = readdirSync(testDir)
      .filter((name) => name.endsWith(".test.js") && !name.startsWith("browser"))
      .sort()
      .map((name) => join(testDir, name));
    if (tests.length === 0) throw new Error(`no tests in ${testDir}`);
    const env = { ...process.env, TETHER_REPO: process.env.TETHER_REPO ?? REPO };
    console.log(`running ${tests.length} test files from ${testDir}`);
    const out = await run(
      "node",
      ["--test", "--test-concurrency=1", "--test-reporter=tap", ...tests],
      { cwd: project, env, echo: true },
    ).catch((error) => {
      throw new Error(`the installed package's tests failed: ${error.message}`);
    });
    const count = (what) => Number(new RegExp(`^# ${what} (\\d+)$`, "m").exec(out)?.[1] ?? 0);
    console.log(
      `package check: ${count("pass")} passed, ${count("fail")} failed, ` +
        `${count("skipped")} skipped; wasm ${gzipped} bytes gzipped`,
    );
    if (count("fail") > 0 || count("pass") === 0) process.exitCode = 1;
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(`package check failed: ${error.message}`);
  process.exitCode = 1;
});

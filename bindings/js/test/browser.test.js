// The browser driver end to end: the example page (examples/browser) in headless Debian
// Chromium, subscribed to a real nostr-rs-relay; the relay is killed (SIGKILL: no close
// frame) and restarted on the same port with the same database, and the page must show every
// event published before and after, each exactly once.
//
// Needs nostr-rs-relay (~/.cargo/bin or TETHER_NOSTR_RS_RELAY), Chromium (/usr/bin/chromium
// or TETHER_CHROMIUM) and a built package (dist/ and wasm/). TETHER_SKIP_BROWSER=1 skips it.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { readFile, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { connect, createServer as createTcpServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { extname, join, normalize, resolve, sep } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const SKIP = process.env.TETHER_SKIP_BROWSER === "1";
const RELAY_BIN =
  process.env.TETHER_NOSTR_RS_RELAY ?? join(homedir(), ".cargo", "bin", "nostr-rs-relay");
const CHROMIUM = process.env.TETHER_CHROMIUM ?? "/usr/bin/chromium";
const BEFORE_KILL = 20;
const AFTER_RESTART = 20;

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".png": "image/png",
  ".svg": "image/svg+xml",
  ".ts": "text/plain; charset=utf-8",
  ".map": "application/json",
};

let dir;
let relay;
let server;
let browser;
const diagnostics = [];

/** A port on 127.0.0.1 that was free a moment ago. */
async function freePort() {
  const probe = createTcpServer();
  await new Promise((ok) => probe.listen(0, "127.0.0.1", ok));
  const { port } = probe.address();
  await new Promise((ok) => probe.close(ok));
  return port;
}

async function waitListening(port, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const open = await new Promise((ok) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        ok(true);
      });
      socket.once("error", () => ok(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port} after ${ms} ms`);
    await new Promise((ok) => setTimeout(ok, 50));
  }
}

/** nostr-rs-relay on a fixed port with its database in `dir`; `restart()` keeps both. */
class Relay {
  constructor(port) {
    this.port = port;
    this.child = undefined;
  }

  get url() {
    return `ws://127.0.0.1:${this.port}`;
  }

  async write() {
    mkdirSync(join(dir, "db"), { recursive: true });
    await writeFile(
      join(dir, "config.toml"),
      `[info]\nrelay_url = "ws://127.0.0.1:${this.port}/"\nname = "tether-js browser test"\n\n` +
        `[database]\ndata_directory = "${join(dir, "db")}"\n\n` +
        `[network]\naddress = "127.0.0.1"\nport = ${this.port}\n\n` +
        `[options]\nreject_future_seconds = 1800\n`,
    );
  }

  async start() {
    const log = openSync(join(dir, "relay.log"), "a");
    this.child = spawn(RELAY_BIN, ["--config", join(dir, "config.toml")], {
      cwd: dir,
      env: { ...process.env, RUST_LOG: process.env.TETHER_RELAY_LOG ?? "warn,nostr_rs_relay=info" },
      stdio: ["ignore", log, log],
    });
    const exited = new Promise((_, fail) =>
      this.child.once("exit", (code) => fail(new Error(`nostr-rs-relay exited (${code})`))),
    );
    exited.catch(() => undefined);
    await Promise.race([waitListening(this.port, 15_000), exited]);
  }

  /** SIGKILL and reap: the page gets no close frame, the database stays. */
  async kill() {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((ok) => child.once("exit", ok));
    child.kill("SIGKILL");
    await gone;
  }
}

/** Serve the package root (dist/, wasm/, examples/) to the page. */
function staticServer() {
  return createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url ?? "/", "http://x").pathname);
    const file = normalize(join(ROOT, path));
    if (file !== ROOT && !file.startsWith(ROOT + sep)) {
      response.writeHead(403).end();
      return;
    }
    stat(file).then(
      (info) => {
        if (!info.isFile()) {
          response.writeHead(404).end();
          return;
        }
        response.writeHead(200, {
          "Content-Type": TYPES[extname(file)] ?? "application/octet-stream",
          "Content-Length": info.size,
          "Cache-Control": "no-store",
        });
        createReadStream(file).pipe(response);
      },
      () => response.writeHead(404).end(),
    );
  });
}

/** Publish `count` signed kind-1 events over one socket; resolves with their ids once OK. */
async function publish(url, signer, count, label) {
  const { default: WebSocket } = await import("ws");
  const socket = new WebSocket(url);
  await new Promise((ok, fail) => {
    socket.once("open", ok);
    socket.once("error", fail);
  });
  const waiting = new Map();
  socket.on("message", (data) => {
    const message = JSON.parse(data.toString());
    if (message[0] !== "OK") return;
    const done = waiting.get(message[1]);
    waiting.delete(message[1]);
    done?.(message);
  });
  const ids = [];
  const answers = [];
  const now = Math.floor(Date.now() / 1000);
  for (let i = 0; i < count; i += 1) {
    const event = JSON.parse(signer.signEvent(now, 1, "[]", `${label} ${i + 1} of ${count}`));
    ids.push(event.id);
    answers.push(new Promise((ok) => waiting.set(event.id, ok)));
    socket.send(JSON.stringify(["EVENT", event]));
  }
  const results = await Promise.all(answers);
  socket.close();
  for (const ok of results) assert.equal(ok[2], true, `relay refused ${ok[1]}: ${ok[3]}`);
  return ids;
}

function shownIds(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll("#events li")].map((item) => item.dataset.id),
  );
}

before(async () => {
  if (SKIP) return;
  for (const [what, path] of [
    ["nostr-rs-relay", RELAY_BIN],
    ["Chromium", CHROMIUM],
    ["the built browser entry (npx tsc)", join(ROOT, "dist", "browser", "index.js")],
    ["the wasm (npm run build:wasm)", join(ROOT, "wasm", "tether_bg.wasm")],
  ]) {
    assert.ok(existsSync(path), `${what} is missing at ${path} (TETHER_SKIP_BROWSER=1 skips)`);
  }
  dir = mkdtempSync(join(tmpdir(), "tether-js-browser-"));
  relay = new Relay(await freePort());
  await relay.write();
  await relay.start();
  server = staticServer();
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { chromium } = await import("playwright-core");
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

after(async () => {
  await browser?.close().catch(() => undefined);
  await relay?.kill();
  if (server !== undefined) {
    server.closeAllConnections();
    await new Promise((ok) => server.close(ok));
  }
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

test(
  "the example page shows every event once across a relay kill and restart",
  {
    skip: SKIP ? "TETHER_SKIP_BROWSER=1: the headless Chromium test is skipped" : false,
    timeout: 55_000,
  },
  async (t) => {
    const { Signer } = await import("tether-js/node");
    const signer = new Signer(randomBytes(32));
    const page = await browser.newPage();
    page.on("console", (message) =>
      diagnostics.push(`console.${message.type()}: ${message.text()}`),
    );
    page.on("pageerror", (error) => diagnostics.push(`pageerror: ${error.message}`));
    page.on("requestfailed", (request) =>
      diagnostics.push(`requestfailed: ${request.url()} ${request.failure()?.errorText}`),
    );
    t.after(async () => {
      if (t.passed === false || process.env.TETHER_BROWSER_VERBOSE === "1") {
        const log = await readFile(join(dir, "relay.log"), "utf8").catch(() => "");
        console.log(`page:\n${diagnostics.join("\n")}\nrelay log (tail):\n${log.slice(-4000)}`);
      }
    });

    const { port } = server.address();
    const address = `http://127.0.0.1:${port}/examples/browser/index.html?relay=${encodeURIComponent(relay.url)}`;
    await page.goto(address);
    const state = (name, n) =>
      page.waitForFunction(
        ([key, min]) => Number(document.getElementById("status").dataset[key] ?? 0) >= min,
        [name, n],
        { timeout: 15_000 },
      );
    const showing = (n) =>
      page.waitForFunction((min) => document.querySelectorAll("#events li").length >= min, n, {
        timeout: 20_000,
      });

    await state("connects", 1);
    const first = await publish(relay.url, signer, BEFORE_KILL, "before the kill");
    await showing(BEFORE_KILL);

    await relay.kill();
    await state("disconnects", 1);
    await relay.start();
    // Published at once, before the page is back: they reach it by the core's catch-up or
    // live, whichever comes first, and once either way.
    const second = await publish(relay.url, signer, AFTER_RESTART, "after the restart");
    await state("connects", 2);
    await showing(BEFORE_KILL + AFTER_RESTART);
    // Room for a late duplicate (a catch-up answering what already came live).
    await new Promise((ok) => setTimeout(ok, 1500));

    const shown = await shownIds(page);
    const counts = new Map();
    for (const id of shown) counts.set(id, (counts.get(id) ?? 0) + 1);
    const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
    assert.deepEqual(twice, [], "events shown more than once");
    assert.deepEqual(new Set(shown), new Set([...first, ...second]), "the events shown");
    assert.equal(shown.length, BEFORE_KILL + AFTER_RESTART);
    assert.equal(
      await page.textContent("#count"),
      String(BEFORE_KILL + AFTER_RESTART),
      "the count shown",
    );

    mkdirSync(join(ROOT, "artifacts"), { recursive: true });
    await page.screenshot({ path: join(ROOT, "artifacts", "browser.png"), fullPage: true });
    await page.close();
  },
);

test(
  "a page that stops reading loses its socket past the backlog bound, then gets every event once",
  {
    skip: SKIP ? "TETHER_SKIP_BROWSER=1: the headless Chromium test is skipped" : false,
    timeout: 40_000,
  },
  async (t) => {
    const { Signer } = await import("tether-js/node");
    const signer = new Signer(randomBytes(32));
    const page = await browser.newPage();
    page.on("pageerror", (error) => diagnostics.push(`pageerror: ${error.message}`));
    t.after(() => page.close());
    const { port } = server.address();
    // The example page without `?relay=` does nothing: an origin to import the package from.
    await page.goto(`http://127.0.0.1:${port}/examples/browser/index.html`);
    await page.evaluate(
      async ([url, author]) => {
        const tether = await import("/dist/browser/index.js");
        // A subscription that buffers 4 items before the pool pauses reading, and sockets
        // that hold 16 frames while paused.
        const pool = await tether.createPool([url], {
          bufferItems: 4,
          sockets: { maxBufferedFrames: 16 },
        });
        const state = { whys: [], connects: 0, ids: [], pool };
        window.overflow = state;
        void (async () => {
          for await (const item of pool.items()) {
            if (item.type === "connected") state.connects += 1;
            if (item.type === "disconnected") state.whys.push(item.why);
          }
        })();
        const subscription = pool.subscribe([{ kinds: [1], authors: [author] }]);
        state.read = async () => {
          for await (const item of subscription) {
            if (item.type === "event") state.ids.push(item.event.id);
          }
        };
      },
      [relay.url, signer.publicKey()],
    );
    await page.waitForFunction(() => window.overflow.connects >= 1, null, { timeout: 10_000 });
    const ids = await publish(relay.url, signer, 60, "unread");
    // Nobody reads the subscription: 4 items fill it, the socket holds 16 frames, then the
    // 17th gives the socket up as lost.
    await page
      .waitForFunction(() => window.overflow.whys.length >= 1, null, { timeout: 15_000 })
      .catch(async (error) => {
        const seen = await page.evaluate(() => JSON.stringify(window.overflow));
        throw new Error(`no overflow: ${seen}`, { cause: error });
      });
    await page.evaluate(() => {
      void window.overflow.read();
    });
    await page.waitForFunction((n) => window.overflow.ids.length >= n, ids.length, {
      timeout: 20_000,
    });
    await new Promise((ok) => setTimeout(ok, 1000));
    const { seen, whys } = await page.evaluate(() => ({
      seen: window.overflow.ids,
      whys: window.overflow.whys,
    }));
    // The one way this socket is lost here (the relay stays up) is the backlog's bound.
    assert.ok(whys.includes("network_error"), `disconnected ${JSON.stringify(whys)}`);
    assert.equal(seen.length, ids.length, "each event once");
    assert.deepEqual(new Set(seen), new Set(ids));
    await page.evaluate(() => window.overflow.pool.close());
  },
);

test(
  "a page left and opened again resumes from its IndexedDB checkpoint: only what came meanwhile",
  {
    skip: SKIP ? "TETHER_SKIP_BROWSER=1: the headless Chromium test is skipped" : false,
    timeout: 30_000,
  },
  async (t) => {
    const { Signer } = await import("tether-js/node");
    const signer = new Signer(randomBytes(32));
    // One context for both visits: they share its IndexedDB.
    const context = await browser.newContext();
    t.after(() => context.close());
    const page = await context.newPage();
    page.on("pageerror", (error) => diagnostics.push(`pageerror: ${error.message}`));
    const { port } = server.address();
    const address = `http://127.0.0.1:${port}/examples/browser/index.html?relay=${encodeURIComponent(relay.url)}&resume=1`;
    const showsAll = (ids) =>
      page.waitForFunction(
        (wanted) => wanted.every((id) => document.querySelector(`li[data-id="${id}"]`) !== null),
        ids,
        { timeout: 15_000 },
      );

    await page.goto(address);
    const first = await publish(relay.url, signer, 5, "before leaving");
    await showsAll(first);
    const before = await shownIds(page);
    // The pool saves its checkpoint at least once a second while it changes (the save at
    // `pagehide` is best effort: a browser does not wait for IndexedDB while it leaves a page).
    await new Promise((ok) => setTimeout(ok, 1500));
    await page.goto("about:blank");
    const away = await publish(relay.url, signer, 5, "while away");
    await page.goto(address);
    await page.waitForSelector("body[data-restored]", { timeout: 10_000 });
    assert.equal(
      await page.getAttribute("body", "data-restored"),
      "true",
      "restored from IndexedDB",
    );
    await showsAll(away);
    await new Promise((ok) => setTimeout(ok, 1000));
    const shown = await shownIds(page);
    // The restored subscription catches up from the checkpoint: what it delivered before does
    // not come again. (It may deliver older events the first visit's `limit` left out.)
    assert.deepEqual(
      shown.filter((id) => before.includes(id)),
      [],
      "events shown on both visits",
    );
    assert.equal(new Set(shown).size, shown.length, "events shown twice");
    for (const id of away) assert.ok(shown.includes(id), `${id} (published while away) shown`);
  },
);

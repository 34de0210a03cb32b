// Shared by the Node tests (not a test itself): the peers they run against, signed events,
// and waiting with a deadline.
//
// - `testpeer`: tether-ffi's example relay (`TETHER_TESTPEER`, else
//   `$CARGO_TARGET_DIR/release/examples/testpeer`, `<repo>/target/...`, or
//   `~/.cache/tether/target/...`);
// - nostr-rs-relay (`TETHER_NOSTR_RS_RELAY`, else on `PATH` or in `~/.cargo/bin`), on a free
//   127.0.0.1 port with its SQLite database in a temporary directory;
// - a scripted relay in this process (`ws`), for what no real relay serves (forged events).
//
// A test whose peer is missing is skipped, saying which variable names it.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { WebSocket, WebSocketServer } from "ws";

import { Signer } from "tether-js/node";

/** The tether checkout: `TETHER_REPO`, else three levels above this file. */
export function repoRoot() {
  return process.env.TETHER_REPO ?? resolve(fileURLToPath(new URL("../../../", import.meta.url)));
}

// ----- testpeer ----------------------------------------------------------------------------

/** The testpeer binary, or `undefined`. */
export function testpeerPath() {
  if (process.env.TETHER_TESTPEER) return process.env.TETHER_TESTPEER;
  const relative = join("release", "examples", "testpeer");
  const candidates = [
    process.env.CARGO_TARGET_DIR && join(process.env.CARGO_TARGET_DIR, relative),
    join(repoRoot(), "target", relative),
    join(homedir(), ".cache", "tether", "target", relative),
  ];
  return candidates.find((path) => path && existsSync(path));
}

/** A `skip` reason when testpeer is missing, else `false`. */
export function testpeerMissing() {
  const path = testpeerPath();
  if (path !== undefined && existsSync(path)) return false;
  return missing(
    "no testpeer binary: build it with `cargo build --release -p tether-ffi --example " +
      "testpeer` or name it with TETHER_TESTPEER",
  );
}

/** A missing peer's `skip` reason; with TETHER_REQUIRE_PEERS=1 (CI) a failure instead. */
function missing(reason) {
  if (process.env.TETHER_REQUIRE_PEERS === "1") throw new Error(reason);
  return reason;
}

/**
 * Start testpeer with `args`; resolves once it printed its URL. `frames()` stops it and
 * resolves with the frames it received, counted by verb.
 */
export async function startTestpeer(...args) {
  const child = spawn(testpeerPath(), args, { stdio: ["pipe", "pipe", "inherit"] });
  const lines = lineReader(child.stdout);
  const url = await withTimeout(lines.next(), 10_000, "testpeer printed no URL");
  if (!url.startsWith("ws://")) throw new Error(`testpeer printed ${url}`);
  let stopped;
  return {
    url,
    frames() {
      stopped ??= (async () => {
        child.stdin.end();
        const line = await withTimeout(lines.next(), 10_000, "testpeer printed no frames");
        return JSON.parse(line).frames;
      })();
      return stopped;
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

function lineReader(stream) {
  let buffered = "";
  const waiting = [];
  const ready = [];
  stream.setEncoding("utf8");
  stream.on("data", (chunk) => {
    buffered += chunk;
    for (let at = buffered.indexOf("\n"); at >= 0; at = buffered.indexOf("\n")) {
      const line = buffered.slice(0, at).trim();
      buffered = buffered.slice(at + 1);
      const wake = waiting.shift();
      if (wake) wake(line);
      else ready.push(line);
    }
  });
  return {
    next: () =>
      ready.length > 0
        ? Promise.resolve(ready.shift())
        : new Promise((wake) => {
            waiting.push(wake);
          }),
  };
}

// ----- nostr-rs-relay ----------------------------------------------------------------------

/** The nostr-rs-relay binary, or `undefined`. */
export function nostrRsRelayPath() {
  if (process.env.TETHER_NOSTR_RS_RELAY) return process.env.TETHER_NOSTR_RS_RELAY;
  const dirs = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  dirs.push(join(homedir(), ".cargo", "bin"));
  return dirs.map((dir) => join(dir, "nostr-rs-relay")).find((path) => existsSync(path));
}

/** A `skip` reason when nostr-rs-relay is missing, else `false`. */
export function nostrRsRelayMissing() {
  if (nostrRsRelayPath() !== undefined) return false;
  return missing(
    "no nostr-rs-relay: `cargo install nostr-rs-relay` or name it with TETHER_NOSTR_RS_RELAY",
  );
}

/** A port on 127.0.0.1 that was free a moment ago. */
export async function freePort() {
  const server = createServer();
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address();
  await new Promise((done) => server.close(done));
  return port;
}

/** Resolves once something accepts TCP connections on 127.0.0.1:`port`. */
export async function waitListening(port, withinMs = 20_000) {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const up = await new Promise((done) => {
      const socket = createConnection({ host: "127.0.0.1", port });
      socket.once("connect", () => {
        socket.destroy();
        done(true);
      });
      socket.once("error", () => done(false));
    });
    if (up) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port} in ${withinMs} ms`);
    await sleep(20);
  }
}

/**
 * nostr-rs-relay on a free port with a fresh database. `kill()` ends it with SIGKILL (no
 * goodbye to clients), `restart()` starts it again on the same port and database, `stop()`
 * ends it and removes its directory.
 */
export async function startNostrRsRelay() {
  const dir = mkdtempSync(join(tmpdir(), "tether-js-nostr-rs-relay-"));
  const port = await freePort();
  mkdirSync(join(dir, "db"));
  writeFileSync(
    join(dir, "config.toml"),
    `[info]\nrelay_url = "ws://127.0.0.1:${port}/"\nname = "tether-js-test"\n\n` +
      `[database]\ndata_directory = "${join(dir, "db")}"\n\n` +
      `[network]\naddress = "127.0.0.1"\nport = ${port}\n\n` +
      `[options]\nreject_future_seconds = 1800\n\n[limits]\n`,
  );
  let child;
  const relay = {
    port,
    url: `ws://127.0.0.1:${port}`,
    async kill() {
      if (child === undefined) return;
      const exited = new Promise((done) => child.once("exit", done));
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
      child = undefined;
    },
    async restart() {
      await relay.kill();
      child = spawn(nostrRsRelayPath(), ["--config", join(dir, "config.toml")], {
        cwd: dir,
        stdio: "ignore",
        env: { ...process.env, RUST_LOG: "warn" },
      });
      const died = new Promise((_, fail) => {
        child.once("exit", (code) => fail(new Error(`nostr-rs-relay exited (${code})`)));
      });
      await Promise.race([waitListening(port), died]);
    },
    async stop() {
      await relay.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await relay.restart();
  return relay;
}

/**
 * Publish `events` to the relay at `url` over a plain WebSocket (not the pool under test);
 * resolves once each was accepted (`OK true`), rejects on a refusal.
 */
export async function publishDirect(url, events) {
  const socket = new WebSocket(url);
  await withTimeout(
    new Promise((done, fail) => {
      socket.once("open", done);
      socket.once("error", fail);
    }),
    10_000,
    `no connection to ${url}`,
  );
  const pending = new Map(events.map((event) => [event.id, undefined]));
  const answered = new Promise((done, fail) => {
    socket.on("message", (data) => {
      const [verb, id, accepted, message] = JSON.parse(String(data));
      if (verb !== "OK" || !pending.has(id)) return;
      if (!accepted) fail(new Error(`${url} refused ${id}: ${message}`));
      pending.delete(id);
      if (pending.size === 0) done();
    });
  });
  for (const event of events) socket.send(JSON.stringify(["EVENT", event]));
  try {
    await withTimeout(answered, 10_000, `${url} did not answer every EVENT`);
  } finally {
    socket.close();
  }
}

// ----- a scripted relay in this process ----------------------------------------------------

/**
 * A relay on 127.0.0.1 answering every REQ with `events` (as given, no filtering) and EOSE;
 * `frames` counts what it received by verb.
 */
export async function startScriptedRelay(events) {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise((done) => server.once("listening", done));
  const frames = {};
  server.on("connection", (socket) => {
    socket.on("message", (data) => {
      const message = JSON.parse(String(data));
      frames[message[0]] = (frames[message[0]] ?? 0) + 1;
      if (message[0] !== "REQ") return;
      for (const event of events) socket.send(JSON.stringify(["EVENT", message[1], event]));
      socket.send(JSON.stringify(["EOSE", message[1]]));
    });
  });
  return {
    url: `ws://127.0.0.1:${server.address().port}`,
    frames,
    close: () =>
      new Promise((done) => {
        for (const client of server.clients) client.terminate();
        server.close(() => done());
      }),
  };
}

/**
 * A TCP proxy on 127.0.0.1 to `port`, which lets a test hold a client off: while
 * `refuse(true)`, a new connection is accepted and reset at once. A connection through it
 * ends when either side's does.
 */
export async function startProxy(port) {
  const pairs = new Set();
  let refusing = false;
  const server = createServer((client) => {
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = createConnection({ host: "127.0.0.1", port });
    const pair = [client, upstream];
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", cut).on("close", cut);
    upstream.on("error", cut).on("close", cut);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return {
    url: `ws://127.0.0.1:${server.address().port}`,
    refuse(on) {
      refusing = on;
    },
    close: () =>
      new Promise((done) => {
        for (const [client, upstream] of pairs) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => done());
      }),
  };
}

// ----- events ------------------------------------------------------------------------------

/** A signer for the secret key whose 32 bytes are all `byte` (1..255). */
export function signerOf(byte) {
  return new Signer(new Uint8Array(32).fill(byte));
}

/** A signed event (parsed) from `signer`. */
export function signed(signer, { kind = 1, tags = [], content = "", createdAt } = {}) {
  const at = createdAt ?? Math.floor(Date.now() / 1000);
  return JSON.parse(signer.signEvent(at, kind, JSON.stringify(tags), content));
}

/** NIP-01's event id: sha256 of `[0, pubkey, created_at, kind, tags, content]`. */
export function eventId(event) {
  const serial = JSON.stringify([
    0,
    event.pubkey,
    event.created_at,
    event.kind,
    event.tags,
    event.content,
  ]);
  return createHash("sha256").update(serial).digest("hex");
}

// ----- waiting -----------------------------------------------------------------------------

export function sleep(ms) {
  return new Promise((done) => setTimeout(done, ms));
}

/** `promise`, or a rejection saying `what` after `ms`. */
export async function withTimeout(promise, ms, what) {
  let timer;
  const late = new Promise((_, fail) => {
    timer = setTimeout(() => fail(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Read `iterator` (an async iterator, not an iterable: it is read on later) until an item
 * for which `until(item, items)` holds; resolves with every item read, that one included.
 * Rejects after `ms`, listing the item types read so far.
 */
export async function readUntil(iterator, until, ms, what = "the expected item") {
  const items = [];
  const reading = (async () => {
    for (;;) {
      const { value, done } = await iterator.next();
      if (done) throw new Error(`the iterator ended before ${what}`);
      items.push(value);
      if (until(value, items)) return items;
    }
  })();
  try {
    return await withTimeout(reading, ms, what);
  } catch (error) {
    error.message += `; read: ${items.map((item) => item.type).join(",")}`;
    throw error;
  }
}

/** An async iterator over `iterable` (a subscription), to read on with `readUntil`. */
export function iterate(iterable) {
  return iterable[Symbol.asyncIterator]();
}

/** Read `iterable` to its end in the background: `items` so far, `done` at the end. */
export function collect(iterable) {
  const items = [];
  const done = (async () => {
    for await (const item of iterable) items.push(item);
    return items;
  })();
  return { items, done };
}

/** Resolves once `check()` holds, polling every 20 ms; rejects after `ms`. */
export async function eventually(check, ms, what) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what}`);
    await sleep(20);
  }
}

/** Count `items` by `type`. */
export function countTypes(items) {
  const counts = {};
  for (const item of items) counts[item.type] = (counts[item.type] ?? 0) + 1;
  return counts;
}

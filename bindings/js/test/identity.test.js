// One relay per URL across a restore: a checkpoint holds no application's URL (it may carry
// credentials), so the driver names each restored relay again, and the pool then finds it
// by its URL, as routing by people does, rather than opening a second socket.
import assert from "node:assert/strict";
import { test } from "node:test";

import { TetherPool } from "tether-js/node";

/** A host whose sockets never open: the pool is only asked about relays. */
const host = {
  canPing: true,
  connect() {
    return { send() {}, ping() {}, close() {}, pause() {} };
  },
};

test("a restored relay is the one relay at the URL the application gave it", (t) => {
  const url = "ws://127.0.0.1:7777";
  const first = new TetherPool(host, { seed: 1 });
  t.after(() => first.close());
  assert.equal(first.addRelay(url), 0);
  const checkpoint = first.checkpoint();
  assert.ok(!checkpoint.includes("7777"), checkpoint);

  const restored = new TetherPool(host, { seed: 1, checkpoint, relayUrls: [url] });
  t.after(() => restored.close());
  assert.equal(restored.addRelay("WS://127.0.0.1:7777/"), 0);
  assert.equal(restored.addRelay("ws://127.0.0.1:7778"), 1);
});

test("an application's relay with a long token in its URL is added, once", (t) => {
  const pool = new TetherPool(host, { seed: 1 });
  t.after(() => pool.close());
  const url = `wss://a.example/?token=${"t".repeat(2000)}`;
  assert.equal(pool.addRelay(url), 0);
  assert.equal(pool.addRelay(url), 0);
});

// Subscribing against tether-ffi's testpeer relay: every stored event once, then `eose` and
// `complete`, and the frames the relay received.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createPool } from "tether-js/node";

import {
  countTypes,
  iterate,
  readUntil,
  sleep,
  startTestpeer,
  testpeerMissing,
} from "./helpers.js";

const skip = testpeerMissing();

/** The id of testpeer's stored event `n` (its sequence number in 64 hex digits). */
const idOf = (n) => n.toString(16).padStart(64, "0");

test(
  "a pool of one relay delivers every stored event once, then eose and complete",
  { skip },
  async (t) => {
    const peer = await startTestpeer("--events", "50");
    t.after(() => peer.kill());
    const pool = createPool([peer.url], { seed: 1 });
    t.after(() => pool.close());

    const sub = pool.subscribe([{ kinds: [1] }]);
    const items = await readUntil(iterate(sub), (item) => item.type === "complete", 10_000);

    assert.deepEqual(countTypes(items), { event: 50, eose: 1, complete: 1 });
    const events = items.filter((item) => item.type === "event");
    const want = Array.from({ length: 50 }, (_, n) => idOf(n + 1)).sort();
    assert.deepEqual(events.map((item) => item.id).sort(), want);
    for (const item of events) {
      assert.equal(item.sub, sub.id);
      assert.equal(item.relay, 0);
      assert.equal(item.url, peer.url);
      assert.equal(item.event.id, item.id);
      assert.equal(item.event.content, `event ${Number.parseInt(item.id, 16)}`);
    }
    // Every stored event before the EOSE, the outcome last.
    assert.equal(items.at(-2).type, "eose");
    assert.deepEqual(items.at(-2), { type: "eose", sub: sub.id, relay: 0, url: peer.url });
    assert.deepEqual(items.at(-1), {
      type: "complete",
      sub: sub.id,
      outcome: "complete",
      missing: [],
    });

    // Closing the subscription sends one CLOSE; the relay saw one REQ in all.
    sub.close();
    await sleep(300);
    assert.deepEqual(await peer.frames(), { CLOSE: 1, REQ: 1 });
  },
);

test("two relays holding the same events deliver each event once", { skip }, async (t) => {
  const a = await startTestpeer("--events", "30");
  t.after(() => a.kill());
  const b = await startTestpeer("--events", "30");
  t.after(() => b.kill());
  const pool = createPool([a.url, b.url], { seed: 2 });
  t.after(() => pool.close());

  const sub = pool.subscribe([{ kinds: [1] }]);
  const items = await readUntil(iterate(sub), (item) => item.type === "complete", 10_000);

  assert.deepEqual(countTypes(items), { event: 30, eose: 2, complete: 1 });
  const ids = items.filter((item) => item.type === "event").map((item) => item.id);
  assert.equal(new Set(ids).size, 30);
  assert.deepEqual(
    items
      .filter((item) => item.type === "eose")
      .map((item) => item.url)
      .sort(),
    [a.url, b.url].sort(),
  );
  assert.deepEqual(items.at(-1), {
    type: "complete",
    sub: sub.id,
    outcome: "complete",
    missing: [],
  });
  // Every second copy was counted as a duplicate on the relay that sent it.
  const duplicates = pool.relayStats(a.url).duplicates + pool.relayStats(b.url).duplicates;
  assert.equal(duplicates, 30);

  pool.close();
  assert.equal((await a.frames()).REQ, 1);
  assert.equal((await b.frames()).REQ, 1);
});

// A relay refusing a REQ with a rate limit (NIP-01's `rate-limited:` prefix, read by
// core/src/nostr/reason.rs): the subscription says `retrying` with the wait, waits it out
// and then gets its events.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createPool } from "tether-js/node";

import {
  collect,
  countTypes,
  iterate,
  readUntil,
  startTestpeer,
  testpeerMissing,
} from "./helpers.js";

const skip = testpeerMissing();

test(
  "a rate-limited REQ is retried after the relay's hint and then gets its events",
  { skip },
  async (t) => {
    const peer = await startTestpeer(
      "--events",
      "5",
      "--scripted-closed",
      "rate-limited: slow down, retry in 1s",
    );
    t.after(() => peer.kill());
    const pool = createPool([peer.url], { seed: 3 });
    t.after(() => pool.close());
    const all = collect(pool.items());

    const started = performance.now();
    const sub = pool.subscribe([{ kinds: [1] }]);
    const items = await readUntil(iterate(sub), (item) => item.type === "complete", 10_000);
    const took = performance.now() - started;

    assert.deepEqual(items[0], {
      type: "retrying",
      sub: sub.id,
      relay: 0,
      url: peer.url,
      in_ms: 1000,
      attempt: 1,
    });
    assert.deepEqual(countTypes(items), { retrying: 1, event: 5, eose: 1, complete: 1 });
    assert.equal(new Set(items.filter((i) => i.type === "event").map((i) => i.id)).size, 5);
    assert.deepEqual(items.at(-1), {
      type: "complete",
      sub: sub.id,
      outcome: "complete",
      missing: [],
    });
    // It waited the hinted second before asking again.
    assert.ok(took >= 950, `complete after ${took} ms`);

    pool.close();
    await all.done;
    const limited = all.items.filter((item) => item.type === "rate_limited");
    assert.deepEqual(limited, [{ type: "rate_limited", relay: 0, url: peer.url, window_ms: 1000 }]);
    // The refused REQ and the retry; nothing else was asked.
    assert.equal((await peer.frames()).REQ, 2);
  },
);

test("a rate limit without a hint waits the default 10 s window", { skip }, async (t) => {
  const peer = await startTestpeer("--events", "5", "--scripted-closed", "rate-limited: slow down");
  t.after(() => peer.kill());
  const pool = createPool([peer.url], { seed: 3 });
  t.after(() => pool.close());

  const sub = pool.subscribe([{ kinds: [1] }]);
  const items = await readUntil(iterate(sub), (item) => item.type === "retrying", 5_000);
  assert.deepEqual(items, [
    { type: "retrying", sub: sub.id, relay: 0, url: peer.url, in_ms: 10_000, attempt: 1 },
  ]);
  pool.close();
  // Only the refused REQ: the retry is not due yet.
  assert.deepEqual(await peer.frames(), { REQ: 1 });
});

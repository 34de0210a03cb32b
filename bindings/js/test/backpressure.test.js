// Bounded buffering: a subscription nobody reads while a relay floods it stops the driver
// reading the socket once `bufferItems` items wait (TCP then holds the relay back), instead
// of buffering the flood; reading again resumes the socket and every event arrives once.
import assert from "node:assert/strict";
import { test } from "node:test";

import { nodeHost, TetherPool } from "tether-js/node";

import {
  countTypes,
  eventually,
  iterate,
  readUntil,
  sleep,
  startTestpeer,
  testpeerMissing,
} from "./helpers.js";

const EVENTS = 20_000;
const BOUND = 256;

/** `nodeHost()` with its sockets watched: opens, text frames, pauses and resumes, ends. */
function watchedHost() {
  const host = nodeHost();
  const watch = { opened: 0, frames: 0, pauses: [], closed: [] };
  watch.host = {
    ...host,
    connect(url, events, dial) {
      const socket = host.connect(
        url,
        {
          ...events,
          opened() {
            watch.opened += 1;
            events.opened();
          },
          closed(loss, code) {
            watch.closed.push(loss);
            events.closed(loss, code);
          },
          text(frame) {
            watch.frames += 1;
            events.text(frame);
          },
        },
        dial,
      );
      return {
        ...socket,
        pause(paused) {
          watch.pauses.push({ paused, frames: watch.frames });
          socket.pause(paused);
        },
      };
    },
  };
  return watch;
}

test(
  "an unread subscription pauses the flooding relay's socket at its bound",
  { skip: testpeerMissing() },
  async (t) => {
    const peer = await startTestpeer("--events", String(EVENTS));
    t.after(() => peer.kill());
    const watch = watchedHost();
    const pool = new TetherPool(watch.host, { seed: 8, bufferItems: BOUND });
    t.after(() => pool.close());
    pool.addRelay(peer.url);
    const sub = pool.subscribe([{ kinds: [1] }]);

    // Nobody reads `sub`: the driver pauses the socket when the bound-th item is buffered.
    await eventually(() => watch.pauses.length > 0, 10_000, "the socket paused");
    assert.deepEqual(watch.pauses, [{ paused: true, frames: BOUND }]);
    // A paused socket still hands over what `ws` had already read (at most one read's
    // worth); then nothing, however long the application lags.
    await sleep(500);
    const held = watch.frames;
    await sleep(1_000);
    assert.equal(watch.frames, held, "frames read while paused");
    assert.ok(held < BOUND + 2_000, `${held} frames read of ${EVENTS}`);
    assert.equal(watch.pauses.length, 1);
    // The lag is the application's, not the relay's: the socket stayed up.
    assert.deepEqual([watch.opened, watch.closed], [1, []]);

    // Reading again resumes the socket; every event arrives once.
    const items = await readUntil(iterate(sub), (item) => item.type === "complete", 30_000);
    assert.deepEqual(countTypes(items), { event: EVENTS, eose: 1, complete: 1 });
    assert.equal(new Set(items.filter((i) => i.type === "event").map((i) => i.id)).size, EVENTS);
    assert.deepEqual(items.at(-1), {
      type: "complete",
      sub: sub.id,
      outcome: "complete",
      missing: [],
    });
    assert.deepEqual(watch.pauses.at(-1).paused, false);
    // Every pause was followed by its resume.
    assert.deepEqual(
      watch.pauses.map((p) => p.paused),
      watch.pauses.map((_, i) => i % 2 === 0),
    );
    assert.equal(watch.frames, EVENTS + 1);
    assert.equal(pool.relayStats(peer.url).duplicates, 0);
    // One socket all along.
    assert.deepEqual([watch.opened, watch.closed], [1, []]);
    pool.close();
  },
);

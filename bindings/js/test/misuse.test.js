// Local misuse throws a TetherError of the right kind, the machine is unchanged by it, and
// the pool keeps working.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createPool, TetherError, WasmPool } from "tether-js/node";

import {
  countTypes,
  iterate,
  readUntil,
  signed,
  signerOf,
  startTestpeer,
  testpeerMissing,
  withTimeout,
} from "./helpers.js";

/** An assert.throws matcher for a TetherError of `kind`. */
const tether = (kind) => (error) => {
  assert.ok(error instanceof TetherError, `${error} is a TetherError`);
  assert.equal(error.name, "TetherError");
  assert.equal(error.kind, kind, error.message);
  assert.ok(error.message.length > 0);
  return true;
};

test(
  "misuse throws TetherError by kind and the pool keeps working",
  {
    skip: testpeerMissing(),
  },
  async (t) => {
    const peer = await startTestpeer("--events", "3");
    t.after(() => peer.kill());
    const pool = createPool([peer.url], { seed: 7 });
    t.after(() => pool.close());

    // A filter that is not a JSON object, filters that are not an array, a routed filter
    // naming nobody.
    assert.throws(() => pool.subscribe([42]), tether("InvalidArgument"));
    assert.throws(() => pool.subscribe({ kinds: [1] }), tether("InvalidArgument"));
    assert.throws(() => pool.subscribeOutbox({ kinds: [1] }), tether("InvalidArgument"));
    // Not an event, not a relay URL.
    assert.throws(() => pool.publish("{}"), tether("InvalidArgument"));
    assert.throws(() => pool.addRelay("http://example.com"), tether("InvalidArgument"));
    // A relay this pool never had, by id and by URL.
    assert.throws(() => pool.removeRelay(42), tether("UnknownId"));
    assert.throws(() => pool.relayStats("ws://127.0.0.1:1"), tether("UnknownId"));
    assert.throws(() => pool.lifecycle("asleep"), tether("InvalidArgument"));
    assert.throws(() => pool.handleRelayList({ kind: 1 }), tether("InvalidArgument"));

    // After all that, the pool works as if none of it happened.
    const sub = pool.subscribe([{ kinds: [1] }]);
    const items = await readUntil(iterate(sub), (item) => item.type === "complete", 10_000);
    assert.deepEqual(countTypes(items), { event: 3, eose: 1, complete: 1 });
    pool.close();
    // Nothing refused went out: one REQ.
    assert.equal((await peer.frames()).REQ, 1);

    // A closed pool refuses input.
    assert.throws(() => pool.subscribe([{ kinds: [1] }]), tether("WrongState"));
    assert.throws(() => pool.addRelay(peer.url), tether("WrongState"));
  },
);

test("misspelt options are refused by name", () => {
  assert.throws(
    () => createPool([], { verifyy: true }),
    (error) => tether("InvalidArgument")(error) && /verifyy/.test(error.message),
  );
  assert.throws(() => createPool([], { maxConnecting: 0 }), tether("InvalidArgument"));
});

test("the wasm pool names an unknown subscription UnknownId and stays usable", () => {
  const pool = new WasmPool(JSON.stringify({ seed: 7 }));
  refusedUnknown(() => pool.unsubscribe(0, 7));
  const sub = pool.subscribe(0, '[{"kinds":[1]}]');
  pool.unsubscribe(1, sub);
  // Unsubscribing twice is the same misuse.
  refusedUnknown(() => pool.unsubscribe(2, sub));
  assert.throws(() => pool.subscribe(3, "[42]"), { name: "InvalidArgument" });
  assert.equal(pool.subscribe(4, '[{"kinds":[1]}]'), sub + 1);
  pool.free();

  function refusedUnknown(call) {
    assert.throws(call, (error) => {
      assert.equal(error.name, "UnknownId");
      assert.match(error.message, /unknown subscription/);
      return true;
    });
  }
});

test("a publish with no relay to go to is done at once", async (t) => {
  const pool = createPool([], { seed: 7 });
  t.after(() => pool.close());
  const note = signed(signerOf(9), { content: "to nobody" });
  // Before the driver registered a publish inside its own input, this never resolved.
  assert.deepEqual(await withTimeout(pool.publish(note), 2_000, "publish_done"), {
    type: "publish_done",
    id: note.id,
    accepted: [],
    rejected: [],
    pending: [],
    urls: [],
  });
});

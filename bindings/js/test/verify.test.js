// Verification: with `verify: true` the pool delivers genuine events (signed with the wasm
// `Signer`) and drops forged ones with an `invalid` item; without it, the same relay's
// forgeries are delivered (what the relay really sends).
import assert from "node:assert/strict";
import { test } from "node:test";

import { createPool, verifyEvent } from "tether-js/node";

import { eventId, iterate, readUntil, signed, signerOf, startScriptedRelay } from "./helpers.js";

const alice = signerOf(5);
const genuine = [1, 2, 3].map((n) => signed(alice, { content: `genuine ${n}` }));
// Content changed after signing: the id no longer hashes the event.
const tampered = { ...signed(alice, { content: "original" }), content: "tampered" };
// A correct id with another event's signature.
const stolenSig = { ...signed(signerOf(6), { content: "other" }), sig: genuine[0].sig };
const served = [genuine[0], tampered, genuine[1], stolenSig, genuine[2]];

test("the fixtures are what they claim", () => {
  for (const event of genuine) {
    assert.equal(event.pubkey, alice.publicKey());
    assert.equal(eventId(event), event.id);
    assert.equal(verifyEvent(JSON.stringify(event)), undefined);
  }
  assert.equal(verifyEvent(JSON.stringify(tampered)), "id is not the hash of the event");
  assert.equal(eventId(stolenSig), stolenSig.id);
  assert.equal(verifyEvent(JSON.stringify(stolenSig)), "bad signature");
});

test("verify: true delivers genuine events and drops forged ones as invalid", async (t) => {
  const relay = await startScriptedRelay(served);
  t.after(() => relay.close());
  const pool = createPool([relay.url], { seed: 5, verify: true });
  t.after(() => pool.close());

  const sub = pool.subscribe([{ kinds: [1] }]);
  const items = await readUntil(iterate(sub), (item) => item.type === "complete", 10_000);

  // In the relay's order: a verdict never reorders delivery.
  assert.deepEqual(
    items.map((item) => [item.type, item.id]),
    [
      ["event", genuine[0].id],
      ["invalid", tampered.id],
      ["event", genuine[1].id],
      ["invalid", stolenSig.id],
      ["event", genuine[2].id],
      ["eose", undefined],
      ["complete", undefined],
    ],
  );
  const invalid = items.filter((item) => item.type === "invalid");
  assert.deepEqual(
    invalid.map((item) => item.reason),
    ["id is not the hash of the event", "bad signature"],
  );
  for (const item of invalid) assert.equal(item.url, relay.url);
  assert.deepEqual(
    items.filter((item) => item.type === "event").map((item) => item.event),
    genuine,
  );
  assert.equal(pool.relayStats(relay.url).invalid, 2);
});

test("without verify the same relay's forgeries are delivered", async (t) => {
  const relay = await startScriptedRelay(served);
  t.after(() => relay.close());
  const pool = createPool([relay.url], { seed: 5 });
  t.after(() => pool.close());

  const sub = pool.subscribe([{ kinds: [1] }]);
  const items = await readUntil(iterate(sub), (item) => item.type === "complete", 10_000);
  assert.deepEqual(
    items.filter((item) => item.type === "event").map((item) => item.id),
    served.map((event) => event.id),
  );
  assert.equal(items.filter((item) => item.type === "invalid").length, 0);
});

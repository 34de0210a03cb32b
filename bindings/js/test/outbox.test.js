// Routing by people against real relays: an indexer (nostr-rs-relay) serves two people's
// signed kind 10002 lists naming another local nostr-rs-relay, which holds their notes. Both
// are on loopback, which the core allows because the indexer is (docs/outbox.md).
import assert from "node:assert/strict";
import { test } from "node:test";

import { createPool, normalizeRelayUrl } from "tether-js/node";

import {
  collect,
  countTypes,
  iterate,
  nostrRsRelayMissing,
  publishDirect,
  readUntil,
  signed,
  signerOf,
  startNostrRsRelay,
} from "./helpers.js";

test(
  "subscribeOutbox routes to the relay the people's lists name and gets their notes",
  { skip: nostrRsRelayMissing() },
  async (t) => {
    const indexer = await startNostrRsRelay();
    t.after(() => indexer.stop());
    const home = await startNostrRsRelay();
    t.after(() => home.stop());
    assert.equal(normalizeRelayUrl(home.url, true), home.url);

    const people = [signerOf(11), signerOf(12)];
    const authors = people.map((person) => person.publicKey());
    await publishDirect(
      indexer.url,
      people.map((person) => signed(person, { kind: 10002, tags: [["r", home.url]] })),
    );
    const notes = people.flatMap((person, i) =>
      [1, 2].map((n) => signed(person, { content: `note ${n} of ${i}` })),
    );
    await publishDirect(home.url, notes);

    const pool = createPool([], { seed: 6, outboxIndexers: [indexer.url] });
    t.after(() => pool.close());
    const all = collect(pool.items());
    const sub = pool.subscribeOutbox({ kinds: [1], authors });
    const reader = iterate(sub);

    // First, before any list: nobody is covered.
    const [first] = await readUntil(reader, () => true, 5_000);
    assert.deepEqual(
      { ...first, uncovered: [...first.uncovered].sort() },
      {
        type: "routed",
        sub: sub.id,
        relays: [],
        covered: [],
        fallback_only: [],
        uncovered: [...authors].sort(),
      },
    );

    const items = await readUntil(
      reader,
      (_, read) => read.filter((item) => item.type === "event").length === notes.length,
      15_000,
      "every note",
    );
    const routed = items.filter((item) => item.type === "routed");
    assert.ok(routed.length >= 1, "a routed item once the lists came");
    const covering = routed.find((item) => item.relays.includes(home.url));
    assert.ok(covering, JSON.stringify(routed));
    assert.deepEqual(
      [...covering.covered].sort((a, b) => a.author.localeCompare(b.author)),
      [...authors].sort().map((author) => ({ author, relays: 1 })),
    );
    assert.deepEqual(covering.uncovered, []);
    assert.deepEqual(covering.fallback_only, []);

    // Every note once, from the relay the lists named (the indexer is asked for no notes).
    const events = items.filter((item) => item.type === "event");
    assert.deepEqual(events.map((item) => item.id).sort(), notes.map((note) => note.id).sort());
    for (const item of events) assert.equal(item.url, home.url);
    assert.deepEqual(
      Object.keys(countTypes(items)).filter((type) => !["routed", "event", "eose"].includes(type)),
      [],
    );

    pool.close();
    await all.done;
    // Two sockets: the indexer's and the home relay's.
    assert.deepEqual(
      all.items
        .filter((item) => item.type === "connected")
        .map((item) => item.url)
        .sort(),
      [indexer.url, home.url].sort(),
    );
  },
);

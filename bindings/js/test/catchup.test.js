// Catch-up after a cut, against a real relay: nostr-rs-relay is killed (no goodbye), events
// are written while the client is held off, the relay comes back on the same port with the
// same database, and the subscription resumes: the missed events once each, nothing it had
// already, a `caught_up` saying how, then live events again.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createPool } from "tether-js/node";

import {
  collect,
  countTypes,
  eventually,
  iterate,
  nostrRsRelayMissing,
  publishDirect,
  readUntil,
  signed,
  signerOf,
  startNostrRsRelay,
  startProxy,
} from "./helpers.js";

test(
  "a subscription cut by a relay's crash catches up on what it missed, each event once",
  { skip: nostrRsRelayMissing() },
  async (t) => {
    const relay = await startNostrRsRelay();
    t.after(() => relay.stop());
    // The client dials the relay through a proxy that can hold it off while the missed
    // events are written (else it might reconnect first and get them live).
    const proxy = await startProxy(relay.port);
    t.after(() => proxy.close());
    const author = signerOf(7);
    const now = Math.floor(Date.now() / 1000);
    const before = [1, 2, 3].map((n) =>
      signed(author, { content: `before ${n}`, createdAt: now - 60 + n }),
    );
    await publishDirect(relay.url, before);

    const pool = createPool([proxy.url], { seed: 4 });
    t.after(() => pool.close());
    const all = collect(pool.items());
    const sub = pool.subscribe([{ kinds: [1], authors: [author.publicKey()] }]);
    const reader = iterate(sub);
    const first = await readUntil(reader, (item) => item.type === "complete", 10_000);
    assert.deepEqual(countTypes(first), { event: 3, eose: 1, complete: 1 });
    assert.deepEqual(
      first
        .filter((i) => i.type === "event")
        .map((i) => i.id)
        .sort(),
      before.map((e) => e.id).sort(),
    );

    // The relay dies: the socket ends without a close frame.
    proxy.refuse(true);
    await relay.kill();
    await eventually(
      () => all.items.some((item) => item.type === "disconnected"),
      10_000,
      "a disconnected item",
    );
    await relay.restart();
    const missed = [1, 2].map((n) =>
      signed(author, { content: `missed ${n}`, createdAt: now + n }),
    );
    await publishDirect(relay.url, missed);
    proxy.refuse(false);

    const resumed = await readUntil(reader, (item) => item.type === "caught_up", 20_000);
    const caughtUp = resumed.at(-1);
    // nostr-rs-relay speaks no NIP-77: the catch-up asks `since` the last event it had.
    assert.equal(caughtUp.method, "since");
    assert.equal(caughtUp.recovered, 2);
    assert.equal(caughtUp.sub, sub.id);
    const events = resumed.filter((i) => i.type === "event");
    assert.deepEqual(events.map((i) => i.id).sort(), missed.map((e) => e.id).sort());
    assert.deepEqual(
      resumed.filter((i) => !["event", "eose", "caught_up"].includes(i.type)),
      [],
      "only the missed events, the replay's EOSE and the catch-up",
    );

    // And live again: a new event arrives once, nothing before it.
    const after = signed(author, { content: "after", createdAt: now + 10 });
    await publishDirect(relay.url, [after]);
    const live = await readUntil(reader, (item) => item.type === "event", 10_000);
    assert.deepEqual(
      live.map((i) => [i.type, i.id]),
      [["event", after.id]],
    );

    pool.close();
    await all.done;
    // Connected, cut (and any attempt made while the proxy refused), connected again.
    const connection = all.items
      .filter((i) => ["connected", "disconnected"].includes(i.type))
      .map((i) => i.type)
      .join(" ");
    assert.match(connection, /^connected( disconnected)+ connected$/);
    const cut = all.items.find((i) => i.type === "disconnected");
    assert.ok(["network_error", "closed_by_peer"].includes(cut.why), `cut by ${cut.why}`);
  },
);

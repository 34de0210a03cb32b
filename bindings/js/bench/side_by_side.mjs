// Goal 1: tether-js vs nostr-tools reading the same relay to EOSE, both verifying every
// event. The relay (adapters/ffi/examples/notes_relay: nostr-relay-builder holding N signed,
// realistic kind-1 notes) runs in its own process; each client runs in a child process of
// its own (bench/clients/), measured from subscribing to EOSE by wall time and by the
// child's CPU time (process.cpuUsage: every thread of the process). Rounds alternate the
// clients; the ratio is taken per round, the median reported. The same as
// bindings/python/bench/side_by_side.py does for tether-py and nostr-sdk.
//
// With `--no-verify-too`, each round also runs both clients without verification
// (nostr-tools with `verifyEvent: () => true`), which shows what the rest costs.
//
// `node bench/side_by_side.mjs [N=20000] [ROUNDS=3] [--no-verify-too]`
import { fileURLToPath } from "node:url";

import { count, median, runNode, startServer, table } from "./lib.mjs";

const client = (name) => fileURLToPath(new URL(`clients/${name}.mjs`, import.meta.url));

const CLIENTS = [
  { key: "tether", name: "tether-js createPool verify:true", script: "tether", verify: "1" },
  { key: "nostr-tools", name: "nostr-tools 2.25.5 SimplePool", script: "nostr-tools", verify: "1" },
];
const UNVERIFIED = [
  { key: "tether-nv", name: "tether-js, verify off", script: "tether", verify: "0" },
  {
    key: "nostr-tools-nv",
    name: "nostr-tools, verifyEvent: () => true",
    script: "nostr-tools",
    verify: "0",
  },
];

/** `{ n, rounds: [{ key: result }], rows }`; each result as clients/*.mjs print it. */
export async function measure(n, rounds = 3, withUnverified = false) {
  const clients = withUnverified ? [...CLIENTS, ...UNVERIFIED] : CLIENTS;
  const relay = await startServer("notes_relay", [String(n)]);
  const all = [];
  try {
    for (let r = 0; r < rounds; r++) {
      const row = {};
      for (const c of clients) {
        row[c.key] = await runNode(client(c.script), [relay.url, String(n), c.verify]);
        if (row[c.key].events !== n) {
          throw new Error(`${c.name}: ${row[c.key].events} events of ${n}`);
        }
      }
      all.push(row);
    }
  } finally {
    await relay.stop();
  }
  const summary = {};
  for (const c of clients) {
    const pick = (f) => median(all.map((row) => f(row[c.key])));
    summary[c.key] = {
      name: c.name,
      events: n,
      wall: pick((x) => x.wall),
      eps: pick((x) => x.events / x.wall),
      cpu: pick((x) => x.cpu),
      cpuPerEvent: pick((x) => (x.cpu / x.events) * 1e6),
      processCpu: pick((x) => x.cpuProcess),
    };
  }
  const ratios = all.map(
    (row) =>
      row.tether.events / row.tether.wall / (row["nostr-tools"].events / row["nostr-tools"].wall),
  );
  const cpuRatios = all.map((row) => row["nostr-tools"].cpu / row.tether.cpu);
  return {
    n,
    rounds: all.length,
    summary,
    ratios,
    ratio: median(ratios),
    cpuRatio: median(cpuRatios),
  };
}

export function report(result) {
  const rows = Object.values(result.summary).map((s) => [
    s.name,
    s.events,
    s.wall.toFixed(2),
    s.eps.toFixed(0),
    s.cpu.toFixed(2),
    s.cpuPerEvent.toFixed(1),
    s.processCpu.toFixed(2),
  ]);
  return (
    `${result.n} notes on one local relay, medians of ${result.rounds} rounds (subscribe to EOSE)\n` +
    table(
      ["client", "events", "wall s", "events/s", "CPU s", "CPU us/event", "process CPU s"],
      rows,
    ) +
    `\ntether-js / nostr-tools events/s: ${result.ratio.toFixed(2)}x (per round: ` +
    `${result.ratios.map((r) => r.toFixed(2)).join(", ")}; goal >= 10x); ` +
    `CPU per event nostr-tools / tether-js: ${result.cpuRatio.toFixed(2)}x`
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
  const result = await measure(
    count(args[0], 20_000),
    count(args[1], 3),
    process.argv.includes("--no-verify-too"),
  );
  console.log(report(result));
}

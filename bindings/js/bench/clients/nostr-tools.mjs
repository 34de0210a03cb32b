// One nostr-tools client: `SimplePool.subscribeMany` on one relay for every kind-1 note,
// read to EOSE (it verifies every event); prints one JSON line like clients/tether.mjs.
// `node bench/clients/nostr-tools.mjs URL N [VERIFY=1]` (0: every event taken as valid, to see
// what the rest costs)
import { AbstractSimplePool } from "nostr-tools/abstract-pool";
import { SimplePool, useWebSocketImplementation } from "nostr-tools/pool";
import WebSocket from "ws";

useWebSocketImplementation(WebSocket);

const [url, n, verifyArg] = process.argv.slice(2);
const cpuBefore = process.cpuUsage();
const started = performance.now();
const pool =
  verifyArg === "0"
    ? new AbstractSimplePool({ verifyEvent: () => true, websocketImplementation: WebSocket })
    : new SimplePool();
let events = 0;
let invalid = 0;
await new Promise((resolve) => {
  pool.subscribeMany(
    [url],
    { kinds: [1], limit: Number(n) },
    {
      onevent() {
        events += 1;
      },
      oninvalidevent() {
        invalid += 1;
      },
      oneose: resolve,
      // Its default EOSE timeout (4.4 s) would end the read long before the relay's EOSE.
      maxWait: 600_000,
    },
  );
});
const wall = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
const total = process.cpuUsage();
console.log(
  JSON.stringify({
    events,
    invalid,
    wall,
    cpu: (cpu.user + cpu.system) / 1e6,
    cpuProcess: (total.user + total.system) / 1e6,
  }),
);
process.exit(0);

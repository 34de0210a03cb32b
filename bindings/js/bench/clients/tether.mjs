// One tether-js client: subscribe to every kind-1 note of one relay with verification on
// and read to EOSE; prints one JSON line (events, wall and CPU seconds from subscribing to
// EOSE, and the whole process's CPU). `node bench/clients/tether.mjs URL N [VERIFY=1]`
import { loadTether } from "../lib.mjs";

const { createPool } = await loadTether();

const [url, n, verifyArg] = process.argv.slice(2);
const verify = verifyArg !== "0";
const cpuBefore = process.cpuUsage();
const started = performance.now();
// No pool deadline: read to the relay's own EOSE however long verification takes.
const pool = createPool([url], { verify, eoseDeadlineMs: 600_000 });
const sub = pool.subscribe([{ kinds: [1], limit: Number(n) }]);
let events = 0;
let invalid = 0;
for await (const item of sub) {
  if (item.type === "event") events += 1;
  else if (item.type === "invalid") invalid += 1;
  else if (item.type === "eose" || item.type === "complete") break;
}
const wall = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
const total = process.cpuUsage();
pool.close();
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

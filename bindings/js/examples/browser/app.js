// The example page: one relay from `?relay=`, a subscription to kind 1, each event as one
// <li data-id> and the relay's connected/disconnected items on a status line. Serve the
// package root over HTTP (the wasm is fetched next to its glue) and open
// examples/browser/index.html?relay=wss://relay.example. With `&resume=1` the pool is saved
// to IndexedDB when the page is hidden or left, and restored from there on the next visit.
import { createPool, indexedDbStore } from "../../dist/browser/index.js";

const params = new URL(window.location.href).searchParams;
const relay = params.get("relay");
const list = document.getElementById("events");
const count = document.getElementById("count");
const status = document.getElementById("status");
let shown = 0;
let connects = 0;
let disconnects = 0;

function setStatus(state, text) {
  status.dataset.state = state;
  status.dataset.connects = String(connects);
  status.dataset.disconnects = String(disconnects);
  status.textContent = text;
}

// No dedup here on purpose: the core delivers each event id once per subscription across
// relays and reconnects, and the browser test checks exactly that on this list.
function render(event) {
  const item = document.createElement("li");
  item.dataset.id = event.id;
  const when = new Date(event.created_at * 1000).toISOString();
  const meta = document.createElement("code");
  meta.textContent = `${when} ${event.pubkey.slice(0, 8)} `;
  item.append(meta, document.createTextNode(event.content));
  list.append(item);
  shown += 1;
  count.textContent = String(shown);
}

async function main() {
  if (relay === null) return;
  document.getElementById("relay").textContent = relay;
  const store = params.has("resume") ? indexedDbStore(`example ${relay}`) : undefined;
  const pool = await createPool([relay], store === undefined ? {} : { store });
  document.body.dataset.restored = String(pool.restored);
  // Every item of the pool: the events of every subscription (a restored one too) and the
  // relays' connected/disconnected items.
  const items = pool.items();
  if (!pool.restored) {
    const subscription = pool.subscribe([{ kinds: [1], limit: 100 }]);
    // A subscription's bounded queue must be read, or the pool stops reading the relay once
    // it is full; this page renders from `pool.items()`, so here its items are let go.
    void (async () => {
      for await (const item of subscription) void item;
    })();
  }
  for await (const item of items) {
    switch (item.type) {
      case "event":
        render(item.event);
        break;
      case "connected":
        connects += 1;
        setStatus("connected", `connected to ${item.url ?? relay}`);
        break;
      case "disconnected": {
        disconnects += 1;
        const retry =
          item.reconnect_in_ms === null ? "" : `, reconnecting in ${item.reconnect_in_ms} ms`;
        setStatus("disconnected", `disconnected (${item.why})${retry}`);
        break;
      }
      default:
        break;
    }
  }
}

main().catch((error) => {
  setStatus("error", `error: ${error instanceof Error ? error.message : String(error)}`);
  console.error(error);
});

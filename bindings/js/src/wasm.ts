// The wasm core, loaded once per realm. The Node entry loads it synchronously from the
// package's file; the browser entry fetches it next to the glue (`await loadWasm()`).
import init, { initSync } from "../wasm/tether.js";

export {
  Pool as WasmPool,
  Relay as WasmRelay,
  Sse as WasmSse,
  SavedPool,
  Signer,
  verifyEvent,
  isPrivateIp,
  normalizeRelayUrl,
} from "../wasm/tether.js";

let loaded = false;

/** Load the wasm from its bytes (Node, workers that already hold it). */
export function loadWasmSync(bytes: BufferSource): void {
  if (loaded) return;
  initSync({ module: bytes });
  loaded = true;
}

/** Load the wasm by URL (default: next to the glue, as a bundler or a browser finds it). */
export async function loadWasm(source?: URL | string | Response): Promise<void> {
  if (loaded) return;
  await init(source === undefined ? undefined : { module_or_path: source });
  loaded = true;
}

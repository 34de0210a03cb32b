// The core's free-standing rules, with misuse as a TetherError like every other call.
import { core } from "./errors.js";
import { isPrivateIp as wasmIsPrivateIp, normalizeRelayUrl as wasmNormalize } from "./wasm.js";

/**
 * Whether an IP address (text) is one a relay from a stranger's relay list may not be dialed
 * at (loopback, private, link-local, in their mapped and NAT64 forms too). Text that is not
 * an address throws `TetherError` `InvalidArgument`.
 */
export function isPrivateIp(address: string): boolean {
  return core(() => wasmIsPrivateIp(address));
}

/**
 * A relay URL in its one spelling (the pool keys relays by it); `allowPrivate` admits
 * loopback and private hosts. A URL that is not a relay's throws `InvalidArgument`.
 */
export function normalizeRelayUrl(url: string, allowPrivate = false): string {
  return core(() => wasmNormalize(url, allowPrivate));
}

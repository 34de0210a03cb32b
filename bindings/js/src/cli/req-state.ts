// What `req --state` asks of the checkpoint it restores from: which subscriptions it holds
// and which relay catches which one up (its `caught_up` then follows the EOSE). The core
// reads its own format (the wasm `SavedPool`); a relay session's checkpoint (a one-relay run
// of tether-py, or of tether before it ran one relay as a pool of one) reads as a pool of one.
import { core } from "../errors.js";
import { SavedPool } from "../wasm.js";
import type { LoadedState } from "./common.js";

/** The checkpoint text of a state file; `oneRelay` admits a relay session's. */
export function readSaved(text: string, oneRelay: boolean): SavedPool {
  return core(() => new SavedPool(text, oneRelay));
}

/** The state's remembered subscriptions that the checkpoint holds. */
export function restoredIds(
  saved: SavedPool,
  loaded: LoadedState,
): { filter: string; id: number }[] {
  const ids = new Set(saved.subscriptions());
  return loaded.subscriptions.filter((s) => ids.has(s.id));
}

/** Whether `relay` catches pool subscription `sub` up after the restore. */
export function catchesUp(saved: SavedPool, sub: number, relay: number): boolean {
  return core(() => saved.catchesUp(sub, relay));
}

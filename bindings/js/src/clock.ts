// The host's clocks, read here and nowhere else: the core takes them as inputs.

/** Monotonic whole milliseconds (the core's `nowMs`). */
export function nowMs(): number {
  return Math.floor(performance.now());
}

/** The wall clock in whole seconds. */
export function unixSecs(): number {
  return Math.floor(Date.now() / 1000);
}

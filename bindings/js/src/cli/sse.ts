// `tether-js sse`: see adapters/cli/src/sse.rs for the contract.

/** Run `sse` with its arguments; resolves with the exit code. */
export function runSse(args: string[]): Promise<number> {
  process.stderr.write(`tether-js sse: not built yet (${args.length} arguments)\n`);
  return Promise.resolve(1);
}

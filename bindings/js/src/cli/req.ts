// `tether-js req`: see adapters/cli/src/req.rs for the contract.

/** Run `req` with its arguments; resolves with the exit code. */
export function runReq(args: string[]): Promise<number> {
  process.stderr.write(`tether-js req: not built yet (${args.length} arguments)\n`);
  return Promise.resolve(1);
}

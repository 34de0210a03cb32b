#!/usr/bin/env node
// tether-js: the contract of `tether req` and `tether sse` (the same flags and JSON lines),
// over the Node driver. adapters/cli/tests/cli.rs runs against it with
// TETHER_CLI_UNDER_TEST. Exit codes: 0 done, 1 failed, 2 usage.

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    // Each command loads only what it uses: a CLI's start is part of every run.
    case "req":
      return (await import("./req.js")).runReq(rest);
    case "sse":
      return (await import("./sse.js")).runSse(rest);
    default:
      process.stderr.write(
        "usage: tether-js <req|sse> [ARGS]\n  req  keep subscriptions open on relays\n" +
          "  sse  stream a Server-Sent Events endpoint\n",
      );
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`tether-js: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);

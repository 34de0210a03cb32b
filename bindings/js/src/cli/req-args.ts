// The command line of `tether-js req`: the Rust CLI's flags (adapters/cli/src/req.rs), parsed
// as clap parses them (`--flag value`, `--flag=value`, options anywhere, `--` ending them).
import { parseSecs, parseU64, Usage } from "./common.js";

/** The arguments of `req`. */
export interface ReqArgs {
  /** The first positional argument: the relay, or with `--outbox` the first filter. */
  url: string | undefined;
  /** The positional arguments after it: further relays (leading ws:// ones), then filters. */
  filters: string[];
  eoseTimeout: number | undefined;
  untilEose: boolean;
  seed: bigint | undefined;
  secretKey: string | undefined;
  maxSubscriptions: bigint | undefined;
  verify: boolean;
  duration: number | undefined;
  state: string | undefined;
  cacert: string[];
  nativeRoots: boolean;
  outbox: boolean;
  indexer: string[];
  maxRelays: bigint | undefined;
  /** `--help` was asked for: print {@link REQ_HELP}, exit 0. */
  help: boolean;
}

/** What `tether-js req --help` prints: the flags and every line type of the contract. */
export const REQ_HELP = `Keep subscriptions open on relays; write what happens as JSON lines

Usage: tether-js req [OPTIONS] [URL] [FILTER_JSON]...

Arguments:
  [URL]             The relay, ws:// or wss://. More relays may follow: then the
                    subscriptions span all of them through one pool, each event is written
                    once, and every line about one relay carries \`relay\`. None with --outbox.
  [FILTER_JSON]...  One subscription per filter: a NIP-01 filter object as JSON
                    [default: {"limit":10}]. Leading ws:// or wss:// arguments are further
                    relays.

Options:
      --eose-timeout <SECS>       With several relays: report each subscription's \`complete\`
                                  line at the latest this long after it was made [default: 10]
      --until-eose                Exit 0 once every subscription has had EOSE or was closed
      --seed <N>                  Seed for the session's jitter (default: random)
      --secret-key <HEX>          Answer NIP-42 AUTH challenges with this secret key (hex or
                                  nsec) [env: TETHER_SECRET_KEY]
      --max-subscriptions <N>     Keep at most N REQs open per relay; the rest queue
      --verify                    Check each event's id and signature before writing it
      --duration <SECS>           Stop after this many seconds: CLOSE every subscription, exit 0
      --state <FILE>              Keep the run's state in FILE and resume from it
      --cacert <FILE>             Also trust the CA certificates in this PEM file (repeatable)
      --native-roots              Also trust the platform's root certificates
      --outbox                    Subscribe to people, not relays (takes no relay URL)
      --indexer <URL>             With --outbox: fetch relay lists from this relay (repeatable)
      --max-relays <N>            With --outbox: most relays connected at once [default: 20]
  -h, --help                      Print help

Output, one JSON object per line on stdout: connected, disconnected (reconnect_in_ms; why:
requested, connection_refused, tls_rejected, handshake_failed, connect_timeout,
closed_by_peer with close_code, frame_too_large, pong_timeout, network_error), event (sub,
event), eose (sub), caught_up (sub, method: negentropy or since, exact_since, recovered),
closed (sub, reason, attempts), notice (message), auth (challenge), retrying (sub, in_ms,
attempt), queued, eose_timeout, rate_limited (window_ms), subscription_limit (max),
authenticated, auth_failed, signer_failed, peer_error (kind, excerpt, suppressed). \`sub\` is
the filter argument's index, from 0. Diagnostics go to stderr.
With several relays every line about one relay carries \`relay\` (the URL as given); \`event\`
lines appear once per event id per subscription; each subscription gets one \`complete\` line
(sub, outcome: complete or partial, missing: URLs of the relays that did not answer EOSE by
--eose-timeout), and \`ended\` (sub) once if no relay serves it any more; --until-eose exits 0
after every subscription's \`complete\`. With --verify, an event whose id or signature is wrong
is dropped and written as \`invalid\` (sub, relay, id, reason).
With --outbox there is no relay argument: each filter names people (\`authors\`, or one \`#p\`
key for an inbox), their relays come from their relay lists on the indexers, and each
subscription gets a \`routed\` line whenever its routes change (sub, relays, covered,
fallback_only, uncovered), beside the pool's lines.
Exit codes: 0 done (--until-eose, --duration, Ctrl-C), 1 failure, 2 bad arguments.
`;

type Kind = "flag" | "value" | "many";

const OPTIONS: Record<string, Kind> = {
  "--eose-timeout": "value",
  "--until-eose": "flag",
  "--seed": "value",
  "--secret-key": "value",
  "--max-subscriptions": "value",
  "--verify": "flag",
  "--duration": "value",
  "--state": "value",
  "--cacert": "many",
  "--native-roots": "flag",
  "--outbox": "flag",
  "--indexer": "many",
  "--max-relays": "value",
  "--help": "flag",
  "-h": "flag",
  "--verbose": "flag",
  "-v": "flag",
};

/** Parse `req`'s arguments; a {@link Usage} error names what is wrong. */
export function parseReqArgs(argv: string[]): ReqArgs {
  const positional: string[] = [];
  const values = new Map<string, string[]>();
  const flags = new Set<string>();
  let rest = false;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] ?? "";
    if (rest || !arg.startsWith("-") || arg === "-") {
      positional.push(arg);
      continue;
    }
    if (arg === "--") {
      rest = true;
      continue;
    }
    // `-vv` counts verbosity as clap's `-v` does; diagnostics here are always warnings.
    if (/^-v+$/.test(arg)) continue;
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const name = eq >= 0 ? arg.slice(0, eq) : arg;
    const kind = OPTIONS[name];
    if (kind === undefined) throw new Usage(`unexpected argument '${arg}' found`);
    if (kind === "flag") {
      if (eq >= 0) throw new Usage(`unexpected value for '${name}'`);
      if (flags.has(name) && name !== "--verbose") {
        throw new Usage(`the argument '${name}' cannot be used multiple times`);
      }
      flags.add(name);
      continue;
    }
    let value: string;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next === undefined)
        throw new Usage(`a value is required for '${name}' but none was supplied`);
      value = next;
      i += 1;
    }
    const seen = values.get(name) ?? [];
    if (kind === "value" && seen.length > 0) {
      throw new Usage(`the argument '${name}' cannot be used multiple times`);
    }
    seen.push(value);
    values.set(name, seen);
  }
  const one = (name: string): string | undefined => values.get(name)?.[0];
  const typed = <T>(name: string, parse: (text: string) => T): T | undefined => {
    const text = one(name);
    if (text === undefined) return undefined;
    try {
      return parse(text);
    } catch (error) {
      throw new Usage(`invalid value '${text}' for '${name}': ${(error as Error).message}`);
    }
  };
  return {
    url: positional[0],
    filters: positional.slice(1),
    eoseTimeout: typed("--eose-timeout", parseSecs),
    untilEose: flags.has("--until-eose"),
    seed: typed("--seed", parseU64),
    secretKey: one("--secret-key") ?? process.env.TETHER_SECRET_KEY,
    maxSubscriptions: typed("--max-subscriptions", parseU64),
    verify: flags.has("--verify"),
    duration: typed("--duration", parseSecs),
    state: one("--state"),
    cacert: values.get("--cacert") ?? [],
    nativeRoots: flags.has("--native-roots"),
    outbox: flags.has("--outbox"),
    indexer: values.get("--indexer") ?? [],
    maxRelays: typed("--max-relays", parseU64),
    help: flags.has("--help") || flags.has("-h"),
  };
}

// `tether-js sse`: the contract of `tether sse` (adapters/cli/src/sse.rs): the same flags,
// the same JSON lines (the core's, printed as it words them), the same exit codes: 0 done
// (ended, the server's 204, --duration, Ctrl-C), 1 after `failed`, 2 bad arguments (one
// `tether: ...` line on stderr).
import "../node/load.js";
import { existsSync, readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import { parseArgs } from "node:util";

import { TetherError } from "../errors.js";
import type { SseItem } from "../items.js";
import { checkSseUrl, TetherSse, type PerAttempt, type SseRequest } from "../sse.js";
import { HeaderError, headersFromCommand, parseHeaders, TOKEN } from "./sse-headers.js";
import { Mcp } from "./sse-mcp.js";
import { ProxyError, Proxies, proxyFetch, type ProxyConfig } from "../node/proxy.js";
import { StateFile, Usage } from "./common.js";

/** How often `--state` is written while anything changes. */
const SAVE_EVERY_MS = 1000;

const HELP = `usage: tether-js sse <URL> [OPTIONS]

Stream a Server-Sent Events endpoint, kept open with tether's rules, as JSON lines.

Options:
  -H, --header <NAME: VALUE>  an extra request header (repeatable)
  -X, --request <METHOD>      the request method (default GET, or POST with --data)
  -d, --data <BODY|@FILE>     the request body, or @FILE to read it from a file
      --resume <POLICY>       never, same, last-event-id[:METHOD] or reissue[:N]
      --end-data <DATA>       end cleanly on a message whose data is exactly this
      --end-event <EVENT>     end cleanly on a message of this event type
      --fail-event <EVENT>    fail on a message of this event type
      --idle-timeout <SECS>   reconnect after this long without a byte (default 90; 0: off)
      --seed <N>              seed for the reconnect jitter
      --duration <SECS>       stop after this many seconds and exit 0
      --state <FILE>          keep the stream's state in FILE and resume from it
      --header-cmd <CMD>      run CMD before each request; its 'Name: value' lines are that
                              request's headers (TETHER_ATTEMPT and TETHER_AFTER are set)
      --mcp <REVISION>        send the JSON-RPC body as MCP Streamable HTTP: 2025-11-25 or
                              2026-07-28
      --proxy <URL|none>      send through this HTTP proxy, or none (default: https_proxy,
                              http_proxy, all_proxy and no_proxy from the environment)
      --no-proxy <LIST>       with --proxy URL: hosts reached directly (NO_PROXY's syntax)
      --cacert <FILE>         also trust the CA certificates in this PEM file (repeatable)
      --native-roots          also trust the platform's root certificates

Output, one JSON object per line on stdout: open, message (event, data, id), reconnecting
(in_ms, last_event_id, attempt, why, status, reason), reconnected (gap_ms), reissued (gap_ms,
attempts), peer_error (kind, excerpt, suppressed), failed (status, reason, kind, events,
last_event_id, body), ended (why, event, events, last_event_id), closed (reason).
Diagnostics go to stderr.

Exit codes: 0 done (ended, 204, --duration, Ctrl-C), 1 after failed, 2 bad arguments.
`;

interface Flags {
  url: string;
  headers: string[];
  method: string | undefined;
  data: string | undefined;
  resume: string | undefined;
  endData: string | undefined;
  endEvent: string | undefined;
  failEvent: string | undefined;
  idleTimeoutMs: number | undefined;
  seed: bigint | undefined;
  durationMs: number | undefined;
  state: string | undefined;
  headerCmd: string | undefined;
  mcp: string | undefined;
  proxy: string | undefined;
  noProxy: string | undefined;
  cacert: string[];
  nativeRoots: boolean;
}

/** Run `sse` with its arguments; resolves with the exit code. */
export async function runSse(args: string[]): Promise<number> {
  try {
    return await run(args);
  } catch (error) {
    if (error instanceof Usage) {
      process.stderr.write(`tether: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}

function parse(args: string[]): Flags | undefined {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        header: { type: "string", short: "H", multiple: true },
        request: { type: "string", short: "X" },
        data: { type: "string", short: "d" },
        resume: { type: "string" },
        "end-data": { type: "string" },
        "end-event": { type: "string" },
        "fail-event": { type: "string" },
        "idle-timeout": { type: "string" },
        seed: { type: "string" },
        duration: { type: "string" },
        state: { type: "string" },
        "header-cmd": { type: "string" },
        mcp: { type: "string" },
        proxy: { type: "string" },
        "no-proxy": { type: "string" },
        cacert: { type: "string", multiple: true },
        "native-roots": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    throw new Usage((error as Error).message.split("\n")[0] ?? "bad arguments");
  }
  const { values, positionals } = parsed;
  if (values.help === true) return undefined;
  if (positionals.length !== 1) {
    throw new Usage(
      positionals.length === 0
        ? "sse needs the endpoint's URL"
        : `unexpected argument ${positionals[1] ?? ""}`,
    );
  }
  if (values["no-proxy"] !== undefined && values.proxy === undefined) {
    throw new Usage("--no-proxy needs --proxy URL");
  }
  return {
    url: positionals[0] ?? "",
    headers: values.header ?? [],
    method: values.request,
    data: values.data,
    resume: values.resume,
    endData: values["end-data"],
    endEvent: values["end-event"],
    failEvent: values["fail-event"],
    idleTimeoutMs: secs(values["idle-timeout"], "--idle-timeout"),
    seed: u64(values.seed),
    durationMs: secs(values.duration, "--duration"),
    state: values.state,
    headerCmd: values["header-cmd"],
    mcp: values.mcp,
    proxy: values.proxy,
    noProxy: values["no-proxy"],
    cacert: values.cacert ?? [],
    nativeRoots: values["native-roots"] === true,
  };
}

/** Seconds as whole milliseconds. */
function secs(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (text.trim() === "" || Number.isNaN(value)) {
    throw new Usage(`${flag}: ${JSON.stringify(text)} is not a number of seconds`);
  }
  if (!Number.isFinite(value) || value < 0) {
    throw new Usage(`${flag}: ${JSON.stringify(text)}: expected 0 or more seconds`);
  }
  return Math.floor(value * 1000);
}

function u64(text: string | undefined): bigint | undefined {
  if (text === undefined) return undefined;
  if (!/^[0-9]+$/.test(text)) throw new Usage(`--seed: ${JSON.stringify(text)} is not a number`);
  const value = BigInt(text);
  if (value >= 1n << 64n) throw new Usage(`--seed: ${JSON.stringify(text)} is out of range`);
  return value;
}

/** A seed from the OS, as `tether` draws one. */
function randomSeed(): bigint {
  return crypto.getRandomValues(new BigUint64Array(1))[0] ?? 0n;
}

/** `-d`'s body: the text, or `@FILE`'s contents. */
function body(data: string | undefined): string | undefined {
  if (data === undefined || !data.startsWith("@")) return data;
  const path = data.slice(1);
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    throw new Usage(`--data @${path}: ${(error as Error).message}`);
  }
}

/** The request the flags describe: method, headers, body, resume policy, end rules. */
function request(flags: Flags, text: string | undefined): { request: SseRequest; mcp?: Mcp } {
  const method = flags.method ?? (text !== undefined ? "POST" : "GET");
  if (!TOKEN.test(method)) throw new Usage(`-X ${JSON.stringify(method)}: not an HTTP method`);
  let headers: [string, string][];
  try {
    headers = parseHeaders(flags.headers);
  } catch (error) {
    if (error instanceof HeaderError) throw new Usage(error.message);
    throw error;
  }
  const built: SseRequest & { headers: [string, string][] } = { method, headers };
  if (text !== undefined) built.body = text;
  if (flags.resume !== undefined) built.resume = flags.resume;
  if (flags.endData !== undefined) built.endData = flags.endData;
  if (flags.endEvent !== undefined) built.endEvent = flags.endEvent;
  if (flags.failEvent !== undefined) built.failEvent = flags.failEvent;
  if (flags.mcp === undefined) return { request: built };
  let mcp: Mcp;
  try {
    mcp = new Mcp(flags.mcp, text ?? "");
  } catch (error) {
    throw new Usage(`--mcp ${(error as Error).message}`);
  }
  return { request: mcp.apply(built, flags.resume !== undefined), mcp };
}

/** The proxy settings of the flags, or a usage error for one that cannot be used. */
function proxies(flags: Flags): Proxies {
  const config: ProxyConfig =
    flags.proxy === undefined
      ? { kind: "env" }
      : flags.proxy === "none"
        ? { kind: "direct" }
        : { kind: "url", url: flags.proxy, noProxy: flags.noProxy };
  try {
    return Proxies.resolve(config);
  } catch (error) {
    if (error instanceof ProxyError) throw new Usage(error.message);
    throw error;
  }
}

/** The CA certificates `--cacert` and `--native-roots` ask for; `undefined`: Node's own. */
function roots(flags: Flags): string[] | undefined {
  if (flags.cacert.length === 0 && !flags.nativeRoots) return undefined;
  const ca = [...rootCertificates];
  for (const path of flags.cacert) {
    try {
      ca.push(readFileSync(path, "utf8"));
    } catch (error) {
      throw new Usage(`--cacert ${path}: ${(error as Error).message}`);
    }
  }
  if (flags.nativeRoots) ca.push(...systemRoots());
  return ca;
}

/** The platform's store: Node 22's API where there is one, else the usual bundle files. */
function systemRoots(): string[] {
  const tls = { rootCertificates } as unknown as {
    getCACertificates?: (type: string) => string[];
  };
  if (tls.getCACertificates !== undefined) return tls.getCACertificates("system");
  const bundles = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
  ];
  const found = bundles.find((path) => existsSync(path));
  return found === undefined ? [] : [readFileSync(found, "utf8")];
}

async function run(args: string[]): Promise<number> {
  const flags = parse(args);
  if (flags === undefined) {
    process.stdout.write(HELP);
    return 0;
  }
  try {
    checkSseUrl(flags.url);
  } catch (error) {
    if (error instanceof TetherError) throw new Usage(error.message);
    throw error;
  }
  const { request: req, mcp } = request(flags, body(flags.data));
  const http = proxyFetch(proxies(flags), roots(flags));
  const state =
    flags.state === undefined ? undefined : new StateFile(flags.state, "sse", [flags.url]);
  // A state file that is not this run's is a usage error (exit 2), left as it is.
  const checkpoint = state?.load()?.checkpoint;
  const headerCmd = flags.headerCmd;
  const perAttempt: PerAttempt | undefined =
    mcp === undefined && headerCmd === undefined
      ? undefined
      : async (info) => ({
          headers: headerCmd === undefined ? undefined : await headersFromCommand(headerCmd, info),
          body: mcp?.bodyFor(info),
        });
  let sse: TetherSse;
  try {
    sse = new TetherSse(flags.url, {
      seed: flags.seed ?? randomSeed(),
      ...(flags.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: flags.idleTimeoutMs }),
      request: req,
      perAttempt,
      fetch: http.fetch,
      checkpoint,
    });
  } catch (error) {
    await http.close();
    if (!(error instanceof TetherError)) throw error;
    if (state !== undefined && checkpoint !== undefined && error.kind.startsWith("Checkpoint")) {
      throw state.refuse(error.message);
    }
    throw new Usage(`the request was refused (${error.message}): check --resume`);
  }
  return drive(flags, sse, state, () => http.close());
}

/** Write the stream's items as lines until it ends or the run is stopped. */
async function drive(
  flags: Flags,
  sse: TetherSse,
  state: StateFile | undefined,
  closeHttp: () => Promise<void>,
): Promise<number> {
  let dirty = false;
  let saved = false;
  const save = (): void => {
    if (state === undefined) return;
    try {
      state.store([], sse.checkpoint());
    } catch (error) {
      process.stderr.write(`tether: --state not written: ${(error as Error).message}\n`);
    }
  };
  // Before the close: a stream still open is kept as one to resume, not one that ended.
  const finish = (): void => {
    if (saved) return;
    saved = true;
    save();
  };
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    finish();
    sse.close();
  };
  // An object: the error handler sets it while the loop below reads it.
  const out = { closed: false };
  const onOutError = (): void => {
    out.closed = true;
    stop();
  };
  process.stdout.on("error", onOutError);
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  const duration = flags.durationMs === undefined ? undefined : setTimeout(stop, flags.durationMs);
  const saves =
    state === undefined
      ? undefined
      : setInterval(() => {
          if (!dirty || stopping) return;
          dirty = false;
          save();
        }, SAVE_EVERY_MS);
  let failed: string | undefined;
  try {
    for await (const item of sse) {
      dirty = true;
      // A local close is this run's own stop: `tether sse` prints no line for it.
      if (item.type === "closed" && item.reason === "closed") continue;
      if (item.type === "peer_error") {
        process.stderr.write(`tether: the server sent something wrong: ${JSON.stringify(item)}\n`);
      }
      if (!out.closed) process.stdout.write(`${JSON.stringify(item)}\n`);
      if (item.type === "failed") {
        failed = reasonOf(item);
        break;
      }
      if (item.type === "ended" || item.type === "closed") break;
    }
  } finally {
    finish();
    sse.close();
    if (duration !== undefined) clearTimeout(duration);
    if (saves !== undefined) clearInterval(saves);
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    process.stdout.off("error", onOutError);
    await closeHttp();
  }
  if (failed !== undefined) {
    process.stderr.write(`tether: ${flags.url}: ${failed}\n`);
    return 1;
  }
  return 0;
}

function reasonOf(item: SseItem): string {
  return "reason" in item ? item.reason : "failed";
}

// What `tether-js req` and `tether-js sse` share: the failures that pick the exit code, the
// argument values of the Rust CLI (seconds, numbers, URLs), JSON lines on stdout and the
// `--state FILE` format of adapters/cli/src/state.rs.
import { X509Certificate } from "node:crypto";
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { basename, dirname } from "node:path";
import * as tls from "node:tls";

/** The command line cannot be used: exit 2 with one `tether: ...` line on stderr. */
export class Usage extends Error {
  override readonly name = "Usage";
}

/** It ran and failed: exit 1. */
export class Failed extends Error {
  override readonly name = "Failed";
}

/** The exit code of a run that threw `error`, its one line written to stderr. */
export function exitCodeOf(error: unknown): number {
  const message = error instanceof Error ? error.message : String(error);
  // One line, as the contract says: a message quoting user input may hold a line break.
  process.stderr.write(`tether: ${message.replace(/\r?\n/g, " ")}\n`);
  return error instanceof Usage ? 2 : 1;
}

const SECONDS = /^[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** `--duration` and friends: seconds, fractions allowed (the Rust CLI's `parse_secs`). */
export function parseSecs(text: string): number {
  if (/^-/.test(text) && SECONDS.test(text.slice(1))) {
    throw new Error(`${JSON.stringify(text)}: expected 0 or more seconds`);
  }
  const secs = Number(text);
  if (!SECONDS.test(text) || !Number.isFinite(secs)) {
    throw new Error(`${JSON.stringify(text)} is not a number of seconds`);
  }
  return secs;
}

/** A whole number that fits a u64 (the Rust CLI's `--seed`, `--max-subscriptions`...). */
export function parseU64(text: string): bigint {
  if (!/^\+?\d+$/.test(text)) throw new Error(`invalid digit found in string: ${text}`);
  const value = BigInt(text);
  if (value >= 1n << 64n) throw new Error(`number too large to fit in target type: ${text}`);
  return value;
}

/**
 * Check a URL as tether's Rust entry points do before anything starts (tether-driver's
 * `check_ws_url` / `check_http_url`): the scheme, a host, and a port of 1-65535 when one is
 * written. A port out of range would otherwise reach a socket as absent (port 80) and be
 * retried forever. Throws {@link Usage} worded as the Rust CLI words it.
 */
export function checkUrl(url: string, kind: "ws" | "http"): void {
  const invalid = (why: string): Usage => new Usage(`invalid URL: ${url}: ${why}`);
  // The characters http::Uri takes; anything else is not a URL at all.
  if (url.length === 0) throw invalid("empty string");
  if (!/^[\x21-\x7e]*$/.test(url) || /["<>\\^`{|}]/.test(url)) {
    throw invalid("invalid uri character");
  }
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^#]*)(#.*)?$/.exec(url);
  if (match === null) throw invalid("invalid format");
  const scheme = match[1] ?? "";
  const authority = match[2] ?? "";
  if (kind === "ws") {
    // Compared as written: WebSocket connectors take only lower-case `ws`/`wss`.
    if (scheme !== "ws" && scheme !== "wss") {
      if (/^wss?$/i.test(scheme)) {
        throw invalid("write the scheme in lower case (ws:// or wss://)");
      }
      throw invalid("expected ws:// or wss://");
    }
  } else if (!/^https?$/i.test(scheme)) {
    throw invalid("expected http:// or https://");
  }
  const at = authority.lastIndexOf("@");
  const hostPort = at >= 0 ? authority.slice(at + 1) : authority;
  let host: string;
  let port: string | undefined;
  if (hostPort.startsWith("[")) {
    const close = hostPort.indexOf("]");
    if (close < 0) throw invalid("invalid authority");
    host = hostPort.slice(0, close + 1);
    const rest = hostPort.slice(close + 1);
    if (rest.startsWith(":")) port = rest.slice(1);
    else if (rest !== "") throw invalid("invalid authority");
  } else {
    const colon = hostPort.lastIndexOf(":");
    host = colon >= 0 ? hostPort.slice(0, colon) : hostPort;
    port = colon >= 0 ? hostPort.slice(colon + 1) : undefined;
  }
  if (host === "") throw invalid("no host");
  if (port === undefined) return;
  if (port === "") throw invalid("empty port");
  if (!/^\d+$/.test(port)) throw invalid(`port ${JSON.stringify(port)} is not a number`);
  const n = Number(port);
  if (n < 1 || n > 65535) throw invalid(`port ${port} is not in 1-65535`);
}

/**
 * The CA certificates (PEM) sockets trust for `--cacert FILE...` and `--native-roots`: the
 * built-in roots and these beside them, or `undefined` to keep the built-in ones alone. A
 * file that cannot be read or holds no valid certificate is a {@link Usage} error.
 */
export function caBundle(files: string[], nativeRoots: boolean): string | undefined {
  if (files.length === 0 && !nativeRoots) return undefined;
  // Node's `ca` replaces its built-in roots: they are listed with the extra ones.
  const pems: string[] = [...tls.rootCertificates];
  if (nativeRoots) {
    // The platform's store where this Node can read it (22.15 and later).
    const store = (tls as { getCACertificates?: (type: string) => string[] }).getCACertificates;
    if (store !== undefined) pems.push(...store("system"));
  }
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new Usage(`--cacert: ${file}: ${(error as Error).message}`);
    }
    const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
    if (blocks === null) throw new Usage(`--cacert: ${file}: no certificate in it`);
    for (const block of blocks) {
      try {
        new X509Certificate(block);
      } catch (error) {
        throw new Usage(`--cacert: ${file}: ${(error as Error).message}`);
      }
      pems.push(block);
    }
  }
  return pems.join("\n");
}

/** JSON lines on stdout, each written whole; a reader that went away ends the run quietly. */
export class JsonLines {
  /** Whoever read stdout went away. */
  closed = false;
  private readonly onClosed: () => void;

  constructor(onClosed: () => void) {
    this.onClosed = onClosed;
    process.stdout.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "EPIPE") process.stderr.write(`tether: writing to stdout: ${error}\n`);
      this.close();
    });
  }

  /** Write one line (text already JSON, without its line break). */
  write(text: string): void {
    if (this.closed) return;
    try {
      process.stdout.write(`${text}\n`);
    } catch {
      this.close();
    }
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClosed();
  }
}

/** The state file format this build writes and the newest it reads. */
const STATE_VERSION = 1;

/** What a state file held. */
export interface LoadedState {
  /** Each remembered subscription: its filter (canonical JSON) and its id in the checkpoint. */
  subscriptions: { filter: string; id: number }[];
  /** The core's checkpoint, as JSON text. */
  checkpoint: string;
}

/**
 * `--state FILE`: `{"tether":"state","version":1,"command":"req"|"sse","targets":[...],
 * "subscriptions":[{"filter":JSON,"id":N}...],"checkpoint":{...}}`, the checkpoint being the
 * core's. Replaced atomically (written beside it, fsynced, renamed, the directory fsynced),
 * so a kill at any instant leaves the previous state or the next. A file that is not one, is
 * corrupt, is another command's or other targets', or is newer is refused (exit 2) and left
 * as it is.
 */
export class StateFile {
  constructor(
    readonly path: string,
    readonly command: "req" | "sse",
    readonly targets: string[],
  ) {}

  /** Refuse the file with `why` (exit 2). */
  refuse(why: string): Usage {
    return new Usage(`--state ${this.path}: ${why}`);
  }

  /** What the file holds, or `undefined` when there is none yet. */
  load(): LoadedState | undefined {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw this.refuse(`cannot read it: ${(error as Error).message}`);
    }
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      throw this.refuse("not a tether state file");
    }
    if (!isObject(doc) || doc.tether !== "state" || !Number.isInteger(doc.version)) {
      throw this.refuse("not a tether state file");
    }
    const version = doc.version as number;
    if (version > STATE_VERSION) {
      throw this.refuse(
        `written by a newer tether (state version ${version}, this one reads ${STATE_VERSION})`,
      );
    }
    const { command, targets, subscriptions, checkpoint } = doc;
    if (typeof command !== "string") throw this.refuse("corrupt: missing field `command`");
    if (!Array.isArray(targets) || !targets.every((t) => typeof t === "string")) {
      throw this.refuse("corrupt: missing field `targets`");
    }
    if (!Array.isArray(subscriptions)) {
      throw this.refuse("corrupt: missing field `subscriptions`");
    }
    const subs: LoadedState["subscriptions"] = [];
    for (const saved of subscriptions) {
      if (!isObject(saved) || typeof saved.filter !== "string" || !isWhole(saved.id)) {
        throw this.refuse("corrupt: a subscription without its filter and id");
      }
      subs.push({ filter: saved.filter, id: saved.id });
    }
    if (!isObject(checkpoint)) throw this.refuse("corrupt: missing field `checkpoint`");
    if (command !== this.command) throw this.refuse(`the state of a \`tether ${command}\` run`);
    const given = targets;
    if (given.length !== this.targets.length || given.some((t, i) => t !== this.targets[i])) {
      throw this.refuse(`the state of a run on ${given.join(" ")}, not ${this.targets.join(" ")}`);
    }
    // The checkpoint's own text: re-encoding it could round numbers past 2^53.
    return { subscriptions: subs, checkpoint: rawField(text, "checkpoint") ?? "" };
  }

  /** Replace the file with this state: the core's `checkpoint` and the subscriptions. */
  store(subscriptions: { filter: string; id: number }[], checkpoint: string): void {
    const doc =
      `{"tether":"state","version":${STATE_VERSION},"command":${JSON.stringify(this.command)},` +
      `"targets":${JSON.stringify(this.targets)},` +
      `"subscriptions":${JSON.stringify(subscriptions.map(({ filter, id }) => ({ filter, id })))},` +
      `"checkpoint":${checkpoint}}`;
    const directory = dirname(this.path);
    const temporary = `${directory}/.${basename(this.path)}.tmp-${process.pid}`;
    const fd = openSync(temporary, "w");
    try {
      writeSync(fd, doc);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, this.path);
    // The rename is durable once the directory is; not every platform can open one.
    try {
      const dir = openSync(directory, "r");
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    } catch {
      // Best effort, as the Rust CLI's.
    }
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isWhole(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/**
 * The text of top-level field `name` of the JSON object `text` (already known to parse), as
 * written. A small scanner: strings are skipped whole, nesting is counted.
 */
function rawField(text: string, name: string): string | undefined {
  let depth = 0;
  let i = 0;
  const n = text.length;
  const skipString = (from: number): number => {
    let j = from + 1;
    while (j < n && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
    return j + 1;
  };
  while (i < n) {
    const c = text[i];
    if (c === '"') {
      const end = skipString(i);
      if (depth === 1 && JSON.parse(text.slice(i, end)) === name) {
        let j = end;
        while (j < n && /\s/.test(text[j] ?? "")) j += 1;
        if (text[j] === ":") {
          j += 1;
          while (j < n && /\s/.test(text[j] ?? "")) j += 1;
          const start = j;
          let inner = 0;
          while (j < n) {
            const d = text[j];
            if (d === '"') {
              j = skipString(j);
              if (inner === 0) break;
              continue;
            }
            if (d === "{" || d === "[") inner += 1;
            else if (d === "}" || d === "]") {
              if (inner === 0) break;
              inner -= 1;
              if (inner === 0) {
                j += 1;
                break;
              }
            } else if (d === "," && inner === 0) break;
            j += 1;
          }
          return text.slice(start, j).trim();
        }
      }
      i = end;
      continue;
    }
    if (c === "{" || c === "[") depth += 1;
    else if (c === "}" || c === "]") depth -= 1;
    i += 1;
  }
  return undefined;
}

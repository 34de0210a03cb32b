// `-H 'Name: value'` and `--header-cmd CMD` for `tether-js sse`: the rules of
// adapters/cli/src/sse.rs (`parse_headers`, `headers_from_command`).
import { spawn } from "node:child_process";

import type { AttemptInfo } from "../sse.js";

/** How long `--header-cmd` may run. */
export const HEADER_CMD_LIMIT_MS = 10_000;

/** An RFC 9110 token: what a header name and a method are. */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A header argument that is not `Name: value`; the message is one line. */
export class HeaderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HeaderError";
  }
}

/** Parse `Name: value` arguments; throws {@link HeaderError} naming the first bad one. */
export function parseHeaders(args: string[]): [string, string][] {
  return args.map((arg) => {
    const bad = (why: string): HeaderError =>
      new HeaderError(`header ${JSON.stringify(arg)}: ${why}`);
    const colon = arg.indexOf(":");
    if (colon < 0) throw bad("expected 'Name: value'");
    const name = arg.slice(0, colon).trim();
    const value = arg.slice(colon + 1).trim();
    if (!TOKEN.test(name)) throw bad("not a valid header name");
    // What an HTTP header value may hold: no control character but TAB, no DEL, and
    // nothing a byte cannot carry.
    for (const char of value) {
      const code = char.codePointAt(0) ?? 0;
      if ((code < 0x20 && code !== 0x09) || code === 0x7f || code > 0xff) {
        throw bad("not a valid header value");
      }
    }
    return [name, value];
  });
}

/**
 * Run `cmd` (through sh) for the attempt `info` describes and read its `Name: value` lines;
 * rejects with a one-line reason when it fails, prints something else or runs too long.
 */
export function headersFromCommand(cmd: string, info: AttemptInfo): Promise<[string, string][]> {
  return new Promise((resolve, reject) => {
    // Its own process group: a timeout ends CMD and whatever it started, so no leftover
    // child keeps the pipe open.
    const child = spawn("sh", ["-c", cmd], {
      env: { ...process.env, TETHER_ATTEMPT: String(info.number), TETHER_AFTER: info.after ?? "" },
      stdio: ["ignore", "pipe", "inherit"],
      detached: true,
    });
    const chunks: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }, HEADER_CMD_LIMIT_MS);
    child.stdout.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
    });
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`--header-cmd: ${error.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (timedOut) {
        reject(new Error(`--header-cmd ran past ${HEADER_CMD_LIMIT_MS / 1000}s`));
        return;
      }
      if (code !== 0) {
        reject(new Error(`--header-cmd exited with ${code ?? `signal ${signal ?? "?"}`}`));
        return;
      }
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
      } catch {
        reject(new Error("--header-cmd printed something that is not UTF-8"));
        return;
      }
      try {
        resolve(parseHeaders(text.split(/\r?\n/).filter((line) => line.trim() !== "")));
      } catch (error) {
        reject(new Error(`--header-cmd: ${(error as Error).message}`));
      }
    });
  });
}

// `tether-js sse --mcp REVISION`: a JSON-RPC body (`-d`) sent as MCP's Streamable HTTP
// transport of that revision expects, as `tether sse --mcp` does (adapters/cli/src/mcp.rs).
//
// - Both revisions: `MCP-Protocol-Version`, `Accept: application/json, text/event-stream`
//   and `Content-Type: application/json` where no `-H` sets them; the stream ends once the
//   call's JSON-RPC response arrived.
// - 2025-11-25: a cut stream is resumed with a GET and `Last-Event-ID`.
// - 2026-07-28: `Mcp-Method` and `Mcp-Name` mirror the body, whose `params._meta` gains the
//   protocol version and (empty) client capabilities where it has none; a cut
//   `subscriptions/listen` is re-issued as a new request with a new JSON-RPC id each time (a
//   numeric id plus n - 1, a string id with `-n`); anything else ends.
//
// An explicit `-H` or `--resume` wins over what this adds. Which attempt is a re-issue is
// the core's decision; this only builds the body the attempt it names carries.
import type { AttemptInfo, SseRequest } from "../sse.js";

/** The revisions `--mcp` knows. */
export const REVISIONS = ["2025-11-25", "2026-07-28"] as const;

/** Re-issues in a row that may fail for a listen stream. */
const LISTEN_REISSUES = 5;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What `--mcp` makes of a request. */
export class Mcp {
  private readonly body: { [key: string]: Json };

  /** `revision` for `body`; throws an `Error` with a one-line reason. */
  constructor(
    readonly revision: string,
    body: string,
  ) {
    if (!(REVISIONS as readonly string[]).includes(revision)) {
      throw new Error(`${JSON.stringify(revision)}: expected one of ${REVISIONS.join(", ")}`);
    }
    let value: Json;
    try {
      value = JSON.parse(body) as Json;
    } catch (error) {
      throw new Error(`the body (-d) is not JSON: ${(error as Error).message}`);
    }
    if (!isObject(value) || typeof value.method !== "string") {
      throw new Error('the body (-d) is not a JSON-RPC request: no "method"');
    }
    if (revision === "2026-07-28") {
      // Without a handshake a 2026-07-28 request says what it speaks in `params._meta`.
      const params = (value.params ??= {});
      if (isObject(params)) {
        const meta = (params._meta ??= {});
        if (isObject(meta)) {
          meta["io.modelcontextprotocol/protocolVersion"] ??= revision;
          meta["io.modelcontextprotocol/clientCapabilities"] ??= {};
        }
      }
    }
    this.body = value;
  }

  private get method(): string {
    return this.body.method as string;
  }

  /**
   * `request` with this revision's headers where none is set, its default resume where
   * `resumeGiven` is false, the body, and the end on the call's response.
   */
  apply(request: SseRequest & { headers: [string, string][] }, resumeGiven: boolean): SseRequest {
    const add: [string, string][] = [
      ["content-type", "application/json"],
      ["accept", "application/json, text/event-stream"],
      ["mcp-protocol-version", this.revision],
    ];
    if (this.revision === "2026-07-28") {
      add.push(["mcp-method", this.method]);
      const params = this.body.params;
      const name = isObject(params) ? (params.name ?? params.uri) : undefined;
      if (typeof name === "string") add.push(["mcp-name", name]);
    }
    const present = new Set(request.headers.map(([n]) => n.toLowerCase()));
    const headers = [...request.headers, ...add.filter(([n]) => !present.has(n))];
    return {
      ...request,
      headers,
      ...(resumeGiven ? {} : { resume: this.defaultResume() }),
      body: JSON.stringify(this.body),
      endOnJsonrpcResponse: true,
    };
  }

  private defaultResume(): string {
    if (this.revision === "2025-11-25") return "last-event-id:GET";
    if (this.method === "subscriptions/listen") return `reissue:${LISTEN_REISSUES}`;
    return "never";
  }

  /**
   * The body of attempt `info`: under 2026-07-28 each later sending of the request is a new
   * request with a new id; `undefined` keeps the request's body.
   */
  bodyFor(info: AttemptInfo): string | undefined {
    if (this.revision !== "2026-07-28" || info.number <= 1 || info.attempt === "resume") {
      return undefined;
    }
    const id = this.body.id;
    let next: Json;
    if (typeof id === "number" && Number.isSafeInteger(id) && id >= 0) {
      next = id + info.number - 1;
    } else if (typeof id === "string") {
      next = `${id}-${info.number}`;
    } else {
      return undefined;
    }
    return JSON.stringify({ ...this.body, id: next });
  }
}

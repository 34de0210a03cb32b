// Which proxy a request goes through, read as curl reads the environment (the rule of
// adapters/driver/src/http_options.rs, so `tether`, `tether-py` and `tether-js` agree), and a
// `fetch` over undici that uses it: Node's own `fetch` reads no proxy variable at all.
//
// `https_proxy` / `HTTPS_PROXY` for https:// targets, `http_proxy` / `HTTP_PROXY` for http://
// ones, `all_proxy` / `ALL_PROXY` for either when the specific one is unset (lower case
// first), and `no_proxy` / `NO_PROXY`: `*`, host names (a name also covers its subdomains),
// IP addresses and CIDR blocks. A proxy is `http://[user:password@]host[:port]` (port 1080
// by default, as curl's). The uppercase `HTTP_PROXY` is ignored in a CGI process
// (`REQUEST_METHOD` set), where a request's `Proxy:` header would set it ("httpoxy").
import { BlockList, isIP } from "node:net";

import type { Dispatcher } from "undici";

import type { SseFetch, SseResponse } from "../sse.js";

/** A proxy setting that cannot be used. */
export class ProxyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProxyError";
  }
}

/** Which proxy, if any: from the environment, none, or one URL. */
export type ProxyConfig =
  { kind: "env" } | { kind: "direct" } | { kind: "url"; url: string; noProxy?: string | undefined };

/** The proxies a run uses, per target scheme, with `NO_PROXY`'s exceptions. */
export class Proxies {
  private constructor(
    private readonly http: string | undefined,
    private readonly https: string | undefined,
    private readonly noProxy: NoProxy,
  ) {}

  /** The settings `config` says, reading `env` for `{ kind: "env" }`; throws
   * {@link ProxyError} for a proxy URL that is not `http://host[:port]`. */
  static resolve(config: ProxyConfig, env: NodeJS.ProcessEnv = process.env): Proxies {
    switch (config.kind) {
      case "direct":
        return new Proxies(undefined, undefined, new NoProxy(""));
      case "url": {
        const proxy = parseProxy(config.url);
        return new Proxies(proxy, proxy, new NoProxy(config.noProxy ?? ""));
      }
      case "env": {
        const set = (name: string): string | undefined => {
          const value = env[name];
          return value === undefined || value.trim() === "" ? undefined : value;
        };
        const either = (lower: string, upper: string): string | undefined =>
          set(lower) ?? set(upper);
        const all = either("all_proxy", "ALL_PROXY");
        const cgi = set("REQUEST_METHOD") !== undefined;
        const http = set("http_proxy") ?? (cgi ? undefined : set("HTTP_PROXY")) ?? all;
        const https = either("https_proxy", "HTTPS_PROXY") ?? all;
        return new Proxies(
          http === undefined ? undefined : parseProxy(http),
          https === undefined ? undefined : parseProxy(https),
          new NoProxy(either("no_proxy", "NO_PROXY") ?? ""),
        );
      }
    }
  }

  /** The proxy for a request to `url`; `undefined`: connect directly. */
  forTarget(url: string): string | undefined {
    const target = new URL(url);
    const proxy = target.protocol === "https:" ? this.https : this.http;
    if (proxy === undefined) return undefined;
    return this.noProxy.covers(target.hostname) ? undefined : proxy;
  }
}

/** `NO_PROXY`'s entries. */
class NoProxy {
  private readonly all: boolean = false;
  private readonly names: string[] = [];
  private readonly blocks = new BlockList();

  constructor(list: string) {
    for (const raw of list.split(",")) {
      const entry = raw.trim();
      if (entry === "") continue;
      if (entry === "*") {
        this.all = true;
      } else if (!this.addBlock(entry)) {
        this.names.push(entry.replace(/^\.+/, "").replace(/\.+$/, "").toLowerCase());
      }
    }
  }

  /** Add `entry` as an address or `address/bits`; false when it is neither. */
  private addBlock(entry: string): boolean {
    const bare = entry.replace(/^\[/, "").replace(/\]$/, "");
    const slash = bare.indexOf("/");
    const address = slash < 0 ? bare : bare.slice(0, slash);
    const family = isIP(address);
    if (family === 0) return false;
    const max = family === 4 ? 32 : 128;
    let bits = max;
    if (slash >= 0) {
      const text = bare.slice(slash + 1);
      if (!/^[0-9]+$/.test(text)) return false;
      bits = Number(text);
    }
    if (bits > max) return false;
    this.blocks.addSubnet(address, bits, family === 4 ? "ipv4" : "ipv6");
    return true;
  }

  covers(hostname: string): boolean {
    if (this.all) return true;
    const host = hostname.replace(/^\[/, "").replace(/\]$/, "");
    const family = isIP(host);
    if (family !== 0) return this.blocks.check(host, family === 4 ? "ipv4" : "ipv6");
    const name = host.replace(/\.+$/, "").toLowerCase();
    return this.names.some((entry) => name === entry || name.endsWith(`.${entry}`));
  }
}

/** `http://[user:password@]host[:port]` (or `host:port`), with curl's default port. */
function parseProxy(text: string): string {
  const trimmed = text.trim();
  const withScheme = trimmed.includes("://") ? trimmed : `http://${trimmed}`;
  const bad = (why: string): ProxyError =>
    new ProxyError(`proxy ${JSON.stringify(trimmed)}: ${why}`);
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch (error) {
    throw bad((error as Error).message);
  }
  if (url.protocol !== "http:") throw bad("only http:// proxies are supported");
  if (url.hostname === "") throw bad("no host");
  if (url.port === "") url.port = "1080";
  url.pathname = "";
  return url.href.replace(/\/$/, "");
}

/** A `fetch` through `proxies`, trusting `ca` (PEM certificates) when given. */
export interface ProxyFetch {
  /** The fetch for {@link TetherSse}'s `fetch` option. */
  fetch: SseFetch;
  /** Close its connections (the process can then exit). */
  close(): Promise<void>;
}

/**
 * A `fetch` that sends each request through the proxy `proxies` names for its URL (redirect
 * hops included), over undici with no timeouts of its own: the core's connect and idle
 * timeouts are the ones that count.
 */
export function proxyFetch(proxies: Proxies, ca?: string[]): ProxyFetch {
  const tls = ca === undefined ? {} : { ca };
  const common = { headersTimeout: 0, bodyTimeout: 0 };
  const dispatchers = new Map<string, Dispatcher>();
  // undici is loaded at the first request: importing it costs ~150 ms of a CLI's start, which
  // `tether-js req` (no HTTP) should not pay.
  let loaded: Promise<typeof import("undici")> | undefined;
  const undici = (): Promise<typeof import("undici")> => (loaded ??= import("undici"));
  let direct: Dispatcher | undefined;
  const pick = async (url: string): Promise<Dispatcher> => {
    const { Agent, ProxyAgent } = await undici();
    direct ??= new Agent({ ...common, connect: tls });
    const proxy = proxies.forTarget(url);
    if (proxy === undefined) return direct;
    let agent = dispatchers.get(proxy);
    if (agent === undefined) {
      // No tunnel for an http:// target: the request goes to the proxy in absolute form,
      // as curl sends it; an https:// one is tunnelled with CONNECT.
      agent = new ProxyAgent({ ...common, uri: proxy, proxyTunnel: false, requestTls: tls });
      dispatchers.set(proxy, agent);
    }
    return agent;
  };
  return {
    fetch: async (url, init) => {
      const dispatcher = await pick(url);
      const { fetch: undiciFetch } = await undici();
      const response: SseResponse = await undiciFetch(url, { ...init, dispatcher });
      return response;
    },
    close: async () => {
      await Promise.all(
        [...(direct === undefined ? [] : [direct]), ...dispatchers.values()].map((d) =>
          d.destroy().catch(() => undefined),
        ),
      );
    },
  };
}

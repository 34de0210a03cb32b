// The items a driver hands the application: the core's one vocabulary (the JSON lines
// `tether req` and `tether sse` print), typed. Relays are named by URL where the driver knows
// it (`url`) beside the core's relay id (`relay`).

/** A Nostr event as a relay sent it. */
export interface NostrEvent {
  id: string;
  pubkey: string;
  created_at: number;
  kind: number;
  tags: string[][];
  content: string;
  sig: string;
}

/** A NIP-01 filter. */
export interface Filter {
  ids?: string[];
  authors?: string[];
  kinds?: number[];
  since?: number;
  until?: number;
  limit?: number;
  [tag: `#${string}`]: string[] | undefined;
}

interface OnRelay {
  /** The core's relay id. */
  relay?: number;
  /** The relay's URL, when the driver knows it. */
  url?: string;
}

interface OnSub extends OnRelay {
  /** The subscription id. */
  sub: number;
}

/** Every item of a relay pool, by its `type`. */
export type PoolItem =
  | ({ type: "connected" } & OnRelay)
  | ({
      type: "disconnected";
      reconnect_in_ms: number | null;
      why: string;
      close_code?: number;
    } & OnRelay)
  | ({ type: "event"; id?: string; event: NostrEvent } & OnSub)
  | ({ type: "invalid"; id: string; reason: string; suppressed?: number } & OnSub)
  | ({ type: "eose" } & OnSub)
  | ({ type: "caught_up"; method: string; exact_since: number; recovered: number } & OnSub)
  | ({ type: "retrying"; in_ms: number; attempt: number } & OnSub)
  | ({ type: "queued" } & OnSub)
  | ({ type: "eose_timeout" } & OnSub)
  | ({ type: "closed"; reason: string; attempts: number } & OnSub)
  | { type: "complete"; sub: number; outcome: string; missing: number[] }
  | { type: "ended"; sub: number }
  | ({ type: "notice"; message: string } & OnRelay)
  | ({ type: "auth"; challenge: string; id?: number } & OnRelay)
  | ({ type: "authenticated" } & OnRelay)
  | ({ type: "auth_failed"; reason: string } & OnRelay)
  | ({ type: "signer_failed"; error: string } & OnRelay)
  | ({ type: "rate_limited"; window_ms: number } & OnRelay)
  | ({ type: "subscription_limit"; max: number } & OnRelay)
  | ({ type: "peer_error"; kind: string; excerpt: string; suppressed?: number } & OnRelay)
  | ({ type: "published"; id: string } & OnRelay)
  | ({
      type: "rejected";
      id: string;
      why: string;
      message: string | null;
      len?: number;
      max?: number;
    } & OnRelay)
  | PublishDone
  | {
      type: "routed";
      sub: number;
      relays: string[];
      covered: { author: string; relays: number }[];
      fallback_only: string[];
      uncovered: string[];
    };

/** The one outcome of a publish. */
export interface PublishDone {
  type: "publish_done";
  id: string;
  accepted: number[];
  rejected: { relay: number; reason: string }[];
  pending: number[];
  urls: string[];
}

/** The items of one subscription: those naming its `sub`, and the pool's own. */
export type SubscriptionItem = Extract<PoolItem, { sub: number }>;

/** Every item of an SSE stream, by its `type` (the core's `line::sse::Line`). */
export type SseItem =
  | { type: "open" }
  | { type: "message"; event: string; data: string; id: string }
  | {
      type: "reconnecting";
      in_ms: number;
      last_event_id: string;
      attempt: number;
      why: string;
      status?: number;
      reason: string;
    }
  | { type: "reconnected"; gap_ms: number }
  | { type: "reissued"; gap_ms: number; attempts: number }
  | { type: "peer_error"; kind: string; excerpt: string; suppressed?: number }
  | {
      type: "failed";
      status: number | null;
      reason: string;
      kind: string;
      events?: number;
      last_event_id?: string;
      body?: string;
    }
  | { type: "ended"; why: string; event?: string; events: number; last_event_id: string }
  | { type: "closed"; reason: string };

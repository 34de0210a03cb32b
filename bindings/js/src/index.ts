// tether-js: the runtime-independent part. Import `tether-js/node` or `tether-js/browser`,
// which load the wasm and provide the sockets; this entry alone does neither.
export { TetherPool, Subscription } from "./pool.js";
export type {
  CoreOptions,
  PoolHost,
  PoolOptions,
  PublishOptions,
  RelaySocket,
  SocketEvents,
  SocketLoss,
  SubscribeOptions,
} from "./pool.js";
export type {
  Filter,
  NostrEvent,
  PoolItem,
  PublishDone,
  SseItem,
  SubscriptionItem,
} from "./items.js";
export { TetherError, type TetherErrorKind } from "./errors.js";
export { TetherSse, checkSseUrl } from "./sse.js";
export type {
  AttemptInfo,
  AttemptParts,
  PerAttempt,
  SseBodyReader,
  SseCoreOptions,
  SseFetch,
  SseFetchInit,
  SseHeaders,
  SseOptions,
  SseRequest,
  SseResponse,
} from "./sse.js";
export { Signer, verifyEvent, normalizeRelayUrl, WasmPool, WasmRelay, WasmSse } from "./wasm.js";
export { nowMs, unixSecs } from "./clock.js";

// tether-js: the runtime-independent part. Import `tether-js/node` or `tether-js/browser`,
// which load the wasm and provide the sockets; this entry alone does neither.
export { TetherPool, Subscription } from "./pool.js";
export type {
  CoreOptions,
  Dial,
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
export { isPrivateIp, normalizeRelayUrl } from "./rules.js";
// The wasm classes as they are: their misuse is an `Error` whose `name` is the kind.
export { Signer, verifyEvent, WasmPool, WasmRelay, WasmSse } from "./wasm.js";
export { nowMs, unixSecs } from "./clock.js";

// Local misuse thrown by the core (its `Error.name` says which kind), as a typed class.

/** What kind of misuse; the wasm core's `Error.name`. */
export type TetherErrorKind =
  "InvalidArgument" | "UnknownId" | "WrongState" | "Limit" | "Checkpoint" | "CheckpointNewer";

const KINDS = new Set<string>([
  "InvalidArgument",
  "UnknownId",
  "WrongState",
  "Limit",
  "Checkpoint",
  "CheckpointNewer",
]);

/** A call the core refused: the machine is unchanged. A peer's misbehaviour is never one. */
export class TetherError extends Error {
  /** Which kind of misuse. */
  readonly kind: TetherErrorKind;

  constructor(kind: TetherErrorKind, message: string) {
    super(message);
    this.name = "TetherError";
    this.kind = kind;
  }
}

/** Run `call`, turning the core's thrown `Error` into a {@link TetherError}. */
export function core<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    if (error instanceof Error && KINDS.has(error.name)) {
      throw new TetherError(error.name as TetherErrorKind, error.message);
    }
    throw error;
  }
}

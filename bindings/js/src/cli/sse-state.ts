// `--state FILE` for `tether-js sse`: the file format of `tether` and `tether-py`
// (`{"tether":"state","version":1,"command":...,"targets":[...],"subscriptions":[...],
// "checkpoint":{...}}`), replaced atomically: written beside it, fsynced, renamed, the
// directory fsynced. A file that is not one, is corrupt, is for another command or other
// targets, or comes from a newer version is refused (exit 2) and left untouched.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** The state file version this writes and reads up to. */
export const STATE_VERSION = 1;

/** A state file that cannot be resumed from; the message is one line. */
export class StateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StateError";
  }
}

/** One run's state file. */
export class StateFile {
  constructor(
    /** Where it is. */
    readonly path: string,
    /** The command it is the state of (`sse`). */
    readonly command: string,
    /** What the run is on (the URL). */
    readonly targets: string[],
  ) {}

  /** An error naming the file and `why`. */
  refuse(why: string): StateError {
    return new StateError(`--state ${this.path}: ${why}`);
  }

  /** The checkpoint JSON it holds, or `undefined` when it does not exist yet. */
  load(): string | undefined {
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
    if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
      throw this.refuse("not a tether state file");
    }
    const fields = doc as Record<string, unknown>;
    if (fields.tether !== "state" || !Number.isInteger(fields.version)) {
      throw this.refuse("not a tether state file");
    }
    const version = fields.version as number;
    if (version > STATE_VERSION) {
      throw this.refuse(
        `written by a newer tether (state version ${version}, this one reads ${STATE_VERSION})`,
      );
    }
    const { command, targets, checkpoint } = fields;
    if (typeof command !== "string" || !Array.isArray(targets) || checkpoint === undefined) {
      throw this.refuse("corrupt: a field is missing or of the wrong type");
    }
    if (command !== this.command) throw this.refuse(`the state of a \`tether ${command}\` run`);
    if (JSON.stringify(targets) !== JSON.stringify(this.targets)) {
      throw this.refuse(
        `the state of a run on ${targets.map(String).join(" ")}, not ${this.targets.join(" ")}`,
      );
    }
    return JSON.stringify(checkpoint);
  }

  /** Replace the file with `checkpoint` (the session's JSON) as its state. */
  store(checkpoint: string): void {
    const doc =
      `{"tether":"state","version":${STATE_VERSION},"command":${JSON.stringify(this.command)},` +
      `"targets":${JSON.stringify(this.targets)},"subscriptions":[],"checkpoint":${checkpoint}}`;
    const directory = dirname(this.path);
    const temporary = join(directory, `.${basename(this.path)}.tmp-${process.pid}`);
    const fd = openSync(temporary, "w");
    try {
      writeSync(fd, doc);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, this.path);
    // The rename is durable once the directory is.
    try {
      const dir = openSync(directory, "r");
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    } catch {
      // A directory that cannot be opened for fsync (some filesystems): the rename stands.
    }
  }
}

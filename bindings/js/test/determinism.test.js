// Cross-runtime determinism: the scenario adapters/ffi/tests/determinism.rs drives through
// the Rust API (and bindings/python/tests/test_determinism.py through the C ABI), driven here
// through the wasm `WasmRelay`, gives the same committed transcript byte for byte.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { TetherError, WasmRelay } from "tether-js/node";

import { repoRoot } from "./helpers.js";

const DATA = join(repoRoot(), "adapters", "ffi", "tests", "data");
const SCENARIO = join(DATA, "scenario.json");
const TRANSCRIPT = join(DATA, "scenario.transcript");

/** The C ABI's socket-loss codes (`tether_socket_loss`), as the scenario spells them. */
const LOSS = {
  1: "connection_refused",
  2: "tls_rejected",
  3: "handshake_failed",
  4: "closed_by_peer",
  5: "frame_too_large",
  6: "network_error",
  7: "out_of_files",
};

function transcript(scenario) {
  let relay = new WasmRelay(JSON.stringify({ seed: scenario.seed }));
  const lines = [];
  scenario.steps.forEach((step, n) => {
    const [kind, now] = step;
    try {
      switch (kind) {
        case "wall":
          relay.setWallClock(now, step[2]);
          break;
        case "subscribe":
          lines.push(`${n} sub ${relay.subscribe(now, step[2], step[3])}`);
          break;
        case "unsubscribe":
          relay.unsubscribe(now, step[2]);
          break;
        case "connect":
          relay.connect(now);
          break;
        case "disconnect":
          relay.disconnect(now);
          break;
        case "open":
          relay.handleOpen(now, step[2]);
          break;
        case "frame":
          relay.handleFrame(now, step[2], step[3]);
          break;
        case "close": {
          const loss = LOSS[step[3]];
          assert.ok(loss, `unknown loss code ${step[3]}`);
          relay.handleClose(now, step[2], loss, step[4]);
          break;
        }
        case "authenticate":
          relay.authenticate(now, step[2], step[3]);
          break;
        case "timeout":
          relay.handleTimeout(now);
          break;
        case "restart": {
          const saved = relay.checkpoint();
          lines.push(`${n} checkpoint ${saved}`);
          relay.free();
          relay = WasmRelay.restore(JSON.stringify({ seed: step[3] }), saved, now, step[2]);
          relay.connect(now);
          break;
        }
        default:
          assert.fail(`unknown step ${kind}`);
      }
    } catch (error) {
      // The core's refusals are `Error`s named by kind; anything else is a bug here.
      if (!(error instanceof TetherError) && !KINDS.has(error?.name)) throw error;
      lines.push(`${n} error ${error.message}`);
    }
    for (;;) {
      const transmit = relay.pollTransmit();
      if (transmit !== undefined) {
        lines.push(`${n} transmit ${transmit}`);
        continue;
      }
      const event = relay.pollEvent();
      if (event !== undefined) {
        lines.push(`${n} event ${event}`);
        continue;
      }
      break;
    }
    const deadline = relay.pollTimeout();
    lines.push(`${n} timeout ${deadline === undefined ? "none" : deadline}`);
  });
  relay.free();
  return lines.map((line) => `${line}\n`).join("");
}

const KINDS = new Set([
  "InvalidArgument",
  "UnknownId",
  "WrongState",
  "Limit",
  "Checkpoint",
  "CheckpointNewer",
]);

const missing = existsSync(SCENARIO)
  ? false
  : `no ${SCENARIO}: set TETHER_REPO to a tether checkout to run the determinism test`;

test("the wasm relay reproduces the committed transcript byte for byte", { skip: missing }, () => {
  const scenario = JSON.parse(readFileSync(SCENARIO, "utf8"));
  const want = readFileSync(TRANSCRIPT, "utf8");
  const got = transcript(scenario);
  assert.equal(got, want);
  // The scenario restarts from a checkpoint: that path ran too.
  assert.match(got, /^\d+ checkpoint \{/m);
  // And another seed really does change the jittered times.
  assert.notEqual(transcript({ ...scenario, seed: scenario.seed + 1 }), want);
});

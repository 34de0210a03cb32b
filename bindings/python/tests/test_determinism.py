"""Cross-runtime determinism: the scenario the Rust test drives through the Rust API, driven
here through the C ABI, gives the same committed transcript byte for byte
(`adapters/ffi/tests/determinism.rs` checks the Rust side against the same file)."""

from __future__ import annotations

import json

import tether
from tether import TetherError

from .conftest import REPO

DATA = REPO / "adapters" / "ffi" / "tests" / "data"


def transcript(scenario: dict) -> str:
    relay = tether.Relay(seed=scenario["seed"])
    lines = []
    for n, step in enumerate(scenario["steps"]):
        kind, now = step[0], step[1]
        try:
            if kind == "wall":
                relay.set_wall_clock(now, step[2])
            elif kind == "subscribe":
                lines.append(f"{n} sub {relay.subscribe(now, step[2], step[3])}")
            elif kind == "unsubscribe":
                relay.unsubscribe(now, step[2])
            elif kind == "connect":
                relay.connect(now)
            elif kind == "disconnect":
                relay.disconnect(now)
            elif kind == "open":
                relay.handle_open(now, step[2])
            elif kind == "frame":
                relay.handle_frame(now, step[2], step[3])
            elif kind == "close":
                relay.handle_close(now, step[2], step[3], step[4])
            elif kind == "authenticate":
                relay.authenticate(now, step[2], step[3])
            elif kind == "timeout":
                relay.handle_timeout(now)
            elif kind == "restart":
                saved = relay.checkpoint()
                lines.append(f"{n} checkpoint {saved.decode()}")
                relay.close()
                relay = tether.Relay.restore(saved, now, step[2], seed=step[3])
                relay.connect(now)
            else:
                raise AssertionError(f"unknown step {kind}")
        except TetherError as error:
            lines.append(f"{n} error {error.message}")
        while True:
            transmit = relay.poll_transmit_raw()
            if transmit is not None:
                lines.append(f"{n} transmit {transmit.decode()}")
                continue
            event = relay.poll_event_raw()
            if event is not None:
                lines.append(f"{n} event {event.decode()}")
                continue
            break
        deadline = relay.poll_timeout()
        lines.append(f"{n} timeout {'none' if deadline is None else deadline}")
    relay.close()
    return "".join(line + "\n" for line in lines)


def test_python_through_the_abi_gives_the_rust_transcript():
    scenario = json.loads((DATA / "scenario.json").read_text())
    want = (DATA / "scenario.transcript").read_text()
    got = transcript(scenario)
    assert got == want
    # And another seed really does change the jittered times.
    assert transcript({**scenario, "seed": scenario["seed"] + 1}) != want

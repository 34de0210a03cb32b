"""tether-py req vs the nostr-sdk Python package, reading the same N notes from local relays.

    cargo build --release -p tether-ffi --example notes_relay
    pip install ./bindings/python nostr-sdk==0.45.1
    TETHER_LIBRARY=... python3 bindings/python/bench/side_by_side.py [N] [RELAYS]

With RELAYS > 1 (default 1) each relay holds the same N notes, so every note arrives RELAYS
times: both clients deduplicate and both verify every id and signature (`tether-py req
--verify`: the pool's first copy of each id, checked on a thread pool; nostr-sdk checks every
copy it keeps).

The relay (nostr-relay-builder holding N signed, realistic kind-1 notes) runs in its own
process; each client runs in a child process of its own, measured by wall time to EOSE and
by the child's CPU time (user + system, from `getrusage`). `tether-py req --until-eose` does
what its contract says: one JSON line per event on stdout (read here and counted). nostr-sdk
`Client.fetch_events` collects the events and verifies every id and signature (it has no
switch to turn that off); tether hands over the relay's bytes, checked for shape.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

NOSTR_SDK_CLIENT = """
import asyncio, sys
from datetime import timedelta
from nostr_sdk import Client, Filter, Kind, RelayUrl, ReqTarget

async def main(n, urls):
    client = Client()
    for url in urls:
        await client.add_relay(RelayUrl.parse(url))
    await client.connect()
    target = ReqTarget.auto([Filter().kind(Kind(1)).limit(n)])
    # Until every relay's EOSE or n unique events (without `max_events` it refuses more than
    # its own cap: "too many fetched events").
    events = await client.fetch_events(target, timeout=timedelta(seconds=600), max_events=n)
    print(len(events))
    await client.shutdown()

asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))
"""


def relay_binary() -> Path:
    target = Path(
        os.environ.get("CARGO_TARGET_DIR", Path(__file__).resolve().parents[3] / "target")
    )
    return target / "release" / "examples" / "notes_relay"


def measure(command: list) -> tuple:
    """Run `command`; (its stdout, wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.stdout, wall, cpu


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    relays = [
        subprocess.Popen(
            [str(relay_binary()), str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(k)
    ]
    urls = []
    for relay in relays:
        assert relay.stdout is not None
        urls.append(relay.stdout.readline().strip())
    verify = ["--verify"] if k > 1 else []
    try:
        rows = []
        out, wall, cpu = measure(
            [
                sys.executable,
                "-m",
                "tether.cli",
                "req",
                *urls,
                f'{{"kinds":[1],"limit":{n}}}',
                "--until-eose",
                "--eose-timeout",
                "600",
                "--seed",
                "1",
                *verify,
            ]
        )
        ids = {
            json.loads(line)["event"]["id"]
            for line in out.splitlines()
            if line.startswith('{"type":"event"')
        }
        name = "tether-py req --verify (C ABI pool)" if verify else "tether-py req (C ABI)"
        rows.append((name, len(ids), wall, cpu))
        out, wall, cpu = measure([sys.executable, "-c", NOSTR_SDK_CLIENT, str(n), *urls])
        rows.append(("nostr-sdk 0.45.1 fetch_events (verifies)", int(out.strip()), wall, cpu))
    finally:
        for relay in relays:
            assert relay.stdin is not None
            relay.stdin.close()
            relay.wait(30)
    print(f"{n} notes on each of {k} local relay(s)")
    header = ("client", "events", "wall s", "events/s", "CPU s", "CPU us/event")
    print("{:<42} {:>8} {:>8} {:>10} {:>7} {:>13}".format(*header))
    for name, received, wall, cpu in rows:
        print(
            f"{name:<42} {received:>8} {wall:>8.2f} {received / wall:>10.0f} {cpu:>7.2f}"
            f" {cpu / max(received, 1) * 1e6:>13.1f}"
        )


if __name__ == "__main__":
    main()

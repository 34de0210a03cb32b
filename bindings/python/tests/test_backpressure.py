"""A peer that floods: tether-py stops reading the socket while it lags (TCP holds the peer
back) instead of queueing without bound, so its memory stays flat. Each case runs the
installed ``tether-py`` against a flooding peer in a process of its own, reads its stdout
slowly (1 000 lines a second) or as fast as it comes, and samples its RSS."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
READ_RATE = 1000
"""Lines a second the slow reader takes."""
GROWTH_LIMIT_MB = 8
"""RSS growth allowed from the third second to the ninth (it grew ~22 MB a second before)."""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def reader(stream, counter: list, rate: int | None) -> None:
    for _ in stream:
        counter[0] += 1
        if rate is not None:
            time.sleep(1 / rate)


def run_against(peer: str, args: list, rate: int | None) -> tuple[float, float, int]:
    """RSS of ``tether-py ARGS URL`` at 3 s and at 9 s, and the lines read by then."""
    flood = subprocess.Popen(
        [sys.executable, str(HERE / peer)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = flood.stdout.readline().strip()
        cli = subprocess.Popen(
            ["tether-py", *args[:1], url, *args[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            lines = [0]
            threading.Thread(target=reader, args=(cli.stdout, lines, rate), daemon=True).start()
            time.sleep(3)
            early = rss_mb(cli.pid)
            time.sleep(6)
            late = rss_mb(cli.pid)
            return early, late, lines[0]
        finally:
            cli.kill()
            cli.wait()
    finally:
        flood.stdin.close()
        flood.kill()
        flood.wait()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
@pytest.mark.parametrize(
    ("peer", "args", "rate"),
    [
        # A slow application: the loop spends its time writing lines.
        ("flood_relay.py", ["req", '{"kinds":[1]}'], READ_RATE),
        ("flood_sse.py", ["sse"], READ_RATE),
        # A fast one: the loop spends its time in the core, the peer is faster still.
        ("flood_relay.py", ["req", '{"kinds":[1]}'], None),
        ("flood_sse.py", ["sse"], None),
    ],
)
def test_a_flood_keeps_memory_flat(peer: str, args: list, rate: int | None) -> None:
    early, late, lines = run_against(peer, args, rate)
    reader_rate = rate or "fast"
    print(f"\n{peer} reader {reader_rate}: RSS {early:.1f} MB at 3 s, {late:.1f} MB at 9 s")
    assert lines > 3 * READ_RATE, f"the reader got {lines} lines: the stream did not flow"
    assert late - early < GROWTH_LIMIT_MB, f"RSS {early:.1f} MB at 3 s, {late:.1f} MB at 9 s"

"""``tether.verify_event``: the library's id and signature check, from any thread."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import tether
from tether.keys import SecretKey

KEY = SecretKey("0000000000000000000000000000000000000000000000000000000000000003")


def signed(n: int) -> str:
    return KEY.sign_event(1, [["t", "tether"]], f"note {n}", 1_700_000_000 + n)


def test_genuine_and_forged_events_get_their_reasons() -> None:
    event = signed(0)
    assert tether.verify_event(event) is None
    forged = json.loads(event)
    forged["content"] = "changed"
    assert tether.verify_event(json.dumps(forged)) == "bad_id"
    swapped = json.loads(event)
    swapped["sig"] = json.loads(signed(1))["sig"]
    assert tether.verify_event(json.dumps(swapped)) == "bad_signature"
    short = dict(json.loads(event), sig="00")
    assert tether.verify_event(json.dumps(short)) == "malformed_signature"
    assert tether.verify_event(b'{"id":1}') == "malformed"
    assert tether.verify_event("not json") == "malformed"


def test_threads_verify_in_parallel() -> None:
    """Every verdict is the same from a pool of threads as from one; the timing is printed
    (``pytest -s``), not asserted: a shared CI machine decides it."""
    events = [signed(n).encode() for n in range(200)] * 25

    def check(part: list) -> list:
        return [tether.verify_event(e) for e in part]

    check(events[:200])  # this thread's context, and the library's pages, warm
    started = time.perf_counter()
    alone = check(events)
    one = time.perf_counter() - started
    with ThreadPoolExecutor(max_workers=2) as pool:
        halves = [events[0::2], events[1::2]]
        list(pool.map(check, [events[:200], events[:200]]))  # both workers started and warm
        started = time.perf_counter()
        pooled = [verdict for half in pool.map(check, halves) for verdict in half]
        two = time.perf_counter() - started
    assert alone == [None] * len(events)
    assert pooled == [None] * len(events)
    print(f"\n{len(events)} checks: 1 thread {one * 1000:.0f} ms, 2 threads {two * 1000:.0f} ms")


def test_a_batch_gets_each_event_its_own_verdict_in_one_call() -> None:
    """``verify_events`` answers as ``verify_event`` would, slot by slot; the time per check
    is printed (``pytest -s``), not asserted."""
    genuine = signed(0)
    forged = json.dumps(dict(json.loads(genuine), content="changed"))
    batch = [genuine, forged, "not json", genuine.encode()]
    assert tether.verify_events(batch) == [None, "bad_id", "malformed", None]
    assert tether.verify_events([]) == []
    events = [signed(n) for n in range(2_000)]
    started = time.perf_counter()
    assert tether.verify_events(events) == [None] * len(events)
    took = time.perf_counter() - started
    print(f"\n{len(events)} checks in one call: {took / len(events) * 1e6:.0f} us per check")

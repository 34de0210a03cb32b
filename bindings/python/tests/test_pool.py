"""The pool through the C ABI and its asyncio driver, against testpeer relays."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tether import Pool, TetherError, verify_event
from tether._ffi import ERR_INVALID_ARGUMENT, ERR_INVALID_URL
from tether.keys import SecretKey
from tether.pool_driver import PoolDriver


def event(n: int) -> str:
    return (
        f'{{"id":"{n:064x}","pubkey":"{"a" * 64}","created_at":1700000000,"kind":1,'
        f'"tags":[],"content":"hi","sig":"{"b" * 128}"}}'
    )


def test_two_relays_deliver_each_event_once_and_one_outcome():
    pool = Pool(seed=7)
    a, b = pool.add_relay(0), pool.add_relay(0)
    sub = pool.subscribe(0, '[{"kinds":[1]}]')
    opens = [pool.poll_transmit(), pool.poll_transmit()]
    assert opens == [
        {"relay": a, "type": "open", "epoch": 1},
        {"relay": b, "type": "open", "epoch": 1},
    ]
    for relay in (a, b):
        pool.handle_open(5, relay, 1)
    while pool.poll_transmit() or pool.poll_event():
        pass
    for relay in (b, a):
        pool.handle_frame(6, relay, 1, '["EVENT","0:1",' + event(1) + "]")
        pool.handle_frame(7, relay, 1, '["EOSE","0:1"]')
    events = []
    while (e := pool.poll_event()) is not None:
        events.append(e)
    assert [e["type"] for e in events] == ["event", "eose", "eose", "complete"]
    assert events[0]["relay"] == b and events[0]["raw"] == event(1)
    assert events[3] == {"type": "complete", "sub": sub, "outcome": "complete", "missing": []}
    assert pool.relay_stats(a)["duplicates"] == 1
    with pytest.raises(TetherError):
        pool.relay_stats(9)


def test_verdicts_come_back_in_any_order_and_delivery_keeps_its_order():
    pool = Pool(seed=7, verify=1)
    relay = pool.add_relay(0)
    pool.subscribe(0, '[{"kinds":[1]}]')
    pool.handle_open(0, relay, 1)
    while pool.poll_transmit() or pool.poll_event():
        pass
    for n in (1, 2):
        pool.handle_frame(1, relay, 1, '["EVENT","0:1",' + event(n) + "]")
    first, second = pool.poll_verify(), pool.poll_verify()
    assert (first["raw"], second["raw"]) == (event(1), event(2))
    pool.handle_verified(2, second["ticket"], None)
    assert pool.poll_event() is None  # the first is still awaited
    pool.handle_verified(3, first["ticket"], "bad_id")
    invalid, received = pool.poll_event(), pool.poll_event()
    assert invalid["type"] == "invalid" and invalid["reason"] == "id is not the hash of the event"
    assert received["type"] == "event" and received["raw"] == event(2)
    with pytest.raises(TetherError):
        pool.handle_verified(4, first["ticket"], None)


def test_nip11_documents_apply_to_a_pool_relay_and_unreadable_ones_change_nothing():
    pool = Pool()
    relay = pool.add_relay(0)
    doc = b'{"limitation":{"max_subscriptions":3,"max_message_length":65536}}'
    applied = pool.apply_relay_info(0, relay, doc)
    assert applied["subscription_limit"] == 3 and applied["max_message_length"] == 65536
    assert "error" in pool.apply_relay_info(0, relay, b"<html>")


def test_a_checkpoint_restores_the_same_relays_and_subscription():
    pool = Pool(seed=1)
    relay = pool.add_relay(0)
    sub = pool.subscribe(0, '[{"kinds":[1]}]')
    restored = Pool.restore(pool.checkpoint(), 0, int(time.time()))
    assert restored.poll_transmit() == {"relay": relay, "type": "open", "epoch": 1}
    restored.unsubscribe(0, sub)
    with pytest.raises(TetherError):
        Pool.restore(b"{}", 0, 0)


def test_a_url_is_one_relay_and_a_restored_pool_is_told_it_again():
    pool = Pool(seed=1)
    relay = pool.add_relay_url(0, "ws://127.0.0.1:7002")
    assert pool.add_relay_url(0, "WS://127.0.0.1:7002/") == relay
    with pytest.raises(TetherError) as refused:
        pool.add_relay_url(0, "http://a.example")
    assert refused.value.code == ERR_INVALID_URL
    # The checkpoint keeps the relay, not the application's URL (it may carry credentials).
    assert b"7002" not in pool.checkpoint()
    restored = Pool.restore(pool.checkpoint(), 0, int(time.time()))
    restored.name_relay(relay, "ws://127.0.0.1:7002")
    assert restored.add_relay_url(0, "ws://127.0.0.1:7002") == relay
    with pytest.raises(TetherError) as taken:
        restored.name_relay(relay, "ws://127.0.0.1:7003")
    assert taken.value.code == ERR_INVALID_ARGUMENT


async def _silent_server() -> tuple[asyncio.AbstractServer, str]:
    """A TCP server that accepts and never answers: a WebSocket handshake to it hangs."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"ws://127.0.0.1:{port}"


def test_a_hung_relay_never_stalls_the_others(peer):
    live = peer("--events", "5")

    async def run() -> tuple[list, float]:
        server, hung = await _silent_server()
        got: list = []
        pool = Pool(seed=3, verify=0)
        driver = PoolDriver(pool, lambda e, now: got.append(e))
        driver.add_relay(hung)
        driver.add_relay(live.url)
        pool.subscribe(driver.now(), '[{"kinds":[1]}]')
        started = time.monotonic()

        def five_and_eose() -> None:
            received = [e for e in got if e["type"] == "event"]
            if len(received) == 5 and any(e["type"] == "eose" for e in got):
                driver.stop()

        driver.on_event = lambda e, now: (got.append(e), five_and_eose())
        await asyncio.wait_for(driver.run(), 10)
        took = time.monotonic() - started
        await driver.shut_down([])
        server.close()
        return got, took

    got, took = asyncio.run(run())
    received = [e for e in got if e["type"] == "event"]
    assert len(received) == 5 and all(e["relay"] == 1 for e in received)
    # The hung relay's connect timeout is 10 s: the live relay did not wait for it.
    assert took < 5, took
    live.frames()


def test_verification_runs_on_threads_and_drops_forgeries(peer):
    live = peer("--events", "3")

    async def run() -> list:
        got: list = []
        pool = Pool(seed=3, verify=1)
        driver = PoolDriver(pool, lambda e, now: None, verifiers=2)

        def sink(e: dict, now: int) -> None:
            got.append(e)
            if e["type"] == "complete":
                driver.stop()

        driver.on_event = sink
        driver.add_relay(live.url)
        pool.subscribe(driver.now(), '[{"kinds":[1]}]')
        await asyncio.wait_for(driver.run(), 10)
        await driver.shut_down([])
        return got

    got = asyncio.run(run())
    kinds = [e["type"] for e in got if e["type"] != "relay"]
    # The testpeer's events are not signed: every one is invalid, none delivered.
    assert kinds.count("invalid") == 3 and "event" not in kinds, json.dumps(got)
    live.frames()


def test_lagging_verifiers_hold_the_sockets_back_instead_of_dropping_events(peer, monkeypatch):
    # More events than the pool holds under verification (max_unverified 4 096), and
    # verifiers slowed down: the driver stops taking socket input while checks are in
    # flight, so none is dropped (without that rule the pool drops those past its bound).
    import tether.pool_driver as pool_driver

    check_all = pool_driver._check_all

    def slow(batch):
        time.sleep(0.3)
        return check_all(batch)

    monkeypatch.setattr(pool_driver, "_check_all", slow)
    live = peer("--events", "6000")

    async def run() -> tuple[list, dict]:
        got: list = []
        # The outcome deadline is not what this test is about: under a loaded machine the
        # slowed verifiers could outlast the default and end the run before every verdict.
        pool = Pool(seed=3, verify=1, eose_deadline_ms=120_000)
        driver = PoolDriver(pool, lambda e, now: None, verifiers=1)

        def sink(e: dict, now: int) -> None:
            got.append(e)
            if e["type"] == "complete":
                driver.stop()

        driver.on_event = sink
        relay = driver.add_relay(live.url)
        pool.subscribe(driver.now(), '[{"kinds":[1]}]')
        await asyncio.wait_for(driver.run(), 60)
        stats = pool.relay_stats(relay)
        await driver.shut_down([])
        return got, stats

    got, stats = asyncio.run(run())
    # Every forgery is counted; at most 10 `invalid` lines a second reach the host, each
    # saying how many were left out before it.
    invalid = [e for e in got if e["type"] == "invalid"]
    assert 0 < len(invalid) < 6000
    assert sum(1 + e.get("suppressed", 0) for e in invalid) <= 6000
    assert stats["unverified_dropped"] == 0 and stats["invalid"] == 6000, stats
    live.frames()


def test_routing_by_people_opens_the_relay_a_list_names_at_its_url():
    pool = Pool(seed=7, outbox_indexers=["ws://127.0.0.1:7001"], outbox_max_relays=5)
    author = "2" * 64
    with pytest.raises(TetherError):
        pool.subscribe_outbox(0, '{"kinds":[1]}')  # names nobody
    sub = pool.subscribe_outbox(0, json.dumps({"kinds": [1], "authors": [author]}))
    assert pool.poll_transmit() == {
        "type": "open",
        "relay": 0,
        "epoch": 1,
        "url": "ws://127.0.0.1:7001",
    }
    assert pool.poll_event() == {
        "type": "routed",
        "sub": sub,
        "relays": [],
        "covered": [],
        "fallback_only": [],
        "uncovered": [author],
    }
    pool.handle_open(100, 0, 1)
    lists_req = pool.poll_transmit()
    assert json.loads(lists_req["text"]) == [
        "REQ",
        "0:1",
        {"authors": [author], "kinds": [10002, 10050]},
    ]
    while pool.poll_transmit() or pool.poll_event():
        pass
    # The application hands over a list it got elsewhere: it routes as one a relay sent.
    pool.handle_relay_list(
        200,
        json.dumps(
            {
                "id": "1" * 64,
                "pubkey": author,
                "created_at": 1700000000,
                "kind": 10002,
                "tags": [["r", "ws://127.0.0.1:7002"]],
                "content": "",
                "sig": "s",
            }
        ),
    )
    with pytest.raises(TetherError):
        pool.handle_relay_list(200, '{"kind":1}')
    assert pool.poll_timeout() == 1200
    pool.handle_timeout(1200)
    assert pool.poll_transmit() == {
        "type": "open",
        "relay": 1,
        "epoch": 1,
        "url": "ws://127.0.0.1:7002",
    }
    routed = pool.poll_event()
    assert routed["relays"] == ["ws://127.0.0.1:7001", "ws://127.0.0.1:7002"]
    assert routed["covered"] == [{"author": author, "relays": 1}]


def _outputs(pool: Pool, now: int) -> tuple[list, list]:
    """Every transmit and event the pool has queued; a check it asks for is answered."""
    transmits, events = [], []
    while True:
        if (transmit := pool.poll_transmit()) is not None:
            transmits.append(transmit)
        elif (check := pool.poll_verify()) is not None:
            pool.handle_verified(now, check["ticket"], verify_event(check["raw"]))
        elif (event := pool.poll_event()) is not None:
            events.append(event)
        else:
            return transmits, events


def test_publish_done_names_no_url_for_the_relays_the_application_added():
    pool = Pool(seed=7)
    relay = pool.add_relay(0)
    published = pool.publish(1, event(1))
    pool.handle_open(2, relay, 1)
    _outputs(pool, 2)
    pool.handle_frame(3, relay, 1, f'["OK","{published}",true,""]')
    assert _outputs(pool, 3)[1] == [
        {"type": "published", "relay": relay, "id": published},
        {
            "type": "publish_done",
            "id": published,
            "accepted": [relay],
            "rejected": [],
            "pending": [],
            "urls": [],
        },
    ]


def test_a_publish_by_outbox_names_the_relays_it_opened_in_publish_done():
    key = SecretKey("03" * 32)
    pool = Pool(seed=7, outbox_indexers=["ws://127.0.0.1:7001"], outbox_max_relays=5)
    note = key.sign_event(1, [], "hi", 1700000000, aux=bytes(32))
    published = pool.publish_outbox(0, note)
    transmits, _ = _outputs(pool, 0)
    assert transmits == [{"type": "open", "relay": 0, "epoch": 1, "url": "ws://127.0.0.1:7001"}]
    # The indexer answers the lists request with the author's list: one write relay.
    pool.handle_open(100, 0, 1)
    transmits, _ = _outputs(pool, 100)
    lists = json.loads(transmits[0]["text"])
    assert lists[0] == "REQ" and lists[2]["authors"] == [key.public_hex]
    outbox = key.sign_event(10002, [["r", "ws://127.0.0.1:7002"]], "", 1700000000, bytes(32))
    pool.handle_frame(200, 0, 1, json.dumps(["EVENT", lists[1], json.loads(outbox)]))
    pool.handle_frame(200, 0, 1, json.dumps(["EOSE", lists[1]]))
    now, opened = 200, []
    while not opened:
        transmits, _ = _outputs(pool, now)
        opened = [t for t in transmits if t["type"] == "open" and t["relay"] != 0]
        if not opened:
            now = pool.poll_timeout()
            assert now is not None and now < 5000, "the write relay opens within LIST_WAIT"
            pool.handle_timeout(now)
    assert opened == [{"type": "open", "relay": 1, "epoch": 1, "url": "ws://127.0.0.1:7002"}]
    pool.handle_open(now + 1, 1, 1)
    transmits, _ = _outputs(pool, now + 1)
    assert [json.loads(t["text"])[0] for t in transmits if t["relay"] == 1] == ["EVENT"]
    pool.handle_frame(now + 2, 1, 1, f'["OK","{published}",true,""]')
    _, events = _outputs(pool, now + 2)
    assert events == [
        {"type": "published", "relay": 1, "id": published},
        {
            "type": "publish_done",
            "id": published,
            "accepted": [1],
            "rejected": [],
            "pending": [],
            "urls": ["ws://127.0.0.1:7002"],
        },
    ]


def test_a_bad_indexer_list_is_refused():
    with pytest.raises(TetherError):
        Pool(outbox_indexers=["http://127.0.0.1:7001"])
    with pytest.raises(TetherError):
        Pool(outbox_max_relays=0)


def test_liveness_hints_are_taken_and_bad_ones_refused():
    pool = Pool()
    pool.hint_live(0, "wss://relay.example", False)
    event = {
        "id": "1" * 64,
        "pubkey": "2" * 64,
        "created_at": 1700000000,
        "kind": 30166,
        "tags": [["d", "wss://relay.example/"]],
        "content": "",
        "sig": "s",
    }
    pool.handle_liveness(0, json.dumps(event))
    with pytest.raises(TetherError):
        pool.handle_liveness(0, json.dumps({**event, "kind": 1}))

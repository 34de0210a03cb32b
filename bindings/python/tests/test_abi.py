"""The ctypes layer over the C ABI: codes, buffers, the drain shape."""

from __future__ import annotations

import json

import pytest

import tether
from tether import _ffi

# The core's request-header rule, carried in every SSE open.
DEFAULT_HEADERS = [
    ["accept", "text/event-stream"],
    ["cache-control", "no-cache"],
    ["accept-encoding", "identity"],
]


def test_abi_version_matches():
    assert _ffi.lib().tether_abi_version() == tether.ABI_VERSION


def test_a_session_opens_replays_and_delivers_the_relays_bytes():
    relay = tether.Relay(seed=1)
    assert relay.subscribe(0, '[{"kinds":[1]}]') == 0
    assert relay.poll_transmit() is None
    relay.connect(10)
    assert relay.poll_transmit() == {"type": "open", "epoch": 1}
    relay.handle_open(20, 1)
    assert relay.poll_transmit() == {
        "type": "send",
        "text": '["REQ","0:1",{"kinds":[1]}]',
        "carries": {"req": 0},
    }
    assert relay.poll_event() == {"type": "connected"}
    assert relay.poll_event() is None
    # An event larger than the 64 KiB default buffer: the buffer grows, the item is kept.
    raw = '{{"id":"{}", "created_at":1,\n"content":"{}"}}'.format("ab" * 32, "x" * 100_000)
    relay.handle_frame(30, 1, '["EVENT","0:1",' + raw + "]")
    event = relay.poll_event()
    assert event is not None
    assert event["type"] == "event" and event["sub"] == 0 and event["id"] == "ab" * 32
    assert event["raw"] == raw
    assert event["event"] == json.loads(raw)
    assert relay.poll_timeout() == 30_030  # a ping after 30 s without a frame
    relay.close()


def test_misuse_is_an_error_code_with_a_message():
    relay = tether.Relay()
    with pytest.raises(tether.TetherError) as error:
        relay.subscribe(0, '{"kinds":[1]}')
    assert error.value.code == _ffi.ERR_INVALID_ARGUMENT
    with pytest.raises(tether.TetherError) as error:
        relay.unsubscribe(0, 5)
    assert error.value.code == _ffi.ERR_UNKNOWN_ID
    assert error.value.message == "unknown subscription s5"
    with pytest.raises(tether.TetherError) as error:
        relay.handle_frame(0, 1, b"\xff")
    assert error.value.code == _ffi.ERR_UTF8
    with pytest.raises(tether.TetherError) as error:
        relay.handle_open(0, 3)
    assert (error.value.code, error.value.message) == (
        _ffi.ERR_UNKNOWN_ID,
        "epoch 3 was never opened",
    )


def test_sse_session_parses_and_reports_the_resume_id():
    sse = tether.Sse(seed=3)
    sse.connect(0)
    assert sse.poll_transmit() == {
        "type": "open",
        "epoch": 1,
        "last_event_id": None,
        "redirect": None,
        "method": "GET",
        "headers": DEFAULT_HEADERS,
        "body": "",
        "withhold": [],
        "attempt": "original",
        "number": 1,
        "after": None,
    }
    sse.handle_response(5, 1, 200, "text/event-stream", None)
    assert sse.poll_event() == {"type": "open"}
    assert sse.handle_bytes(6, 1, b"id: 7\ndata: a\n\n") == 15
    assert sse.poll_event() == {"type": "message", "event": "message", "data": "a", "id": "7"}
    assert sse.last_event_id() == "7"
    sse.handle_eof(7, 1)
    event = sse.poll_event()
    assert event is not None and event["type"] == "reconnecting"
    assert (event["why"], event.get("status"), event["reason"], event["attempt"]) == (
        "eof",
        None,
        "stream ended",
        1,
    )
    assert event["last_event_id"] == "7"
    assert 500 <= event["in_ms"] <= 1500


def test_the_library_is_found_by_env_then_wheel_then_target_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TETHER_LIBRARY", "/somewhere/libtether_ffi.so")
    assert str(tether.library_path()) == "/somewhere/libtether_ffi.so"
    monkeypatch.delenv("TETHER_LIBRARY")
    bundled = tmp_path / "_native.so"
    bundled.write_bytes(b"")
    monkeypatch.setattr(_ffi, "_bundled", lambda: bundled)
    assert tether.library_path() == bundled
    monkeypatch.setattr(_ffi, "_bundled", lambda: None)
    release = tmp_path / "release"
    release.mkdir()
    (release / _ffi._library_name()).write_bytes(b"")
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path))
    assert tether.library_path() == release / _ffi._library_name()


def test_the_url_rule_is_the_librarys():
    from tether.driver import check_url

    assert _ffi.check_url("wss://relay.example.com/", _ffi.URL_RELAY) is None
    assert _ffi.check_url("https://example.com:8443/events", _ffi.URL_SSE) is None
    assert (
        _ffi.check_url("ws://127.0.0.1:99999/", _ffi.URL_RELAY)
        == "invalid URL: ws://127.0.0.1:99999/: port 99999 is not in 1-65535"
    )
    assert (
        _ffi.check_url("http://relay.example.com", _ffi.URL_RELAY)
        == "invalid URL: http://relay.example.com: expected ws:// or wss://"
    )
    # A long reason grows the buffer.
    long = "ws://" + "h" * 1000 + ":0"
    assert _ffi.check_url(long, _ffi.URL_RELAY) == f"invalid URL: {long}: port 0 is not in 1-65535"
    with pytest.raises(_ffi.TetherError) as error:
        _ffi.check_url("ws://h", 9)
    assert error.value.code == _ffi.ERR_INVALID_ARGUMENT
    # The driver's check keeps its signature: the URL back, or ValueError with the reason.
    assert check_url("ws://127.0.0.1:7777", ("ws", "wss")) == "ws://127.0.0.1:7777"
    with pytest.raises(ValueError, match="expected http:// or https://"):
        check_url("ws://127.0.0.1:7777", ("http", "https"))
    with pytest.raises(ValueError, match="write the scheme in lower case"):
        check_url("WSS://relay.example.com", ("ws", "wss"))


def test_a_resume_probes_the_socket_and_a_dead_one_is_given_up_in_5_s():
    relay = tether.Relay(seed=1)
    relay.subscribe(0, '[{"kinds":[1]}]')
    relay.connect(0)
    assert relay.poll_transmit() == {"type": "open", "epoch": 1}
    relay.handle_open(10, 1)
    while relay.poll_transmit() is not None:
        pass
    while relay.poll_event() is not None:
        pass
    relay.lifecycle(1_000, _ffi.LIFECYCLE_SUSPENDED)
    assert relay.poll_timeout() is None, "no deadline runs while suspended"
    relay.lifecycle(600_000, _ffi.LIFECYCLE_RESUMED)
    assert relay.poll_transmit() == {"type": "ping"}
    assert relay.poll_timeout() == 605_000
    relay.handle_timeout(605_000)
    assert relay.poll_transmit() == {"type": "close", "epoch": 1}
    event = relay.poll_event()
    assert event is not None and event["why"] == "resume_probe"
    with pytest.raises(tether.TetherError) as error:
        relay.lifecycle(605_000, 99)
    assert error.value.code == _ffi.ERR_INVALID_ARGUMENT
    relay.close()


def test_a_checkpoint_restores_in_a_new_handle_and_catches_up():
    relay = tether.Relay(seed=1)
    relay.set_wall_clock(0, 1_750_000_000)
    sub = relay.subscribe(0, '[{"kinds":[1]}]')
    relay.connect(0)
    relay.handle_open(10, 1)
    while relay.poll_transmit() is not None:
        pass
    note = '{"id":"' + "0" * 63 + '1","created_at":1749999990,"kind":1}'
    relay.handle_frame(20, 1, '["EVENT","0:1",' + note + "]")
    relay.handle_frame(20, 1, '["EOSE","0:1"]')
    while relay.poll_event() is not None:
        pass
    saved = relay.checkpoint()
    assert json.loads(saved)["subscriptions"][0]["id"] == sub
    relay.close()

    restored = tether.Relay.restore(saved, 0, 1_750_000_060, seed=2)
    restored.connect(0)
    assert restored.poll_transmit() == {"type": "open", "epoch": 1}
    restored.handle_open(10, 1)
    transmit = restored.poll_transmit()
    assert transmit is not None
    # The subscription is live again; its catch-up follows the live half's EOSE.
    assert transmit["text"] == '["REQ","0:1",{"kinds":[1],"limit":1}]'
    # The event delivered before the checkpoint is not delivered again.
    restored.handle_frame(30, 1, '["EVENT","0:1",' + note + "]")
    events = []
    while (event := restored.poll_event()) is not None:
        events.append(event["type"])
    assert "event" not in events
    restored.close()


def test_bytes_that_are_not_a_checkpoint_are_refused_with_the_reason():
    with pytest.raises(tether.TetherError) as error:
        tether.Relay.restore(b'{"kinds":[1]}', 0, 0)
    assert error.value.code == _ffi.ERR_CHECKPOINT
    assert error.value.message.startswith("not a tether checkpoint")
    with pytest.raises(tether.TetherError) as error:
        tether.Relay.restore(b'{"tether":"relay","version":9}', 0, 0)
    assert error.value.code == _ffi.ERR_CHECKPOINT_NEWER
    sse = tether.Sse(seed=1)
    with pytest.raises(tether.TetherError) as error:
        tether.Relay.restore(sse.checkpoint(), 0, 0)
    assert error.value.code == _ffi.ERR_CHECKPOINT
    assert "sse" in error.value.message


def test_an_sse_checkpoint_resumes_from_its_last_event_id():
    sse = tether.Sse(seed=3)
    sse.connect(0)
    sse.poll_transmit()
    sse.handle_response(5, 1, 200, "text/event-stream", None)
    sse.handle_bytes(6, 1, b"id: 7\ndata: a\n\n")
    while sse.poll_event() is not None:
        pass
    saved = sse.checkpoint()
    sse.close()
    restored = tether.Sse.restore(saved, seed=4)
    restored.connect(0)
    assert restored.poll_transmit() == {
        "type": "open",
        "epoch": 1,
        "last_event_id": "7",
        "redirect": None,
        "method": "GET",
        "headers": DEFAULT_HEADERS,
        "body": "",
        "withhold": [],
        "attempt": "original",
        "number": 1,
        "after": "restarted",
    }
    restored.close()


def test_sse_redirect_is_a_hop_of_the_same_attempt_until_the_limit():
    sse = tether.Sse(seed=3)
    sse.connect(0)
    first = sse.poll_transmit()
    assert first is not None and first["redirect"] is None
    url = "http://a.example/x"
    for hop in range(1, 6):
        sse.handle_head(hop, 1, 307, url=url, location="/y#frag")
        url = "http://a.example/y"
        assert sse.poll_transmit() == {**first, "redirect": url, "number": 1 + hop}
    sse.handle_head(9, 1, 307, url=url, location="/y")
    assert sse.poll_transmit() == {"type": "close", "epoch": 1}
    assert sse.poll_transmit() == {"type": "end"}
    assert sse.poll_event() == {
        "type": "failed",
        "status": 307,
        "reason": 'redirect to "/y" not followed: too many redirects',
        "kind": "redirect",
    }


def test_sse_a_redirect_to_another_origin_withholds_the_credentials():
    sse = tether.Sse(seed=3)
    sse.connect(0)
    first = sse.poll_transmit()
    assert first is not None and first["withhold"] == []
    sse.handle_head(1, 1, 307, url="https://a.example/x", location="/y")
    assert sse.poll_transmit()["withhold"] == []
    sse.handle_head(2, 1, 307, url="https://a.example/y", location="https://b.example/z")
    hop = sse.poll_transmit()
    assert hop["redirect"] == "https://b.example/z"
    assert hop["withhold"] == ["authorization", "cookie", "proxy-authorization"]
    # Back to the first origin: still withheld for the rest of the attempt.
    sse.handle_head(3, 1, 307, url="https://b.example/z", location="https://a.example/x")
    assert sse.poll_transmit()["withhold"] == ["authorization", "cookie", "proxy-authorization"]
    sse.close()


def test_relay_identity_is_the_librarys():
    from tether._ffi import normalize_url

    assert normalize_url("wss://R.example:443/") == normalize_url("wss://r.example")
    assert normalize_url("wss://r.example/A") != normalize_url("wss://r.example/a")
    with pytest.raises(tether.TetherError):
        normalize_url("http://r.example")

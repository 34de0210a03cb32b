"""`tether-py req` against tether-testserver's relay over a real WebSocket, and `tether-py
sse` against a scripted SSE server: the JSON lines contract of `tether req` / `tether sse`.
(`adapters/cli/tests/cli.rs` also runs the Rust CLI's own tests against `tether-py` when
`TETHER_CLI_UNDER_TEST` names it.)"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from .conftest import ScriptedSse, tether_py

LIMIT = 40


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(tether_py(*args), capture_output=True, text=True, timeout=LIMIT)


def lines(output: str) -> list:
    return [json.loads(line) for line in output.splitlines()]


def event_id(n: int) -> str:
    return f"{n:064x}"


def test_req_until_eose_writes_each_line_and_closes_each_subscription(peer):
    relay = peer("--events", "2")
    done = run("req", relay.url, '{"kinds":[1]}', '{"kinds":[7]}', "--until-eose", "--seed", "7")
    assert done.returncode == 0, done.stderr
    out = lines(done.stdout)
    assert out[0] == {"type": "connected"}
    events = [line for line in out if line["type"] == "event"]
    # Newest first, as relays answer.
    assert [(e["sub"], e["event"]["id"]) for e in events] == [
        ("0", event_id(2)),
        ("0", event_id(1)),
    ]
    assert events[1]["event"] == {
        "id": event_id(1),
        "pubkey": event_id(1),
        "created_at": 1_000_001,
        "kind": 1,
        "tags": [],
        "content": "event 1",
        "sig": "0" * 127 + "1",
    }
    assert sorted(line["sub"] for line in out if line["type"] == "eose") == ["0", "1"]
    assert out[-1] == {"type": "disconnected", "reconnect_in_ms": None, "why": "requested"}
    assert relay.frames() == {"REQ": 2, "CLOSE": 2}


def test_req_refused_subscription_is_one_closed_line(peer):
    relay = peer("--events", "1", "--refuse", "blocked: not here")
    done = run("req", relay.url, "--until-eose")
    assert done.returncode == 0, done.stderr
    out = lines(done.stdout)
    assert [line for line in out if line["type"] == "closed"] == [
        {"type": "closed", "sub": "0", "reason": "blocked: not here", "attempts": 0}
    ]
    assert [line["type"] for line in out] == ["connected", "closed", "disconnected"]


def test_req_answers_auth_with_a_secret_key(peer):
    relay = peer("--events", "2", "--auth")
    key = "6b911fd37cdf5c81d4c0adb1ab7fa822ed253ab0ad9aa18d77257c88b29b718e"
    done = run("req", relay.url, '{"kinds":[1]}', "--until-eose", "--secret-key", key)
    assert done.returncode == 0, done.stderr
    out = lines(done.stdout)
    kinds = [line["type"] for line in out]
    assert kinds.count("auth") == 1 and kinds.count("event") == 2, done.stdout
    assert relay.frames()["AUTH"] == 1


def test_req_sigint_closes_and_exits_zero(peer):
    relay = peer("--events", "1")
    child = subprocess.Popen(
        tether_py("req", relay.url, '{"kinds":[1]}'), stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    seen = []
    while not seen or seen[-1]["type"] != "eose":
        seen.append(json.loads(child.stdout.readline()))
    child.send_signal(signal.SIGINT)
    rest = child.stdout.read()
    assert child.wait(LIMIT) == 0
    assert rest == '{"type":"disconnected","reconnect_in_ms":null,"why":"requested"}\n'
    assert relay.frames() == {"REQ": 1, "CLOSE": 1}


def test_usage_errors_are_one_line_and_exit_2():
    for args in (
        ["req", "http://127.0.0.1:1"],
        ["req", "ws://127.0.0.1:1", "[1]"],
        ["req", "ws://127.0.0.1:1", "--secret-key", "nope"],
        ["sse", "ws://127.0.0.1:1/"],
        ["sse", "http://127.0.0.1:1/", "-H", "no colon"],
        ["nope"],
    ):
        done = run(*args)
        assert done.returncode == 2, (args, done)
        assert done.stdout == ""
        assert done.stderr.startswith("tether: ") and done.stderr.count("\n") == 1, done.stderr


def test_a_port_out_of_range_is_a_usage_error_not_endless_retries():
    for url in ("ws://127.0.0.1:99999/", "ws://127.0.0.1:65536", "ws://127.0.0.1:abc/"):
        done = run("req", url)
        assert done.returncode == 2, (url, done)
        assert done.stderr.startswith(f"tether: invalid URL: {url}: port"), done.stderr
    done = run("sse", "http://127.0.0.1:0/events")
    assert done.returncode == 2, done
    assert "port 0 is not in 1-65535" in done.stderr, done.stderr


def note(n: int, data: str) -> str:
    return f"retry: 500\nevent: note\nid: {n}\ndata: {data}\n\n"


def test_sse_open_messages_reconnect_with_last_event_id():
    server = ScriptedSse(
        [
            (200, "text/event-stream", note(1, "one") + note(2, "two"), True),
            (200, "text/event-stream", note(3, "three"), False),
        ]
    )
    try:
        started = time.monotonic()
        done = run("sse", server.url, "-H", "X-Test: yes", "--seed", "5", "--duration", "2.5")
        assert time.monotonic() - started >= 2.5
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    out = lines(done.stdout)
    assert [line["type"] for line in out] == [
        "open",
        "message",
        "message",
        "reconnecting",
        "reconnected",
        "message",
    ]
    assert out[1] == {"type": "message", "event": "note", "data": "one", "id": "1"}
    reconnecting = out[3]
    assert 250 <= reconnecting.pop("in_ms") <= 750
    assert reconnecting == {
        "type": "reconnecting",
        "last_event_id": "2",
        "attempt": 1,
        "why": "eof",
        "reason": "stream ended",
    }
    assert out[5]["data"] == "three"
    assert [(r.get("X-Test"), r.get("Last-Event-ID")) for r in server.requests] == [
        ("yes", None),
        ("yes", "2"),
    ]


def test_sse_refusal_is_a_failed_line_and_exit_1():
    server = ScriptedSse([(404, "text/plain", "no", True)])
    try:
        done = run("sse", server.url)
    finally:
        server.stop()
    assert done.returncode == 1
    assert lines(done.stdout) == [
        {"type": "failed", "status": 404, "reason": "HTTP status 404", "kind": "status"}
    ]


def test_sse_204_is_a_closed_line_and_exit_0():
    server = ScriptedSse([(204, None, "", True)])
    try:
        done = run("sse", server.url)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert lines(done.stdout) == [
        {"type": "closed", "reason": "204 No Content: the server asked to stop"}
    ]


def test_sse_redirect_refused_is_a_failed_line_and_exit_1():
    server = ScriptedSse([(302, None, "", True), (200, "text/event-stream", note(1, "a"), False)])
    try:
        done = run("sse", server.url)
    finally:
        server.stop()
    assert done.returncode == 1
    assert lines(done.stdout) == [
        {
            "type": "failed",
            "status": 302,
            "reason": 'redirect to "" not followed: no usable Location',
            "kind": "redirect",
        }
    ]
    assert len(server.requests) == 1


def test_sse_header_cmd_gives_each_attempt_the_header_of_its_time():
    server = ScriptedSse(
        [
            (200, "text/event-stream", note(1, "a"), True),
            (200, "text/event-stream", note(2, "b"), False),
        ]
    )
    cmd = 'echo "X-Token: t$TETHER_ATTEMPT"; echo "X-After: [$TETHER_AFTER]"'
    try:
        done = run(
            "sse", server.url, "-H", "X-Token: stale", "--header-cmd", cmd, "--duration", "2"
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert [(r.get("X-Token"), r.get("X-After")) for r in server.requests] == [
        ("t1", "[]"),
        ("t2", "[eof]"),
    ]


def test_sse_header_cmd_that_fails_is_a_typed_local_failure():
    server = ScriptedSse([(200, "text/event-stream", note(1, "a"), False)])
    try:
        done = run("sse", server.url, "--header-cmd", "echo nope; exit 3")
    finally:
        server.stop()
    assert done.returncode == 1
    assert lines(done.stdout) == [
        {
            "type": "failed",
            "status": None,
            "reason": "the request could not be built: --header-cmd exited with 3",
            "kind": "invalid_request",
        }
    ]
    assert server.requests == []


def test_sse_header_cmd_past_its_limit_is_ended_with_what_it_started(monkeypatch):
    from tether import cli
    from tether.driver import AttemptInfo

    monkeypatch.setattr(cli, "HEADER_CMD_LIMIT", 0.5)
    build = cli._header_cmd("sleep 30; echo 'X-Late: yes'")
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"^--header-cmd ran past 0\.5s$"):
        build(AttemptInfo(number=1, attempt="original", after=None))
    assert time.monotonic() - started < 5
    assert cli._header_cmd("echo 'X-A: 1'; echo; echo 'X-B:two'")(
        AttemptInfo(number=2, attempt="original", after="eof")
    ) == [("X-A", "1"), ("X-B", "two")]

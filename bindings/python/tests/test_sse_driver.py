"""The asyncio SSE driver against a scripted server: redirects decided by the core (the HTTP
client follows none), the request headers, and the per-attempt builder."""

from __future__ import annotations

import asyncio
from typing import Callable, Union

from tether import Sse
from tether.driver import AttemptInfo, PerAttempt, SseDriver

from .conftest import ScriptedSse

LIMIT = 20.0

Script = Union[list, Callable[[str], list]]


def note(n: int, data: str) -> str:
    return f"retry: 500\nid: {n}\ndata: {data}\n\n"


def stream(n: int, data: str, end: bool) -> tuple:
    return (200, "text/event-stream", note(n, data), end)


def redirect(status: int, location: str | None) -> tuple:
    return (status, None, "", True, {} if location is None else {"Location": location})


def header(headers: dict, name: str) -> str | None:
    """``name``'s value in a request's headers, whatever its case there."""
    values = [v for n, v in headers.items() if n.lower() == name.lower()]
    assert len(values) <= 1, headers
    return values[0] if values else None


def drive(
    script: Script,
    until: Callable[[list], bool],
    headers: list | None = None,
    per_attempt: PerAttempt | None = None,
) -> tuple[list, ScriptedSse]:
    """Run an :class:`SseDriver` against ``script`` (or ``script(origin)``, for replies that
    name the server) until ``until(events)``; the events and the stopped server."""
    server = ScriptedSse([])
    origin = server.url.rsplit("/", 1)[0]
    server.script.extend(script(origin) if callable(script) else script)
    events: list = []

    async def main() -> None:
        driver: SseDriver

        def on_event(event: dict, now: int) -> None:
            events.append(event)
            if until(events):
                driver.stop()

        driver = SseDriver(server.url, Sse(seed=5), on_event, headers or [], per_attempt)
        await asyncio.wait_for(driver.run(), LIMIT)

    try:
        asyncio.run(main())
    finally:
        server.stop()
    return events, server


def messages(count: int) -> Callable[[list], bool]:
    return lambda events: sum(e["type"] == "message" for e in events) >= count


def over(events: list) -> bool:
    return events[-1]["type"] in ("failed", "closed")


def test_a_307_is_followed_with_the_same_request_to_the_new_url():
    calls: list[AttemptInfo] = []

    def per_attempt(info: AttemptInfo) -> dict:
        calls.append(info)
        return {"X-Token": f"t{len(calls)}"}

    events, server = drive(
        lambda origin: [
            redirect(307, "/moved?x=1"),
            redirect(308, f"{origin}/again"),  # absolute
            redirect(303, "last"),  # a GET: followed, no method change to refuse
            stream(1, "one", False),
        ],
        messages(1),
        headers=[("X-Token", "stale"), ("X-App", "yes")],
        per_attempt=per_attempt,
    )
    assert [e["type"] for e in events] == ["open", "message"]
    assert events[1]["data"] == "one"
    # The builder ran once, for the attempt; each hop sent its parts again.
    assert calls == [AttemptInfo(number=1, attempt="original", after=None)]
    assert [(m, p, body) for m, p, _, body in server.log] == [
        ("GET", "/events", b""),
        ("GET", "/moved", b""),
        ("GET", "/again", b""),
        ("GET", "/last", b""),
    ]
    for _, _, headers, _ in server.log:
        assert header(headers, "X-Token") == "t1"
        assert header(headers, "X-App") == "yes"
        assert header(headers, "Accept") == "text/event-stream"
        assert header(headers, "Accept-Encoding") == "identity"
        assert header(headers, "Last-Event-ID") is None


def test_a_redirect_without_location_fails_typed_and_is_not_followed():
    # The C ABI session is a GET, so a 302 is followed when it names a target (a POST's
    # method_change refusal cannot be reached from here); one without a Location cannot be.
    events, server = drive([redirect(302, None), stream(1, "one", False)], over)
    assert events == [
        {
            "type": "failed",
            "status": 302,
            "reason": 'redirect to "" not followed: no usable Location',
            "kind": "redirect",
        }
    ]
    assert [(m, p) for m, p, _, _ in server.log] == [("GET", "/events")]


def test_a_redirect_loop_stops_at_the_hop_limit():
    calls: list[AttemptInfo] = []

    def per_attempt(info: AttemptInfo) -> list:
        calls.append(info)
        return [("Authorization", "Bearer once")]

    events, server = drive([redirect(307, "/events")] * 8, over, per_attempt=per_attempt)
    assert events == [
        {
            "type": "failed",
            "status": 307,
            "reason": 'redirect to "/events" not followed: too many redirects',
            "kind": "redirect",
        }
    ]
    # The request and 5 hops; the 6th redirect is refused, nothing more is sent.
    assert len(server.log) == 6
    assert len(calls) == 1
    assert {header(h, "Authorization") for _, _, h, _ in server.log} == {"Bearer once"}


def test_each_attempt_carries_the_token_built_for_it():
    calls: list[AttemptInfo] = []

    def per_attempt(info: AttemptInfo) -> dict:
        calls.append(info)
        # Another case than -H: replaced all the same.
        return {"authorization": f"Bearer t{info.number}"}

    events, server = drive(
        [stream(1, "one", True), stream(2, "two", False)],
        messages(2),
        headers=[("Authorization", "Bearer stale"), ("X-App", "yes")],
        per_attempt=per_attempt,
    )
    assert [e["type"] for e in events] == [
        "open",
        "message",
        "reconnecting",
        "reconnected",
        "message",
    ]
    assert calls == [
        AttemptInfo(number=1, attempt="original", after=None),
        AttemptInfo(number=2, attempt="original", after="eof"),  # a GET resumes as itself
    ]
    sent = [h for _, _, h, _ in server.log]
    assert [header(h, "Authorization") for h in sent] == ["Bearer t1", "Bearer t2"]
    assert [header(h, "Last-Event-ID") for h in sent] == [None, "1"]
    assert [header(h, "X-App") for h in sent] == ["yes", "yes"]
    later = " ".join(v for h in sent[1:] for v in h.values())
    assert "Bearer t1" not in later and "stale" not in later


def test_a_builder_that_raises_is_a_local_failure_and_nothing_is_sent():
    def per_attempt(info: AttemptInfo) -> dict:
        raise RuntimeError("no token")

    events, server = drive([stream(1, "one", False)], over, per_attempt=per_attempt)
    assert events == [
        {
            "type": "failed",
            "status": None,
            "reason": "the request could not be built: no token",
            "kind": "invalid_request",
        }
    ]
    assert server.log == []


def test_an_accept_encoding_of_the_application_is_kept():
    _, server = drive([stream(1, "one", False)], messages(1), headers=[("accept-encoding", "br")])
    assert header(server.log[0][2], "Accept-Encoding") == "br"

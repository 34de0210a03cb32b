"""asyncio drivers: sockets, HTTP and time around a session, and nothing else.

Each driver runs the drain loop of the Rust drivers: feed one input, drain transmits and
events until both are empty, then wait for the next input or until ``poll_timeout`` and
call ``handle_timeout`` with a fresh ``now``. Socket and HTTP tasks only put what happened
into one inbox; the loop alone touches the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import ssl
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable, Union
from urllib.parse import urlsplit

from . import _ffi
from ._ffi import Relay, Sse, TetherError

EventSink = Callable[[dict, int], None]
"""Called with each event and the ``now_ms`` it was drained at."""


INBOX_BOUND = 256
"""Socket and body inputs queued for the loop at most. A reader with no room waits, and so
stops reading its socket: the peer is held back by TCP while the application lags, and
memory stays flat however fast it sends."""

INBOX_BYTES = 8 * 1024 * 1024
"""Bytes of frames and body queued for the loop at most (one item may exceed it alone: a
frame up to the session's ``max_frame``)."""

_BODY_CHUNK = 16 * 1024
"""Bytes of an SSE body per inbox item, so the inbox holds at most ``INBOX_BOUND`` of them."""

_CONTROL = frozenset(("stop", "wake", "pong", "stalled"))
"""Inputs that take no room: the loop's own signals and the pool's stalled sockets, a
handful at any time."""


def _payload(item: tuple) -> int:
    """The bytes an inbox item holds: a frame's or a body piece's (the item's last field)."""
    return len(item[-1]) if item[0] in ("frame", "bytes") else 0


class _Loop:
    """The inbox, the clock and the wait-until-deadline shared by both drivers."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.inbox: asyncio.Queue = asyncio.Queue()
        self._room = asyncio.Semaphore(INBOX_BOUND)
        self._bytes = 0
        self._taken = asyncio.Event()
        self._origin = time.monotonic()
        self.stopping = False

    async def put(self, item: tuple) -> None:
        """Queue a socket or body input for the loop, waiting for room (see
        :data:`INBOX_BOUND` and :data:`INBOX_BYTES`)."""
        await self._room.acquire()
        size = _payload(item)
        while self._bytes and self._bytes + size > INBOX_BYTES:
            self._taken.clear()
            await self._taken.wait()
        self._bytes += size
        self.inbox.put_nowait(item)

    def now(self) -> int:
        """Milliseconds since the driver started: the session's ``now_ms``."""
        return int((time.monotonic() - self._origin) * 1000)

    def stop(self) -> None:
        """Ask the loop to return after the current step (safe from any callback)."""
        self.stopping = True
        self.inbox.put_nowait(("stop",))

    async def next_input(self) -> tuple | None:
        """The next input, or ``None`` when the session's deadline came first."""
        deadline = self.session.poll_timeout()
        if deadline is not None and self.now() >= deadline:
            return None
        timeout = None if deadline is None else (deadline - self.now()) / 1000
        try:
            item = await asyncio.wait_for(self.inbox.get(), timeout)
        except asyncio.TimeoutError:
            return None
        if item[0] not in _CONTROL:
            self._room.release()
            self._bytes -= _payload(item)
            self._taken.set()
        return item


_MESSAGE_TOO_BIG = 1009
"""The close code websockets sends for a frame over ``max_size``."""

_URL_KINDS = {("ws", "wss"): _ffi.URL_RELAY, ("http", "https"): _ffi.URL_SSE}


def check_url(url: str, schemes: tuple[str, ...]) -> str:
    """``url`` if it passes tether's URL rule (``tether_driver::url``, through
    ``tether_check_url``): one of ``schemes`` (``("ws", "wss")`` for a relay,
    ``("http", "https")`` for SSE), a host, and a port of 1-65535 when one is written; else
    :class:`ValueError` saying what is wrong, worded as the Rust entry points word it.

    Checked before a driver starts: a port out of range would only surface as reconnects
    failing forever.
    """
    kind = _URL_KINDS.get(tuple(schemes))
    if kind is None:
        raise ValueError(f"no URL rule for the schemes {schemes!r}")
    why = _ffi.check_url(url, kind)
    if why is not None:
        raise ValueError(why)
    return url


def _warn(message: str) -> None:
    print(f"tether: {message}", file=sys.stderr)


class RelayDriver(_Loop):
    """Drives a :class:`Relay` over WebSockets to ``url`` (ws:// or wss://, checked by
    :func:`check_url`: a bad one is a :class:`ValueError` here, not endless reconnects).

    ``sign(url, challenge)`` answers NIP-42 challenges (a signed kind 22242 event as JSON);
    without it challenges only reach ``on_event``. ``tls``: the context wss:// sockets use
    (default: Python's, which trusts the platform's store).
    """

    def __init__(
        self,
        url: str,
        relay: Relay,
        on_event: EventSink,
        sign: Callable[[str, str], str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(relay)
        self.url = check_url(url, ("ws", "wss"))
        self.relay = relay
        self.on_event = on_event
        self.sign = sign
        self.tls = tls
        self._sockets: dict[int, Any] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self._open: int | None = None

    async def run(self) -> None:
        """Connect and drive until :meth:`stop`; then return, sockets left as they are."""
        self.relay.connect(self.now())
        while True:
            await self.drain()
            if self.stopping:
                return
            item = await self.next_input()
            if item is None:
                self.relay.handle_timeout(self.now())
            else:
                self._feed(item)

    async def shut_down(self, subs: list, wait: float = 2.0) -> None:
        """Unsubscribe ``subs``, disconnect, and drain until the socket is closed (bounded)."""
        now = self.now()
        for sub in subs:
            try:
                self.relay.unsubscribe(now, sub)
            except TetherError as error:
                _warn(f"unsubscribe at shutdown: {error}")
        # The CLOSEs go out before the disconnect drops whatever transmit is still queued.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.drain(), wait)
        self.relay.disconnect(self.now())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.drain(), wait)
        for task in self._tasks.values():
            task.cancel()

    def _feed(self, item: tuple) -> None:
        kind, now = item[0], self.now()
        try:
            if kind == "open":
                self._open = item[1]
                self.relay.handle_open(now, item[1])
            elif kind == "frame":
                self.relay.handle_frame(now, item[1], item[2])
            elif kind == "binary":
                self.relay.handle_binary(now, item[1], item[2])
            elif kind == "pong":
                self.relay.handle_pong(now, item[1])
            elif kind == "lost":
                self._forget(item[1])
                self.relay.handle_close(now, item[1], item[2], item[3])
        except TetherError as error:
            # A stale socket's report is ignored by the session; anything else is a bug here.
            _warn(f"socket input {kind}: {error}")

    async def drain(self) -> None:
        """Transmits and events until both queues are empty."""
        while True:
            transmit = self.relay.poll_transmit()
            if transmit is not None:
                await self._transmit(transmit)
                continue
            event = self.relay.poll_event()
            if event is None:
                return
            self.on_event(event, self.now())
            if event["type"] == "auth" and self.sign is not None:
                self._answer(event)

    def _answer(self, event: dict) -> None:
        try:
            signed = self.sign(self.url, event["challenge"])
        except Exception as error:  # the signer's failure is reported
            self.on_event({"type": "signer_failed", "error": str(error)}, self.now())
            return
        try:
            self.relay.authenticate(self.now(), event["id"], signed)
        except TetherError as error:
            _warn(f"authenticate: {error}")

    async def _transmit(self, transmit: dict) -> None:
        kind = transmit["type"]
        if kind == "open":
            epoch = transmit["epoch"]
            self._tasks[epoch] = asyncio.ensure_future(self._socket(epoch))
        elif kind == "send":
            ws = self._sockets.get(self._open) if self._open is not None else None
            if ws is not None:
                # A failed send is the reader task's to report, as a loss.
                with contextlib.suppress(Exception):
                    await ws.send(transmit["text"])
        elif kind == "ping":
            epoch = self._open
            ws = self._sockets.get(epoch) if epoch is not None else None
            if ws is not None:
                asyncio.ensure_future(self._ping(ws, epoch))
        elif kind == "close":
            epoch = transmit["epoch"]
            ws = self._sockets.pop(epoch, None)
            task = self._tasks.pop(epoch, None)
            if ws is not None:
                # Closing a socket that is already dead.
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.close(), 2.0)
            if task is not None:
                task.cancel()

    async def _ping(self, ws: Any, epoch: int) -> None:
        try:
            await (await ws.ping())
            self.inbox.put_nowait(("pong", epoch))
        except Exception:  # no pong: the session's timeout decides
            pass

    def _forget(self, epoch: int) -> None:
        self._sockets.pop(epoch, None)
        self._tasks.pop(epoch, None)
        if self._open == epoch:
            self._open = None

    async def _socket(self, epoch: int) -> None:
        ws = await open_websocket(self.url, self.relay.max_frame, self.put, (epoch,), self.tls)
        if ws is None:
            return
        self._sockets[epoch] = ws
        await self.put(("open", epoch))
        await read_websocket(ws, self.put, (epoch,))


async def open_websocket(
    url: str,
    max_frame: int,
    put,
    tag: tuple,
    tls: ssl.SSLContext | None = None,
    public_only: bool = False,
) -> Any | None:
    """Open a WebSocket to ``url`` (a wss:// one with ``tls`` when given), or put its
    failure (``("lost", *tag, loss, -1)``) and return ``None``. No timeout of its own: the
    session's connect timeout closes it. With ``public_only`` (a relay from a stranger's
    relay list, as the pool says) the name is resolved here and dialed at the addresses
    resolved, none of them private (:func:`public_addresses`)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidHandshake

    secure = {"ssl": tls} if tls is not None and url.startswith("wss://") else {}
    try:
        if public_only:
            secure.update(await public_addresses(url))
        return await connect(
            url,
            **secure,
            ping_interval=None,
            # The core refuses a larger frame anyway; websockets must not buffer one.
            max_size=max_frame,
            # Frames websockets holds before it stops reading the socket itself.
            max_queue=4,
            open_timeout=None,
            close_timeout=2,
        )
    except asyncio.CancelledError:
        raise
    except ssl.SSLError:
        loss = _ffi.LOSS_TLS_REJECTED
    except InvalidHandshake:
        loss = _ffi.LOSS_HANDSHAKE_FAILED
    except OSError as error:
        out_of_files = error.errno in (errno.EMFILE, errno.ENFILE)
        loss = _ffi.LOSS_OUT_OF_FILES if out_of_files else _ffi.LOSS_CONNECTION_REFUSED
    except Exception:  # anything else on the way up
        loss = _ffi.LOSS_NETWORK_ERROR
    await put(("lost", *tag, loss, -1))
    return None


async def public_addresses(url: str) -> dict:
    """Where a public-only relay may be dialed: its name resolved once, every address checked
    by the core's rule (:func:`tether.is_private_ip`), the connection then made to the first
    of those same addresses (a rebinding name is not asked twice). A name with any private
    address is refused as a whole (``PermissionError``, reported as a refused connection), as
    that address written in the URL would be."""
    parsed = urlsplit(url)
    host = parsed.hostname or ""
    port = parsed.port or (443 if parsed.scheme == "wss" else 80)
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [info[4][0] for info in infos]
    inside = next((a for a in addresses if _ffi.is_private_ip(a.split("%")[0])), None)
    if inside is not None or not addresses:
        raise PermissionError(
            f"{host} resolves to {inside}, a private address: a relay from a relay list is not "
            "dialed inside the network"
        )
    dial = {"host": addresses[0], "port": port}
    if parsed.scheme == "wss":
        # TLS still names and checks the host, not the address dialed.
        dial["server_hostname"] = host
    return dial


async def read_websocket(ws: Any, put, tag: tuple) -> None:
    """Put each frame of ``ws`` (``("frame", *tag, text)``, ``("binary", *tag, n)``), then
    how it ended (``("lost", *tag, loss, close_code)``)."""
    from websockets.exceptions import ConnectionClosed

    try:
        async for message in ws:
            if isinstance(message, str):
                await put(("frame", *tag, message))
            else:
                await put(("binary", *tag, len(message)))
        code = ws.close_code
        await put(("lost", *tag, _ffi.LOSS_CLOSED_BY_PEER, -1 if code is None else code))
    except ConnectionClosed as closed:
        if closed.sent is not None and closed.sent.code == _MESSAGE_TOO_BIG:
            await put(("lost", *tag, _ffi.LOSS_FRAME_TOO_LARGE, -1))
        elif closed.rcvd is not None:
            await put(("lost", *tag, _ffi.LOSS_CLOSED_BY_PEER, closed.rcvd.code))
        else:
            await put(("lost", *tag, _ffi.LOSS_NETWORK_ERROR, -1))
    except asyncio.CancelledError:
        raise
    except Exception:  # a reset or broken pipe
        await put(("lost", *tag, _ffi.LOSS_NETWORK_ERROR, -1))


@dataclass(frozen=True)
class AttemptInfo:
    """What an SSE request is, as the core decided it (the ``open`` transmit's fields)."""

    number: int
    """Requests sent since the session was created, this one included (1 for the first; a
    redirect hop counts as a request)."""
    attempt: str
    """``original`` (the application's request), ``resume`` (with ``Last-Event-ID``) or
    ``reissue``."""
    after: str | None
    """Why the previous attempt since ``connect`` was lost (a ``drop`` name such as ``eof``,
    ``status``, ``network_error``); ``None`` for the first."""


Headers = Union[Mapping[str, str], Iterable[tuple[str, str]]]

PerAttempt = Callable[[AttemptInfo], Headers]
"""The application's builder: called once per attempt with its :class:`AttemptInfo`, before
the request goes; returns headers (a mapping or ``(name, value)`` pairs) that replace the
request's headers of the same name (case-insensitive) for that attempt only."""


def _replace(headers: list, parts: Headers) -> list:
    """``headers`` with each of ``parts`` replacing the headers of its name."""
    pairs = list(parts.items()) if isinstance(parts, Mapping) else list(parts)
    built = list(headers)
    for name, value in pairs:
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"per_attempt: header {name!r}: {value!r} is not a pair of str")
        built = [(n, v) for n, v in built if n.lower() != name.lower()]
        built.append((name, value))
    return built


class SseDriver(_Loop):
    """Drives an :class:`Sse` session: GET ``url`` (http:// or https://, checked by
    :func:`check_url`) with aiohttp, ``headers`` (``(name, value)`` pairs) on every request.

    Each request carries ``Accept: text/event-stream``, ``Cache-Control: no-cache`` and
    ``Accept-Encoding: identity`` unless ``headers`` (or the attempt's) set that header, then
    ``headers``, then ``Last-Event-ID`` when the core asks for one (one in ``headers`` is
    left out: which id to resume from is the core's decision). aiohttp decompresses nothing
    and follows no redirect: every response head goes to the core whole
    (:meth:`Sse.handle_head`), which follows a redirect (the same attempt, to the URL it
    names) or fails the stream (``failed`` with ``why`` ``redirect``), and fails a stream
    encoded other than ``identity`` (``content_encoding``).

    ``per_attempt`` (see :data:`PerAttempt`) is called once per attempt, before its request
    goes, with its :class:`AttemptInfo`: its headers replace those of the same name for that
    attempt (a fresh token each time). A redirect hop sends the headers built for its
    attempt again without calling it. If it raises, the session is told the request could
    not be built (``failed`` with ``why`` ``invalid_request`` and the error as ``detail``):
    a local failure, never retried. It runs on the event loop: keep it short.

    The session is a GET (the C ABI has no method or body), so there is no body to build.
    """

    def __init__(
        self,
        url: str,
        sse: Sse,
        on_event: EventSink,
        headers: list,
        per_attempt: PerAttempt | None = None,
        proxy: str | None = None,
        body_for: Callable[[AttemptInfo], bytes | None] | None = None,
    ) -> None:
        super().__init__(sse)
        self.url = check_url(url, ("http", "https"))
        # None: the environment's proxy (http_proxy, https_proxy, no_proxy, read by aiohttp);
        # "none": no proxy; else the proxy's URL.
        self.proxy = proxy
        # The body of each attempt, where the application builds it (a new JSON-RPC id);
        # `None` from it keeps the core's.
        self.body_for = body_for
        self._bodies: dict[int, bytes | None] = {}
        self.sse = sse
        self.on_event = on_event
        self.headers = headers
        self.per_attempt = per_attempt
        self._tasks: dict[int, asyncio.Task] = {}
        # The headers built for the attempt of each epoch, for its redirect hops.
        self._built: dict[int, list] = {}
        # The newest request of each epoch: a redirect hop replaces the one before it, whose
        # late body and end are not the hop's.
        self._hop: dict[int, int] = {}
        self._http: Any = None

    async def run(self) -> None:
        """Connect and drive until :meth:`stop`, then abort the request."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=None, sock_read=None)
        async with aiohttp.ClientSession(
            timeout=timeout, auto_decompress=False, trust_env=self.proxy is None
        ) as http:
            self._http = http
            self.sse.set_wall_clock(self.now(), int(time.time()))
            self.sse.connect(self.now())
            try:
                while True:
                    self.drain()
                    if self.stopping:
                        return
                    item = await self.next_input()
                    if item is None:
                        self.sse.handle_timeout(self.now())
                    else:
                        self._feed(item)
            finally:
                for task in self._tasks.values():
                    task.cancel()

    def _feed(self, item: tuple) -> None:
        if item[0] == "stop":
            return  # only wakes the loop to see `stopping`
        kind, epoch, hop, rest = item[0], item[1], item[2], item[3:]
        if self._hop.get(epoch) != hop:
            return  # from a request a redirect hop replaced
        now = self.now()
        try:
            if kind == "response":
                status, head = rest
                self.sse.handle_head(now, epoch, status, **head)
            elif kind == "bytes":
                (data,) = rest
                while data:
                    consumed = self.sse.handle_bytes(self.now(), epoch, data)
                    data = data[consumed:]
                    if data:
                        # The event queue is full: hand events over, then offer the rest.
                        self.drain()
                        if self.stopping:
                            return
            elif kind == "eof":
                self.sse.handle_eof(now, epoch)
            elif kind == "error":
                self.sse.handle_error(now, epoch, rest[0])
            elif kind == "invalid":
                self.sse.handle_request_invalid(now, epoch, rest[0])
        except TetherError as error:
            _warn(f"request input {kind}: {error}")

    def drain(self) -> None:
        """Transmits and events until both queues are empty."""
        while True:
            transmit = self.sse.poll_transmit()
            if transmit is not None:
                self._transmit(transmit)
                continue
            event = self.sse.poll_event()
            if event is None:
                return
            self.on_event(event, self.now())
            if self.stopping:
                return

    def _transmit(self, transmit: dict) -> None:
        if transmit["type"] == "end":
            # The core says the stream is over: no request follows.
            for task in self._tasks.values():
                task.cancel()
            self._tasks.clear()
            self._built.clear()
            return
        epoch = transmit["epoch"]
        if transmit["type"] == "open":
            redirect = transmit.get("redirect")
            headers = self._built.get(epoch) if redirect is not None else None
            if headers is None:
                headers = self._build(epoch, transmit)
                if headers is None:
                    return
            self._built = {epoch: headers}
            # The core withholds some headers (credentials, on a redirect to another origin).
            withhold = {name.lower() for name in transmit.get("withhold", ())}
            request = [(n, v) for n, v in headers if n.lower() not in withhold]
            if transmit["last_event_id"] is not None:
                request.append(("Last-Event-ID", transmit["last_event_id"]))
            url = self.url if redirect is None else redirect
            previous = self._tasks.pop(epoch, None)
            if previous is not None:
                previous.cancel()
            hop = self._hop.get(epoch, 0) + 1
            self._hop = {epoch: hop}
            method = transmit.get("method", "GET")
            body = transmit.get("body", "").encode("utf-8") or None
            if redirect is None:
                self._bodies = {epoch: self._attempt_body(transmit)}
            # A hop re-sends what its attempt sent (after a 303 the core sends no body).
            if body is not None and self._bodies.get(epoch) is not None:
                body = self._bodies[epoch]
            self._tasks[epoch] = asyncio.ensure_future(
                self._request(epoch, hop, url, method, body, request)
            )
        elif transmit["type"] == "close":
            task = self._tasks.pop(epoch, None)
            if task is not None:
                task.cancel()

    def _attempt_body(self, transmit: dict) -> bytes | None:
        if self.body_for is None:
            return None
        info = AttemptInfo(
            number=transmit["number"], attempt=transmit["attempt"], after=transmit["after"]
        )
        return self.body_for(info)

    def _build(self, epoch: int, transmit: dict) -> list | None:
        """The headers of the attempt ``transmit`` opens, without ``Last-Event-ID``; ``None``
        when ``per_attempt`` failed (the session was told)."""
        # The core's headers for this attempt (its defaults included), then the driver's and
        # the builder's, each replacing the core's of the same name: the application's wins.
        own = _replace([(n, v) for n, v in transmit.get("headers", ())], self.headers)
        if self.per_attempt is not None:
            info = AttemptInfo(
                number=transmit["number"], attempt=transmit["attempt"], after=transmit["after"]
            )
            try:
                own = _replace(own, self.per_attempt(info))
            except Exception as error:  # the application's failure is the session's to report
                detail = str(error) or type(error).__name__
                try:
                    self.sse.handle_request_invalid(self.now(), epoch, detail)
                except TetherError as refused:
                    _warn(f"per_attempt failure: {refused}")
                return None
        return [(n, v) for n, v in own if n.lower() != "last-event-id"]

    async def _request(
        self, epoch: int, hop: int, url: str, method: str, body: bytes | None, headers: list
    ) -> None:
        import aiohttp

        async def put(item: tuple) -> None:
            await self.put((item[0], epoch, hop, *item[2:]))

        try:
            proxy = None if self.proxy in (None, "none") else self.proxy
            send = self._http.request(
                method, url, headers=headers, data=body, allow_redirects=False, proxy=proxy
            )
            async with send as response:
                # Every header the core judges; it decides what a redirect or an encoding means.
                head = {
                    "content_type": response.headers.get("Content-Type"),
                    "retry_after": response.headers.get("Retry-After"),
                    "content_encoding": response.headers.get("Content-Encoding"),
                    "location": response.headers.get("Location"),
                    "url": url,
                }
                await put(("response", epoch, response.status, head))
                # Pieces of a bounded size: the inbox's bound is then one of bytes too (and
                # aiohttp, read no faster than that, pauses the socket itself).
                async for chunk in response.content.iter_chunked(_BODY_CHUNK):
                    await put(("bytes", epoch, bytes(chunk)))
            await put(("eof", epoch))
        except asyncio.CancelledError:
            raise
        except (ValueError, aiohttp.InvalidURL) as error:
            await put(("invalid", epoch, str(error)))
        except aiohttp.ClientSSLError:
            await put(("error", epoch, _ffi.LOSS_TLS_REJECTED))
        except aiohttp.ClientConnectorError:
            await put(("error", epoch, _ffi.LOSS_CONNECTION_REFUSED))
        except Exception:  # a reset, a broken body
            await put(("error", epoch, _ffi.LOSS_NETWORK_ERROR))
        finally:
            # A redirect hop's request has the same epoch: leave the next one's task alone.
            if self._tasks.get(epoch) is asyncio.current_task():
                del self._tasks[epoch]

"""The asyncio driver of a :class:`Pool`: one WebSocket per relay, sends that never wait on
a socket, and verification on a thread pool. Every protocol decision is the pool's.

One relay never stalls the others:

- each socket has its own writer task and queue, so the loop never awaits a send; a socket
  whose queue stays full (a peer that stopped reading) is given up as lost, and the pool
  reconnects it and replays what it must;
- readers share the loop's bounded inbox, which a reader waits on in turn, so a flooding
  relay is held back by TCP without shutting the others out;
- a relay that never answers holds nothing but its own socket: its connect and liveness
  timeouts are the pool's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from . import _ffi
from ._ffi import Pool, TetherError
from .driver import EventSink, _Loop, _warn, check_url, open_websocket, read_websocket

VERIFY_BATCH = 256
"""Checks gathered before they go to the verifier threads while socket input keeps coming
(they go at once when it stops): a thread hand-off per event costs more than the check."""

VERIFY_BACKLOG = 1024
"""Checks handed to the verifier threads and not yet answered, at most, before the loop
stops taking socket input: readers then wait, and TCP holds the relays back. Past the pool's
own bound (``max_unverified``, 4 096) new events would be dropped; this keeps well below it."""

WRITE_QUEUE = 1024
"""Frames queued for one socket at most. A socket that cannot take them is dead for every
purpose the pool has; it is reported lost rather than allowed to hold the loop."""


class PoolDriver(_Loop):
    """Drives a :class:`Pool` over WebSockets. :meth:`add_relay` each URL (ws:// or wss://,
    checked by :func:`check_url`), subscribe through :attr:`pool`, then :meth:`run`.

    ``sign(url, challenge)`` answers NIP-42 challenges (a signed kind 22242 event as JSON).
    With the pool's ``verify`` on, each event copy is checked by :func:`tether.verify_event`
    on ``verifiers`` threads (default: one per CPU) before the pool delivers it. ``tls``: the
    context wss:// sockets use (default: Python's, which trusts the platform's store).
    """

    def __init__(
        self,
        pool: Pool,
        on_event: EventSink,
        sign: Callable[[str, str], str] | None = None,
        verifiers: int | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(pool)
        self.pool = pool
        self.on_event = on_event
        self.sign = sign
        self.tls = tls
        self.urls: dict[int, str] = {}
        self._open: dict[int, int] = {}
        self._writers: dict[tuple[int, int], asyncio.Queue] = {}
        self._tasks: dict[tuple[int, int], list[asyncio.Task]] = {}
        self._verifiers = verifiers or os.cpu_count() or 1
        self._executor: ThreadPoolExecutor | None = None
        self._checking = 0
        self._gathered: list[tuple[int, str]] = []
        self._verdicts: asyncio.Queue = asyncio.Queue()

    def add_relay(self, url: str) -> int:
        """Add ``url`` to the pool; its relay id. Raises :class:`TetherError`
        (``ERR_INVALID_URL``) for a URL the core's rule refuses (over 8 KiB)."""
        checked = check_url(url, ("ws", "wss"))
        # One relay per URL, by the core's rule: a relay routing opened there is this one.
        relay = self.pool.add_relay_url(self.now(), checked)
        self.urls[relay] = checked
        return relay

    def adopt(self, relay: int, url: str) -> None:
        """Name the URL of a relay a restored pool already holds, here and in the pool."""
        checked = check_url(url, ("ws", "wss"))
        with contextlib.suppress(TetherError):
            self.pool.name_relay(relay, checked)
        self.urls[relay] = checked

    async def run(self) -> None:
        """Drive until :meth:`stop`; then return, sockets left as they are."""
        while True:
            await self.drain()
            if self.stopping:
                return
            if self._gathered and (len(self._gathered) >= VERIFY_BATCH or self.inbox.empty()):
                self._verify(self._gathered)
                self._gathered = []
            if not self._verdicts.empty():
                self._handle_verdicts(self._verdicts.get_nowait())
            elif self._checking + len(self._gathered) >= VERIFY_BACKLOG:
                await self._await_verdicts()
            else:
                item = await self.next_input()
                if item is None:
                    self.pool.handle_timeout(self.now())
                else:
                    self._feed(item)

    async def _await_verdicts(self) -> None:
        """The verifiers lag: take no socket input until a verdict comes (or a deadline)."""
        deadline = self.pool.poll_timeout()
        timeout = None if deadline is None else max(0, deadline - self.now()) / 1000
        try:
            verdicts = await asyncio.wait_for(self._verdicts.get(), timeout)
        except asyncio.TimeoutError:
            self.pool.handle_timeout(self.now())
            return
        self._handle_verdicts(verdicts)

    def _handle_verdicts(self, verdicts: list) -> None:
        self._checking -= len(verdicts)
        now = self.now()
        for ticket, verdict in verdicts:
            try:
                self.pool.handle_verified(now, ticket, verdict)
            except TetherError as error:
                # Its subscription was dropped meanwhile: nothing awaits it.
                _warn(f"verdict: {error}")

    async def shut_down(self, subs: list, wait: float = 2.0) -> None:
        """Unsubscribe ``subs``, close every socket (bounded), stop the verifiers."""
        now = self.now()
        for sub in subs:
            with contextlib.suppress(TetherError):
                self.pool.unsubscribe(now, sub)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.drain(), wait)
        for relay in list(self.urls):
            with contextlib.suppress(TetherError):
                self.pool.remove_relay(self.now(), relay)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.drain(), wait)
        for tasks in self._tasks.values():
            for task in tasks:
                task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def drain(self) -> None:
        """Transmits, events and verifications until all are drained. Never waits on a
        socket: sends go to each socket's writer."""
        while True:
            transmit = self.pool.poll_transmit()
            if transmit is not None:
                self._transmit(transmit)
                continue
            request = self.pool.poll_verify()
            if request is not None:
                self._gathered.append((request["ticket"], request["raw"]))
                continue
            if not self._deliver_event():
                break

    def _deliver_event(self) -> bool:
        """One of the pool's events to ``on_event`` (and a challenge to the signer); whether
        there was one."""
        event = self.pool.poll_event()
        if event is None:
            return False
        self.on_event(event, self.now())
        if event["type"] == "auth" and self.sign:
            self._answer(event["relay"], event)
        return True

    def _feed(self, item: tuple) -> None:
        kind, now = item[0], self.now()
        try:
            if kind == "open":
                self._open[item[1]] = item[2]
                self.pool.handle_open(now, item[1], item[2])
            elif kind == "frame":
                self.pool.handle_frame(now, item[1], item[2], item[3])
            elif kind == "binary":
                self.pool.handle_binary(now, item[1], item[2], item[3])
            elif kind == "pong":
                self.pool.handle_pong(now, item[1], item[2])
            elif kind in ("lost", "stalled"):
                self._forget((item[1], item[2]))
                self.pool.handle_close(now, item[1], item[2], item[3], item[4])
        except TetherError as error:
            # A removed relay's or a stale socket's report; nothing to do.
            _warn(f"socket input {kind}: {error}")

    def _answer(self, relay: int, challenge: dict) -> None:
        url = self.urls.get(relay, "")
        try:
            signed = self.sign(url, challenge["challenge"])  # type: ignore[misc]
        except Exception as error:  # the signer's failure is reported
            self.on_event(
                {"type": "signer_failed", "relay": relay, "error": str(error)}, self.now()
            )
            return
        try:
            self.pool.authenticate(self.now(), relay, challenge["id"], signed)
        except TetherError as error:
            _warn(f"authenticate: {error}")

    def _verify(self, checks: list[tuple[int, str]]) -> None:
        """Check ``checks`` on the verifier threads, one batch and one foreign call per
        thread: a thread that takes the GIL back after every check waits for the busy loop
        thread each time (the switch interval), which costs more than the check."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._verifiers, thread_name_prefix="verify")
        loop = asyncio.get_running_loop()
        self._checking += len(checks)
        share = -(-len(checks) // self._verifiers)
        for at in range(0, len(checks), share):
            batch = checks[at : at + share]
            future = loop.run_in_executor(self._executor, _check_all, batch)
            future.add_done_callback(lambda f, batch=batch: self._verified(f, batch))

    def _verified(self, future: asyncio.Future, batch: list[tuple[int, str]]) -> None:
        if future.cancelled():
            return
        if future.exception() is not None:
            verdicts = [(ticket, "malformed") for ticket, _ in batch]
        else:
            verdicts = future.result()
        self._verdicts.put_nowait(verdicts)
        # Wake a loop waiting on socket input (a control item: it takes no room).
        self.inbox.put_nowait(("wake",))

    def _transmit(self, transmit: dict) -> None:
        relay, kind = transmit["relay"], transmit["type"]
        if kind == "open":
            key = (relay, transmit["epoch"])
            # A relay the pool chose itself (routing by people) comes with its URL.
            if "url" in transmit and self.urls.get(relay) != transmit["url"]:
                # Routing reuses the id of a relay it let go of. Transmits are drained
                # before events, so the events still queued (the last of the relay that
                # held the id among them) came before this open: they go out under that
                # relay's URL first.
                while self._deliver_event():
                    pass
                self.urls[relay] = transmit["url"]
            url = self.urls.get(relay)
            if url is None:
                return
            # Asked now, while the pool's state is this open's: a relay from a stranger's
            # list is dialed at public addresses only.
            public_only = self.pool.public_only(relay)
            self._tasks[key] = [asyncio.ensure_future(self._socket(key, url, public_only))]
        elif kind in ("send", "ping"):
            key = (relay, self._open.get(relay, 0))
            queue = self._writers.get(key)
            if queue is None:
                return
            try:
                # None asks the writer for a ping.
                queue.put_nowait(transmit["text"] if kind == "send" else None)
            except asyncio.QueueFull:
                self._stalled(key)
        elif kind == "close":
            self._close((relay, transmit["epoch"]))
        elif kind == "fetch_info":
            pass  # NIP-11 is asked for only when `info_refresh_ms` is set, which this does not.

    def _stalled(self, key: tuple[int, int]) -> None:
        """A socket that stopped taking frames: lost, reported once."""
        if key not in self._writers:
            return
        self._close(key)
        self.inbox.put_nowait(("stalled", key[0], key[1], _ffi.LOSS_NETWORK_ERROR, -1))

    def _close(self, key: tuple[int, int]) -> None:
        """The pool closes the socket of ``key``: its tasks end without reporting a loss."""
        for task in self._tasks.get(key, []):
            task.cancel()
        self._forget(key)

    def _forget(self, key: tuple[int, int]) -> None:
        self._writers.pop(key, None)
        self._tasks.pop(key, None)
        if self._open.get(key[0]) == key[1]:
            del self._open[key[0]]

    async def _socket(self, key: tuple[int, int], url: str, public_only: bool) -> None:
        relay, epoch = key
        ws = await open_websocket(
            url, self.pool.max_frame, self.put, key, self.tls, public_only=public_only
        )
        if ws is None:
            return
        queue: asyncio.Queue = asyncio.Queue(WRITE_QUEUE)
        self._writers[key] = queue
        writer = asyncio.ensure_future(self._write(ws, queue, key))
        self._tasks.setdefault(key, []).append(writer)
        try:
            await self.put(("open", relay, epoch))
            await read_websocket(ws, self.put, key)
        finally:
            writer.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 2.0)

    async def _write(self, ws: Any, queue: asyncio.Queue, key: tuple[int, int]) -> None:
        while True:
            text = await queue.get()
            try:
                if text is None:
                    asyncio.ensure_future(self._ping(ws, key))
                else:
                    await ws.send(text)
            except asyncio.CancelledError:
                raise
            except Exception:  # the reader reports the loss
                return

    async def _ping(self, ws: Any, key: tuple[int, int]) -> None:
        try:
            await (await ws.ping())
            self.inbox.put_nowait(("pong", key[0], key[1]))
        except Exception:  # no pong: the pool's timeout decides
            pass


def _check_all(batch: list[tuple[int, str]]) -> list[tuple[int, str | None]]:
    """Each check's verdict, in one foreign call (runs on a verifier thread)."""
    verdicts = _ffi.verify_events([raw for _, raw in batch])
    return [(ticket, verdict) for (ticket, _), verdict in zip(batch, verdicts)]

"""Fixtures: the library, tether-ffi's `testpeer` relay, and a scripted SSE server.

`TETHER_LIBRARY` names the library (see `tether.library_path`); `TETHER_TESTPEER` names the
relay binary, else it is looked up in `$CARGO_TARGET_DIR/release/examples` (built with
`cargo build --release -p tether-ffi --example testpeer`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def testpeer_path() -> Path:
    named = os.environ.get("TETHER_TESTPEER")
    if named:
        return Path(named)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "examples" / "testpeer"


class Peer:
    """A running testpeer relay."""

    def __init__(self, args: list[str]) -> None:
        self.process = subprocess.Popen(
            [str(testpeer_path()), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("ws://"), self.url

    def frames(self) -> dict:
        """Stop the relay; the frames it received, counted by verb."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        line = self.process.stdout.readline()
        self.process.wait(10)
        return json.loads(line)["frames"]


@pytest.fixture
def peer() -> Iterator:
    started: list[Peer] = []

    def start(*args: str) -> Peer:
        p = Peer(list(args))
        started.append(p)
        return p

    yield start
    for p in started:
        if p.process.poll() is None:
            p.process.kill()
            p.process.wait()


def tether_py(*args: str) -> list[str]:
    """The command line of `tether-py` from this interpreter."""
    return [sys.executable, "-m", "tether.cli", *args]


class ScriptedSse:
    """An aiohttp server on 127.0.0.1 answering its script, one reply per request to any
    path: `(status, content_type, body, end)` or `(status, content_type, body, end,
    headers)`; past the script, requests hang open. `requests` holds each request's headers,
    `log` its `(method, path, headers, body)`."""

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.requests: list[dict] = []
        self.log: list[tuple[str, str, dict, bytes]] = []
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _serve(self) -> None:
        from aiohttp import web

        async def handle(request: web.Request) -> web.StreamResponse:
            self.requests.append(dict(request.headers))
            self.log.append(
                (request.method, request.path, dict(request.headers), await request.read())
            )
            if not self.script:
                await asyncio.sleep(3600)
            status, content_type, body, end, *extra = self.script.pop(0)
            response = web.StreamResponse(status=status, headers=extra[0] if extra else None)
            if content_type:
                response.content_type = content_type
            await response.prepare(request)
            await response.write(body.encode())
            if not end:
                await asyncio.sleep(3600)
            return response

        async def start() -> None:
            app = web.Application()
            app.router.add_route("*", "/{path:.*}", handle)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}/events"
            self._ready.set()

        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def stop(self) -> None:
        async def cancel_handlers() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_handlers(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

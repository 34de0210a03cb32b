"""An SSE endpoint that floods: distinct events as fast as the socket takes them.

``python flood_sse.py`` prints its ``http://`` URL as the first stdout line and serves until
stdin closes.
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web


async def stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    n = 0
    while True:
        # `write` waits while the transport's buffer is full: a client that stops reading
        # holds this loop back.
        await response.write(f"id: {n}\ndata: token {n} {'x' * 200}\n\n".encode())
        n += 1


async def main() -> None:
    app = web.Application()
    app.router.add_get("/events", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - aiohttp has no public accessor
    print(f"http://127.0.0.1:{port}/events", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())

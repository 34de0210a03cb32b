"""A relay that floods: on a REQ it sends EOSE, then distinct kind-1 events as fast as the
socket takes them, until stdin closes; then it prints how many it sent.

``python flood_relay.py`` prints its ``ws://`` URL as the first stdout line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from websockets.asyncio.server import serve

sent = 0


def event(n: int) -> dict:
    return {
        "id": f"{n:064x}",
        "pubkey": "a" * 64,
        "created_at": int(time.time()),
        "kind": 1,
        "tags": [],
        "content": f"note {n} " + "x" * 200,
        "sig": "b" * 128,
    }


async def handler(ws) -> None:
    global sent
    async for message in ws:
        frame = json.loads(message)
        if frame[0] != "REQ":
            continue
        sub = frame[1]
        await ws.send(json.dumps(["EOSE", sub]))
        while True:
            # `send` waits while the socket's write buffer is above its high-water mark: a
            # client that stops reading holds this loop back.
            await ws.send(json.dumps(["EVENT", sub, event(sent)]))
            sent += 1


async def report() -> None:
    """How many were sent, each second, on stderr."""
    while True:
        await asyncio.sleep(1)
        print(json.dumps({"sent": sent}), file=sys.stderr, flush=True)


async def main() -> None:
    asyncio.get_running_loop().create_task(report())
    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"ws://127.0.0.1:{port}", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
    print(json.dumps({"sent": sent}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())

"""An MCP server on the official Python SDK, serving Streamable HTTP with resumability on.

tether's real-server tests (tests/tests/sse_real_servers.rs) start it as
`python3 mcp_server.py --port PORT` and wait for the `ready` line it prints once it listens.

- `POST /mcp`: the SDK's Streamable HTTP transport, stateful (`Mcp-Session-Id`), with
  `MemoryEventStore` below as its event store, so a lost POST stream is resumed by a GET with
  `Last-Event-ID`.
- The `count` tool reports progress `to` times, waiting `interval` seconds between reports
  (`pause` seconds after each number in `pause_after`), then returns `counted to {to}`.
- `GET /requests`: every HTTP request the server saw, as JSON, so a test can assert what
  tether sent (a resume is a GET with `Last-Event-ID`, never a second POST).
"""

from __future__ import annotations

import argparse
import json

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage
from starlette.types import ASGIApp, Receive, Scope, Send


class MemoryEventStore(EventStore):
    """Every event of every stream, in memory, with ids a test can predict.

    A message's id is `{stream}:{n}`, n counting the messages of that stream from 1; the
    priming events the SDK stores (no message) get `{stream}:{n}:p{k}`, k counting them
    all. With a global counter instead, a priming event minted by a resume would shift the
    ids of everything produced after it, depending on when the resume arrived.
    """

    def __init__(self) -> None:
        self._events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self._messages: dict[StreamId, int] = {}
        self._primings = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        sent = self._messages.get(stream_id, 0)
        if message is None:
            self._primings += 1
            event_id = f"{stream_id}:{sent}:p{self._primings}"
        else:
            self._messages[stream_id] = sent + 1
            event_id = f"{stream_id}:{sent + 1}"
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        start = next((i for i, e in enumerate(self._events) if e[0] == last_event_id), None)
        if start is None:
            return None
        stream_id = self._events[start][1]
        # By index, not over a copy: events stored while a replayed one is being sent are
        # replayed too, which narrows the SDK's gap between replay and live tail.
        i = start + 1
        while i < len(self._events):
            event_id, stream, message = self._events[i]
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            i += 1
        return stream_id


class RequestLog:
    """ASGI middleware: records each HTTP request and answers `GET /requests` with them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, object]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/requests":
            body = json.dumps(self.seen).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        headers = dict(scope["headers"])
        last_event_id = headers.get(b"last-event-id")
        self.seen.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "session": b"mcp-session-id" in headers,
                "last_event_id": last_event_id.decode() if last_event_id is not None else None,
            }
        )
        await self.app(scope, receive, send)


mcp = MCPServer("tether-test-mcp", log_level="WARNING")


@mcp.tool()
async def count(
    ctx: Context,
    to: int,
    interval: float = 0.02,
    pause_after: list[int] | None = None,
    pause: float = 1.0,
) -> str:
    """Report progress 1..to, then return."""
    pauses = set(pause_after or [])
    for n in range(1, to + 1):
        await ctx.report_progress(n, to, f"counted {n}")
        await anyio.sleep(pause if n in pauses else interval)
    return f"counted to {to}"


class Server(uvicorn.Server):
    """uvicorn that says when it listens (its own log line is not meant for parsing)."""

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"ready http://127.0.0.1:{self.config.port}/mcp", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = RequestLog(mcp.streamable_http_app(event_store=MemoryEventStore(), host="127.0.0.1"))
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="info")
    Server(config).run()


if __name__ == "__main__":
    main()

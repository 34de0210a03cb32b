"""An MCP server on the official Python SDK (mcp 2.3.0), spoken to at revision 2026-07-28.

`python3 mcp2026_server.py --port PORT [options]`; prints `ready http://127.0.0.1:PORT/mcp`
on stdout once it listens (the line tether's `PythonServer` waits for).

At 2026-07-28 there is no handshake, no session and no GET stream: the SDK routes every POST
whose `MCP-Protocol-Version` is not a handshake-era revision to its single-exchange entry
(`mcp/server/_streamable_http_modern.py`), which checks that header, `Mcp-Method` and
`Mcp-Name` against the body (400, JSON-RPC error -32020 HeaderMismatch on a mismatch) and
needs `params._meta` to carry `io.modelcontextprotocol/protocolVersion` and
`io.modelcontextprotocol/clientCapabilities`. Handshake-era clients (2025-11-25) still get
the stateful transport, without an event store.

- `subscriptions/listen`: the SDK's `ListenHandler`. A ticker publishes a tools list-changed
  event every `--tick` seconds (default 0.2), so a stream opened with
  `{"notifications":{"toolsListChanged":true}}` gets `notifications/subscriptions/
  acknowledged` then `notifications/tools/list_changed` every tick. The SDK writes an SSE
  comment `: ping` whenever a stream has been quiet for its keep-alive interval (15 s in the
  SDK); `--keepalive` (default 0.1) shortens it, so comments come between the ticks. The
  interval is also the SDK's wait before it commits a silent request to SSE.
- Tool `slow_count(n, interval=0.05)`: `n` progress notifications (needs a `progressToken`
  in `params._meta`), `interval` seconds apart, then the result `counted to {n}`.
- Cut hook: `--cut-after K` (with `--cut-times T`, default 1, and `--cut-method M`, default
  any) cuts the next T SSE responses after their K-th SSE event (comments do not count):
  `--cut-mode abort` (default) closes the connection mid-body (no last chunk), `end` ends
  the body cleanly without the JSON-RPC response. Either way the SDK cancels the request.
  Re-armed at runtime with `POST /cut?after=K&times=T&method=M&mode=abort` (`after=-1`
  disarms); each cut uses one of the T.
- Log: one JSON object a line, to stderr (or `--log FILE`), and all of them as a JSON array
  from `GET /log`:
  `{"event":"request","n":1,"http":"POST","path":"/mcp","id":7,"method":"tools/call",
    "mcp_method":"tools/call","mcp_name":"slow_count","mcp_protocol_version":"2026-07-28",
    "session":false,"last_event_id":null}` for every request to the MCP endpoint (a GET
  would show up too), then `{"event":"response","n":1,"status":200,"content_type":...,
  "events":4,"comments":2,"cut":false,"complete":true}` when its response ends (or is cut).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from typing import Any
from urllib.parse import parse_qs

import anyio
import mcp.server._streamable_http_modern as modern
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from starlette.types import ASGIApp, Message, Receive, Scope, Send

bus = InMemorySubscriptionBus()
mcp = MCPServer("tether-test-mcp-2026", log_level="WARNING", subscriptions=bus)


@mcp.tool()
async def slow_count(ctx: Context, n: int, interval: float = 0.05) -> str:
    """Report progress 1..n, `interval` seconds apart, then return."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"counted {i}")
        await anyio.sleep(interval)
    return f"counted to {n}"


class Cut(Exception):
    """Raised out of the app to make uvicorn drop the connection mid-response."""


class Arm:
    """What the cut hook does to the next SSE responses."""

    def __init__(self, after: int, times: int, method: str | None, mode: str) -> None:
        self.after, self.times, self.method, self.mode = after, times, method, mode

    def take(self, method: str | None) -> tuple[int, str] | None:
        """The cut (after, mode) for a request of `method`, using one of `times`; or None."""
        if self.after < 0 or self.times <= 0 or (self.method and self.method != method):
            return None
        self.times -= 1
        return self.after, self.mode


class Hook:
    """ASGI middleware: logs, cuts, and serves `GET /log` and `POST /cut`."""

    def __init__(self, app: ASGIApp, arm: Arm, log_file: Any) -> None:
        self.app, self.arm, self.log_file = app, arm, log_file
        self.lines: list[dict[str, Any]] = []
        self.count = 0

    def log(self, line: dict[str, Any]) -> None:
        line = {"t": round(time.time(), 3), **line}
        self.lines.append(line)
        print(json.dumps(line), file=self.log_file, flush=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/log":
            await reply(send, 200, json.dumps(self.lines).encode())
            return
        if scope["path"] == "/cut":
            q = {k: v[-1] for k, v in parse_qs(scope["query_string"].decode()).items()}
            self.arm = Arm(
                int(q.get("after", -1)),
                int(q.get("times", 1)),
                q.get("method"),
                q.get("mode", "abort"),
            )
            await reply(send, 200, json.dumps(vars(self.arm)).encode())
            return

        # The whole body first (to log it), then handed to the SDK as if unread.
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            decoded = None
        decoded = decoded if isinstance(decoded, dict) else {}
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.count += 1
        n = self.count
        self.log(
            {
                "event": "request",
                "n": n,
                "http": scope["method"],
                "path": scope["path"],
                "id": decoded.get("id"),
                "method": decoded.get("method"),
                "mcp_method": headers.get("mcp-method"),
                "mcp_name": headers.get("mcp-name"),
                "mcp_protocol_version": headers.get("mcp-protocol-version"),
                "session": "mcp-session-id" in headers,
                "last_event_id": headers.get("last-event-id"),
            }
        )

        cut = self.arm.take(decoded.get("method")) if scope["method"] == "POST" else None
        state: dict[str, Any] = {"status": None, "content_type": None, "events": 0, "comments": 0}
        state.update(cut=False, complete=False)

        async def hooked(message: Message) -> None:
            if state["cut"]:
                if cut is not None and cut[1] == "abort":
                    raise Cut
                return  # mode end: the body is over; swallow what the SDK still sends
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                state["content_type"] = (
                    dict(message.get("headers", [])).get(b"content-type", b"").decode()
                )
            chunk = message.get("body", b"") if message["type"] == "http.response.body" else b""
            sse = (state["content_type"] or "").startswith("text/event-stream")
            if sse and chunk:
                if chunk.startswith(b":"):
                    state["comments"] += 1
                else:
                    state["events"] += chunk.count(b"\r\n\r\n") or 1
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                state["complete"] = True
            if sse and cut is not None and state["events"] >= cut[0] and not state["complete"]:
                state["cut"] = True
                if cut[1] == "abort":
                    raise Cut
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        try:
            await self.app(scope, replay, hooked)
        except BaseException:
            if state["cut"] and cut is not None and cut[1] == "abort":
                self.log({"event": "response", "n": n, **state})
                raise Cut from None
            raise
        self.log({"event": "response", "n": n, **state})


async def reply(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


class QuietCut(logging.Filter):
    """Keeps uvicorn from printing a traceback for each deliberate cut."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, Cut)


class Server(uvicorn.Server):
    """uvicorn that says when it listens (its own log line is not meant for parsing)."""

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"ready http://127.0.0.1:{self.config.port}/mcp", flush=True)


async def tick(every: float) -> None:
    while True:
        await anyio.sleep(every)
        await bus.publish(ToolsListChanged())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tick", type=float, default=0.2, help="seconds between ticks")
    parser.add_argument(
        "--keepalive", type=float, default=0.1, help="quiet seconds before `: ping`"
    )
    parser.add_argument("--cut-after", type=int, default=-1, help="cut after K events")
    parser.add_argument("--cut-times", type=int, default=1, help="responses to cut")
    parser.add_argument("--cut-method", default=None, help="only this method")
    parser.add_argument("--cut-mode", choices=["abort", "end"], default="abort")
    parser.add_argument("--log", default=None, help="log file (default stderr)")
    args = parser.parse_args()

    # The SDK's keep-alive interval is a module constant, read each time it waits.
    modern._SSE_PING_INTERVAL = args.keepalive
    arm = Arm(args.cut_after, args.cut_times, args.cut_method, args.cut_mode)
    with open(args.log, "a") if args.log else contextlib.nullcontext(sys.stderr) as log_file:
        serve(Hook(mcp.streamable_http_app(host="127.0.0.1"), arm, log_file), args)


def serve(app: ASGIApp, args: argparse.Namespace) -> None:
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="info")
    for name in ("uvicorn.error", "uvicorn"):
        logging.getLogger(name).addFilter(QuietCut())
    server = Server(config)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick, args.tick)
            await server.serve()
            tg.cancel_scope.cancel()

    anyio.run(run)


if __name__ == "__main__":
    main()

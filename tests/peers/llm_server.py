"""An OpenAI-style streaming chat endpoint on sse-starlette, counting the POSTs it gets.

tether's real-server tests (tests/tests/sse_real_servers.rs) start it as
`python3 llm_server.py --port PORT` and wait for the `ready` line it prints once it listens.

- `POST /v1/chat/completions` with `"stream": true` streams `max_tokens` chunks
  (`chat.completion.chunk`, one word each, `interval` seconds apart), a last chunk with
  `finish_reason: "stop"`, then `data: [DONE]`. Two test-only fields shape the generation:
  `pause_after` (a chunk number) and `pause` (seconds): the generation stalls there, as a
  model sometimes does, so a test can cut it at a known point. No `messages` is a 400 with
  an OpenAI-style error body.
- `GET /posts`: `{"posts": n}`, every POST received, accepted or not. A client that re-sends
  a generation after a cut shows up here.
"""

from __future__ import annotations

import argparse
import json

import anyio
import uvicorn
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class Counter:
    posts = 0


async def chat_completions(request: Request) -> EventSourceResponse | JSONResponse:
    Counter.posts += 1
    body = await request.json()
    if not body.get("messages"):
        error = {"message": "messages is required", "type": "invalid_request_error"}
        return JSONResponse({"error": error}, status_code=400)
    model = body.get("model", "tether-test")
    tokens = int(body.get("max_tokens", 8))
    interval = float(body.get("interval", 0.02))
    pause_after = body.get("pause_after")
    pause = float(body.get("pause", 0))

    def chunk(delta: dict[str, str], finish_reason: str | None) -> str:
        # Fixed id and timestamp: the bytes on the wire are the same on every run.
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return json.dumps(
            {
                "id": "chatcmpl-tether",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [choice],
            },
            separators=(",", ":"),
        )

    async def generate():
        for n in range(1, tokens + 1):
            delta = {"content": f"word{n} "}
            if n == 1:
                delta = {"role": "assistant", **delta}
            yield {"data": chunk(delta, None)}
            await anyio.sleep(pause if n == pause_after else interval)
        yield {"data": chunk({}, "stop")}
        yield {"data": "[DONE]"}

    return EventSourceResponse(generate())


async def posts(request: Request) -> JSONResponse:
    return JSONResponse({"posts": Counter.posts})


app = Starlette(
    routes=[
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/posts", posts, methods=["GET"]),
    ]
)


class Server(uvicorn.Server):
    """uvicorn that says when it listens (its own log line is not meant for parsing)."""

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"ready http://127.0.0.1:{self.config.port}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="info")
    Server(config).run()


if __name__ == "__main__":
    main()

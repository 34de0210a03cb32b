"""``tether-py sse --mcp REVISION``: a JSON-RPC body (``-d``) sent as MCP's Streamable HTTP
transport of that revision expects, as ``tether sse --mcp`` does (``adapters/cli/src/mcp.rs``).

- Both revisions: ``MCP-Protocol-Version``, ``Accept: application/json, text/event-stream``
  and ``Content-Type: application/json`` where no ``-H`` sets them; the stream ends once the
  call's JSON-RPC response arrived.
- 2025-11-25: a cut stream is resumed with a GET and ``Last-Event-ID``.
- 2026-07-28: ``Mcp-Method`` and ``Mcp-Name`` mirror the body, whose ``params._meta`` gains
  the protocol version and (empty) client capabilities where it has none; a cut
  ``subscriptions/listen`` is re-issued as a new request with a new JSON-RPC id each time
  (a numeric id plus n - 1, a string id with ``-n``); anything else ends.

An explicit ``-H`` or ``--resume`` wins over what this adds.
"""

from __future__ import annotations

import json

from .driver import AttemptInfo

REVISIONS = ("2025-11-25", "2026-07-28")
LISTEN_REISSUES = 5


class Mcp:
    """What ``--mcp`` makes of a request."""

    def __init__(self, revision: str, body: str) -> None:
        if revision not in REVISIONS:
            raise ValueError(f"{revision!r}: expected one of {', '.join(REVISIONS)}")
        try:
            value = json.loads(body)
        except ValueError as error:
            raise ValueError(f"the body (-d) is not JSON: {error}") from None
        if not isinstance(value, dict) or not isinstance(value.get("method"), str):
            raise ValueError('the body (-d) is not a JSON-RPC request: no "method"')
        if revision == "2026-07-28":
            params = value.setdefault("params", {})
            if isinstance(params, dict):
                meta = params.setdefault("_meta", {})
                if isinstance(meta, dict):
                    meta.setdefault("io.modelcontextprotocol/protocolVersion", revision)
                    meta.setdefault("io.modelcontextprotocol/clientCapabilities", {})
        self.revision = revision
        self.body = value

    def apply(self, request: dict) -> dict:
        """``request`` (``tether_sse_new_request``'s JSON) with this revision's headers where
        none is set, its default resume where none is given, the body, and the end on the
        call's response."""
        params = self.body.get("params")
        params = params if isinstance(params, dict) else {}
        add = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", self.revision),
        ]
        if self.revision == "2026-07-28":
            add.append(("mcp-method", self.body["method"]))
            name = params.get("name", params.get("uri"))
            if isinstance(name, str):
                add.append(("mcp-name", name))
        headers = list(request.get("headers", []))
        present = {name.lower() for name, _ in headers}
        headers += [[name, value] for name, value in add if name not in present]
        request["headers"] = headers
        request.setdefault("resume", self._default_resume())
        request["body"] = json.dumps(self.body, separators=(",", ":"))
        request["end_on_jsonrpc_response"] = True
        return request

    def _default_resume(self) -> str:
        if self.revision == "2025-11-25":
            return "last-event-id:GET"
        if self.body["method"] == "subscriptions/listen":
            return f"reissue:{LISTEN_REISSUES}"
        return "never"

    def body_for(self, info: AttemptInfo) -> bytes | None:
        """The body of attempt ``info``: under 2026-07-28 each later sending of the request
        is a new request with a new id; ``None`` keeps the request's body."""
        if self.revision != "2026-07-28" or info.number <= 1 or info.attempt == "resume":
            return None
        id_ = self.body.get("id")
        if isinstance(id_, bool) or not isinstance(id_, (int, str)):
            return None
        body = dict(self.body)
        body["id"] = id_ + info.number - 1 if isinstance(id_, int) else f"{id_}-{info.number}"
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

// The SSE driver against a scripted server (node:http): each request gets the next reply of
// the script, and what it asked for is recorded. The core decides; these check that the
// driver hands it the host's facts and performs what it asks, exactly.
import assert from "node:assert/strict";
import http from "node:http";
import { after, test } from "node:test";

import { TetherError, TetherSse } from "../dist/node/index.js";

/** A server answering its `n`-th request with `script[n]`; `requests` records each. */
async function scripted(script) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      requests.push({
        method: req.method,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      const reply = script[requests.length - 1];
      if (reply === undefined) {
        res.writeHead(500).end("no more script");
        return;
      }
      reply(res);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${server.address().port}/events`, requests };
}

/** A 200 `text/event-stream` with `events` (`[id, data]`, each with `retry`); `end` ends it. */
function stream(events, { end = false, retry = 500 } = {}) {
  return (res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    for (const [id, data] of events) {
      res.write(`retry: ${retry}\n${id === undefined ? "" : `id: ${id}\n`}data: ${data}\n\n`);
    }
    if (end) res.end();
  };
}

/** Items of `sse` until `stop(item)` says so (that one included); then the stream closes. */
async function collect(sse, stop = () => false) {
  const items = [];
  for await (const item of sse) {
    items.push(item);
    if (stop(item)) break;
  }
  return items;
}

test("a GET stream cut by the server resumes with Last-Event-ID", async () => {
  const { url, requests } = await scripted([
    stream(
      [
        ["1", "one"],
        ["2", "two"],
      ],
      { end: true },
    ),
    stream([["3", "three"]]),
  ]);
  const sse = new TetherSse(url, { seed: 5, request: { headers: { "X-Test": "yes" } } });
  const items = await collect(sse, (item) => item.type === "message" && item.id === "3");
  assert.deepEqual(
    items.map((item) => item.type),
    ["open", "message", "message", "reconnecting", "reconnected", "message"],
  );
  assert.deepEqual(items[1], { type: "message", event: "message", data: "one", id: "1" });
  const { in_ms: inMs, ...reconnecting } = items[3];
  assert.deepEqual(reconnecting, {
    type: "reconnecting",
    last_event_id: "2",
    attempt: 1,
    why: "eof",
    reason: "stream ended",
  });
  // `retry: 500` is a floor: the jitter only adds, by up to 20%.
  assert.ok(inMs >= 490 && inMs <= 600, `in_ms ${inMs}`);
  assert.equal(sse.lastEventId(), "3");
  assert.deepEqual(
    requests.map((r) => [r.method, r.headers["x-test"], r.headers["last-event-id"]]),
    [
      ["GET", "yes", undefined],
      ["GET", "yes", "2"],
    ],
  );
  // The core's defaults go with every request.
  for (const r of requests) {
    assert.equal(r.headers.accept, "text/event-stream");
    assert.equal(r.headers["cache-control"], "no-cache");
    assert.equal(r.headers["accept-encoding"], "identity");
  }
});

test("a POST stream (MCP-style) ends on the JSON-RPC response and is sent once", async () => {
  const call = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count"}}';
  const { url, requests } = await scripted([
    (res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write('data: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n');
      // The response; the server keeps the stream open after it.
      res.write('id: 7\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n');
    },
  ]);
  const sse = new TetherSse(url, {
    request: {
      method: "POST",
      headers: [
        ["Content-Type", "application/json"],
        ["Accept", "application/json, text/event-stream"],
      ],
      body: call,
      endOnJsonrpcResponse: true,
    },
  });
  const items = await collect(sse);
  assert.deepEqual(items, [
    { type: "open" },
    {
      type: "message",
      event: "message",
      data: '{"jsonrpc":"2.0","method":"notifications/progress"}',
      id: "",
    },
    { type: "message", event: "message", data: '{"jsonrpc":"2.0","id":1,"result":{}}', id: "7" },
    { type: "ended", why: "response", events: 2, last_event_id: "7" },
  ]);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].method, "POST");
  assert.equal(requests[0].body, call);
  assert.equal(requests[0].headers["content-type"], "application/json");
  assert.equal(requests[0].headers.accept, "application/json, text/event-stream");
});

test("a 503 with Retry-After is waited out, then the stream opens", async () => {
  const { url, requests } = await scripted([
    (res) => res.writeHead(503, { "Retry-After": "1" }).end("busy"),
    stream([["1", "a"]]),
  ]);
  const started = performance.now();
  const sse = new TetherSse(url, { seed: 5 });
  const items = await collect(sse, (item) => item.type === "message");
  const waited = performance.now() - started;
  const { in_ms: inMs, ...reconnecting } = items[0];
  assert.deepEqual(reconnecting, {
    type: "reconnecting",
    last_event_id: "",
    attempt: 1,
    why: "status",
    status: 503,
    reason: "HTTP status 503",
  });
  assert.ok(inMs >= 1000 && inMs <= 1200, `in_ms ${inMs}`);
  assert.ok(waited >= 990, `the second request went after ${waited} ms`);
  assert.deepEqual(
    items.slice(1).map((item) => item.type),
    ["open", "message"],
  );
  assert.equal(requests.length, 2);
});

test("a POST refused with 400 fails with the body's excerpt and is not sent again", async () => {
  const { url, requests } = await scripted([
    (res) => res.writeHead(400, { "Content-Type": "application/json" }).end('{"error":"bad"}'),
  ]);
  const sse = new TetherSse(url, { request: { method: "POST", body: "{}" } });
  const items = await collect(sse);
  assert.equal(items.length, 1);
  assert.deepEqual(
    { type: items[0].type, kind: items[0].kind, status: items[0].status, body: items[0].body },
    { type: "failed", kind: "rejected", status: 400, body: '{"error":"bad"}' },
  );
  assert.equal(requests.length, 1);
});

test("a POST answered with 302 is not followed as a GET: the core refuses the redirect", async () => {
  const { url, requests } = await scripted([
    (res) => res.writeHead(302, { Location: "/elsewhere" }).end(),
  ]);
  const sse = new TetherSse(url, { request: { method: "POST", body: "{}" } });
  const items = await collect(sse);
  assert.equal(items.length, 1);
  assert.equal(items[0].type, "failed");
  assert.equal(items[0].kind, "redirect");
  assert.equal(items[0].status, 302);
  assert.equal(requests.length, 1);
});

test("a 307 is followed with the same method and body, to the Location", async () => {
  const { url, requests } = await scripted([
    (res) => res.writeHead(307, { Location: "/moved" }).end(),
    stream([["1", "a"]]),
  ]);
  const sse = new TetherSse(url, { request: { method: "POST", body: "{}" } });
  const items = await collect(sse, (item) => item.type === "message");
  assert.deepEqual(
    items.map((item) => item.type),
    ["open", "message"],
  );
  assert.deepEqual(
    requests.map((r) => [r.method, r.body]),
    [
      ["POST", "{}"],
      ["POST", "{}"],
    ],
  );
});

test("the per-attempt builder gives each attempt its own header", async () => {
  const { url, requests } = await scripted([
    stream([["1", "a"]], { end: true }),
    stream([["2", "b"]]),
  ]);
  const seen = [];
  const sse = new TetherSse(url, {
    seed: 5,
    request: { headers: [["Authorization", "Bearer stale"]] },
    perAttempt: async (info) => {
      seen.push(info);
      return { headers: { Authorization: `Bearer t${info.number}` } };
    },
  });
  await collect(sse, (item) => item.type === "message" && item.id === "2");
  assert.deepEqual(seen, [
    { number: 1, attempt: "original", after: null },
    // A GET's policy sends the same request again (with Last-Event-ID): the core names it
    // `original`.
    { number: 2, attempt: "original", after: "eof" },
  ]);
  assert.deepEqual(
    requests.map((r) => r.headers.authorization),
    ["Bearer t1", "Bearer t2"],
  );
});

test("a builder that throws fails the stream as a local error; nothing is sent", async () => {
  const { url, requests } = await scripted([stream([["1", "a"]])]);
  const sse = new TetherSse(url, {
    perAttempt: () => {
      throw new Error("no token");
    },
  });
  const items = await collect(sse);
  assert.equal(items.length, 1);
  assert.equal(items[0].type, "failed");
  assert.equal(items[0].kind, "invalid_request");
  assert.match(items[0].reason, /no token/);
  assert.equal(requests.length, 0);
});

test("a checkpoint resumes a new stream from the last event id", async () => {
  const { url, requests } = await scripted([
    stream([
      ["1", "a"],
      ["2", "b"],
    ]),
    stream([["3", "c"]]),
  ]);
  const first = new TetherSse(url, { seed: 1 });
  await collect(first, (item) => item.type === "message" && item.id === "2");
  const checkpoint = first.checkpoint();
  const second = new TetherSse(url, { seed: 1, checkpoint });
  const items = await collect(second, (item) => item.type === "message");
  assert.equal(items.at(-1).data, "c");
  assert.equal(requests[1].headers["last-event-id"], "2");
});

test("a reader slower than the server loses nothing and gets every event in order", async () => {
  const total = 3000;
  const body = Array.from({ length: total }, (_, i) => `id: ${i}\ndata: ${i}\n\n`).join("");
  const { url } = await scripted([
    (res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(body);
    },
  ]);
  // A buffer far smaller than what one chunk holds: the core's own queue fills and takes
  // fewer bytes than offered; the driver holds the rest until the reader pulls.
  const sse = new TetherSse(url, { bufferItems: 4 });
  const data = [];
  for await (const item of sse) {
    if (item.type !== "message") continue;
    data.push(Number(item.data));
    if (data.length % 100 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    if (data.length === total) break;
  }
  assert.deepEqual(
    data,
    Array.from({ length: total }, (_, i) => i),
  );
});

test("an abort signal closes the stream: a closed item, then the iterator ends", async () => {
  const { url } = await scripted([stream([["1", "a"]])]);
  const abort = new AbortController();
  const sse = new TetherSse(url, { signal: abort.signal });
  const items = [];
  for await (const item of sse) {
    items.push(item);
    if (item.type === "message") abort.abort();
  }
  assert.deepEqual(
    items.map((item) => item.type),
    ["open", "message", "closed"],
  );
  assert.equal(items[2].reason, "closed");
});

test("a refused connection is reported with the core's loss name", async () => {
  // A port that was free a moment ago: nothing listens there.
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  const sse = new TetherSse(`http://127.0.0.1:${port}/events`, { seed: 5 });
  const items = await collect(sse, (item) => item.type === "reconnecting");
  assert.equal(items[0].type, "reconnecting");
  assert.equal(items[0].why, "connection_refused");
});

test("a port fetch refuses to dial is a local failure, not a loss retried forever", async () => {
  // Port 1 is on the fetch spec's "bad port" list.
  const sse = new TetherSse("http://127.0.0.1:1/events");
  const items = await collect(sse);
  assert.equal(items.length, 1);
  assert.equal(items[0].type, "failed");
  assert.equal(items[0].kind, "invalid_request");
});

test("a URL that is not http(s) or has a bad port throws before anything is sent", () => {
  assert.throws(() => new TetherSse("ws://127.0.0.1:1/"), TetherError);
  assert.throws(
    () => new TetherSse("http://127.0.0.1:99999/"),
    (error) => error instanceof TetherError && /port 99999/.test(error.message),
  );
  assert.throws(
    () => new TetherSse("http://127.0.0.1:1/", { request: { resume: "sometimes" } }),
    (error) => error instanceof TetherError && error.kind === "InvalidArgument",
  );
});

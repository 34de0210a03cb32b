// A relay routing opened from a stranger's relay list is dialed at public addresses only:
// the Node host checks every address its name resolves to with the core's rule and refuses
// the socket before a byte goes out when any is private (a name pointing into the network is
// refused as its address in the URL would be).
import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";

import { WebSocketServer } from "ws";

import { isPrivateIp, nodeHost } from "tether-js/node";

/** Open one socket through the Node host; resolves with what it reported first. */
function dial(url, publicOnly) {
  return new Promise((resolve) => {
    const socket = nodeHost().connect(
      url,
      {
        opened: () => {
          socket.close();
          resolve({ opened: true });
        },
        text: () => undefined,
        binary: () => undefined,
        pong: () => undefined,
        closed: (loss) => resolve({ opened: false, loss }),
      },
      { publicOnly },
    );
  });
}

test("the core's rule names private addresses in every form", () => {
  assert.equal(isPrivateIp("127.0.0.1"), true);
  assert.equal(isPrivateIp("10.1.2.3"), true);
  assert.equal(isPrivateIp("::1"), true);
  assert.equal(isPrivateIp("::ffff:192.168.1.1"), true);
  assert.equal(isPrivateIp("93.184.216.34"), false);
  assert.throws(() => isPrivateIp("localhost"), { kind: "InvalidArgument" });
});

test("a public-only relay whose name resolves to loopback is never dialed", async () => {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await once(server, "listening");
  let accepted = 0;
  server.on("connection", (socket) => {
    accepted += 1;
    socket.close();
  });
  const url = `ws://localhost:${server.address().port}`;
  try {
    assert.deepEqual(await dial(url, true), { opened: false, loss: "connection_refused" });
    assert.equal(accepted, 0, "nothing reached the server");
    // The application's own relay at the same name is dialed as it asked.
    assert.deepEqual(await dial(url, false), { opened: true });
    assert.equal(accepted, 1);
  } finally {
    server.close();
  }
});

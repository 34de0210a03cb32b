"""A relay routing opened from a stranger's relay list is dialed at public addresses only:
the driver resolves its name, checks every address with the core's rule and dials none when
any is private, so a name pointing into the network is refused as its address in the URL
would be."""

from __future__ import annotations

import asyncio

import pytest

import tether
from tether import _ffi
from tether.driver import open_websocket


def test_the_cores_rule_names_private_addresses_in_every_form():
    assert tether.is_private_ip("127.0.0.1")
    assert tether.is_private_ip("10.1.2.3")
    assert tether.is_private_ip("::1")
    assert tether.is_private_ip("::ffff:192.168.1.1")
    assert not tether.is_private_ip("93.184.216.34")
    with pytest.raises(tether.TetherError):
        tether.is_private_ip("localhost")


def test_a_public_only_relay_resolving_to_loopback_is_never_dialed():
    from websockets.asyncio.server import serve

    async def run() -> tuple[list, int, bool]:
        accepted = 0

        async def handler(ws) -> None:
            nonlocal accepted
            accepted += 1
            await ws.close()

        async with serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            url = f"ws://localhost:{port}"
            lost: list = []

            async def put(item) -> None:
                lost.append(item)

            refused = await open_websocket(url, 1 << 20, put, (7,), public_only=True)
            refused_accepted = accepted
            # The application's own relay at the same name is dialed as asked.
            ws = await open_websocket(url, 1 << 20, put, (8,))
            opened = ws is not None
            if ws is not None:
                await ws.close()
            assert refused is None
            return lost, refused_accepted, opened

    lost, accepted, opened = asyncio.run(run())
    assert lost == [("lost", 7, _ffi.LOSS_CONNECTION_REFUSED, -1)]
    assert accepted == 0
    assert opened

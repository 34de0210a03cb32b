"""tether over its C ABI: sans-IO Nostr relay and SSE sessions, and an asyncio driver.

The sessions (:class:`Relay`, :class:`Pool`, :class:`Sse`) make every protocol decision
inside the Rust core; this package only moves bytes and time in and out of them.
"""

from ._ffi import (
    ABI_VERSION,
    LOSS_CLOSED_BY_PEER,
    LOSS_CONNECTION_REFUSED,
    LOSS_FRAME_TOO_LARGE,
    LOSS_HANDSHAKE_FAILED,
    LOSS_NETWORK_ERROR,
    LOSS_TLS_REJECTED,
    Pool,
    Relay,
    Sse,
    TetherError,
    is_private_ip,
    library_path,
    verify_event,
    verify_events,
)

__version__ = "0.1.0"
"""The version of the tether workspace this package is built from."""

__all__ = [
    "__version__",
    "ABI_VERSION",
    "LOSS_CLOSED_BY_PEER",
    "LOSS_CONNECTION_REFUSED",
    "LOSS_FRAME_TOO_LARGE",
    "LOSS_HANDSHAKE_FAILED",
    "LOSS_NETWORK_ERROR",
    "LOSS_TLS_REJECTED",
    "Pool",
    "Relay",
    "Sse",
    "TetherError",
    "is_private_ip",
    "library_path",
    "verify_event",
    "verify_events",
]

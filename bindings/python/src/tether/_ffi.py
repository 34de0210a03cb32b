"""The C ABI of tether-ffi through ctypes: loading the library and one class per handle.

Every method mirrors one ``tether_*`` function. Error codes become :class:`TetherError`
(with the handle's last error message); ``TETHER_DONE`` becomes ``None``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
from pathlib import Path
from typing import Any

ABI_VERSION = 1

OK = 0
DONE = 1
ERR_BUFFER_TOO_SMALL = -1
ERR_NULL = -2
ERR_UTF8 = -3
ERR_INVALID_ARGUMENT = -4
ERR_UNKNOWN_ID = -5
ERR_WRONG_STATE = -6
ERR_LIMIT = -7
ERR_PANIC = -8
ERR_POISONED = -9
ERR_INVALID_URL = -10
ERR_CHECKPOINT = -11
ERR_CHECKPOINT_NEWER = -12

URL_RELAY = 1
URL_SSE = 2

LOSS_CONNECTION_REFUSED = 1
LOSS_TLS_REJECTED = 2
LOSS_HANDSHAKE_FAILED = 3
LOSS_CLOSED_BY_PEER = 4
LOSS_FRAME_TOO_LARGE = 5
LOSS_NETWORK_ERROR = 6
LOSS_OUT_OF_FILES = 7

LIFECYCLE_SUSPENDED = 1
LIFECYCLE_RESUMED = 2
LIFECYCLE_NETWORK_CHANGED = 3
LIFECYCLE_NETWORK_GONE = 4
LIFECYCLE_ONLINE = 5
LIFECYCLE_OFFLINE = 6

_CODE_NAMES = {
    ERR_BUFFER_TOO_SMALL: "buffer too small",
    ERR_NULL: "null pointer",
    ERR_UTF8: "invalid UTF-8",
    ERR_INVALID_ARGUMENT: "invalid argument",
    ERR_UNKNOWN_ID: "unknown id",
    ERR_WRONG_STATE: "wrong state",
    ERR_LIMIT: "limit reached",
    ERR_PANIC: "panic inside the library (handle poisoned)",
    ERR_POISONED: "handle poisoned",
    ERR_INVALID_URL: "invalid URL",
    ERR_CHECKPOINT: "not a checkpoint of this kind",
    ERR_CHECKPOINT_NEWER: "a checkpoint of a newer format",
}


class TetherError(Exception):
    """A call returned an error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{_CODE_NAMES.get(code, code)}: {message}" if message else str(code))
        self.code = code
        self.message = message


def _library_name() -> str:
    if sys.platform == "darwin":
        return "libtether_ffi.dylib"
    if sys.platform == "win32":
        return "tether_ffi.dll"
    return "libtether_ffi.so"


def library_path() -> Path:
    """Where the library is: ``$TETHER_LIBRARY``, else the one the wheel carries
    (``tether/_native*``), else ``release/`` under ``$CARGO_TARGET_DIR``, else the
    ``target/release`` of the workspace above the current directory or this file."""
    named = os.environ.get("TETHER_LIBRARY")
    if named:
        return Path(named)
    bundled = _bundled()
    if bundled is not None:
        return bundled
    name = _library_name()
    target = os.environ.get("CARGO_TARGET_DIR")
    if target and (Path(target) / "release" / name).exists():
        return Path(target) / "release" / name
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for directory in (start, *start.parents):
            candidate = directory / "target" / "release" / name
            if candidate.exists():
                return candidate
    raise OSError(
        f"{name} not found: build it with `cargo build --release -p tether-ffi` "
        "and set TETHER_LIBRARY to its path"
    )


def _bundled() -> Path | None:
    """The library a wheel installed beside this module, if any."""
    import importlib.machinery

    here = Path(__file__).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / f"_native{suffix}"
        if candidate.exists():
            return candidate
    return None


_VERDICTS = {
    0: None,
    2: "malformed",
    3: "bad_id",
    4: "malformed_pubkey",
    5: "malformed_signature",
    6: "bad_signature",
}
"""``tether_verify_event``'s codes: ``None`` for a genuine event, else why not."""


def verify_event(event: str | bytes) -> str | None:
    """Check one event's JSON object (id and BIP-340 signature, libsecp256k1): ``None`` when
    it is genuine, else ``malformed``, ``bad_id``, ``malformed_pubkey``,
    ``malformed_signature`` or ``bad_signature``. No handle: call it from any thread; ctypes
    releases the GIL around the check, so threads verify in parallel."""
    raw = event.encode("utf-8") if isinstance(event, str) else event
    code = releasing().tether_verify_event(raw, len(raw))
    if code in _VERDICTS:
        return _VERDICTS[code]
    raise TetherError(code, "tether_verify_event")


def verify_events(events: list[str]) -> list[str | None]:
    """:func:`verify_event` for a batch in one foreign call: the GIL is released once for
    all of them, not taken back after each (which, with other threads busy, costs more than
    the check)."""
    raws = [e.encode("utf-8") if isinstance(e, str) else e for e in events]
    n = len(raws)
    if n == 0:
        return []
    pointers = (ctypes.c_char_p * n)(*raws)
    lengths = (ctypes.c_size_t * n)(*(len(r) for r in raws))
    out = (ctypes.c_int32 * n)()
    code = releasing().tether_verify_events(pointers, lengths, n, out)
    if code != OK:
        raise TetherError(code, "tether_verify_events")
    verdicts = []
    for code in out:
        if code not in _VERDICTS:
            raise TetherError(code, "tether_verify_events")
        verdicts.append(_VERDICTS[code])
    return verdicts


class RelayConfig(ctypes.Structure):
    """``TetherRelayConfig``, version 2 (``info_refresh_ms``)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("gate_per_session", ctypes.c_uint32),
        ("seed", ctypes.c_uint64),
        ("max_subscriptions", ctypes.c_uint64),
        ("max_frame", ctypes.c_uint64),
        ("eose_timeout_ms", ctypes.c_uint64),
        ("publish_timeout_ms", ctypes.c_uint64),
        ("info_refresh_ms", ctypes.c_uint64),
    ]


class PoolConfig(ctypes.Structure):
    """``TetherPoolConfig``, version 3 (routing by people: ``outbox_*``)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("gate_per_session", ctypes.c_uint32),
        ("seed", ctypes.c_uint64),
        ("max_subscriptions", ctypes.c_uint64),
        ("max_frame", ctypes.c_uint64),
        ("eose_timeout_ms", ctypes.c_uint64),
        ("publish_timeout_ms", ctypes.c_uint64),
        ("info_refresh_ms", ctypes.c_uint64),
        ("verify", ctypes.c_uint32),
        ("max_unverified", ctypes.c_uint32),
        ("eose_deadline_ms", ctypes.c_uint64),
        ("after_first_eose_ms", ctypes.c_uint64),
        ("publish_deadline_ms", ctypes.c_uint64),
        ("max_relays", ctypes.c_uint32),
        ("max_pool_subscriptions", ctypes.c_uint32),
        ("dedup_capacity", ctypes.c_uint32),
        ("seen_on_max", ctypes.c_uint32),
        ("max_connecting", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("outbox_max_relays", ctypes.c_uint32),
        ("outbox_redundancy", ctypes.c_uint32),
        ("outbox_indexers", ctypes.c_char_p),
    ]


class SseConfig(ctypes.Structure):
    """``TetherSseConfig``, version 1."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("seed", ctypes.c_uint64),
        ("idle_timeout_ms", ctypes.c_uint64),
        ("connect_timeout_ms", ctypes.c_uint64),
    ]


_U8P = ctypes.POINTER(ctypes.c_uint8)
_SIZEP = ctypes.POINTER(ctypes.c_size_t)
_U64P = ctypes.POINTER(ctypes.c_uint64)
_U32P = ctypes.POINTER(ctypes.c_uint32)
_I32 = ctypes.c_int32
_U64 = ctypes.c_uint64
_U32 = ctypes.c_uint32
_SIZE = ctypes.c_size_t
_P = ctypes.c_void_p

_SIGNATURES = {
    "tether_abi_version": (ctypes.c_uint32, []),
    "tether_relay_config_default": (_I32, [ctypes.POINTER(RelayConfig)]),
    "tether_relay_new": (_I32, [ctypes.POINTER(RelayConfig), ctypes.POINTER(_P)]),
    "tether_relay_free": (None, [_P]),
    "tether_relay_last_error": (_I32, [_P, _U8P, _SIZEP]),
    "tether_relay_set_wall_clock": (_I32, [_P, _U64, _U64]),
    "tether_relay_connect": (_I32, [_P, _U64]),
    "tether_relay_disconnect": (_I32, [_P, _U64]),
    "tether_relay_lifecycle": (_I32, [_P, _U64, _U32]),
    "tether_relay_subscribe": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, ctypes.c_int32, _U64P]),
    "tether_relay_unsubscribe": (_I32, [_P, _U64, _U64]),
    "tether_relay_publish": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, _U8P]),
    "tether_relay_authenticate": (_I32, [_P, _U64, _U64, ctypes.c_char_p, _SIZE, _U8P]),
    "tether_relay_handle_open": (_I32, [_P, _U64, _U64]),
    "tether_relay_handle_close": (_I32, [_P, _U64, _U64, _U32, ctypes.c_int32]),
    "tether_relay_handle_frame": (_I32, [_P, _U64, _U64, ctypes.c_char_p, _SIZE]),
    "tether_relay_handle_binary": (_I32, [_P, _U64, _U64, _SIZE]),
    "tether_relay_handle_pong": (_I32, [_P, _U64, _U64]),
    "tether_relay_handle_read_paused": (_I32, [_P, _U64, _U32]),
    "tether_relay_handle_timeout": (_I32, [_P, _U64]),
    "tether_relay_poll_transmit": (_I32, [_P, _U8P, _SIZEP]),
    "tether_relay_poll_event": (_I32, [_P, _U8P, _SIZEP]),
    "tether_relay_poll_timeout": (_I32, [_P, _U64P]),
    "tether_sse_config_default": (_I32, [ctypes.POINTER(SseConfig)]),
    "tether_sse_new": (_I32, [ctypes.POINTER(SseConfig), ctypes.POINTER(_P)]),
    "tether_verify_event": (_I32, [ctypes.c_char_p, _SIZE]),
    "tether_public_key": (_I32, [_U8P, _U8P]),
    "tether_sign_schnorr": (_I32, [_U8P, _U8P, ctypes.c_char_p, _U8P]),
    "tether_sign_event": (
        _I32,
        [_U8P, _U64, _U32, ctypes.c_char_p, _SIZE, ctypes.c_char_p, _SIZE]
        + [ctypes.c_char_p, _U8P, _SIZEP],
    ),
    "tether_sign_auth": (
        _I32,
        [_U8P, ctypes.c_char_p, _SIZE, ctypes.c_char_p, _SIZE, _U64, ctypes.c_char_p]
        + [_U8P, _SIZEP],
    ),
    "tether_verify_events": (
        _I32,
        [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(_SIZE), _SIZE, ctypes.POINTER(_I32)],
    ),
    "tether_sse_new_request": (
        _I32,
        [ctypes.POINTER(SseConfig), ctypes.c_char_p, _SIZE, ctypes.POINTER(_P)],
    ),
    "tether_sse_free": (None, [_P]),
    "tether_sse_last_error": (_I32, [_P, _U8P, _SIZEP]),
    "tether_sse_last_event_id": (_I32, [_P, _U8P, _SIZEP]),
    "tether_sse_set_wall_clock": (_I32, [_P, _U64, _U64]),
    "tether_sse_connect": (_I32, [_P, _U64]),
    "tether_sse_disconnect": (_I32, [_P, _U64]),
    "tether_sse_lifecycle": (_I32, [_P, _U64, _U32]),
    "tether_sse_handle_response": (
        _I32,
        [_P, _U64, _U64, ctypes.c_uint16, ctypes.c_char_p, _SIZE, ctypes.c_char_p, _SIZE],
    ),
    "tether_sse_handle_head": (
        _I32,
        [_P, _U64, _U64, ctypes.c_uint16] + [ctypes.c_char_p, _SIZE] * 5,
    ),
    "tether_sse_handle_bytes": (_I32, [_P, _U64, _U64, ctypes.c_char_p, _SIZE, _SIZEP]),
    "tether_sse_handle_eof": (_I32, [_P, _U64, _U64]),
    "tether_sse_handle_error": (_I32, [_P, _U64, _U64, _U32]),
    "tether_sse_handle_request_invalid": (_I32, [_P, _U64, _U64, ctypes.c_char_p, _SIZE]),
    "tether_sse_handle_read_paused": (_I32, [_P, _U64, _U32]),
    "tether_sse_handle_timeout": (_I32, [_P, _U64]),
    "tether_sse_poll_transmit": (_I32, [_P, _U8P, _SIZEP]),
    "tether_sse_poll_event": (_I32, [_P, _U8P, _SIZEP]),
    "tether_sse_poll_timeout": (_I32, [_P, _U64P]),
    "tether_check_url": (_I32, [ctypes.c_char_p, _SIZE, _U32, _U8P, _SIZEP]),
    "tether_normalize_url": (_I32, [ctypes.c_char_p, _SIZE, _U8P, _SIZEP]),
    "tether_is_private_ip": (_I32, [ctypes.c_char_p, _SIZE, _U32P]),
    "tether_relay_checkpoint": (_I32, [_P, _U8P, _SIZEP]),
    "tether_relay_restore": (
        _I32,
        [
            ctypes.POINTER(RelayConfig),
            ctypes.c_char_p,
            _SIZE,
            _U64,
            _U64,
            ctypes.POINTER(_P),
            _U8P,
            _SIZEP,
        ],
    ),
    "tether_relay_apply_relay_info": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, _U8P, _SIZEP]),
    "tether_pool_config_default": (_I32, [ctypes.POINTER(PoolConfig)]),
    "tether_pool_new": (_I32, [ctypes.POINTER(PoolConfig), ctypes.POINTER(_P)]),
    "tether_pool_free": (None, [_P]),
    "tether_pool_last_error": (_I32, [_P, _U8P, _SIZEP]),
    "tether_pool_set_wall_clock": (_I32, [_P, _U64, _U64]),
    "tether_pool_lifecycle": (_I32, [_P, _U64, _U32]),
    "tether_pool_add_relay": (_I32, [_P, _U64, ctypes.POINTER(_U32)]),
    "tether_pool_add_relay_url": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, ctypes.POINTER(_U32)]),
    "tether_pool_name_relay": (_I32, [_P, _U32, ctypes.c_char_p, _SIZE]),
    "tether_pool_remove_relay": (_I32, [_P, _U64, _U32]),
    "tether_pool_subscribe": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, _U64P]),
    "tether_pool_subscribe_routed": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, _U64P]),
    "tether_pool_subscribe_outbox": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, _U64P]),
    "tether_pool_handle_relay_list": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE]),
    "tether_pool_publish_outbox": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, _U8P]),
    "tether_pool_handle_liveness": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE]),
    "tether_pool_hint_live": (_I32, [_P, _U64, ctypes.c_char_p, _SIZE, _U32]),
    "tether_pool_unsubscribe": (_I32, [_P, _U64, _U64]),
    "tether_pool_publish": (
        _I32,
        [_P, _U64, ctypes.c_char_p, _SIZE, ctypes.POINTER(_U32), _SIZE, _U8P],
    ),
    "tether_pool_authenticate": (_I32, [_P, _U64, _U32, _U64, ctypes.c_char_p, _SIZE, _U8P]),
    "tether_pool_apply_relay_info": (
        _I32,
        [_P, _U64, _U32, ctypes.c_char_p, _SIZE, _U8P, _SIZEP],
    ),
    "tether_pool_handle_open": (_I32, [_P, _U64, _U32, _U64]),
    "tether_pool_handle_close": (_I32, [_P, _U64, _U32, _U64, _U32, ctypes.c_int32]),
    "tether_pool_handle_frame": (_I32, [_P, _U64, _U32, _U64, ctypes.c_char_p, _SIZE]),
    "tether_pool_handle_binary": (_I32, [_P, _U64, _U32, _U64, _SIZE]),
    "tether_pool_handle_pong": (_I32, [_P, _U64, _U32, _U64]),
    "tether_pool_handle_read_paused": (_I32, [_P, _U64, _U32, _U32]),
    "tether_pool_handle_timeout": (_I32, [_P, _U64]),
    "tether_pool_poll_transmit": (_I32, [_P, _U8P, _SIZEP]),
    "tether_pool_poll_event": (_I32, [_P, _U8P, _SIZEP]),
    "tether_pool_poll_verify": (_I32, [_P, _U8P, _SIZEP]),
    "tether_pool_handle_verified": (_I32, [_P, _U64, _U64, _I32, ctypes.c_char_p, _SIZE]),
    "tether_pool_poll_timeout": (_I32, [_P, _U64P]),
    "tether_pool_public_only": (_I32, [_P, _U32, _U32P]),
    "tether_pool_relay_stats": (_I32, [_P, _U32, _U8P, _SIZEP]),
    "tether_pool_checkpoint": (_I32, [_P, _U8P, _SIZEP]),
    "tether_pool_restore": (
        _I32,
        [
            ctypes.POINTER(PoolConfig),
            ctypes.c_char_p,
            _SIZE,
            _U64,
            _U64,
            ctypes.POINTER(_P),
            _U8P,
            _SIZEP,
        ],
    ),
    "tether_sse_checkpoint": (_I32, [_P, _U32, _U8P, _SIZEP]),
    "tether_sse_restore": (
        _I32,
        [ctypes.POINTER(SseConfig), ctypes.c_char_p, _SIZE, ctypes.POINTER(_P), _U8P, _SIZEP],
    ),
    "tether_sse_restore_request": (
        _I32,
        [ctypes.POINTER(SseConfig), ctypes.c_char_p, _SIZE, ctypes.c_char_p, _SIZE]
        + [ctypes.POINTER(_P), _U8P, _SIZEP],
    ),
}

_lib: ctypes.CDLL | None = None
_released: ctypes.CDLL | None = None

_RELEASING = ("tether_verify_event", "tether_verify_events")
"""The calls that let go of the GIL: signature checks, long enough to run in parallel on
threads. Every other call is microseconds and never blocks, and holding the GIL through it
spares a hand-off between threads on each call (with a verifier thread busy, taking the GIL
back cost more than the call itself)."""


def lib() -> ctypes.CDLL:
    """The loaded library, its prototypes declared and its ABI version checked. Its calls
    keep the GIL (see :func:`releasing`)."""
    global _lib, _released
    if _lib is None:
        path = str(library_path())
        loaded = ctypes.PyDLL(path)
        released = ctypes.CDLL(path)
        for name, (restype, argtypes) in _SIGNATURES.items():
            for handle in (loaded, released) if name in _RELEASING else (loaded,):
                function = getattr(handle, name)
                function.restype = restype
                function.argtypes = argtypes
        version = loaded.tether_abi_version()
        if version != ABI_VERSION:
            raise OSError(f"the library speaks ABI {version}, this package {ABI_VERSION}")
        _lib, _released = loaded, released
    return _lib


def releasing() -> ctypes.CDLL:
    """The library for the calls that release the GIL while they run (:data:`_RELEASING`)."""
    lib()
    assert _released is not None
    return _released


def check_url(url: str, kind: int) -> str | None:
    """Why ``url`` fails tether's URL rule for ``kind`` (``URL_RELAY``: ws:// or wss://,
    ``URL_SSE``: http:// or https://), worded as the Rust entry points word it, or ``None``
    when it passes (``tether_check_url``). A ``url`` holding undecodable bytes (from
    ``surrogateescape``) fails as not UTF-8."""
    data = url.encode("utf-8", "surrogateescape")
    why = (ctypes.c_uint8 * 512)()
    while True:
        length = ctypes.c_size_t(len(why))
        code = lib().tether_check_url(data, len(data), kind, why, ctypes.byref(length))
        if code == ERR_BUFFER_TOO_SMALL:
            why = (ctypes.c_uint8 * length.value)()
            continue
        message = bytes(memoryview(why)[: length.value]).decode("utf-8", "replace")
        if code == OK:
            return None
        if code in (ERR_INVALID_URL, ERR_UTF8):
            return message
        raise TetherError(code, message)


def normalize_url(url: str) -> str:
    """Which relay ``url`` is: its normal form (``tether_normalize_url``), equal for two URLs
    exactly when they are one relay. :class:`TetherError` for a URL that is no relay URL."""
    data = url.encode("utf-8", "surrogateescape")
    out = (ctypes.c_uint8 * 512)()
    while True:
        length = ctypes.c_size_t(len(out))
        code = lib().tether_normalize_url(data, len(data), out, ctypes.byref(length))
        if code == ERR_BUFFER_TOO_SMALL:
            out = (ctypes.c_uint8 * length.value)()
            continue
        text = bytes(memoryview(out)[: length.value]).decode("utf-8", "replace")
        if code != OK:
            raise TetherError(code, text)
        return text


def is_private_ip(address: str) -> bool:
    """Whether ``address`` (an IP address as text) is one a relay from a stranger's relay
    list may not be dialed at (``tether_is_private_ip``: the core's rule, loopback, private,
    link-local, in their mapped and NAT64 forms too). :class:`TetherError` for text that is
    not an address."""
    data = address.encode("utf-8", "surrogateescape")
    out = ctypes.c_uint32()
    code = lib().tether_is_private_ip(data, len(data), ctypes.byref(out))
    if code != OK:
        raise TetherError(code, f"{address!r} is not an IP address")
    return out.value == 1


def _restored(make) -> ctypes.c_void_p:
    """Call a ``tether_*_restore`` (``make(out, why, why_len)``): the new handle's pointer, or
    :class:`TetherError` with the library's reason."""
    why = (ctypes.c_uint8 * 512)()
    while True:
        pointer = ctypes.c_void_p()
        length = ctypes.c_size_t(len(why))
        code = make(ctypes.byref(pointer), why, ctypes.byref(length))
        if code == ERR_BUFFER_TOO_SMALL:
            why = (ctypes.c_uint8 * length.value)()
            continue
        if code != OK:
            message = bytes(memoryview(why)[: length.value]).decode("utf-8", "replace")
            raise TetherError(code, message)
        return pointer


class _Handle:
    """What both handles share: the pointer, error reporting and polling into a buffer."""

    _prefix = ""

    def __init__(self, pointer: ctypes.c_void_p) -> None:
        self._ptr = pointer
        self._buf = (ctypes.c_uint8 * 65536)()
        self._len = ctypes.c_size_t(0)

    def _fn(self, name: str):
        return getattr(lib(), f"tether_{self._prefix}_{name}")

    def _check(self, code: int) -> int:
        if code < 0:
            raise TetherError(code, self.last_error())
        return code

    def _call(self, name: str, *args: Any) -> int:
        return self._check(self._fn(name)(self._ptr, *args))

    def last_error(self) -> str:
        """The message of the last failed call."""
        return self._copy("last_error").decode("utf-8", "replace")

    def _copy(self, name: str, *args: Any) -> bytes:
        """Call a function that copies bytes out (``args`` before the buffer), growing the
        buffer when asked to."""
        while True:
            self._len.value = len(self._buf)
            code = self._fn(name)(self._ptr, *args, self._buf, ctypes.byref(self._len))
            if code == ERR_BUFFER_TOO_SMALL:
                self._buf = (ctypes.c_uint8 * self._len.value)()
                continue
            if code == DONE:
                return b""
            if code < 0:
                raise TetherError(code, "" if name == "last_error" else self.last_error())
            return bytes(memoryview(self._buf)[: self._len.value])

    def _poll(self, name: str) -> bytes | None:
        while True:
            self._len.value = len(self._buf)
            code = self._fn(name)(self._ptr, self._buf, ctypes.byref(self._len))
            if code == DONE:
                return None
            if code == ERR_BUFFER_TOO_SMALL:
                # The item is kept: poll again with room for it.
                self._buf = (ctypes.c_uint8 * self._len.value)()
                continue
            self._check(code)
            return bytes(memoryview(self._buf)[: self._len.value])

    def poll_transmit_raw(self) -> bytes | None:
        """The next transmit's JSON object as the library wrote it, or ``None``."""
        return self._poll("poll_transmit")

    def poll_event_raw(self) -> bytes | None:
        """The next event's JSON object as the library wrote it, or ``None``."""
        return self._poll("poll_event")

    def poll_transmit(self) -> dict | None:
        """The next transmit, decoded, or ``None``."""
        raw = self.poll_transmit_raw()
        return None if raw is None else json.loads(raw)

    def poll_event(self) -> dict | None:
        """The next event, decoded, or ``None``. An ``event`` also carries ``"raw"``: the
        relay's event JSON as the core embedded it."""
        raw = self.poll_event_raw()
        if raw is None:
            return None
        event = json.loads(raw)
        if event.get("type") == "event":
            event["raw"] = received_raw(raw)
        return event

    def poll_timeout(self) -> int | None:
        """When to call ``handle_timeout`` next (``now_ms`` scale), or ``None``."""
        at = ctypes.c_uint64(0)
        code = self._call("poll_timeout", ctypes.byref(at))
        return None if code == DONE else at.value

    def handle_timeout(self, now_ms: int) -> None:
        """Fire whatever is due at ``now_ms``."""
        self._call("handle_timeout", now_ms)

    def handle_read_paused(self, now_ms: int, paused: bool) -> None:
        """The driver stopped or resumed reading."""
        self._call("handle_read_paused", now_ms, 1 if paused else 0)

    def set_wall_clock(self, now_ms: int, unix_secs: int) -> None:
        """The wall clock read ``unix_secs`` at ``now_ms``."""
        self._call("set_wall_clock", now_ms, unix_secs)

    def connect(self, now_ms: int) -> None:
        """Start connecting (and keep reconnecting)."""
        self._call("connect", now_ms)

    def disconnect(self, now_ms: int) -> None:
        """Stop for good (until the next ``connect``)."""
        self._call("disconnect", now_ms)

    def lifecycle(self, now_ms: int, signal: int) -> None:
        """The application's lifecycle: one of the ``LIFECYCLE_*`` codes."""
        self._call("lifecycle", now_ms, signal)

    def close(self) -> None:
        """Free the handle (also done when it is garbage collected)."""
        if self._ptr:
            self._fn("free")(self._ptr)
            self._ptr = ctypes.c_void_p()

    def __del__(self) -> None:
        # Never raise from a finaliser (at interpreter exit the library may be gone).
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_RECEIVED_MARK = b',"event":'


def received_raw(encoded: bytes) -> str:
    """The relay's event JSON inside an ``event`` object: the ABI writes it last, after fields
    (numbers and hex) that cannot contain the marker."""
    start = encoded.index(_RECEIVED_MARK) + len(_RECEIVED_MARK)
    return encoded[start:-1].decode("utf-8")


def _text(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _relay_config(seed: int, max_subscriptions: int, gate_per_session: bool) -> RelayConfig:
    config = RelayConfig()
    config.struct_size = ctypes.sizeof(RelayConfig)
    if lib().tether_relay_config_default(ctypes.byref(config)) != OK:
        raise TetherError(ERR_INVALID_ARGUMENT, "config")
    config.seed = seed
    config.max_subscriptions = max_subscriptions
    config.gate_per_session = 1 if gate_per_session else 0
    return config


class Relay(_Handle):
    """A relay session (``TetherRelay``)."""

    _prefix = "relay"

    def __init__(
        self,
        seed: int = 0,
        max_subscriptions: int = 0,
        gate_per_session: bool = False,
    ) -> None:
        config = _relay_config(seed, max_subscriptions, gate_per_session)
        pointer = ctypes.c_void_p()
        code = lib().tether_relay_new(ctypes.byref(config), ctypes.byref(pointer))
        if code != OK:
            raise TetherError(code, "tether_relay_new")
        super().__init__(pointer)
        self.max_frame: int = config.max_frame
        """The largest frame the session takes (the socket must refuse larger ones)."""

    @classmethod
    def restore(
        cls,
        checkpoint: bytes,
        now_ms: int,
        unix_secs: int,
        seed: int = 0,
        max_subscriptions: int = 0,
        gate_per_session: bool = False,
    ) -> Relay:
        """A disconnected session from ``checkpoint`` (:meth:`checkpoint`'s bytes, or any
        tether driver's), at ``now_ms`` when the wall clock reads ``unix_secs``: its
        subscriptions keep their ids and catch up on :meth:`connect`; unacknowledged
        publishes go again. :class:`TetherError` (``ERR_CHECKPOINT``,
        ``ERR_CHECKPOINT_NEWER``) with the reason when it does not restore."""
        config = _relay_config(seed, max_subscriptions, gate_per_session)
        pointer = _restored(
            lambda out, why, why_len: lib().tether_relay_restore(
                ctypes.byref(config),
                checkpoint,
                len(checkpoint),
                now_ms,
                unix_secs,
                out,
                why,
                why_len,
            )
        )
        relay = cls.__new__(cls)
        _Handle.__init__(relay, pointer)
        relay.max_frame = config.max_frame
        return relay

    def checkpoint(self) -> bytes:
        """The session's checkpoint (JSON bytes): write it down and :meth:`restore` it in a
        later process. Taking one changes nothing."""
        return self._copy("checkpoint")

    def subscribe(self, now_ms: int, filters: str | bytes, priority: int = 0) -> int:
        """Register a subscription; ``filters`` is a JSON array of filter objects."""
        data = _text(filters)
        sub = ctypes.c_uint64(0)
        self._call("subscribe", now_ms, data, len(data), priority, ctypes.byref(sub))
        return sub.value

    def unsubscribe(self, now_ms: int, sub: int) -> None:
        """Drop a subscription (a CLOSE goes out if its REQ is open)."""
        self._call("unsubscribe", now_ms, sub)

    def publish(self, now_ms: int, event: str | bytes) -> str:
        """Publish a signed event; its id in hex."""
        data = _text(event)
        out = (ctypes.c_uint8 * 32)()
        self._call("publish", now_ms, data, len(data), out)
        return bytes(out).hex()

    def authenticate(self, now_ms: int, challenge: int, event: str | bytes) -> str:
        """Answer challenge ``challenge`` with a signed kind 22242 event; its id in hex."""
        data = _text(event)
        out = (ctypes.c_uint8 * 32)()
        self._call("authenticate", now_ms, challenge, data, len(data), out)
        return bytes(out).hex()

    def apply_relay_info(self, now_ms: int, document: bytes) -> dict:
        """Apply the relay's NIP-11 document (its bytes, as fetched): what is in force now
        (``subscription_limit``, ``max_message_length``, ``auth_first``, ...), or
        ``{"error": ...}`` when the document could not be read (nothing changed)."""
        return _applied(document, lambda *out: self._call("apply_relay_info", now_ms, *out))

    def handle_open(self, now_ms: int, epoch: int) -> None:
        """The socket of ``epoch`` opened."""
        self._call("handle_open", now_ms, epoch)

    def handle_close(self, now_ms: int, epoch: int, loss: int, close_code: int = -1) -> None:
        """The socket of ``epoch`` was lost (``LOSS_*``)."""
        self._call("handle_close", now_ms, epoch, loss, close_code)

    def handle_frame(self, now_ms: int, epoch: int, text: str | bytes) -> None:
        """A text frame arrived on ``epoch``."""
        data = _text(text)
        self._call("handle_frame", now_ms, epoch, data, len(data))

    def handle_binary(self, now_ms: int, epoch: int, length: int) -> None:
        """A binary frame of ``length`` bytes arrived on ``epoch``."""
        self._call("handle_binary", now_ms, epoch, length)

    def handle_pong(self, now_ms: int, epoch: int) -> None:
        """A pong arrived on ``epoch``."""
        self._call("handle_pong", now_ms, epoch)


INFO_UNREADABLE = 2
"""``tether_*_apply_relay_info``: the relay's document was not read (a verdict, not an error)."""

APPLIED_MAX = 512
"""The buffer ``tether_*_apply_relay_info`` needs (``TETHER_APPLIED_MAX``)."""


def _applied(document: bytes, call) -> dict:
    out = (ctypes.c_uint8 * APPLIED_MAX)()
    length = ctypes.c_size_t(APPLIED_MAX)
    call(document, len(document), out, ctypes.byref(length))
    return json.loads(bytes(memoryview(out)[: length.value]))


_VERIFY_CODES = {name: code for code, name in _VERDICTS.items()}


class Pool(_Handle):
    """A relay pool (``TetherPool``): one subscription across many relays, each event once,
    one outcome per subscription, and verification handed to the caller when ``verify``."""

    _prefix = "pool"

    def __init__(self, **config: Any) -> None:
        built = _pool_config(config)
        pointer = ctypes.c_void_p()
        code = lib().tether_pool_new(ctypes.byref(built), ctypes.byref(pointer))
        if code != OK:
            raise TetherError(code, "tether_pool_new")
        super().__init__(pointer)
        self.max_frame: int = built.max_frame

    @classmethod
    def restore(cls, checkpoint: bytes, now_ms: int, unix_secs: int, **config: Any) -> Pool:
        """A pool from :meth:`checkpoint`'s bytes: the same relay and subscription ids, each
        relay connecting again and catching up. :class:`TetherError` when it does not
        restore."""
        built = _pool_config(config)
        pointer = _restored(
            lambda out, why, why_len: lib().tether_pool_restore(
                ctypes.byref(built),
                checkpoint,
                len(checkpoint),
                now_ms,
                unix_secs,
                out,
                why,
                why_len,
            )
        )
        pool = cls.__new__(cls)
        _Handle.__init__(pool, pointer)
        pool.max_frame = built.max_frame
        return pool

    def checkpoint(self) -> bytes:
        """The pool's checkpoint (JSON bytes); taking one changes nothing."""
        return self._copy("checkpoint")

    def add_relay(self, now_ms: int) -> int:
        """Add a relay (keep its URL by the id returned); it connects at once."""
        relay = ctypes.c_uint32(0)
        self._call("add_relay", now_ms, ctypes.byref(relay))
        return relay.value

    def add_relay_url(self, now_ms: int, url: str) -> int:
        """Add the relay at ``url``, or find the one the pool holds there (routing's too):
        one relay per URL. Raises ``ERR_INVALID_URL`` past the core's rule."""
        data = url.encode()
        relay = ctypes.c_uint32(0)
        self._call("add_relay_url", now_ms, data, len(data), ctypes.byref(relay))
        return relay.value

    def name_relay(self, relay: int, url: str) -> None:
        """Name the URL of a relay a restored pool holds without one (a checkpoint never
        saves an application's URL): routing asks it on its socket rather than a second."""
        data = url.encode()
        self._call("name_relay", relay, data, len(data))

    def remove_relay(self, now_ms: int, relay: int) -> None:
        """Remove a relay; its socket is closed."""
        self._call("remove_relay", now_ms, relay)

    def subscribe(self, now_ms: int, filters: str | bytes) -> int:
        """Subscribe on every relay, present and future."""
        data = _text(filters)
        sub = ctypes.c_uint64(0)
        self._call("subscribe", now_ms, data, len(data), ctypes.byref(sub))
        return sub.value

    def subscribe_routed(self, now_ms: int, routing: list[tuple[int, list[dict]]]) -> int:
        """Subscribe on the named relays, each with its own filters."""
        data = json.dumps([{"relay": r, "filters": f} for r, f in routing]).encode()
        sub = ctypes.c_uint64(0)
        self._call("subscribe_routed", now_ms, data, len(data), ctypes.byref(sub))
        return sub.value

    def subscribe_outbox(self, now_ms: int, filter: str | bytes) -> int:
        """Subscribe to people: one filter naming them by ``authors`` (a feed), or with no
        ``authors`` by its one ``#p`` key (an inbox). The pool finds their relays (its
        ``open`` transmits then carry the ``url`` to dial) and reports ``routed`` events."""
        data = _text(filter)
        sub = ctypes.c_uint64(0)
        self._call("subscribe_outbox", now_ms, data, len(data), ctypes.byref(sub))
        return sub.value

    def handle_relay_list(self, now_ms: int, event: str | bytes) -> None:
        """A relay list (kind 10002 or 10050) the application got elsewhere."""
        data = _text(event)
        self._call("handle_relay_list", now_ms, data, len(data))

    def handle_liveness(self, now_ms: int, event: str | bytes) -> None:
        """A NIP-66 relay discovery event (kind 30166) from a monitor: a liveness hint."""
        data = _text(event)
        self._call("handle_liveness", now_ms, data, len(data))

    def hint_live(self, now_ms: int, url: str, alive: bool) -> None:
        """The application's own liveness word on a relay: weighed, never a rule."""
        data = url.encode()
        self._call("hint_live", now_ms, data, len(data), 1 if alive else 0)

    def unsubscribe(self, now_ms: int, sub: int) -> None:
        """Drop a subscription on every relay."""
        self._call("unsubscribe", now_ms, sub)

    def publish(self, now_ms: int, event: str | bytes, relays: list[int] | None = None) -> str:
        """Publish a signed event to ``relays`` (every relay when ``None``); its id in hex."""
        data = _text(event)
        out = (ctypes.c_uint8 * 32)()
        ids = None if relays is None else (ctypes.c_uint32 * max(1, len(relays)))(*relays)
        count = 0 if relays is None else len(relays)
        self._call("publish", now_ms, data, len(data), ids, count, out)
        return bytes(out).hex()

    def publish_outbox(self, now_ms: int, event: str | bytes) -> str:
        """Publish a signed event by outbox: to its author's write relays and each p-tagged
        person's read relays (DM relays for a gift wrap), which the pool opens (``open``
        transmits with their ``url``) and lets go once done; its id in hex."""
        data = _text(event)
        out = (ctypes.c_uint8 * 32)()
        self._call("publish_outbox", now_ms, data, len(data), out)
        return bytes(out).hex()

    def authenticate(self, now_ms: int, relay: int, challenge: int, event: str | bytes) -> str:
        """Answer ``relay``'s challenge ``challenge``; the AUTH event's id in hex."""
        data = _text(event)
        out = (ctypes.c_uint8 * 32)()
        self._call("authenticate", now_ms, relay, challenge, data, len(data), out)
        return bytes(out).hex()

    def apply_relay_info(self, now_ms: int, relay: int, document: bytes) -> dict:
        """As :meth:`Relay.apply_relay_info`, for one relay of the pool."""
        return _applied(document, lambda *out: self._call("apply_relay_info", now_ms, relay, *out))

    def handle_open(self, now_ms: int, relay: int, epoch: int) -> None:
        """``relay``'s socket of ``epoch`` opened."""
        self._call("handle_open", now_ms, relay, epoch)

    def handle_close(
        self, now_ms: int, relay: int, epoch: int, loss: int, close_code: int = -1
    ) -> None:
        """``relay``'s socket of ``epoch`` was lost (``LOSS_*``)."""
        self._call("handle_close", now_ms, relay, epoch, loss, close_code)

    def handle_frame(self, now_ms: int, relay: int, epoch: int, text: str | bytes) -> None:
        """A text frame from ``relay`` on ``epoch``."""
        data = _text(text)
        self._call("handle_frame", now_ms, relay, epoch, data, len(data))

    def handle_binary(self, now_ms: int, relay: int, epoch: int, length: int) -> None:
        """A binary frame from ``relay`` on ``epoch``."""
        self._call("handle_binary", now_ms, relay, epoch, length)

    def handle_pong(self, now_ms: int, relay: int, epoch: int) -> None:
        """A pong from ``relay`` on ``epoch``."""
        self._call("handle_pong", now_ms, relay, epoch)

    def handle_relay_read_paused(self, now_ms: int, relay: int, paused: bool) -> None:
        """The driver stopped or resumed reading ``relay``'s socket."""
        self._call("handle_read_paused", now_ms, relay, 1 if paused else 0)

    def poll_verify(self) -> dict | None:
        """The next event copy to verify (``ticket``, ``relay``, ``id``, ``raw``), or ``None``."""
        raw = self._poll("poll_verify")
        if raw is None:
            return None
        request = json.loads(raw)
        request["raw"] = received_raw(raw)
        return request

    def handle_verified(self, now_ms: int, ticket: int, verdict: str | None) -> None:
        """The verdict on ``ticket``: ``None`` (genuine) or what :func:`verify_event` said."""
        code = OK if verdict is None else _VERIFY_CODES[verdict]
        self._call("handle_verified", now_ms, ticket, code, None, 0)

    def public_only(self, relay: int) -> bool:
        """Whether ``relay`` may be dialed at public addresses only: a relay routing opened
        from a stranger's relay list (``tether_pool_public_only``). Every address its name
        resolves to must then pass :func:`is_private_ip` before it is dialed."""
        out = ctypes.c_uint32()
        self._call("public_only", relay, ctypes.byref(out))
        return out.value == 1

    def relay_stats(self, relay: int) -> dict:
        """What the pool counted for ``relay``: duplicates, conflicts, invalid,
        unverified_dropped, unmatched."""
        return json.loads(self._copy("relay_stats", relay))


def _pool_config(fields: dict) -> PoolConfig:
    config = PoolConfig()
    config.struct_size = ctypes.sizeof(PoolConfig)
    if lib().tether_pool_config_default(ctypes.byref(config)) != OK:
        raise TetherError(ERR_INVALID_ARGUMENT, "config")
    for name, value in fields.items():
        if name not in dict(PoolConfig._fields_) or name in ("struct_size", "reserved"):
            raise TypeError(f"no pool config field {name!r}")
        if name == "outbox_indexers":
            # A list of URLs; the structure keeps the bytes alive while it lives.
            setattr(config, name, None if value is None else json.dumps(list(value)).encode())
        else:
            setattr(config, name, int(value))
    return config


def _sse_config(seed: int, idle_timeout_ms: int | None, connect_timeout_ms: int) -> SseConfig:
    config = SseConfig()
    config.struct_size = ctypes.sizeof(SseConfig)
    if lib().tether_sse_config_default(ctypes.byref(config)) != OK:
        raise TetherError(ERR_INVALID_ARGUMENT, "config")
    config.seed = seed
    if idle_timeout_ms is not None:
        config.idle_timeout_ms = idle_timeout_ms
    if connect_timeout_ms:
        config.connect_timeout_ms = connect_timeout_ms
    return config


class Sse(_Handle):
    """An SSE session (``TetherSse``)."""

    _prefix = "sse"

    def __init__(
        self,
        seed: int = 0,
        idle_timeout_ms: int | None = None,
        connect_timeout_ms: int = 0,
        request: dict | None = None,
    ) -> None:
        """A session for a GET, or for ``request`` (``tether_sse_new_request``'s JSON as a
        dict: ``method``, ``headers`` as ``[name, value]`` pairs, ``body``, ``resume``,
        ``end_data``, ``end_event``, ``fail_event``, ``end_on_jsonrpc_response``). The core
        decides what may be sent again; each ``open`` transmit says what that attempt sends.
        :class:`TetherError` ``ERR_INVALID_ARGUMENT`` for a request the core refuses (an
        unknown field, a bad ``resume``)."""
        config = _sse_config(seed, idle_timeout_ms, connect_timeout_ms)
        pointer = ctypes.c_void_p()
        if request is None:
            code = lib().tether_sse_new(ctypes.byref(config), ctypes.byref(pointer))
            name = "tether_sse_new"
        else:
            text = json.dumps(request).encode("utf-8")
            code = lib().tether_sse_new_request(
                ctypes.byref(config), text, len(text), ctypes.byref(pointer)
            )
            name = "tether_sse_new_request"
        if code != OK:
            raise TetherError(code, name)
        super().__init__(pointer)

    @classmethod
    def restore(
        cls,
        checkpoint: bytes,
        seed: int = 0,
        idle_timeout_ms: int | None = None,
        connect_timeout_ms: int = 0,
        request: dict | None = None,
    ) -> Sse:
        """An idle session from ``checkpoint``, for a GET or for ``request`` (as
        :class:`Sse` takes it, rebuilt as it was first built: a checkpoint keeps no
        credentials). On :meth:`connect` it goes on as its resume policy says."""
        config = _sse_config(seed, idle_timeout_ms, connect_timeout_ms)
        if request is None:
            pointer = _restored(
                lambda out, why, why_len: lib().tether_sse_restore(
                    ctypes.byref(config), checkpoint, len(checkpoint), out, why, why_len
                )
            )
        else:
            text = json.dumps(request).encode("utf-8")
            pointer = _restored(
                lambda out, why, why_len: lib().tether_sse_restore_request(
                    ctypes.byref(config),
                    text,
                    len(text),
                    checkpoint,
                    len(checkpoint),
                    out,
                    why,
                    why_len,
                )
            )
        sse = cls.__new__(cls)
        _Handle.__init__(sse, pointer)
        return sse

    def checkpoint(self, with_body: bool = False) -> bytes:
        """The session's checkpoint (JSON bytes), never with credentials; the request body
        only with ``with_body``."""
        while True:
            self._len.value = len(self._buf)
            code = lib().tether_sse_checkpoint(
                self._ptr, 1 if with_body else 0, self._buf, ctypes.byref(self._len)
            )
            if code == ERR_BUFFER_TOO_SMALL:
                self._buf = (ctypes.c_uint8 * self._len.value)()
                continue
            self._check(code)
            return bytes(memoryview(self._buf)[: self._len.value])

    def last_event_id(self) -> str:
        """The last event ID the next request will carry ("" for none)."""
        return self._copy("last_event_id").decode("utf-8")

    def handle_response(
        self,
        now_ms: int,
        epoch: int,
        status: int,
        content_type: str | None,
        retry_after: str | None,
    ) -> None:
        """The response head of ``epoch`` arrived."""
        ct = None if content_type is None else content_type.encode("utf-8")
        ra = None if retry_after is None else retry_after.encode("utf-8")
        self._call(
            "handle_response",
            now_ms,
            epoch,
            status,
            ct,
            0 if ct is None else len(ct),
            ra,
            0 if ra is None else len(ra),
        )

    def handle_head(
        self,
        now_ms: int,
        epoch: int,
        status: int,
        *,
        content_type: str | None = None,
        retry_after: str | None = None,
        content_encoding: str | None = None,
        location: str | None = None,
        url: str | None = None,
    ) -> None:
        """The response head of ``epoch`` with every header the core judges (``None`` when
        absent): a redirect is followed with an ``open`` transmit whose ``redirect`` is the
        target (the same attempt and epoch) or fails the stream (``failed``, ``why``
        ``redirect``); a 200 stream whose ``content_encoding`` is not ``identity`` fails
        (``content_encoding``). ``url`` is where the request went (a relative ``location``
        resolves against it). The HTTP client must follow no redirect and decode nothing."""
        args: list = []
        for text in (content_type, retry_after, content_encoding, location, url):
            raw = None if text is None else text.encode("utf-8", "surrogateescape")
            args += [raw, 0 if raw is None else len(raw)]
        self._call("handle_head", now_ms, epoch, status, *args)

    def handle_bytes(self, now_ms: int, epoch: int, data: bytes) -> int:
        """Body bytes of ``epoch``; how many were consumed."""
        consumed = ctypes.c_size_t(0)
        self._call("handle_bytes", now_ms, epoch, data, len(data), ctypes.byref(consumed))
        return consumed.value

    def handle_eof(self, now_ms: int, epoch: int) -> None:
        """The body of ``epoch`` ended."""
        self._call("handle_eof", now_ms, epoch)

    def handle_error(self, now_ms: int, epoch: int, loss: int) -> None:
        """The request or body of ``epoch`` failed (``LOSS_*``)."""
        self._call("handle_error", now_ms, epoch, loss)

    def handle_request_invalid(self, now_ms: int, epoch: int, detail: str) -> None:
        """The request of ``epoch`` could not be built."""
        data = detail.encode("utf-8")
        self._call("handle_request_invalid", now_ms, epoch, data, len(data))

"""Events signed with a secret key, through the C ABI: libsecp256k1's BIP-340 Schnorr.

The key lives in the application, never in a session: :class:`SecretKey` keeps its 32 bytes
in one ctypes buffer, hands that buffer to ``tether_public_key`` / ``tether_sign_*`` (which
read it in place and erase their own copy before returning), and zeroes it on
:meth:`SecretKey.close` (also on garbage collection and at the end of a ``with`` block).
No curve arithmetic happens in Python.

What a caller passes in stays the caller's: a ``str`` cannot be erased, so pass a
``bytearray`` (and zero it yourself) to keep the key out of immutable objects. The hex or
``nsec`` decoding writes into a ``bytearray`` that is zeroed as soon as the key is in the
ctypes buffer.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import time
from typing import Union

from . import _ffi

KeyBytes = Union[bytes, bytearray, memoryview]

_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _nsec(text: str) -> bytearray:
    """The 32 bytes of an ``nsec1...`` key (bech32; the checksum is verified). The decoded
    5-bit groups are overwritten before returning; the caller zeroes the result."""
    text = text.lower()
    hrp, _, data = text.rpartition("1")
    if hrp != "nsec" or any(c not in _BECH32 for c in data) or len(data) < 7:
        raise ValueError("not an nsec key")
    values = [_BECH32.index(c) for c in data]
    try:
        generator = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
        check = 1
        for v in [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + values:
            top = check >> 25
            check = (check & 0x1FFFFFF) << 5 ^ v
            for i in range(5):
                check ^= generator[i] if (top >> i) & 1 else 0
        if check != 1:
            raise ValueError("bad nsec checksum")
        acc, bits, out = 0, 0, bytearray()
        for v in values[:-6]:
            acc = ((acc << 5) | v) & 0xFFF
            bits += 5
            while bits >= 8:
                bits -= 8
                out.append((acc >> bits) & 0xFF)
        if len(out) != 32:
            out[:] = bytes(len(out))
            raise ValueError("an nsec key holds 32 bytes")
        return out
    finally:
        values[:] = [0] * len(values)


def _decode(key: str | KeyBytes) -> bytearray:
    """A fresh ``bytearray`` of the key's bytes (the caller zeroes it)."""
    if isinstance(key, str):
        text = key.strip()
        if text.lower().startswith("nsec1"):
            return _nsec(text)
        return bytearray.fromhex(text)
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytearray(key)
    raise TypeError(f"a secret key is hex or nsec text or 32 bytes, not {type(key).__name__}")


def _aux(aux: bytes | None) -> bytes:
    """BIP-340's auxiliary randomness: fresh bytes unless the caller fixed them."""
    if aux is None:
        return os.urandom(32)
    if len(aux) != 32:
        raise ValueError("aux_rand is 32 bytes")
    return bytes(aux)


class SecretKey:
    """A secp256k1 secret key that signs Nostr events (through the library).

    ``key`` is hex or ``nsec1...`` text (as ``--secret-key`` takes it) or 32 raw bytes.
    ``aux`` arguments are BIP-340's auxiliary randomness: ``None`` (the default) draws 32
    fresh bytes from ``os.urandom``, as BIP-340 recommends; 32 given bytes make the signature
    reproducible (``bytes(32)`` is what the C ABI does with a null ``aux_rand``).
    """

    def __init__(self, key: str | KeyBytes) -> None:
        self._secret: ctypes.Array | None = (ctypes.c_uint8 * 32)()
        try:
            raw = _decode(key)
        except ValueError as error:
            raise ValueError(f"--secret-key is not a secret key: {error}") from None
        try:
            if len(raw) != 32:
                raise ValueError("--secret-key is not a secret key: expected 32 bytes")
            self._secret[:] = raw  # element by element: no intermediate bytes object
        finally:
            raw[:] = bytes(len(raw))
        public = (ctypes.c_uint8 * 32)()
        code = _ffi.lib().tether_public_key(self._secret, public)
        if code != _ffi.OK:
            self.close()
            if code == _ffi.ERR_INVALID_ARGUMENT:
                raise ValueError("--secret-key is not a secret key: expected 32 bytes in range")
            raise _ffi.TetherError(code, "tether_public_key")
        self.public_hex = bytes(public).hex()
        """The x-only public key in hex: the ``pubkey`` of the events this key signs."""

    def _key(self) -> ctypes.Array:
        """The key's buffer, for one call."""
        if self._secret is None:
            raise ValueError("the secret key was closed")
        return self._secret

    def sign_schnorr(self, message: bytes, aux: bytes | None = None) -> bytes:
        """BIP-340 signature of a 32-byte message (``tether_sign_schnorr``)."""
        if len(message) != 32:
            raise ValueError("a BIP-340 message here is 32 bytes")
        sig = (ctypes.c_uint8 * 64)()
        digest = (ctypes.c_uint8 * 32).from_buffer_copy(message)
        code = _ffi.lib().tether_sign_schnorr(self._key(), digest, _aux(aux), sig)
        if code != _ffi.OK:
            raise _ffi.TetherError(code, "tether_sign_schnorr")
        return bytes(sig)

    def sign_event(
        self, kind: int, tags: list, content: str, created_at: int, aux: bytes | None = None
    ) -> str:
        """A signed event as JSON (``tether_sign_event``: the NIP-01 id, then BIP-340)."""
        if not 0 <= kind <= 0xFFFF:
            raise ValueError(f"kind {kind} is not in 0-65535")
        if created_at < 0:
            raise ValueError("created_at is unix seconds, not negative")
        text = json.dumps(tags, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        body = content.encode("utf-8")
        aux_rand = _aux(aux)
        return self._signed(
            "tether_sign_event",
            lambda buf, length: _ffi.lib().tether_sign_event(
                self._key(),
                created_at,
                kind,
                text,
                len(text),
                body,
                len(body),
                aux_rand,
                buf,
                length,
            ),
        )

    def sign_auth(
        self,
        relay_url: str,
        challenge: str,
        created_at: int | None = None,
        aux: bytes | None = None,
    ) -> str:
        """The kind 22242 answer to a NIP-42 challenge from ``relay_url``
        (``tether_sign_auth``), dated ``created_at`` (default: now)."""
        when = int(time.time()) if created_at is None else created_at
        url = relay_url.encode("utf-8")
        said = challenge.encode("utf-8")
        aux_rand = _aux(aux)
        return self._signed(
            "tether_sign_auth",
            lambda buf, length: _ffi.lib().tether_sign_auth(
                self._key(), url, len(url), said, len(said), when, aux_rand, buf, length
            ),
        )

    @staticmethod
    def _signed(name: str, call) -> str:
        """Call a ``tether_sign_*`` that copies an event out, growing the buffer if asked."""
        buf = (ctypes.c_uint8 * 1024)()
        while True:
            length = ctypes.c_size_t(len(buf))
            code = call(buf, ctypes.byref(length))
            if code == _ffi.ERR_BUFFER_TOO_SMALL:
                buf = (ctypes.c_uint8 * length.value)()
                continue
            if code != _ffi.OK:
                raise _ffi.TetherError(code, name)
            return bytes(memoryview(buf)[: length.value]).decode("utf-8")

    def close(self) -> None:
        """Zero the key's bytes; the key signs nothing after this."""
        if self._secret is not None:
            ctypes.memset(self._secret, 0, 32)
            self._secret = None

    def __del__(self) -> None:
        # Never raise from a finaliser (at interpreter exit ctypes may be half gone).
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> SecretKey:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        public = getattr(self, "public_hex", None)
        return (
            f"SecretKey(public_hex={public!r})" if self._secret is not None else "SecretKey(closed)"
        )

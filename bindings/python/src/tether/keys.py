"""NIP-42 answers signed with a secret key: BIP-340 Schnorr over secp256k1 in pure Python.

Written from the BIP-340 specification; slow (milliseconds per signature) but an AUTH is
signed once per connection. The key lives here, in the application, never in the library.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Optional

_P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_G = (
    0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,
    0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8,
)

Point = Optional[tuple[int, int]]


def _add(a: Point, b: Point) -> Point:
    if a is None:
        return b
    if b is None:
        return a
    if a[0] == b[0] and (a[1] + b[1]) % _P == 0:
        return None
    if a == b:
        slope = 3 * a[0] * a[0] * pow(2 * a[1], -1, _P) % _P
    else:
        slope = (b[1] - a[1]) * pow(b[0] - a[0], -1, _P) % _P
    x = (slope * slope - a[0] - b[0]) % _P
    return x, (slope * (a[0] - x) - a[1]) % _P


def _mul(point: Point, k: int) -> Point:
    result: Point = None
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def _tagged(tag: str, data: bytes) -> bytes:
    digest = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(digest + digest + data).digest()


def _int(data: bytes) -> int:
    return int.from_bytes(data, "big")


def _bytes(n: int) -> bytes:
    return n.to_bytes(32, "big")


_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _nsec(text: str) -> bytes:
    """The 32 bytes of an ``nsec1...`` key (bech32; the checksum is verified)."""
    text = text.lower()
    hrp, _, data = text.rpartition("1")
    if hrp != "nsec" or any(c not in _BECH32 for c in data) or len(data) < 7:
        raise ValueError("not an nsec key")
    values = [_BECH32.index(c) for c in data]
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
        acc = (acc << 5) | v
        bits += 5
        while bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    if len(out) != 32:
        raise ValueError("an nsec key holds 32 bytes")
    return bytes(out)


class SecretKey:
    """A secp256k1 secret key that signs Nostr events."""

    def __init__(self, text: str) -> None:
        text = text.strip()
        try:
            raw = _nsec(text) if text.lower().startswith("nsec1") else bytes.fromhex(text)
        except ValueError as error:
            raise ValueError(f"--secret-key is not a secret key: {error}") from None
        if len(raw) != 32 or not 0 < _int(raw) < _N:
            raise ValueError("--secret-key is not a secret key: expected 32 bytes in range")
        self._d = _int(raw)
        point = _mul(_G, self._d)
        assert point is not None
        self._point = point
        self.public_hex = _bytes(point[0]).hex()

    def sign_schnorr(self, message: bytes, aux: bytes | None = None) -> bytes:
        """BIP-340 signature of a 32-byte message."""
        d = self._d if self._point[1] % 2 == 0 else _N - self._d
        aux = os.urandom(32) if aux is None else aux
        t = _bytes(d ^ _int(_tagged("BIP0340/aux", aux)))
        px = _bytes(self._point[0])
        k0 = _int(_tagged("BIP0340/nonce", t + px + message)) % _N
        if k0 == 0:
            raise ValueError("nonce is zero")
        r = _mul(_G, k0)
        assert r is not None
        k = k0 if r[1] % 2 == 0 else _N - k0
        rx = _bytes(r[0])
        e = _int(_tagged("BIP0340/challenge", rx + px + message)) % _N
        return rx + _bytes((k + e * d) % _N)

    def sign_event(self, kind: int, tags: list, content: str, created_at: int) -> str:
        """A signed event as JSON (NIP-01: the id is the SHA-256 of its serialisation)."""
        serialised = json.dumps(
            [0, self.public_hex, created_at, kind, tags, content],
            separators=(",", ":"),
            ensure_ascii=False,
        )
        event_id = hashlib.sha256(serialised.encode("utf-8")).digest()
        event = {
            "id": event_id.hex(),
            "pubkey": self.public_hex,
            "created_at": created_at,
            "kind": kind,
            "tags": tags,
            "content": content,
            "sig": self.sign_schnorr(event_id).hex(),
        }
        return json.dumps(event, separators=(",", ":"), ensure_ascii=False)

    def sign_auth(self, relay_url: str, challenge: str) -> str:
        """The kind 22242 answer to a NIP-42 challenge from ``relay_url``."""
        tags = [["relay", relay_url], ["challenge", challenge]]
        return self.sign_event(22242, tags, "", int(time.time()))

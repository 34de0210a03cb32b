"""The signer over the C ABI: BIP-340 and NIP-19 vectors, events checked by the library's
own verifier, and an event byte for byte as an independent BIP-340 implementation signed it."""

from __future__ import annotations

import ctypes
import hashlib
import json
import time

import pytest

import tether
from tether import _ffi
from tether.keys import SecretKey

# BIP-340's signing vectors 0-3: secret key, public key, aux_rand, message, signature.
BIP340 = [
    (
        "0000000000000000000000000000000000000000000000000000000000000003",
        "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca8215"
        "25f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0",
    ),
    (
        "b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef",
        "dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
        "0000000000000000000000000000000000000000000000000000000000000001",
        "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
        "6896bd60eeae296db48a229ff71dfe071bde413e6d43f917dc8dcf8c78de3341"
        "8906d11ac976abccb20b091292bff4ea897efcb639ea871cfa95f6de339e4b0a",
    ),
    (
        "c90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b14e5c9",
        "dd308afec5777e13121fa72b9cc1b7cc0139715309b086c960e18fd969774eb8",
        "c87aa53824b4d7ae2eb035a2b5bbbccc080e76cdc6d1692c4b0b62d798e6d906",
        "7e2d58d8b3bcdf1abadec7829054f90dda9805aab56c77333024b9d0a508b75c",
        "5831aaeed7b44bb74e5eab94ba9d4294c49bcf2a60728d8b4c200f50dd313c1b"
        "ab745879a5ad954a72c45a91c3a51d3c7adea98d82f8481e0e1e03674a6f3fb7",
    ),
    (
        "0b432b2677937381aef05bb02a66ecd012773062cf3fa2549e44f58ed2401710",
        "25d1dff95105f5253c4022f628a996ad3a0d95fbf21d468a1b33f8c160d8f517",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "7eb0509757e246f19449885651611cb965ecc1a187dd51b64fda1edc9637d5ec"
        "97582b9cb13db3933705b32ba982af5af25fd78881ebb32771fc5922efc66ea3",
    ),
]

NSEC = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
NSEC_PUBLIC = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"


@pytest.mark.parametrize("secret, public, aux, message, sig", BIP340)
def test_bip340_signing_vectors(secret, public, aux, message, sig):
    key = SecretKey(secret)
    assert key.public_hex == public
    assert key.sign_schnorr(bytes.fromhex(message), bytes.fromhex(aux)).hex() == sig
    # The same key given as bytes and as a bytearray.
    assert SecretKey(bytes.fromhex(secret)).public_hex == public
    assert SecretKey(bytearray.fromhex(secret)).public_hex == public


def test_fresh_aux_rand_signs_differently_and_both_verify():
    key = SecretKey(BIP340[1][0])
    one = key.sign_event(1, [], "same", 1_700_000_000)
    two = key.sign_event(1, [], "same", 1_700_000_000)
    assert json.loads(one)["id"] == json.loads(two)["id"]
    assert json.loads(one)["sig"] != json.loads(two)["sig"]
    assert tether.verify_event(one) is None and tether.verify_event(two) is None


def test_an_event_as_an_independent_signer_made_it():
    """tether-py's former pure-Python BIP-340 signer (written from the BIP-340 text) signed
    this note with aux_rand all zeros; the library's signer gives the same bytes."""
    key = SecretKey(BIP340[0][0])
    tags = [["t", "tether"], ["e", "00" * 32, "wss://r.example"]]
    event = key.sign_event(
        1, tags, 'note \u2615 "q"\n\t\\ </script> \u0001', 1_700_000_000, bytes(32)
    )
    assert event == (
        '{"id":"791a821634c9e0e4c4f387d8bb7fb7d306d570030fa98c897b8539126f5d7f6a",'
        '"pubkey":"f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9",'
        '"created_at":1700000000,"kind":1,"tags":[["t","tether"],["e",'
        '"0000000000000000000000000000000000000000000000000000000000000000",'
        '"wss://r.example"]],"content":"note \u2615 \\"q\\"\\n\\t\\\\ </script> \\u0001",'
        '"sig":"f1beaf9a92650b810b8d04b91cb9ef5e95dd35222a3de203f86b65dc042e8236'
        '0267a5ce943b95e5dcd27c596e9f1eaaebdd28cfa4159fbe8bc2b94858fda3e6"}'
    )
    assert tether.verify_event(event) is None


def test_nsec_from_nip19_and_the_auth_event_shape():
    key = SecretKey(NSEC)
    assert key.public_hex == NSEC_PUBLIC
    event_json = key.sign_auth("ws://127.0.0.1:1", "abc", 1_700_000_000, bytes(32))
    # As the former pure-Python signer made it, too.
    assert json.loads(event_json)["sig"] == (
        "9a00fa2c6de7ed84d175ab68416ff281b08c8cc9237c852b0da2e4eb28949515"
        "e6eab20d2ad159930a97d20a784d88e02ab9d6a5762c9f9f73c06cd477530e4a"
    )
    assert tether.verify_event(event_json) is None
    event = json.loads(event_json)
    assert event["kind"] == 22242 and event["content"] == ""
    assert event["created_at"] == 1_700_000_000
    assert event["tags"] == [["relay", "ws://127.0.0.1:1"], ["challenge", "abc"]]
    serialised = json.dumps(
        [0, event["pubkey"], event["created_at"], 22242, event["tags"], ""],
        separators=(",", ":"),
    )
    assert event["id"] == hashlib.sha256(serialised.encode()).hexdigest()
    # Without a date, now.
    assert abs(json.loads(key.sign_auth("ws://h", "c"))["created_at"] - time.time()) < 60


def test_a_large_event_grows_the_buffer():
    key = SecretKey(BIP340[2][0])
    content = "x" * 100_000
    event = key.sign_event(30023, [["d", "a"]] * 500, content, 1_700_000_000)
    assert json.loads(event)["content"] == content
    assert tether.verify_event(event) is None


@pytest.mark.parametrize(
    "text", ["nope", "00" * 32, "nsec1qqqqqq", "ff" * 32, "00" * 31, NSEC[:-1] + "q"]
)
def test_what_is_not_a_key_is_refused(text):
    with pytest.raises(ValueError, match="--secret-key is not a secret key"):
        SecretKey(text)


def test_bad_arguments_are_refused_before_the_library():
    key = SecretKey(BIP340[0][0])
    with pytest.raises(ValueError, match="kind"):
        key.sign_event(65_536, [], "", 1)
    with pytest.raises(ValueError, match="aux_rand"):
        key.sign_event(1, [], "", 1, b"short")
    with pytest.raises(ValueError, match="32 bytes"):
        key.sign_schnorr(b"short")
    with pytest.raises(TypeError):
        SecretKey(3)  # type: ignore[arg-type]


def test_the_library_refuses_what_is_not_a_tag_list():
    key = SecretKey(BIP340[0][0])
    with pytest.raises(tether.TetherError) as refused:
        key.sign_event(1, [["t", 1]], "", 1)
    assert refused.value.code == _ffi.ERR_INVALID_ARGUMENT


def test_closing_zeroes_the_key_and_a_closed_key_signs_nothing():
    key = SecretKey(bytearray.fromhex(BIP340[1][0]))
    buffer = key._secret
    assert buffer is not None and bytes(buffer).hex() == BIP340[1][0]
    with key:
        key.sign_event(1, [], "", 1)
    assert bytes(buffer) == bytes(32)
    with pytest.raises(ValueError, match="closed"):
        key.sign_event(1, [], "", 1)
    assert "closed" in repr(key) and BIP340[1][0] not in repr(SecretKey(BIP340[1][0]))


def test_the_decoding_copy_is_zeroed(monkeypatch):
    """The bytearray the hex is decoded into is all zeros once the key is in its buffer."""
    from tether import keys

    seen = []
    decode = keys._decode

    def spy(key):
        raw = decode(key)
        seen.append(raw)
        return raw

    monkeypatch.setattr(keys, "_decode", spy)
    SecretKey(BIP340[3][0])
    SecretKey(NSEC)
    assert [bytes(raw) for raw in seen] == [bytes(32), bytes(32)]


def test_the_abi_directly_with_a_null_aux_rand():
    """``tether_sign_schnorr`` with a null ``aux_rand`` is BIP-340 vector 0 (zero aux)."""
    secret = (ctypes.c_uint8 * 32).from_buffer_copy(bytes.fromhex(BIP340[0][0]))
    digest = (ctypes.c_uint8 * 32)()
    sig = (ctypes.c_uint8 * 64)()
    assert _ffi.lib().tether_sign_schnorr(secret, digest, None, sig) == _ffi.OK
    assert bytes(sig).hex() == BIP340[0][4]
    public = (ctypes.c_uint8 * 32)()
    assert _ffi.lib().tether_public_key(None, public) == _ffi.ERR_NULL

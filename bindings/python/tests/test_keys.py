"""The NIP-42 signer: BIP-340 and NIP-19 test vectors."""

from __future__ import annotations

import hashlib
import json

import pytest

from tether.keys import SecretKey


def test_bip340_vector_0():
    key = SecretKey("0000000000000000000000000000000000000000000000000000000000000003")
    assert key.public_hex == "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9"
    assert key.sign_schnorr(bytes(32), bytes(32)).hex() == (
        "e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca8215"
        "25f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0"
    )


def test_nsec_from_nip19_and_the_auth_event_shape():
    key = SecretKey("nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5")
    assert key.public_hex == "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
    event = json.loads(key.sign_auth("ws://127.0.0.1:1", "abc"))
    assert event["kind"] == 22242 and event["content"] == ""
    assert event["tags"] == [["relay", "ws://127.0.0.1:1"], ["challenge", "abc"]]
    serialised = json.dumps(
        [0, event["pubkey"], event["created_at"], 22242, event["tags"], ""],
        separators=(",", ":"),
    )
    assert event["id"] == hashlib.sha256(serialised.encode()).hexdigest()


@pytest.mark.parametrize("text", ["nope", "00" * 32, "nsec1qqqqqq", "ff" * 32])
def test_what_is_not_a_key_is_refused(text):
    with pytest.raises(ValueError, match="--secret-key is not a secret key"):
        SecretKey(text)

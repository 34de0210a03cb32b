//! Event signing through the ABI: [`tether_public_key`], [`tether_sign_event`],
//! [`tether_sign_auth`] and [`tether_sign_schnorr`], tether-verify's [`Keys`] (libsecp256k1)
//! with no handle. A host that holds a user's key signs with it here instead of with its own
//! curve arithmetic.
//!
//! # The secret key
//!
//! Every function takes `secret_key`: 32 bytes in the host's memory, read in place for the
//! duration of the call. The only copy the library makes is the libsecp256k1 key pair it
//! signs with, overwritten before the call returns (secp256k1's `non_secure_erase`: volatile
//! writes; best effort, as that function documents, since copies the compiler makes of a
//! moved value cannot be reached). Nothing is kept between calls. Erasing the host's own
//! 32 bytes is the host's business.
//!
//! # Auxiliary randomness
//!
//! `aux_rand` is BIP-340's: null, or 32 bytes. BIP-340 recommends 32 fresh random bytes per
//! signature (they mask the nonce derivation against power and fault side channels); null
//! signs with none, the same as 32 zero bytes, so the signature depends on the key and the
//! message alone (what a reproducible test or transcript wants). Either way the nonce is
//! derived from the key and the message, so no `aux_rand` can make two messages share one.
//! The library has no random source of its own (no global state, nothing to seed), so the
//! host brings the randomness: `getrandom`, `arc4random_buf`, Python's `os.urandom`.
//!
//! # Outputs
//!
//! A signed event is one JSON object, `{"id","pubkey","created_at","kind","tags","content",
//! "sig"}` in that order (UTF-8, no NUL), copied into `buf` (capacity `*len`; `*len` becomes
//! its length). `TETHER_ERR_BUFFER_TOO_SMALL` sets `*len` to the length needed and writes
//! nothing; the length does not depend on `aux_rand`, so calling again with that much room
//! succeeds.
//!
//! # Errors
//!
//! Codes only, as [`tether_verify_event`](crate::verify::tether_verify_event) (there is no
//! handle to keep a message): null pointers and invalid UTF-8 first, then malformed
//! arguments, then the key.

use std::panic::{catch_unwind, AssertUnwindSafe};

use tether_verify::Keys;

use crate::{ptr, TETHER_ERR_INVALID_ARGUMENT, TETHER_ERR_NULL, TETHER_ERR_PANIC, TETHER_OK};

/// The host's 32 key bytes as [`Keys`], or the code for why not.
///
/// # Safety
/// `secret_key` is null or valid for reads of 32 bytes.
unsafe fn keys(secret_key: *const u8) -> Result<Keys, i32> {
    // SAFETY: the contract is passed on (a null pointer is refused: the length is not 0).
    let secret = unsafe { ptr::bytes(secret_key, 32) }?;
    Keys::from_secret_bytes(secret).map_err(|_| TETHER_ERR_INVALID_ARGUMENT)
}

/// `aux_rand`: `None` for null, else its 32 bytes.
///
/// # Safety
/// `aux_rand` is null or valid for reads of 32 bytes.
unsafe fn aux(aux_rand: *const u8) -> Option<[u8; 32]> {
    if aux_rand.is_null() {
        return None;
    }
    // SAFETY: non-null and valid for 32 bytes by this function's contract.
    Some(unsafe { aux_rand.cast::<[u8; 32]>().read_unaligned() })
}

/// Run `f`, turning a panic into [`TETHER_ERR_PANIC`] and an `Err` into its code.
fn run(f: impl FnOnce() -> Result<i32, i32>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code) | Err(code)) => code,
        Err(_) => TETHER_ERR_PANIC,
    }
}

/// The x-only public key (BIP-340, the 32 bytes a Nostr `pubkey` is the hex of) of the
/// secret key at `secret_key` (32 bytes), written to `out_pubkey` (32 bytes).
///
/// No handle and no shared state: every `tether_sign_*` and this are callable from any
/// thread. The 32 key bytes are read in place; the library's one copy, the libsecp256k1 key
/// pair, is overwritten before the call returns and nothing is kept between calls.
///
/// # Errors
/// `TETHER_ERR_NULL` (`secret_key` or `out_pubkey` null), `TETHER_ERR_INVALID_ARGUMENT` (the
/// bytes are not a secret key: zero, or not below the curve order), `TETHER_ERR_PANIC`.
///
/// # Safety
/// `secret_key` is null or valid for reads of 32 bytes; `out_pubkey` is null or valid for
/// writes of 32 bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_public_key(secret_key: *const u8, out_pubkey: *mut u8) -> i32 {
    run(|| {
        if secret_key.is_null() || out_pubkey.is_null() {
            return Err(TETHER_ERR_NULL);
        }
        // SAFETY: the contract is the caller's.
        let keys = unsafe { keys(secret_key) }?;
        // SAFETY: non-null and valid for 32 bytes by the caller's contract.
        unsafe { ptr::write(out_pubkey.cast::<[u8; 32]>(), keys.public_key()) }?;
        Ok(TETHER_OK)
    })
}

/// The BIP-340 Schnorr signature of the 32-byte message at `digest` (for an event: its
/// id) by the secret key at `secret_key` (32 bytes, treated as by [`tether_public_key`]),
/// written to `out_sig` (64 bytes).
///
/// `aux_rand` is null or 32 bytes of BIP-340 auxiliary randomness. BIP-340 recommends 32
/// fresh random bytes per signature (they harden the nonce against side channels); null is
/// the same as 32 zero bytes and makes the signature a function of the key and the message
/// alone (reproducible). The nonce is derived from the key and the message either way. The
/// library has no random source of its own: the host brings the bytes.
///
/// # Errors
/// `TETHER_ERR_NULL` (`secret_key`, `digest` or `out_sig` null),
/// `TETHER_ERR_INVALID_ARGUMENT` (not a secret key), `TETHER_ERR_PANIC`.
///
/// # Safety
/// `secret_key`, `digest` and `aux_rand` are null or valid for reads of 32 bytes; `out_sig`
/// is null or valid for writes of 64 bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_sign_schnorr(
    secret_key: *const u8,
    digest: *const u8,
    aux_rand: *const u8,
    out_sig: *mut u8,
) -> i32 {
    run(|| {
        if secret_key.is_null() || digest.is_null() || out_sig.is_null() {
            return Err(TETHER_ERR_NULL);
        }
        // SAFETY: the contract is the caller's.
        let keys = unsafe { keys(secret_key) }?;
        // SAFETY: non-null and valid for 32 bytes by the caller's contract.
        let digest = unsafe { digest.cast::<[u8; 32]>().read_unaligned() };
        // SAFETY: the contract is the caller's.
        let aux = unsafe { aux(aux_rand) };
        let sig = keys.sign_digest(&digest, aux.as_ref());
        // SAFETY: non-null and valid for 64 bytes by the caller's contract.
        unsafe { ptr::write(out_sig.cast::<[u8; 64]>(), sig) }?;
        Ok(TETHER_OK)
    })
}

/// Sign an event with the secret key at `secret_key` (32 bytes): `created_at` (unix
/// seconds), `kind` (0-65535), `tags` (a JSON array of arrays of strings, `tags_len` bytes
/// of UTF-8, e.g. `[["e","<id>"],["t","tether"]]`) and `content` (`content_len` bytes of
/// UTF-8). The id is the sha256 of the NIP-01 serialization
/// `[0,pubkey,created_at,kind,tags,content]` (the serialization `tether_verify_event`
/// checks), the signature BIP-340 Schnorr of the id (`secret_key` and `aux_rand` as in
/// [`tether_sign_schnorr`]).
///
/// The signed event, `{"id","pubkey","created_at","kind","tags","content","sig"}` (UTF-8, no
/// NUL), is copied to `buf` (capacity `*len`) and `*len` becomes its length: ready for
/// `tether_relay_publish` or `tether_pool_publish`. `TETHER_ERR_BUFFER_TOO_SMALL` sets `*len`
/// to the length needed and writes nothing; that length does not depend on `aux_rand`, so a
/// second call with that much room succeeds.
///
/// # Errors
/// `TETHER_ERR_NULL` (`secret_key` or `len` null, `tags` or `content` null with a length, or
/// `buf` null with room asked for), `TETHER_ERR_UTF8`, `TETHER_ERR_INVALID_ARGUMENT` (not a
/// secret key, `tags` not a JSON array of arrays of strings, `kind` above 65535),
/// `TETHER_ERR_BUFFER_TOO_SMALL`, `TETHER_ERR_PANIC`.
///
/// # Safety
/// `secret_key` and `aux_rand` are null or valid for reads of 32 bytes; `tags` and `content`
/// are null or valid for their lengths; `len` is null or valid for reads and writes of a
/// `size_t`; `buf` is null or valid for writes of `*len` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // The C signature: one argument per event field.
pub unsafe extern "C" fn tether_sign_event(
    secret_key: *const u8,
    created_at: u64,
    kind: u32,
    tags: *const u8,
    tags_len: usize,
    content: *const u8,
    content_len: usize,
    aux_rand: *const u8,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    run(|| {
        if secret_key.is_null() || len.is_null() {
            return Err(TETHER_ERR_NULL);
        }
        // SAFETY: the contract is the caller's.
        let tags = unsafe { ptr::text(tags, tags_len) }?;
        // SAFETY: the contract is the caller's.
        let content = unsafe { ptr::text(content, content_len) }?;
        let kind = u16::try_from(kind).map_err(|_| TETHER_ERR_INVALID_ARGUMENT)?;
        let tags: Vec<Vec<String>> =
            serde_json::from_str(tags).map_err(|_| TETHER_ERR_INVALID_ARGUMENT)?;
        // SAFETY: the contract is the caller's.
        let keys = unsafe { keys(secret_key) }?;
        // SAFETY: the contract is the caller's.
        let aux = unsafe { aux(aux_rand) };
        let event = keys.sign_event(created_at, kind, &tags, content, aux.as_ref());
        drop(keys);
        // SAFETY: the contract is the caller's.
        Ok(unsafe { ptr::copy_out(event.as_bytes(), buf, len) })
    })
}

/// Sign the NIP-42 answer to `challenge` (`challenge_len` bytes of UTF-8: the `AUTH`
/// challenge as the relay sent it) from the relay at `relay_url` (`relay_url_len` bytes of
/// UTF-8) with the secret key at `secret_key` (32 bytes): a kind 22242 event with the tags
/// `["relay",relay_url]` and `["challenge",challenge]`, empty content, and `created_at`
/// (unix seconds, the host's clock: relays refuse an answer far from their own);
/// `secret_key` and `aux_rand` as in [`tether_sign_schnorr`]. The event's JSON goes to `buf`
/// as [`tether_sign_event`] writes it, ready for `tether_relay_authenticate` or
/// `tether_pool_authenticate`.
///
/// # Errors
/// `TETHER_ERR_NULL` (`secret_key` or `len` null, `relay_url` or `challenge` null with a
/// length, or `buf` null with room asked for), `TETHER_ERR_UTF8`,
/// `TETHER_ERR_INVALID_ARGUMENT` (not a secret key), `TETHER_ERR_BUFFER_TOO_SMALL`,
/// `TETHER_ERR_PANIC`.
///
/// # Safety
/// As [`tether_sign_event`], for `relay_url` and `challenge` in place of `tags` and
/// `content`.
#[no_mangle]
pub unsafe extern "C" fn tether_sign_auth(
    secret_key: *const u8,
    relay_url: *const u8,
    relay_url_len: usize,
    challenge: *const u8,
    challenge_len: usize,
    created_at: u64,
    aux_rand: *const u8,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    run(|| {
        if secret_key.is_null() || len.is_null() {
            return Err(TETHER_ERR_NULL);
        }
        // SAFETY: the contract is the caller's.
        let relay_url = unsafe { ptr::text(relay_url, relay_url_len) }?;
        // SAFETY: the contract is the caller's.
        let challenge = unsafe { ptr::text(challenge, challenge_len) }?;
        // SAFETY: the contract is the caller's.
        let keys = unsafe { keys(secret_key) }?;
        // SAFETY: the contract is the caller's.
        let aux = unsafe { aux(aux_rand) };
        let event = keys.sign_auth(relay_url, challenge, created_at, aux.as_ref());
        drop(keys);
        // SAFETY: the contract is the caller's.
        Ok(unsafe { ptr::copy_out(event.as_bytes(), buf, len) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::tether_verify_event;
    use crate::{TETHER_ERR_BUFFER_TOO_SMALL, TETHER_ERR_UTF8};

    const THREE: [u8; 32] = {
        let mut key = [0u8; 32];
        key[31] = 3;
        key
    };

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Sign with room for any event: the code and the JSON.
    fn sign(
        key: &[u8; 32],
        kind: u32,
        tags: &[u8],
        content: &[u8],
        aux: Option<&[u8; 32]>,
    ) -> (i32, String) {
        let mut buf = vec![0u8; 4096];
        let mut len = buf.len();
        let aux = aux.map_or(std::ptr::null(), |a| a.as_ptr());
        // SAFETY: every pointer is live for its length; `len` is a local.
        let code = unsafe {
            tether_sign_event(
                key.as_ptr(),
                1_700_000_000,
                kind,
                tags.as_ptr(),
                tags.len(),
                content.as_ptr(),
                content.len(),
                aux,
                buf.as_mut_ptr(),
                &mut len,
            )
        };
        buf.truncate(if code == TETHER_OK { len } else { 0 });
        (code, String::from_utf8(buf).unwrap())
    }

    fn verify(event: &str) -> i32 {
        // SAFETY: the event is live for its length.
        unsafe { tether_verify_event(event.as_ptr(), event.len()) }
    }

    #[test]
    fn the_public_key_of_bip340_vector_0() {
        let mut out = [0u8; 32];
        // SAFETY: both are live 32-byte arrays.
        let code = unsafe { tether_public_key(THREE.as_ptr(), out.as_mut_ptr()) };
        assert_eq!(code, TETHER_OK);
        assert_eq!(
            hex(&out),
            "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9"
        );
        // SAFETY: null pointers are refused before any access; `out` is live.
        unsafe {
            assert_eq!(
                tether_public_key(std::ptr::null(), out.as_mut_ptr()),
                TETHER_ERR_NULL
            );
            assert_eq!(
                tether_public_key(THREE.as_ptr(), std::ptr::null_mut()),
                TETHER_ERR_NULL
            );
            assert_eq!(
                tether_public_key([0u8; 32].as_ptr(), out.as_mut_ptr()),
                TETHER_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                tether_public_key([0xffu8; 32].as_ptr(), out.as_mut_ptr()),
                TETHER_ERR_INVALID_ARGUMENT
            );
        }
    }

    #[test]
    fn bip340_vector_0_with_and_without_aux_rand() {
        let expected = "e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca8215\
                        25f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0";
        for aux in [std::ptr::null(), [0u8; 32].as_ptr()] {
            let mut sig = [0u8; 64];
            // SAFETY: every pointer is null or a live array of the stated length.
            let code = unsafe {
                tether_sign_schnorr(THREE.as_ptr(), [0u8; 32].as_ptr(), aux, sig.as_mut_ptr())
            };
            assert_eq!((code, hex(&sig)), (TETHER_OK, expected.to_owned()));
        }
    }

    #[test]
    fn a_signed_event_verifies_and_a_deterministic_one_repeats() {
        let (code, event) = sign(
            &THREE,
            1,
            br#"[["t","tether"]]"#,
            "hi \u{2615}".as_bytes(),
            None,
        );
        assert_eq!(code, TETHER_OK);
        assert_eq!(verify(&event), TETHER_OK);
        assert_eq!(
            sign(
                &THREE,
                1,
                br#"[["t","tether"]]"#,
                "hi \u{2615}".as_bytes(),
                None
            )
            .1,
            event
        );
        let (code, other) = sign(
            &THREE,
            1,
            br#"[["t","tether"]]"#,
            "hi \u{2615}".as_bytes(),
            Some(&[9; 32]),
        );
        assert_eq!((code, verify(&other)), (TETHER_OK, TETHER_OK));
        assert_ne!(other, event, "other aux_rand, other signature");
        assert_eq!(other.len(), event.len());
    }

    #[test]
    fn the_auth_answer_verifies_and_too_small_asks_for_the_length() {
        let (url, challenge) = ("wss://relay.example.com", "c-1");
        let mut len = 0usize;
        // SAFETY: every pointer is live for its length; no buffer is given with no room.
        let code = unsafe {
            tether_sign_auth(
                THREE.as_ptr(),
                url.as_ptr(),
                url.len(),
                challenge.as_ptr(),
                challenge.len(),
                1_700_000_000,
                std::ptr::null(),
                std::ptr::null_mut(),
                &mut len,
            )
        };
        assert_eq!(code, TETHER_ERR_BUFFER_TOO_SMALL);
        let mut buf = vec![0u8; len];
        // SAFETY: as above, with a buffer of `len` bytes.
        let code = unsafe {
            tether_sign_auth(
                THREE.as_ptr(),
                url.as_ptr(),
                url.len(),
                challenge.as_ptr(),
                challenge.len(),
                1_700_000_000,
                std::ptr::null(),
                buf.as_mut_ptr(),
                &mut len,
            )
        };
        assert_eq!((code, len), (TETHER_OK, buf.len()));
        let event = String::from_utf8(buf).unwrap();
        assert_eq!(verify(&event), TETHER_OK);
        let value: serde_json::Value = serde_json::from_str(&event).unwrap();
        assert_eq!(value["kind"], 22242);
        assert_eq!(
            value["tags"],
            serde_json::json!([["relay", url], ["challenge", challenge]])
        );
    }

    #[test]
    fn misuse_is_a_code() {
        assert_eq!(
            sign(&[0; 32], 1, b"[]", b"", None).0,
            TETHER_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            sign(&THREE, 65_536, b"[]", b"", None).0,
            TETHER_ERR_INVALID_ARGUMENT
        );
        assert_eq!(sign(&THREE, 65_535, b"[]", b"", None).0, TETHER_OK);
        for tags in [&b"{}"[..], b"[1]", b"[[1]]", b"[\"t\"]", b"nope"] {
            assert_eq!(
                sign(&THREE, 1, tags, b"", None).0,
                TETHER_ERR_INVALID_ARGUMENT
            );
        }
        assert_eq!(sign(&THREE, 1, b"[[]]", b"", None).0, TETHER_OK);
        assert_eq!(sign(&THREE, 1, b"[]", b"\xff", None).0, TETHER_ERR_UTF8);
        let mut len = 64usize;
        // SAFETY: null pointers with lengths are refused before any read; `len` is a local.
        unsafe {
            let null = std::ptr::null();
            assert_eq!(
                tether_sign_event(
                    null,
                    1,
                    1,
                    null,
                    0,
                    null,
                    0,
                    null,
                    std::ptr::null_mut(),
                    &mut len
                ),
                TETHER_ERR_NULL
            );
            assert_eq!(
                tether_sign_event(
                    THREE.as_ptr(),
                    1,
                    1,
                    null,
                    2,
                    null,
                    0,
                    null,
                    std::ptr::null_mut(),
                    &mut len
                ),
                TETHER_ERR_NULL
            );
            assert_eq!(
                tether_sign_event(
                    THREE.as_ptr(),
                    1,
                    1,
                    null,
                    0,
                    null,
                    0,
                    null,
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                TETHER_ERR_NULL
            );
            // Empty tags: no bytes is not a JSON array.
            assert_eq!(
                tether_sign_event(
                    THREE.as_ptr(),
                    1,
                    1,
                    null,
                    0,
                    null,
                    0,
                    null,
                    std::ptr::null_mut(),
                    &mut len
                ),
                TETHER_ERR_INVALID_ARGUMENT
            );
        }
    }
}

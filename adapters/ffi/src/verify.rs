//! Event verification through the ABI: [`tether_verify_event`], tether-verify's id and
//! signature check with no handle, so a host runs checks on its own threads (a pool hands
//! them out; the verdicts go back to it).

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use tether_verify::{Invalid, Verifier};

use crate::{ptr, TETHER_ERR_PANIC, TETHER_OK};

/// Not an event object with the NIP-01 fields and types.
pub const TETHER_VERIFY_MALFORMED: i32 = 2;
/// The id is not the sha256 of the event's serialization.
pub const TETHER_VERIFY_BAD_ID: i32 = 3;
/// The pubkey is not 32 bytes of hex naming a point on the curve.
pub const TETHER_VERIFY_MALFORMED_PUBKEY: i32 = 4;
/// The signature is not 64 bytes of hex.
pub const TETHER_VERIFY_MALFORMED_SIGNATURE: i32 = 5;
/// The signature does not verify for this id and pubkey.
pub const TETHER_VERIFY_BAD_SIGNATURE: i32 = 6;

thread_local! {
    // A verification context per thread: building one per call would cost more than a check.
    static VERIFIER: RefCell<Option<Verifier>> = const { RefCell::new(None) };
}

/// Check one event (its JSON object, `event_len` bytes of UTF-8, as a relay sends it inside
/// `["EVENT", sub, ...]`): the id is the sha256 of its NIP-01 serialization and the signature
/// a BIP-340 Schnorr signature of it by the pubkey (libsecp256k1, as `tether-verify`).
///
/// Returns [`TETHER_OK`] for a genuine event, else why not, cheapest check first:
/// [`TETHER_VERIFY_MALFORMED`], [`TETHER_VERIFY_BAD_ID`], [`TETHER_VERIFY_MALFORMED_PUBKEY`],
/// [`TETHER_VERIFY_MALFORMED_SIGNATURE`], [`TETHER_VERIFY_BAD_SIGNATURE`] (positive codes: a
/// verdict, not a failure of the call).
///
/// No handle and no shared state: callable from any number of threads at once (each keeps
/// its own verification context).
///
/// # Errors
/// `TETHER_ERR_NULL` (`event` null with a length), `TETHER_ERR_UTF8`, `TETHER_ERR_PANIC`.
///
/// # Safety
/// `event` is null or valid for `event_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_verify_event(event: *const u8, event_len: usize) -> i32 {
    // SAFETY: the contract is the caller's.
    let raw = match unsafe { ptr::text(event, event_len) } {
        Ok(raw) => raw,
        Err(code) => return code,
    };
    let verdict = catch_unwind(AssertUnwindSafe(|| {
        VERIFIER.with(|cell| {
            let mut verifier = cell.borrow_mut();
            verifier.get_or_insert_with(Verifier::new).verify(raw)
        })
    }));
    match verdict {
        Ok(Ok(())) => TETHER_OK,
        Ok(Err(why)) => code(&why),
        Err(_) => TETHER_ERR_PANIC,
    }
}

/// Check `count` events at once: `events[i]` (`lens[i]` bytes) gets its verdict in
/// `out[i]`, as [`tether_verify_event`] would return it. One call for a batch, so a host whose
/// foreign calls are costly (an interpreter that takes a lock back after each) pays once.
///
/// # Errors
/// `TETHER_ERR_NULL` (`lens` or `out` null with a count, or `events` null), then nothing is
/// written; a null or non-UTF-8 event gets its error code in its own slot.
///
/// # Safety
/// `events`, `lens` and `out` are null or valid for `count` elements; each `events[i]` is
/// null or valid for `lens[i]` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_verify_events(
    events: *const *const u8,
    lens: *const usize,
    count: usize,
    out: *mut i32,
) -> i32 {
    if count == 0 {
        return TETHER_OK;
    }
    if events.is_null() || lens.is_null() || out.is_null() {
        return crate::TETHER_ERR_NULL;
    }
    for i in 0..count {
        // SAFETY: each array is valid for `count` elements by the contract.
        let (event, len) = unsafe { (events.add(i).read(), lens.add(i).read()) };
        // SAFETY: as above; the event pointer's contract is the caller's.
        unsafe { out.add(i).write(tether_verify_event(event, len)) };
    }
    TETHER_OK
}

fn code(why: &Invalid) -> i32 {
    match why {
        Invalid::Malformed(_) => TETHER_VERIFY_MALFORMED,
        Invalid::BadId => TETHER_VERIFY_BAD_ID,
        Invalid::MalformedPubkey => TETHER_VERIFY_MALFORMED_PUBKEY,
        Invalid::MalformedSignature => TETHER_VERIFY_MALFORMED_SIGNATURE,
        // `Invalid` is non-exhaustive: a check a later tether-verify adds is a bad signature
        // to the host (the event is not genuine either way).
        _ => TETHER_VERIFY_BAD_SIGNATURE,
    }
}

/// The wording of a `TETHER_VERIFY_*` code: tether-verify's own (a malformed event without
/// its detail, which the code does not carry); `None` for any other code.
pub(crate) fn verdict_reason(code: i32) -> Option<String> {
    let why = match code {
        TETHER_VERIFY_MALFORMED => return Some("malformed event".to_owned()),
        TETHER_VERIFY_BAD_ID => Invalid::BadId,
        TETHER_VERIFY_MALFORMED_PUBKEY => Invalid::MalformedPubkey,
        TETHER_VERIFY_MALFORMED_SIGNATURE => Invalid::MalformedSignature,
        TETHER_VERIFY_BAD_SIGNATURE => Invalid::BadSignature,
        _ => return None,
    };
    debug_assert_eq!(self::code(&why), code);
    Some(why.to_string())
}

//! NIP-11 through the ABI: the host fetches a relay's information document (when a
//! `fetch_info` transmit asks, or whenever it likes) and passes its bytes to
//! `tether_relay_apply_relay_info` or `tether_pool_apply_relay_info`; the session reads the
//! limits it uses and says what is in force.

use tether_core::nostr::{Applied, RelayInfo};

use crate::{ptr, Failure, TETHER_ERR_BUFFER_TOO_SMALL, TETHER_ERR_NULL, TETHER_OK};
use tether_core::line::write_into;

/// A `*_apply_relay_info` result: the relay's document was not read (larger than 64 KiB,
/// not JSON, not an object). The session is unchanged and `buf` holds
/// `{"error":"..."}`. A verdict on the peer's document, not a failure of the call.
pub const TETHER_INFO_UNREADABLE: i32 = 2;

/// The least buffer capacity `*_apply_relay_info` takes: the longest answer it writes.
pub const TETHER_APPLIED_MAX: usize = 512;

/// Read `document`, apply it with `apply`, and write what is in force (or why it was not
/// read) to `buf`. A buffer under [`TETHER_APPLIED_MAX`] is refused before anything is
/// applied, so that a retry with a larger one does not apply the document twice.
///
/// # Safety
/// `document` is null or valid for `document_len` bytes; `len` is null or valid; `buf` is
/// valid for `*len` bytes.
pub(crate) unsafe fn apply_document(
    document: *const u8,
    document_len: usize,
    buf: *mut u8,
    len: *mut usize,
    apply: impl FnOnce(&RelayInfo) -> Result<Applied, Failure>,
) -> Result<i32, Failure> {
    if len.is_null() {
        return Err(Failure::arg(TETHER_ERR_NULL, "len"));
    }
    // SAFETY: non-null, and valid by the contract.
    let capacity = unsafe { len.read_unaligned() };
    if capacity < TETHER_APPLIED_MAX {
        // SAFETY: as above.
        unsafe { len.write_unaligned(TETHER_APPLIED_MAX) };
        return Ok(TETHER_ERR_BUFFER_TOO_SMALL);
    }
    if buf.is_null() {
        return Err(Failure::arg(TETHER_ERR_NULL, "buf"));
    }
    // SAFETY: the contract is the caller's.
    let bytes = unsafe { ptr::bytes(document, document_len) }
        .map_err(|code| Failure::arg(code, "document"))?;
    let mut out = Vec::with_capacity(128);
    let code = match RelayInfo::parse(bytes) {
        Ok(info) => {
            write_into(&apply(&info)?, &mut out);
            TETHER_OK
        }
        Err(error) => {
            let mut why = error.to_string();
            if why.len() > TETHER_APPLIED_MAX / 2 {
                let mut end = TETHER_APPLIED_MAX / 2;
                while !why.is_char_boundary(end) {
                    end -= 1;
                }
                why.truncate(end);
            }
            out.extend_from_slice(b"{\"error\":");
            let _ = serde_json::to_writer(&mut out, &why);
            out.push(b'}');
            TETHER_INFO_UNREADABLE
        }
    };
    // SAFETY: the contract is the caller's; the capacity was checked above.
    match unsafe { ptr::copy_out(&out, buf, len) } {
        TETHER_OK => Ok(code),
        other => Ok(other),
    }
}

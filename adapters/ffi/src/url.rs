//! The URL rule through the ABI: [`tether_check_url`], and relay identity:
//! [`tether_normalize_url`]. The host opens the sockets and
//! requests itself, so it checks a URL before it starts a session, with the same rule and
//! the same words as the Rust entry points (`tether_driver::url`: the rule exists once).

use tether_driver::url::{check_http_url, check_ws_url, normalize_relay_url};

use crate::{ptr, Failure, TETHER_ERR_INVALID_ARGUMENT, TETHER_OK};

/// `kind` of [`tether_check_url`]: a relay URL, ws:// or wss:// (lower case).
pub const TETHER_URL_RELAY: u32 = 1;
/// `kind` of [`tether_check_url`]: an SSE endpoint, http:// or https://.
pub const TETHER_URL_SSE: u32 = 2;

/// The URL fails the URL rule; [`tether_check_url`] wrote why.
pub const TETHER_ERR_INVALID_URL: i32 = -10;

/// Check `url` (UTF-8, `url_len` bytes) against tether's URL rule for `kind`
/// ([`TETHER_URL_RELAY`]: ws:// or wss://; [`TETHER_URL_SSE`]: http:// or https://): the
/// scheme, a host, and a port of digits in 1-65535 when one is written. A URL that fails
/// would otherwise surface only as reconnects failing forever.
///
/// Returns [`TETHER_OK`] for a URL that passes (`*why_len` becomes 0). Otherwise the
/// message saying what is wrong, as the Rust entry points word it (`invalid URL:
/// ws://127.0.0.1:99999/: port 99999 is not in 1-65535`), is copied into `why` (capacity
/// `*why_len`) and `*why_len` becomes its length. `why_len` may be null: then only the code
/// is returned.
///
/// No handle and no state: callable from any thread at any time.
///
/// # Errors
/// [`TETHER_ERR_INVALID_URL`] for a URL the rule refuses; `TETHER_ERR_NULL` (`url` null with
/// a length, or `why` null with room asked for), `TETHER_ERR_UTF8`,
/// `TETHER_ERR_INVALID_ARGUMENT` (an unknown `kind`), each with its message in `why`;
/// `TETHER_ERR_BUFFER_TOO_SMALL` when the message does not fit: `*why_len` is the length
/// needed, and calling again with that much room gives the code and the message (the URL
/// failed either way); `TETHER_ERR_PANIC` if the check panicked.
///
/// # Safety
/// `url` is null or valid for `url_len` bytes; `why_len` is null or valid for reads and
/// writes of a `size_t`; `why` is null or valid for `*why_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_check_url(
    url: *const u8,
    url_len: usize,
    kind: u32,
    why: *mut u8,
    why_len: *mut usize,
) -> i32 {
    let check = || -> Result<(), Failure> {
        // SAFETY: the contract is the caller's.
        let url = unsafe { ptr::text(url, url_len) }.map_err(|code| Failure::arg(code, "url"))?;
        let checked = match kind {
            TETHER_URL_RELAY => check_ws_url(url),
            TETHER_URL_SSE => check_http_url(url),
            _ => {
                return Err(Failure::new(
                    TETHER_ERR_INVALID_ARGUMENT,
                    format!("kind {kind} is neither TETHER_URL_RELAY (1) nor TETHER_URL_SSE (2)"),
                ))
            }
        };
        checked.map_err(|e| Failure::new(TETHER_ERR_INVALID_URL, e.to_string()))
    };
    let (code, message) = match std::panic::catch_unwind(check) {
        Ok(Ok(())) => (TETHER_OK, String::new()),
        Ok(Err(failure)) => (failure.code, failure.message),
        Err(_) => (crate::TETHER_ERR_PANIC, "the URL check panicked".to_owned()),
    };
    // SAFETY: the contract is the caller's.
    unsafe { ptr::code_with_message(code, &message, why, why_len) }
}

/// Whether `address` (UTF-8 text, `address_len` bytes: `127.0.0.1`, `::ffff:10.0.0.1`) is
/// an address a relay from a stranger's relay list may not be dialed at: loopback, private,
/// link-local and the like, in their IPv4-mapped, IPv4-compatible and NAT64 forms too (the
/// core's one rule). A host dialing a relay [`tether_pool_public_only`](crate::pool::tether_pool_public_only)
/// names checks every address the relay's name resolves to, and dials none when any is
/// private. `*out_private` becomes 1 for a private address, 0 otherwise.
///
/// No handle and no state: callable from any thread at any time.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_UTF8`, `TETHER_ERR_INVALID_ARGUMENT` for text that is not
/// an IP address.
///
/// # Safety
/// `address` is null or valid for `address_len` bytes; `out_private` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn tether_is_private_ip(
    address: *const u8,
    address_len: usize,
    out_private: *mut u32,
) -> i32 {
    if out_private.is_null() {
        return crate::TETHER_ERR_NULL;
    }
    // SAFETY: the contract is the caller's.
    let text = match unsafe { ptr::text(address, address_len) } {
        Ok(text) => text,
        Err(code) => return code,
    };
    let Ok(ip) = text.parse::<std::net::IpAddr>() else {
        return TETHER_ERR_INVALID_ARGUMENT;
    };
    let private = tether_core::router::relay_url::is_private_ip(ip);
    // SAFETY: non-null (checked above) and writable by the contract.
    match unsafe { ptr::write(out_private, u32::from(private)) } {
        Ok(()) => TETHER_OK,
        Err(code) => code,
    }
}

/// Which relay `url` (UTF-8, `url_len` bytes, ws:// or wss://) is: its normal form, as the
/// pool and the Rust entry points compare relays (`wss://r:443` and `wss://r/` are one
/// relay; the path keeps its case). Two URLs are one relay exactly when their normal forms
/// are equal, so a host never decides that itself.
///
/// On [`TETHER_OK`] the normal form is copied into `out` (capacity `*out_len`) and
/// `*out_len` becomes its length. Otherwise `out` receives the message, as
/// [`tether_check_url`] writes it.
///
/// No handle and no state: callable from any thread at any time.
///
/// # Errors
/// [`TETHER_ERR_INVALID_URL`] for a URL that is no relay URL; `TETHER_ERR_NULL`,
/// `TETHER_ERR_UTF8`; `TETHER_ERR_BUFFER_TOO_SMALL` when the text does not fit (`*out_len`
/// is the length needed); `TETHER_ERR_PANIC`.
///
/// # Safety
/// As [`tether_check_url`], with `out` and `out_len` for `why` and `why_len`.
#[no_mangle]
pub unsafe extern "C" fn tether_normalize_url(
    url: *const u8,
    url_len: usize,
    out: *mut u8,
    out_len: *mut usize,
) -> i32 {
    let normalize = || -> Result<String, Failure> {
        // SAFETY: the contract is the caller's.
        let url = unsafe { ptr::text(url, url_len) }.map_err(|code| Failure::arg(code, "url"))?;
        normalize_relay_url(url).map_err(|e| Failure::new(TETHER_ERR_INVALID_URL, e.to_string()))
    };
    let (code, text) = match std::panic::catch_unwind(normalize) {
        Ok(Ok(normal)) => (TETHER_OK, normal),
        Ok(Err(failure)) => (failure.code, failure.message),
        Err(_) => (crate::TETHER_ERR_PANIC, "the URL rule panicked".to_owned()),
    };
    // SAFETY: the contract is the caller's.
    unsafe { ptr::code_with_message(code, &text, out, out_len) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TETHER_ERR_BUFFER_TOO_SMALL, TETHER_ERR_UTF8};

    /// The code and the message of one check, with room for any message.
    fn check(url: &[u8], kind: u32) -> (i32, String) {
        let mut why = [0u8; 256];
        let mut len = why.len();
        // SAFETY: `url` and `why` are live for their lengths; `len` is a local.
        let code =
            unsafe { tether_check_url(url.as_ptr(), url.len(), kind, why.as_mut_ptr(), &mut len) };
        (code, String::from_utf8(why[..len].to_vec()).unwrap())
    }

    #[test]
    fn the_driver_rule_with_its_words() {
        assert_eq!(
            check(b"wss://relay.example.com", TETHER_URL_RELAY),
            (TETHER_OK, "".into())
        );
        assert_eq!(
            check(b"ws://[::1]:7777/", TETHER_URL_RELAY),
            (TETHER_OK, "".into())
        );
        assert_eq!(
            check(b"https://example.com/events", TETHER_URL_SSE),
            (TETHER_OK, "".into())
        );
        for (url, kind) in [
            ("ws://127.0.0.1:99999/", TETHER_URL_RELAY),
            ("ws://h:abc", TETHER_URL_RELAY),
            ("WSS://relay.example.com", TETHER_URL_RELAY),
            ("http://relay.example.com", TETHER_URL_RELAY),
            ("ws://example.com/events", TETHER_URL_SSE),
            ("http:///x", TETHER_URL_SSE),
            ("", TETHER_URL_SSE),
        ] {
            let expected = if kind == TETHER_URL_RELAY {
                check_ws_url(url)
            } else {
                check_http_url(url)
            };
            assert_eq!(
                check(url.as_bytes(), kind),
                (TETHER_ERR_INVALID_URL, expected.unwrap_err().to_string()),
                "{url}"
            );
        }
        assert_eq!(
            check(b"ws://127.0.0.1:99999/", TETHER_URL_RELAY).1,
            "invalid URL: ws://127.0.0.1:99999/: port 99999 is not in 1-65535"
        );
    }

    #[test]
    fn misuse_is_a_code_with_a_message() {
        assert_eq!(
            check(b"wss://relay.example.com", 0),
            (
                TETHER_ERR_INVALID_ARGUMENT,
                "kind 0 is neither TETHER_URL_RELAY (1) nor TETHER_URL_SSE (2)".into()
            )
        );
        assert_eq!(
            check(b"ws://h\xff", TETHER_URL_RELAY),
            (TETHER_ERR_UTF8, "url is not valid UTF-8".into())
        );
        let mut len = 0usize;
        // SAFETY: a null `url` with a length is refused before any read; `len` is a local.
        let code = unsafe {
            tether_check_url(
                std::ptr::null(),
                4,
                TETHER_URL_RELAY,
                std::ptr::null_mut(),
                &mut len,
            )
        };
        assert_eq!(
            (code, len),
            (TETHER_ERR_BUFFER_TOO_SMALL, "url is a null pointer".len())
        );
        let url = b"ws://127.0.0.1:0";
        // SAFETY: `url` is live for its length; no message is asked for.
        let code = unsafe {
            tether_check_url(
                url.as_ptr(),
                url.len(),
                TETHER_URL_RELAY,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(code, TETHER_ERR_INVALID_URL);
        // Too small: the length needed, then the code and the message with that much room.
        let mut why = [0u8; 8];
        let mut len = why.len();
        // SAFETY: `url` and `why` are live for their lengths; `len` is a local.
        let code = unsafe {
            tether_check_url(
                url.as_ptr(),
                url.len(),
                TETHER_URL_RELAY,
                why.as_mut_ptr(),
                &mut len,
            )
        };
        let message = "invalid URL: ws://127.0.0.1:0: port 0 is not in 1-65535";
        assert_eq!((code, len), (TETHER_ERR_BUFFER_TOO_SMALL, message.len()));
        assert_eq!(
            check(url, TETHER_URL_RELAY),
            (TETHER_ERR_INVALID_URL, message.into())
        );
    }

    #[test]
    fn callable_from_any_thread() {
        let threads: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    let url = format!("ws://127.0.0.1:{}", 65_534 + i);
                    check(url.as_bytes(), TETHER_URL_RELAY).0
                })
            })
            .collect();
        let codes: Vec<i32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(
            codes,
            [
                TETHER_OK,
                TETHER_OK,
                TETHER_ERR_INVALID_URL,
                TETHER_ERR_INVALID_URL
            ]
        );
    }

    fn normalize(url: &str) -> (i32, String) {
        let mut out = [0u8; 256];
        let mut len = out.len();
        // SAFETY: `url` and `out` are live for their lengths; `len` is a local.
        let code =
            unsafe { tether_normalize_url(url.as_ptr(), url.len(), out.as_mut_ptr(), &mut len) };
        (code, String::from_utf8(out[..len].to_vec()).unwrap())
    }

    #[test]
    fn one_relay_one_normal_form() {
        let (code, a) = normalize("wss://R.example:443/");
        let (_, b) = normalize("wss://r.example");
        assert_eq!((code, a.as_str()), (TETHER_OK, b.as_str()));
        let (_, upper) = normalize("wss://r.example/A");
        let (_, lower) = normalize("wss://r.example/a");
        assert_ne!(upper, lower, "the path keeps its case");
        assert_eq!(normalize("http://r.example").0, TETHER_ERR_INVALID_URL);
    }
}

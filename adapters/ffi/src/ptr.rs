//! Every dereference of a host pointer, in one place. Each helper checks for null and turns
//! the host's (pointer, length) into a Rust value or writes one back; the callers are the
//! `extern "C"` entry points, whose own contracts pass the validity requirements on.

use std::mem::size_of;
use std::panic::UnwindSafe;

use crate::{TETHER_ERR_BUFFER_TOO_SMALL, TETHER_ERR_NULL, TETHER_ERR_UTF8, TETHER_OK};

/// The body of an entry point that acts on a handle: `guarded!(handle, |h| ...)` runs the
/// closure under [`guard`] (null and poison checks, panics caught, failures recorded as the
/// last error). Written once here so the 37 such entry points do not each repeat the unsafe
/// call and its justification.
///
/// Use it only as the body of an `extern "C"` function whose `# Safety` section requires
/// `handle` to be null or a live handle used by no other thread during the call.
macro_rules! guarded {
    ($handle:expr, $body:expr) => {{
        // Bound outside the unsafe block, so the body's own unsafe operations still need
        // (and carry) their own blocks and SAFETY comments.
        let (handle, body) = ($handle, $body);
        // SAFETY: the entry point's contract makes `handle` null or a live handle from its
        // `*_new`, used by no other thread during the call: what `guard` requires.
        unsafe { $crate::ptr::guard(handle, body) }
    }};
}

/// The bytes at `ptr`: an empty slice for `len == 0` (any pointer, null included).
///
/// # Safety
/// `ptr` is null or valid for reads of `len` bytes for the returned lifetime.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], i32> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(TETHER_ERR_NULL);
    }
    // SAFETY: non-null and, by this function's contract, valid for `len` bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The UTF-8 text at `ptr`.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn text<'a>(ptr: *const u8, len: usize) -> Result<&'a str, i32> {
    // SAFETY: the contract is passed on.
    let bytes = unsafe { bytes(ptr, len) }?;
    std::str::from_utf8(bytes).map_err(|_| TETHER_ERR_UTF8)
}

/// Optional UTF-8 text: `None` when `ptr` is null.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn opt_text<'a>(ptr: *const u8, len: usize) -> Result<Option<&'a str>, i32> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the contract is passed on.
    unsafe { text(ptr, len) }.map(Some)
}

/// Store `value` at `out`.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
pub(crate) unsafe fn write<T>(out: *mut T, value: T) -> Result<(), i32> {
    if out.is_null() {
        return Err(TETHER_ERR_NULL);
    }
    // SAFETY: non-null and valid for a write of `T` by this function's contract.
    unsafe { out.write_unaligned(value) };
    Ok(())
}

/// Store `value` at `out` unless `out` is null (an optional output).
///
/// # Safety
/// As [`write`].
pub(crate) unsafe fn write_opt<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the contract is passed on; null was excluded.
        let _ = unsafe { write(out, value) };
    }
}

/// Copy `item` into the host's buffer `buf` of capacity `*len`, and set `*len` to the length
/// written ([`TETHER_OK`]) or needed ([`TETHER_ERR_BUFFER_TOO_SMALL`]).
///
/// # Safety
/// `len` is null or valid for reads and writes of a `usize`; `buf` is null or valid for
/// writes of `*len` bytes.
pub(crate) unsafe fn copy_out(item: &[u8], buf: *mut u8, len: *mut usize) -> i32 {
    if len.is_null() {
        return TETHER_ERR_NULL;
    }
    // SAFETY: non-null and valid by this function's contract.
    let capacity = unsafe { len.read_unaligned() };
    if capacity < item.len() {
        // SAFETY: as above.
        unsafe { len.write_unaligned(item.len()) };
        return TETHER_ERR_BUFFER_TOO_SMALL;
    }
    if !item.is_empty() {
        if buf.is_null() {
            return TETHER_ERR_NULL;
        }
        // SAFETY: `buf` is valid for `capacity >= item.len()` bytes by this function's
        // contract, and a host buffer cannot overlap a buffer the library owns.
        unsafe { std::ptr::copy_nonoverlapping(item.as_ptr(), buf, item.len()) };
    }
    // SAFETY: as above.
    unsafe { len.write_unaligned(item.len()) };
    TETHER_OK
}

/// Return `code`, with `message` copied to `why` as [`copy_out`] copies (no copy when
/// `why_len` is null): [`TETHER_ERR_BUFFER_TOO_SMALL`] when it does not fit (`*why_len` the
/// length needed), the copy's own error otherwise, else `code`. How the handle-less entry
/// points (`tether_check_url`, the restores) report why they failed.
///
/// # Safety
/// As [`copy_out`], for `why` and `why_len`.
pub(crate) unsafe fn code_with_message(
    code: i32,
    message: &str,
    why: *mut u8,
    why_len: *mut usize,
) -> i32 {
    if why_len.is_null() {
        return code;
    }
    // SAFETY: the contract is passed on.
    match unsafe { copy_out(message.as_bytes(), why, why_len) } {
        TETHER_OK => code,
        failed => failed,
    }
}

/// Read a size-versioned config struct: start from `defaults`, overlay the first
/// `struct_size` bytes the host passed (its version of the struct), and accept a larger
/// (newer) struct only if every byte this library does not know is zero — the rule of
/// Linux's `copy_struct_from_user`, so a new field set to a non-default value is never
/// silently ignored.
///
/// `T` must be a `#[repr(C)]` struct of integers (and raw pointers, null by default) whose first field is the `u32`
/// `struct_size`, and every bit pattern of it must be valid; the caller validates field
/// values afterwards. `min_size` is the size of the first version.
///
/// # Safety
/// `config` is null or valid for reads of the `u32` at its start and then of `struct_size`
/// bytes.
pub(crate) unsafe fn versioned<T: Copy>(
    config: *const T,
    defaults: T,
    min_size: usize,
) -> Result<T, i32> {
    if config.is_null() {
        return Err(TETHER_ERR_NULL);
    }
    // SAFETY: the struct starts with its `u32` size, readable by this function's contract.
    let size = unsafe { config.cast::<u32>().read_unaligned() } as usize;
    if size < min_size {
        return Err(crate::TETHER_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: valid for `size` bytes by this function's contract.
    let host = unsafe { std::slice::from_raw_parts(config.cast::<u8>(), size) };
    let ours = size_of::<T>();
    if size > ours && host[ours..].iter().any(|&b| b != 0) {
        return Err(crate::TETHER_ERR_INVALID_ARGUMENT);
    }
    let mut value = defaults;
    let known = size.min(ours);
    // SAFETY: `value` is a `T` of `ours >= known` bytes and any bit pattern is a valid `T`
    // (integers only, by this function's contract); the source is the host's `known` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            host.as_ptr(),
            std::ptr::from_mut(&mut value).cast::<u8>(),
            known,
        );
    }
    Ok(value)
}

/// Write the first `struct_size` bytes of `defaults` (this library's defaults, its own size
/// in `struct_size`) over the host's struct at `config`, keeping the host's `struct_size`.
/// Bytes past what this library knows are zeroed: no field there has a non-zero default.
/// Returns the `*_config_default` code.
///
/// # Safety
/// As [`versioned`], for writes.
pub(crate) unsafe fn write_versioned<T: Copy>(config: *mut T, defaults: T, min_size: usize) -> i32 {
    if config.is_null() {
        return TETHER_ERR_NULL;
    }
    // SAFETY: the struct starts with its `u32` size, readable by this function's contract.
    let size = unsafe { config.cast::<u32>().read_unaligned() } as usize;
    if size < min_size {
        return crate::TETHER_ERR_INVALID_ARGUMENT;
    }
    let ours = size_of::<T>();
    let known = size.min(ours);
    let dst = config.cast::<u8>();
    // SAFETY: `dst` is valid for `size >= known` bytes by this function's contract; the
    // source is a local `T` of `ours >= known` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(std::ptr::from_ref(&defaults).cast::<u8>(), dst, known);
    }
    if size > ours {
        // SAFETY: as above, bytes `ours..size` of the host's struct.
        unsafe { std::ptr::write_bytes(dst.add(ours), 0, size - ours) };
    }
    // The host's size stays: the struct is still the host's version.
    // SAFETY: as above.
    unsafe { config.cast::<u32>().write_unaligned(size as u32) };
    TETHER_OK
}

/// Run one entry point on the handle at `handle`: null is [`TETHER_ERR_NULL`], a poisoned
/// handle [`crate::TETHER_ERR_POISONED`]; a panic inside `f` poisons the handle and returns
/// [`crate::TETHER_ERR_PANIC`]; a [`Failure`](crate::Failure) is recorded as the handle's last
/// error and its code returned.
///
/// # Safety
/// `handle` is null or a live handle from its `*_new`, used by no other thread during the
/// call.
pub(crate) unsafe fn guard<H: crate::Guarded>(
    handle: *mut H,
    f: impl FnOnce(&mut H) -> Result<i32, crate::Failure>,
) -> i32 {
    // SAFETY: null or a live, unaliased handle by this function's contract.
    let Some(h) = (unsafe { handle.as_mut() }) else {
        return TETHER_ERR_NULL;
    };
    if h.health().poisoned {
        return crate::TETHER_ERR_POISONED;
    }
    // A panic leaves the session in an unknown state, so the handle is poisoned and never
    // touched again but by `*_free`: observing broken invariants is impossible.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(h))) {
        Ok(Ok(code)) => code,
        Ok(Err(failure)) => {
            // SAFETY: as above; the closure's borrow ended.
            let h = unsafe { &mut *handle };
            h.health().error = failure.message;
            failure.code
        }
        Err(_) => {
            // SAFETY: as above; the closure's borrow ended with the unwind.
            let h = unsafe { &mut *handle };
            h.health().poison();
            crate::TETHER_ERR_PANIC
        }
    }
}

/// A `*_new`: build the handle with `make` (a panic is [`crate::TETHER_ERR_PANIC`], an
/// error its code), move it to the heap and hand the host its pointer at `out`.
///
/// # Safety
/// `out` is null or valid for a write of a pointer.
pub(crate) unsafe fn construct<H>(
    out: *mut *mut H,
    make: impl FnOnce() -> Result<H, i32> + UnwindSafe,
) -> i32 {
    if out.is_null() {
        return TETHER_ERR_NULL;
    }
    match std::panic::catch_unwind(make) {
        Ok(Ok(value)) => {
            let raw = Box::into_raw(Box::new(value));
            // SAFETY: non-null and writable by this function's contract.
            unsafe { out.write_unaligned(raw) };
            TETHER_OK
        }
        Ok(Err(code)) => code,
        Err(_) => crate::TETHER_ERR_PANIC,
    }
}

/// Take back and drop a handle from [`construct`]; null is a no-op. A panic in a destructor
/// is caught (the memory may leak then, but never unwinds into the host).
///
/// # Safety
/// `handle` is null or a live handle from [`construct`], freed at most once.
pub(crate) unsafe fn free<H>(handle: *mut H) {
    if handle.is_null() {
        return;
    }
    // SAFETY: a live handle from `Box::into_raw`, freed once, by this function's contract.
    let boxed = unsafe { Box::from_raw(handle) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(boxed)));
}

/// Copy a handle's last error message out, as [`copy_out`] does.
///
/// # Safety
/// `handle` as in [`guard`]; `buf` and `len` as in [`copy_out`].
pub(crate) unsafe fn last_error<H: crate::Guarded>(
    handle: *const H,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    // SAFETY: null or a live handle by this function's contract.
    let Some(h) = (unsafe { handle.as_ref() }) else {
        return TETHER_ERR_NULL;
    };
    // SAFETY: the contract is passed on.
    unsafe { copy_out(h.health_ref().error.as_bytes(), buf, len) }
}

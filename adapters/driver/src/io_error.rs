//! What an I/O error means to a driver, for every socket and HTTP client: a leaf the
//! WebSocket and SSE paths both read.

/// Whether `error` is the process (`EMFILE`) or the system (`ENFILE`) out of file
/// descriptors. Both numbers are the same on Linux, the BSDs and macOS.
pub(crate) fn out_of_files(error: &std::io::Error) -> bool {
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    cfg!(unix) && matches!(error.raw_os_error(), Some(ENFILE | EMFILE))
}

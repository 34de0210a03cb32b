//! cargo-fuzz target `sse_session`; the body is `tether_testkit::fuzz::sse_session` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::sse_session(data));

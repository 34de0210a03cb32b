//! cargo-fuzz target `sse_parser`; the body is `tether_testkit::fuzz::sse_parser` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::sse_parser(data));

//! cargo-fuzz target `checkpoint`; the body is `tether_testkit::fuzz::checkpoint` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::checkpoint(data));

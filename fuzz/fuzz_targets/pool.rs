//! cargo-fuzz target `pool`; the body is `tether_testkit::fuzz::pool` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::pool(data));

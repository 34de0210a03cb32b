//! cargo-fuzz target `router`; the body is `tether_testkit::fuzz::router` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::router(data));

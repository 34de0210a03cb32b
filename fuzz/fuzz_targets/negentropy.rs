//! cargo-fuzz target `negentropy`; the body is `tether_testkit::fuzz::negentropy` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::negentropy(data));

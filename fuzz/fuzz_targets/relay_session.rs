//! cargo-fuzz target `relay_session`; the body is `tether_testkit::fuzz::relay_session` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::relay_session(data));

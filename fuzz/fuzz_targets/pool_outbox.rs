//! cargo-fuzz target `pool_outbox`; the body is `tether_testkit::fuzz::pool_outbox` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_testkit::fuzz::pool_outbox(data));

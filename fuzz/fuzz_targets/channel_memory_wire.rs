//! libFuzzer target: what a channel memory server reads from a client and a rank from its channel memory; the body is `steadfast_paths::cm::fuzz_decode`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_paths::cm::fuzz_decode(data);
});

//! libFuzzer target: the rollback protocol's messages and channel records; the body is `steadfast_rollback::wire::fuzz_decode`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = steadfast_rollback::wire::fuzz_decode(data);
});

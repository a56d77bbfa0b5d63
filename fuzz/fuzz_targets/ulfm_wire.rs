//! libFuzzer target: ULFM wire messages (agreement, revoke, failure notices); the body is `steadfast_ulfm::wire::fuzz_decode`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = steadfast_ulfm::wire::fuzz_decode(data);
});

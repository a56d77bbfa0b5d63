//! libFuzzer target: the message-logging protocol's messages and event journal; the body is `steadfast_logging::wire::fuzz_decode`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = steadfast_logging::wire::fuzz_decode(data);
});

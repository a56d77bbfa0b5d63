//! libFuzzer target: what a standalone event logger reads from a launcher and a launcher from its event logger; the body is `steadfast_runtime::event_logger::fuzz_decode`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_runtime::event_logger::fuzz_decode(data);
});

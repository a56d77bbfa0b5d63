//! Frame decoder: arbitrary bytes must be rejected or decoded consistently, never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    steadfast_reliable::fuzzing::frame_decode(data);
});

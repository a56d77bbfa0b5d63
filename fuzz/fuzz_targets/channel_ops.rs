//! Channel pair driven by an arbitrary program of sends, deliveries, damage, drops,
//! keyed forgeries, timer advances and route changes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    steadfast_reliable::fuzzing::channel_ops(data);
});

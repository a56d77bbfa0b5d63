//! libFuzzer target; the body (and its oracle) is steadfast_runtime::fuzzing::ckpt_store_wire.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_runtime::fuzzing::ckpt_store_wire(data);
});

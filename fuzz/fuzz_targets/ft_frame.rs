//! libFuzzer target; the body (and its oracle) is steadfast_runtime::fuzzing::ft_frame.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_runtime::fuzzing::ft_frame(data);
});

//! libFuzzer target: the tcp data path's stream parser (hello, frames) on an accepted
//! connection; the body is steadfast_paths::tcp::fuzz_stream.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_paths::tcp::fuzz_stream(data);
});

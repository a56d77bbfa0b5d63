//! libFuzzer target: the shared-memory ring consumer (`poll`) on arbitrary ring contents; the body is `steadfast_paths::shm::fuzz_ring`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = steadfast_paths::shm::fuzz_ring(data);
});

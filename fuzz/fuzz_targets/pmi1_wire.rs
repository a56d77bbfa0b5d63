//! libFuzzer target: the PMI-1 client reading a process manager's replies; the body is `steadfast_runtime::pmi::pmi1::fuzz_replies`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = steadfast_runtime::pmi::pmi1::fuzz_replies(data);
});

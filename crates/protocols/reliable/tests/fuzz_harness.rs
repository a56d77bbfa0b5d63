//! The fuzz harnesses (also used by `fuzz/` with libFuzzer on nightly), driven by
//! random inputs on stable so every `cargo test` exercises them.

use proptest::prelude::*;
use steadfast_reliable::fuzzing;

fn cases() -> u32 {
    std::env::var("STEADFAST_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn frame_decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        fuzzing::frame_decode(&data);
    }

    #[test]
    fn frame_decode_patched_headers(mode in 1u8..4, header in proptest::collection::vec(any::<u8>(), 104),
                                    payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut data = vec![mode];
        data.extend_from_slice(&header);
        data.extend_from_slice(&payload);
        fuzzing::frame_decode(&data);
    }

    #[test]
    fn channel_ops_never_panic(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        fuzzing::channel_ops(&data);
    }
}

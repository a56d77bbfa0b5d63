//! The fused copy-and-CRC32C (`crc::copy_with_crc32c_append`) by where the destination sits
//! relative to the source within a 4 KiB page, at one size (default 64 KiB; first argument).
//!
//! Run: `cargo run --release -p steadfast-reliable --example crc_placement [BYTES]`
//! Prints GB/s per distance (destination offset minus source offset, modulo 4096).
use std::hint::black_box;
use std::time::Instant;
use steadfast_reliable::crc;

fn rate(n: usize, mut f: impl FnMut()) -> f64 {
    let iters = 40_000_000 / n + 10;
    f();
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    (n * iters) as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(65536);
    let src = vec![7u8; n + 8192];
    let mut dst = vec![0u8; n + 8192];
    let s0 = src.as_ptr().align_offset(4096);
    let d0 = dst.as_ptr().align_offset(4096);
    let mut dists: Vec<usize> = (0..64).collect();
    dists.extend((64..4096).step_by(64));
    dists.extend([4096 - 64, 4096 - 32, 4096 - 16, 4096 - 8]);
    let mut slow = Vec::new();
    for d in dists {
        let s = &src[s0..s0 + n];
        let dd = &mut dst[d0 + d..d0 + d + n];
        let r = rate(n, || {
            black_box(crc::copy_with_crc32c_append(0, dd, s));
        });
        println!("{d:>5} {r:>7.2}");
        if r < 10.0 {
            slow.push(d);
        }
    }
    println!("slow (< 10 GB/s) at distances: {slow:?}");
}

//! `steadfast_paths::copy::copy` against the C library's `memcpy` by where the destination
//! sits relative to the source within a 4 KiB page (the placements where `rep movsb`
//! crawls on AMD Zen 3 and Zen 4, see `src/copy.rs`), at sizes from 2 KiB to 1 MiB.
//!
//! Run: `cargo run --release -p steadfast-paths --example copy_placement`
//! Prints, per size and for each, GB/s at distance 0, the worst over distances 1-63 (and
//! where), and the worst over 16-63.
use std::hint::black_box;
use std::time::Instant;

fn rate(n: usize, mut f: impl FnMut()) -> f64 {
    let iters = 20_000_000 / n + 10;
    f();
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    (n * iters) as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn main() {
    const MAX: usize = 1 << 20;
    let src = vec![7u8; MAX + 8192];
    let mut dst = vec![0u8; MAX + 8192];
    // Both from a page boundary, so the distance is the destination's offset.
    let s0 = src.as_ptr().align_offset(4096);
    let d0 = dst.as_ptr().align_offset(4096);
    println!("{:>8} {:>30} {:>30}", "bytes", "memcpy: 0 / worst at / 16-63", "copy: 0 / worst at / 16-63");
    for n in [2048usize, 3072, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1 << 20] {
        let mut row = Vec::new();
        for ours in [false, true] {
            let mut at0 = 0.0;
            let mut worst = (f64::MAX, 0usize);
            let mut worst_far = f64::MAX;
            for dist in 0..64 {
                let s = &src[s0..s0 + n];
                let d = &mut dst[d0 + dist..d0 + dist + n];
                let g = rate(n, || {
                    if ours {
                        // SAFETY: two distinct vectors, both valid for n bytes.
                        unsafe { steadfast_paths::copy::copy(s.as_ptr(), d.as_mut_ptr(), n) };
                    } else {
                        d.copy_from_slice(s);
                    }
                    black_box(&mut *d);
                });
                if dist == 0 {
                    at0 = g;
                } else if g < worst.0 {
                    worst = (g, dist);
                }
                if dist >= 16 {
                    worst_far = worst_far.min(g);
                }
            }
            row.push(format!("{at0:6.1} / {:5.1} at {:2} / {worst_far:5.1}", worst.0, worst.1));
        }
        println!("{n:>8} {:>30} {:>30}", row[0], row[1]);
    }
}

//! Fused copy+CRC32C against memcpy, plain CRC32C, and memcpy followed by CRC32C.
//!
//! Run: `cargo run --release -p steadfast-reliable --example crc_bench`
use std::hint::black_box;
use std::time::Duration;
use steadfast_reliable::crc;

/// CPU time of this thread: the machine is shared, and wall time would count the time
/// slices other processes take.
fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; the clock id is a constant Linux supports.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` repeatedly for about `budget` and returns GB/s over `bytes` per call.
fn rate(bytes: usize, budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let start = cpu_now();
    let mut iters = 0u64;
    while (cpu_now() - start) < budget {
        for _ in 0..16 {
            f();
        }
        iters += 16;
    }
    (bytes as f64 * iters as f64) / (cpu_now() - start).as_secs_f64() / 1e9
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300),
    );
    println!("fused implementation: {}", crc::fused_implementation());
    println!(
        "{:>9} {:>9} {:>9} {:>12} {:>9} {:>9} {:>10} {:>10}   (GB/s)",
        "size", "memcpy", "crc32c", "memcpy+crc", "fused", "portable", "memcpy@48", "fused@48"
    );
    for size in [4096usize, 8192, 65536, 1 << 20, 8 << 20] {
        let src: Vec<u8> = (0..size).map(|i| (i * 131 + 7) as u8).collect();
        let mut dst = vec![0u8; size];
        let memcpy = rate(size, budget, || {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        });
        let crc_only = rate(size, budget, || {
            black_box(crc::crc32c(black_box(&src)));
        });
        let separate = rate(size, budget, || {
            dst.copy_from_slice(black_box(&src));
            black_box(crc::crc32c(black_box(&dst)));
        });
        let fused = rate(size, budget, || {
            black_box(crc::copy_with_crc32c(black_box(&mut dst), black_box(&src)));
        });
        let portable = rate(size, budget, || {
            black_box(crc::copy_with_crc32c_portable(
                0,
                black_box(&mut dst),
                black_box(&src),
            ));
        });
        // Destination 48 bytes into a cache line, where shm ring payloads start.
        let mut big = vec![0u8; size + 128];
        let off = (48 + 64 - (big.as_ptr() as usize % 64)) % 64;
        let dst48 = &mut big[off..off + size];
        let memcpy48 = rate(size, budget, || {
            dst48.copy_from_slice(black_box(&src));
            black_box(&mut *dst48);
        });
        let fused48 = rate(size, budget, || {
            black_box(crc::copy_with_crc32c(black_box(&mut *dst48), black_box(&src)));
        });
        println!(
            "{:>9} {:>9.2} {:>9.2} {:>12.2} {:>9.2} {:>9.2} {:>10.2} {:>10.2}",
            size, memcpy, crc_only, separate, fused, portable, memcpy48, fused48
        );
    }
}

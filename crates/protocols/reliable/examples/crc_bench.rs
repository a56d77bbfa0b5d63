//! Fused copy+CRC32C against memcpy, plain CRC32C, and memcpy followed by CRC32C; then the
//! latency of the shm ring record checksums for small and middle payloads.
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
    for size in [4096usize, 8192, 16384, 65536, 262_144, 1 << 20, 8 << 20, 128 << 20] {
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
    record_latency();
}

/// What a small message's checksums add to its latency: the sender's fused copy of a
/// 40-byte header and the payload into a ring record (payload 56 bytes into a cache line)
/// and the receiver's check of the record followed by the copy of the payload out of it.
/// Each call's CRC feeds the next call's length word, so calls do not overlap the way
/// independent ones would in a throughput loop; the best of 60 runs of 5000 calls.
fn record_latency() {
    const CALLS: u32 = 5000;
    fn best(mut run: impl FnMut() -> Duration) -> f64 {
        (0..60).map(|_| run().as_nanos() as f64 / f64::from(CALLS)).fold(f64::MAX, f64::min)
    }
    println!();
    println!("{:>9} {:>12} {:>16}   (ns per record, calls in a dependent chain)", "payload", "send (copy)", "receive (+copy)");
    let hdr = [7u8; 40];
    let src: Vec<u8> = (0..8192u32).map(|i| (i * 13 + 1) as u8).collect();
    let mut ring = vec![0u8; 8192 + 128];
    let at = (64 - ring.as_ptr() as usize % 64) % 64 + 16;
    let mut out = vec![0u8; 8192];
    let mut chain = 0u32;
    for size in [0usize, 8, 64, 128, 256, 512, 1024, 2048, 4000] {
        let send = best(|| {
            let start = cpu_now();
            for _ in 0..CALLS {
                let body = &mut ring[at..at + 40 + size];
                let (head, all) = crc::copy_record_with_crc32c(size as u32 ^ (chain & 1), body, &hdr, black_box(&src[..size]));
                chain ^= head ^ all;
            }
            cpu_now() - start
        });
        let receive = best(|| {
            let start = cpu_now();
            for _ in 0..CALLS {
                let body = &ring[at..at + 40 + size];
                chain ^= crc::record_crc32c(size as u32 ^ (chain & 1), &body[..40], black_box(&body[40..]));
                out[..size].copy_from_slice(&body[40..]);
                black_box(&mut out);
            }
            cpu_now() - start
        });
        println!("{size:>9} {send:>12.1} {receive:>16.1}");
    }
    black_box(chain);
}

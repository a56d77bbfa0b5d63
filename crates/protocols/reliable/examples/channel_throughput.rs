//! In-process throughput of a channel pair: send → frame on the "wire" (one memcpy into a
//! datagram buffer, as a socket would) → handle (checksum-verified copy) → deliver →
//! ACK back. No faults. Reports fragments/s and payload GB/s.
//!
//! Run: `cargo run --release -p steadfast-reliable --example channel_throughput`
use std::time::Duration;

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

use bytes::Bytes;
use steadfast_reliable::{Channel, Config, Event};

struct Run {
    frags: u64,
    bytes: u64,
    elapsed: Duration,
}

fn run(frag: usize, msg_len: usize, owned: bool, checksum: bool, budget: Duration) -> Run {
    let mut cfg = Config::new(7, 0, 1);
    cfg.payload_checksum = checksum;
    cfg.max_payload = frag;
    // BENCH_WINDOW_KB sets the send window; the default keeps it well inside L2.
    let window_kb: usize = std::env::var("BENCH_WINDOW_KB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    cfg.send_window_bytes = (window_kb << 10).max(frag);
    cfg.send_window_frags = 1024;
    cfg.recv_window_frags = 1024;
    cfg.recv_buffer_bytes = cfg.send_window_bytes;
    cfg.send_buffer_bytes = cfg.send_window_bytes;
    let mut a = Channel::new(cfg.clone()).expect("config");
    let mut b = Channel::new(cfg.mirrored()).expect("config");
    let msg: Vec<u8> = (0..msg_len).map(|i| (i * 7 + 3) as u8).collect();
    let shared = Bytes::from(msg.clone());
    let mut wire = Vec::with_capacity(frag + 256);
    let mut now = 0u64;
    let (mut frags, mut bytes) = (0u64, 0u64);
    let start = cpu_now();
    while (cpu_now() - start) < budget {
        for _ in 0..64 {
            now += 1000;
            // Fill the send buffer.
            while a.can_send(msg_len) {
                let r = if owned {
                    a.send_bytes(now, shared.clone())
                } else {
                    a.send(now, &msg)
                };
                if r.is_err() {
                    break;
                }
            }
            while let Some(t) = a.poll_transmit(now) {
                wire.clear();
                wire.extend_from_slice(&t.header);
                wire.extend_from_slice(&t.payload);
                b.handle(now, &wire);
            }
            while let Some(e) = b.poll_event() {
                if let Event::Delivered(d) = e {
                    frags += 1;
                    bytes += d.data.len() as u64;
                }
            }
            while let Some(t) = b.poll_transmit(now) {
                wire.clear();
                wire.extend_from_slice(&t.header);
                a.handle(now, &wire);
            }
            while a.poll_event().is_some() {}
        }
    }
    assert_eq!(a.counters().retransmits, 0);
    Run {
        frags,
        bytes,
        elapsed: (cpu_now() - start),
    }
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000),
    );
    println!(
        "{:>10} {:>10} {:>8} {:>6} {:>14} {:>10}",
        "fragment", "message", "send", "check", "fragments/s", "GB/s"
    );
    // BENCH_ONLY=<index> runs one case.
    let only: Option<usize> = std::env::var("BENCH_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    let cases = [
        (8192, 1 << 20),
        (65536, 1 << 20),
        (8192, 8192),
        (65536, 65536),
        (65536, 8 << 20),
    ];
    for (i, &(frag, msg_len)) in cases.iter().enumerate() {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        for (owned, checksum) in [(false, true), (true, true), (false, false), (true, false)] {
            let r = run(frag, msg_len, owned, checksum, budget);
            let s = r.elapsed.as_secs_f64();
            println!(
                "{:>10} {:>10} {:>8} {:>6} {:>14.0} {:>10.2}",
                frag,
                msg_len,
                if owned { "owned" } else { "copy" },
                if checksum { "crc" } else { "none" },
                r.frags as f64 / s,
                r.bytes as f64 / s / 1e9
            );
        }
    }
}

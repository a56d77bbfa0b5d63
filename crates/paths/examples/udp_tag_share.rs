//! Share of the udp path's CPU time spent on the frames' SipHash-2-4 tags.
//!
//! An A/B comparison against a build without tags cannot resolve a 2 % difference on a
//! shared virtual machine (pairs of runs spread from 0.5 to 1.9, docs/security.md), so
//! this counts instead, in one process and in CPU time: it streams messages between two
//! endpoints of a udp loopback path in one thread, counts the frames both ends sent (data
//! fragments, retransmissions, ACKs, NACKs, receipts: each is tagged once by its sender and
//! checked once by its receiver), and times the tag of a frame header in a tight loop. The
//! share is tags × time per tag / CPU time of the stream.
//!
//! ```sh
//! cargo run --release -p steadfast-paths --example udp_tag_share [-- MiB_PER_SIZE]
//! ```

use std::net::Ipv4Addr;
use std::time::Duration;

use steadfast_paths::reliable::{ReliableConfig, ReliablePath};
use steadfast_paths::udp::{LocalEndpoint, UdpWire};
use steadfast_paths::{PacketSink, Path, RawHeader, SendStatus, HDR_LEN};
use steadfast_reliable::frame::FrameKey;
use steadfast_reliable::Counters;

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Copies each payload out, as the engine copies into the application's buffer.
struct Sink(usize, Vec<u8>);
impl PacketSink for Sink {
    fn packet(&mut self, _peer: u32, _hdr: &RawHeader, payload: &[u8]) {
        self.0 += payload.len();
        if self.1.len() < payload.len() {
            self.1.resize(payload.len(), 0);
        }
        self.1[..payload.len()].copy_from_slice(payload);
        std::hint::black_box(&self.1);
    }
}

type Udp = ReliablePath<UdpWire>;

fn pair() -> (Udp, Udp) {
    let eps = [LocalEndpoint { ip: Ipv4Addr::LOCALHOST, key: "r0".into() }];
    let mut wa = UdpWire::bind(&eps, 2).expect("udp");
    let mut wb = UdpWire::bind(&eps, 2).expect("udp");
    wa.set_peer(1, &wb.published()).expect("peer");
    wb.set_peer(0, &wa.published()).expect("peer");
    let cfg = ReliableConfig::new(1);
    (ReliablePath::new(wa, 0, 2, cfg.clone()).expect("path"), ReliablePath::new(wb, 1, 2, cfg).expect("path"))
}

/// Frames a channel sent, each tagged once here and checked once at the other end.
fn frames_sent(c: &Counters) -> u64 {
    c.frags_sent + c.retransmits + c.acks_sent + c.nacks_sent + c.receipts_sent
}

/// Streams `total` bytes in messages of `size` from a to b; returns (CPU ns, frames sent by
/// both ends).
fn stream(a: &mut Udp, b: &mut Udp, size: usize, total: usize) -> (u64, u64) {
    let hdr = [0u8; HDR_LEN];
    let chunk = a.max_payload();
    let data: Vec<u8> = (0..size.min(chunk)).map(|i| i as u8).collect();
    let (mut sa, mut sb) = (Sink(0, Vec::new()), Sink(0, Vec::new()));
    let before = frames_sent(&a.channel_counters()) + frames_sent(&b.channel_counters());
    let t0 = cpu_ns();
    let mut sent = 0usize;
    for _ in 0..(total / size).max(2) {
        let mut off = 0;
        while off < size {
            let n = (size - off).min(chunk);
            // SAFETY: `data` lives and is unchanged until this function returns.
            while unsafe { a.send_held(1, &hdr, &data[..n]) }.expect("send") == SendStatus::Full {
                b.poll(&mut sb).expect("poll");
                a.poll(&mut sa).expect("poll");
            }
            off += n;
            sent += n;
            b.poll(&mut sb).expect("poll");
        }
    }
    while sb.0 < sent || a.backlog() > 0 {
        b.poll(&mut sb).expect("poll");
        a.poll(&mut sa).expect("poll");
        if sb.0 < sent {
            a.wait(Duration::from_micros(50)).expect("wait");
        }
    }
    let ns = cpu_ns() - t0;
    let after = frames_sent(&a.channel_counters()) + frames_sent(&b.channel_counters());
    (ns, after - before)
}

/// CPU ns of one tag over a frame header's 92 tagged bytes (least of five batches:
/// preemption only ever adds time, and so does the cache state a batch starts in).
fn ns_per_tag(key: &FrameKey) -> f64 {
    let mut hdr = [0u8; 92];
    let n = 2_000_000u64;
    (0..5)
        .map(|_| {
            let t0 = cpu_ns();
            let mut acc = 0u64;
            for i in 0..n {
                hdr[0] = i as u8;
                acc ^= key.tag(std::hint::black_box(&hdr));
            }
            std::hint::black_box(acc);
            (cpu_ns() - t0) as f64 / n as f64
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let mib: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(256);
    let key = FrameKey::from_job_key(1);
    let tag_ns = ns_per_tag(&key);
    println!("# SipHash-2-4 tag of a 92-byte frame header: {tag_ns:.1} CPU ns");
    println!("| message size | MB per CPU-s | frames (both ways) | tags | CPU share of the tags |");
    println!("|---:|---:|---:|---:|---:|");
    let (mut a, mut b) = pair();
    stream(&mut a, &mut b, 64 << 10, 16 << 20);
    for (label, size) in [("64 KiB", 64usize << 10), ("1 MiB", 1 << 20), ("8 MiB", 8 << 20)] {
        let total = mib << 20;
        let (ns, frames) = stream(&mut a, &mut b, size, total);
        // Each frame: one tag when sealed, one when checked on arrival.
        let tags = 2 * frames;
        let share = tags as f64 * tag_ns / ns as f64 * 100.0;
        let rate = total as f64 / (ns as f64 / 1e9) / 1e6;
        println!("| {label} | {rate:.0} | {frames} | {tags} | {share:.2} % |");
    }
}

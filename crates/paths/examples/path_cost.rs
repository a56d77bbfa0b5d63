//! What the end-to-end checksum costs on each path, in CPU time (immune to the
//! scheduling noise of a shared machine): two endpoints of a path in one thread, so the
//! thread's CPU time covers sender, receiver and the kernel work of both.
//!
//! For each path (shm ring, tcp loopback, udp loopback under the reliable channel) and
//! checksum setting: CPU µs per 8-byte round trip, and MB per CPU-second for messages of
//! 64 KiB, 1 MiB and 8 MiB cut into packets of the path's `max_payload` (as the engine
//! does). On shm this is the ring (the engine's pipelined copy, `STEADFAST_CMA=0`; with
//! CMA, large messages bypass the ring and the checksum).
//!
//! ```sh
//! cargo run --release -p steadfast-paths --example path_cost [-- ROUNDS]
//! ```

use std::net::Ipv4Addr;
use std::time::Duration;

use steadfast_paths::checksum::Checksum;
use steadfast_paths::reliable::{ReliableConfig, ReliablePath};
use steadfast_paths::shm::ShmPath;
use steadfast_paths::tcp::TcpPath;
use steadfast_paths::udp::{LocalEndpoint, UdpWire};
use steadfast_paths::{PacketSink, Path, RawHeader, SendStatus, HDR_LEN};

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Counts packets and copies each payload out, as the engine copies into the
/// application's buffer (for unverified payloads with the check fused into that copy,
/// as the engine does for rendezvous data).
struct Count(usize, usize, Vec<u8>);
impl PacketSink for Count {
    fn packet(&mut self, _peer: u32, _hdr: &RawHeader, payload: &[u8]) {
        self.0 += 1;
        self.1 += payload.len();
        if self.2.len() < payload.len() {
            self.2.resize(payload.len(), 0);
        }
        self.2[..payload.len()].copy_from_slice(payload);
        std::hint::black_box(&self.2);
    }

    fn packet_unverified(&mut self, _peer: u32, _hdr: &RawHeader, payload: &[u8], seed: u32, expected: u32) -> bool {
        if self.2.len() < payload.len() {
            self.2.resize(payload.len(), 0);
        }
        let crc = steadfast_paths::checksum::copy_with_crc32c_append(seed, &mut self.2[..payload.len()], payload);
        std::hint::black_box(&self.2);
        if crc != expected {
            return false;
        }
        self.0 += 1;
        self.1 += payload.len();
        true
    }
}

fn pair(kind: &str, c: Checksum, dir: &std::path::Path) -> (Box<dyn Path>, Box<dyn Path>) {
    match kind {
        "shm" => {
            let ring = steadfast_paths::shm::default_ring_size(2);
            let mut a = ShmPath::create(dir, 0, 2, ring).expect("shm");
            let mut b = ShmPath::create(dir, 1, 2, ring).expect("shm");
            a.set_checksum(c);
            b.set_checksum(c);
            (Box::new(a), Box::new(b))
        }
        "tcp" => {
            let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 1).expect("tcp");
            let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 1).expect("tcp");
            a.set_peer_contact(1, &b.contact().expect("addr")).expect("contact");
            b.set_peer_contact(0, &a.contact().expect("addr")).expect("contact");
            a.set_checksum(c);
            b.set_checksum(c);
            (Box::new(a), Box::new(b))
        }
        _ => {
            let eps = [LocalEndpoint { ip: Ipv4Addr::LOCALHOST, key: "r0".into() }];
            let mut wa = UdpWire::bind(&eps, 2).expect("udp");
            let mut wb = UdpWire::bind(&eps, 2).expect("udp");
            wa.set_peer(1, &wb.published()).expect("peer");
            wb.set_peer(0, &wa.published()).expect("peer");
            let mut cfg = ReliableConfig::new(1);
            cfg.checksum = c;
            if let Some(f) = std::env::var("STEADFAST_UDP_FRAG").ok().and_then(|v| v.parse().ok()) {
                cfg.frag = f;
            }
            (
                Box::new(ReliablePath::new(wa, 0, 2, cfg.clone()).expect("path")),
                Box::new(ReliablePath::new(wb, 1, 2, cfg).expect("path")),
            )
        }
    }
}

/// CPU ns per round trip of an 8-byte packet.
fn latency(a: &mut dyn Path, b: &mut dyn Path, rounds: usize) -> f64 {
    let hdr = [0u8; HDR_LEN];
    let p = [7u8; 8];
    let (mut ca, mut cb) = (Count(0, 0, Vec::new()), Count(0, 0, Vec::new()));
    let mut go = |n: usize| {
        for _ in 0..n {
            while a.send(1, &hdr, &p).unwrap() == SendStatus::Full {
                a.poll(&mut ca).unwrap();
            }
            let want = cb.0 + 1;
            while cb.0 < want {
                b.poll(&mut cb).unwrap();
            }
            while b.send(0, &hdr, &p).unwrap() == SendStatus::Full {
                b.poll(&mut cb).unwrap();
            }
            let want = ca.0 + 1;
            while ca.0 < want {
                a.poll(&mut ca).unwrap();
            }
        }
    };
    go(rounds / 10 + 1);
    let t0 = cpu_ns();
    go(rounds);
    (cpu_ns() - t0) as f64 / rounds as f64
}

/// MB (10^6 B) per CPU-second streaming messages of `size` bytes from a to b.
fn bandwidth(a: &mut dyn Path, b: &mut dyn Path, size: usize, total: usize) -> f64 {
    let hdr = [0u8; HDR_LEN];
    let chunk = a.max_payload();
    let data: Vec<u8> = (0..size.min(chunk)).map(|i| i as u8).collect();
    let (mut ca, mut cb) = (Count(0, 0, Vec::new()), Count(0, 0, Vec::new()));
    let msgs = (total / size).max(2);
    let t0 = cpu_ns();
    let mut sent = 0usize;
    for _ in 0..msgs {
        let mut off = 0;
        while off < size {
            let n = (size - off).min(chunk);
            loop {
                // As the engine streams rendezvous data: the buffer stays unchanged until
                // the end, so a path may keep a reference instead of a copy.
                // SAFETY: `data` lives and is unchanged until this function returns.
                match unsafe { a.send_held(1, &hdr, &data[..n]) }.unwrap() {
                    SendStatus::Done => break,
                    SendStatus::Full => {
                        b.poll(&mut cb).unwrap();
                        a.poll(&mut ca).unwrap();
                    }
                }
            }
            off += n;
            sent += n;
            b.poll(&mut cb).unwrap();
        }
    }
    while cb.1 < sent || a.backlog() > 0 {
        b.poll(&mut cb).unwrap();
        a.poll(&mut ca).unwrap();
        if cb.1 < sent {
            a.wait(Duration::from_micros(50)).unwrap();
        }
    }
    let dt = (cpu_ns() - t0) as f64 / 1e9;
    sent as f64 / dt / 1e6
}

fn main() {
    let scale: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let dir = std::env::temp_dir().join(format!("sf-path-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    println!("# CPU cost of the end-to-end checksum, both endpoints in one thread");
    println!("# crc32c fused copy: {}", steadfast_reliable::crc::fused_implementation());
    println!("| path | checksum | 8 B round trip, CPU µs | 64 KiB MB/CPU-s | 1 MiB MB/CPU-s | 8 MiB MB/CPU-s |");
    println!("|---|---|---:|---:|---:|---:|");
    let kinds: Vec<String> = match std::env::var("PATHS") {
        Ok(v) => v.split(',').map(str::to_owned).collect(),
        Err(_) => vec!["shm".into(), "tcp".into(), "udp".into()],
    };
    for kind in kinds.iter().map(String::as_str) {
        let mut rows = Vec::new();
        for c in [Checksum::None, Checksum::Crc32c] {
            let (mut a, mut b) = pair(kind, c, &dir);
            let rounds = if kind == "shm" { 1_000_000 } else { 20_000 } * scale;
            // Least of three: preemption only ever adds time.
            let lat = (0..3).map(|_| latency(a.as_mut(), b.as_mut(), rounds)).fold(f64::MAX, f64::min) / 1e3;
            let total = if kind == "udp" { 128 << 20 } else { 512 << 20 } * scale;
            let bw: Vec<f64> =
                [64 << 10, 1 << 20, 8 << 20].iter().map(|&s| bandwidth(a.as_mut(), b.as_mut(), s, total)).collect();
            let name = if c.enabled() { "crc32c" } else { "none" };
            println!("| {kind} | {name} | {lat:.3} | {:.0} | {:.0} | {:.0} |", bw[0], bw[1], bw[2]);
            rows.push((lat, bw));
        }
        let (l0, b0) = &rows[0];
        let (l1, b1) = &rows[1];
        let pct = |x: f64, y: f64| (y - x) / x * 100.0;
        println!(
            "| {kind} | cost | {:+.3} | {:+.1} % | {:+.1} % | {:+.1} % |",
            l1 - l0,
            pct(b0[0], b1[0]),
            pct(b0[1], b1[1]),
            pct(b0[2], b1[2])
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

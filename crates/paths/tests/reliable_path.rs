//! The reliable path end to end, in one process: over an in-memory wire whose routes can
//! be cut (failover, fail-back), and over UDP loopback with the fault injector (drop,
//! duplicate, reorder, corrupt, bus errors, foreign frames).
//!
//! Promise checked: every packet arrives exactly once, in order, byte for byte, and
//! nothing damaged or foreign is delivered.

use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steadfast_paths::fault::{FaultSpec, FaultyWire, Injector};
use steadfast_paths::reliable::{ReliableConfig, ReliablePath, Wire, WireSend};
use steadfast_paths::setup::Exchange;
use steadfast_paths::udp::{self, LocalEndpoint, UdpWire};
use steadfast_paths::{PacketSink, Path, RawHeader, SendStatus, HDR_LEN};

type Queue = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// One end of an in-memory wire with `routes` routes to one peer; a route that is cut
/// loses everything sent on it (in both directions) and reports nothing.
struct MemWire {
    peer: u32,
    out: Vec<Queue>,
    inbox: Vec<Queue>,
    cut: Vec<Arc<AtomicBool>>,
    next: usize,
}

fn mem_pair(routes: usize) -> (MemWire, MemWire, Vec<Arc<AtomicBool>>) {
    let ab: Vec<Queue> = (0..routes).map(|_| Queue::default()).collect();
    let ba: Vec<Queue> = (0..routes).map(|_| Queue::default()).collect();
    let cut: Vec<Arc<AtomicBool>> = (0..routes).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let a = MemWire { peer: 1, out: ab.clone(), inbox: ba.clone(), cut: cut.clone(), next: 0 };
    let b = MemWire { peer: 0, out: ba, inbox: ab, cut: cut.clone(), next: 0 };
    (a, b, cut)
}

impl Wire for MemWire {
    fn routes(&self, peer: u32) -> u8 {
        if peer == self.peer {
            self.out.len() as u8
        } else {
            0
        }
    }
    fn send(&mut self, _peer: u32, route: u8, header: &[u8], payload: &[u8]) -> WireSend {
        let r = usize::from(route);
        if !self.cut[r].load(Ordering::Relaxed) {
            let mut f = header.to_vec();
            f.extend_from_slice(payload);
            self.out[r].lock().unwrap().push_back(f);
        }
        WireSend::Sent
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let n = self.inbox.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            let f = self.inbox[i].lock().unwrap().pop_front();
            if let Some(f) = f {
                self.next = (i + 1) % n;
                if self.cut[i].load(Ordering::Relaxed) {
                    return Ok(None);
                }
                buf[..f.len()].copy_from_slice(&f);
                return Ok(Some(f.len()));
            }
        }
        Ok(None)
    }
    fn wait(&mut self, timeout: Duration, _want_write: bool) {
        std::thread::sleep(timeout.min(Duration::from_micros(200)));
    }
}

#[derive(Default)]
struct Collect(Vec<(u32, RawHeader, Vec<u8>)>);

impl PacketSink for Collect {
    fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) {
        self.0.push((peer, *hdr, payload.to_vec()));
    }
}

fn packet(i: u32, max: usize) -> (RawHeader, Vec<u8>) {
    let mut hdr = [0u8; HDR_LEN];
    hdr[..4].copy_from_slice(&i.to_le_bytes());
    let len = (i as usize * 7919) % max;
    let payload = (0..len).map(|j| (j as u32).wrapping_mul(31).wrapping_add(i) as u8).collect();
    (hdr, payload)
}

fn fast_config(key: u64) -> ReliableConfig {
    let mut c = ReliableConfig::new(key);
    c.max_payload = 64 << 10;
    c.probe_interval = Duration::from_millis(20);
    c.channel.rto_initial_ns = 5_000_000;
    c.channel.rto_min_ns = 1_000_000;
    c.channel.rto_max_ns = 50_000_000;
    c.channel.retries_per_route = 3;
    c
}

/// Sends `count` packets from `a` to `b`, polling both, calling `during(i, a)` after each
/// send; returns what `b` received. Fails after `limit`.
fn transfer(
    a: &mut dyn Path,
    b: &mut dyn Path,
    count: u32,
    max: usize,
    limit: Duration,
    mut during: impl FnMut(u32, &mut dyn Path),
) -> Collect {
    let start = Instant::now();
    let mut got = Collect::default();
    let mut sink_a = Collect::default();
    for i in 0..count {
        let (hdr, p) = packet(i, max);
        while a.send(1, &hdr, &p).unwrap() == SendStatus::Full {
            a.poll(&mut sink_a).unwrap();
            b.poll(&mut got).unwrap();
            assert!(start.elapsed() < limit, "stuck sending packet {i}");
        }
        a.poll(&mut sink_a).unwrap();
        b.poll(&mut got).unwrap();
        during(i, a);
    }
    while (got.0.len() < count as usize || a.backlog() > 0) && start.elapsed() < limit {
        a.poll(&mut sink_a).unwrap();
        b.poll(&mut got).unwrap();
        a.wait(Duration::from_micros(500)).unwrap();
    }
    assert!(sink_a.0.is_empty(), "nothing flows back");
    got
}

fn check(got: &Collect, count: u32, max: usize) {
    assert_eq!(got.0.len(), count as usize, "every packet exactly once");
    for (i, (peer, hdr, p)) in got.0.iter().enumerate() {
        let (eh, ep) = packet(i as u32, max);
        assert_eq!(*peer, 0);
        assert_eq!(hdr, &eh, "packet {i} header (order kept)");
        assert!(p == &ep, "packet {i} payload differs");
    }
}

#[test]
#[ignore = "timing-dependent: on a loaded machine the cut window can pass before the route is declared failed; scripts/netns-failover.sh checks failover and fail-back end to end in CI (run with --ignored)"]
fn failover_and_failback_over_two_routes() {
    let (wa, wb, cut) = mem_pair(2);
    let mut a = ReliablePath::new(wa, 0, 2, fast_config(7)).unwrap();
    let mut b = ReliablePath::new(wb, 1, 2, fast_config(7)).unwrap();
    let max = 40_000;
    let got = transfer(&mut a, &mut b, 400, max, Duration::from_secs(30), |i, _| {
        if i == 100 {
            cut[1].store(true, Ordering::Relaxed);
        }
        if i == 250 {
            cut[1].store(false, Ordering::Relaxed);
        }
    });
    check(&got, 400, max);
    assert!(a.counters().route_failures >= 1, "the cut route was detected: {}", a.counters());
    assert!(a.counters().rebound >= 1, "its fragments were rebound: {}", a.counters());
    // Fail-back: the restored route carried traffic again.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !a.route_is_up(1, 1) && Instant::now() < deadline {
        a.poll(&mut Collect::default()).unwrap();
        b.poll(&mut Collect::default()).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(a.route_is_up(1, 1), "route restored by probing");
    assert!(a.counters().route_restores >= 1);
    let got2 = transfer(&mut a, &mut b, 50, 20_000, Duration::from_secs(10), |_, _| {});
    assert_eq!(got2.0.len(), 50);
    let (_, since) = a.route_frames(1, 1);
    assert!(since > 0, "traffic resumed on the restored route");
}

#[test]
fn everything_arrives_when_both_routes_flap() {
    let (wa, wb, cut) = mem_pair(2);
    let mut a = ReliablePath::new(wa, 0, 2, fast_config(9)).unwrap();
    let mut b = ReliablePath::new(wb, 1, 2, fast_config(9)).unwrap();
    let max = 20_000;
    let got = transfer(&mut a, &mut b, 300, max, Duration::from_secs(30), |i, _| {
        // Each route down for a while, never both at once.
        cut[0].store((40..90).contains(&i), Ordering::Relaxed);
        cut[1].store((120..200).contains(&i), Ordering::Relaxed);
    });
    check(&got, 300, max);
}

fn udp_pair(spec: Option<FaultSpec>, key: u64) -> (Box<dyn Path>, Box<dyn Path>) {
    let eps = [LocalEndpoint { ip: Ipv4Addr::LOCALHOST, key: "r0".into() }];
    let mut a = UdpWire::bind(&eps, 2).unwrap();
    let mut b = UdpWire::bind(&eps, 2).unwrap();
    a.set_peer(1, &b.published()).unwrap();
    b.set_peer(0, &a.published()).unwrap();
    let cfg = fast_config(key);
    match spec {
        Some(s) => (
            Box::new(ReliablePath::new(FaultyWire::new(a, Injector::new(s.clone(), 0)), 0, 2, cfg.clone()).unwrap()),
            Box::new(ReliablePath::new(FaultyWire::new(b, Injector::new(s, 1)), 1, 2, cfg).unwrap()),
        ),
        None => (
            Box::new(ReliablePath::new(a, 0, 2, cfg.clone()).unwrap()),
            Box::new(ReliablePath::new(b, 1, 2, cfg).unwrap()),
        ),
    }
}

#[test]
fn udp_with_every_fault_delivers_intact_in_order() {
    let spec = FaultSpec::parse("drop=0.02,dup=0.02,reorder=0.05,corrupt=0.01,bus=0.01,seed=11").unwrap();
    let (mut a, mut b) = udp_pair(Some(spec), 0xfeed);
    let max = 30_000;
    let got = transfer(a.as_mut(), b.as_mut(), 300, max, Duration::from_secs(60), |_, _| {});
    check(&got, 300, max);
    let (ca, cb) = (a.counters(), b.counters());
    let injected = ca.injected() + cb.injected();
    assert!(ca.injected_drop + cb.injected_drop > 0 && ca.injected_corrupt + cb.injected_corrupt > 0, "{ca} / {cb}");
    assert!(cb.injected_bus + ca.injected_bus > 0, "{ca} / {cb}");
    assert!(ca.retransmits > 0, "losses were repaired by retransmission: {ca}");
    assert!(ca.corrupt_detected + cb.corrupt_detected > 0, "damage was detected: {ca} / {cb}");
    assert!(injected > 0);
}

#[test]
fn udp_drops_foreign_frames() {
    let eps = [LocalEndpoint { ip: Ipv4Addr::LOCALHOST, key: "r0".into() }];
    let mut wa = UdpWire::bind(&eps, 2).unwrap();
    let mut wb = UdpWire::bind(&eps, 2).unwrap();
    // Another job on the same host (key 2) that knows b's address and ids.
    let mut wf = UdpWire::bind(&eps, 2).unwrap();
    wa.set_peer(1, &wb.published()).unwrap();
    wf.set_peer(1, &wb.published()).unwrap();
    wb.set_peer(0, &wa.published()).unwrap();
    let mut a = ReliablePath::new(wa, 0, 2, fast_config(1)).unwrap();
    let mut b = ReliablePath::new(wb, 1, 2, fast_config(1)).unwrap();
    let mut f = ReliablePath::new(wf, 0, 2, fast_config(2)).unwrap();
    let mut got = Collect::default();
    for i in 0..20 {
        let (hdr, p) = packet(1000 + i, 3000);
        assert_eq!(f.send(1, &hdr, &p).unwrap(), SendStatus::Done);
    }
    let good = transfer(&mut a, &mut b, 20, 5000, Duration::from_secs(20), |_, _| {
        f.poll(&mut Collect::default()).unwrap();
    });
    check(&good, 20, 5000);
    for _ in 0..50 {
        f.poll(&mut Collect::default()).unwrap();
        b.poll(&mut got).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(got.0.is_empty(), "nothing of the foreign job was delivered");
    assert!(b.counters().foreign_dropped >= 20, "{}", b.counters());
}

#[test]
fn a_failed_peer_is_forgotten() {
    let (wa, _wb, cut) = mem_pair(1);
    cut[0].store(true, Ordering::Relaxed);
    let mut a = ReliablePath::new(wa, 0, 2, fast_config(3)).unwrap();
    for i in 0..3 {
        let (hdr, p) = packet(i, 1000);
        assert_eq!(a.send(1, &hdr, &p).unwrap(), SendStatus::Done);
    }
    a.poll(&mut Collect::default()).unwrap();
    assert_eq!(a.backlog(), 3, "unacknowledged packets to an unreachable peer");
    a.peer_failed(1);
    assert_eq!(a.backlog(), 0, "nothing is owed to a failed peer");
    let (hdr, p) = packet(9, 10);
    assert!(matches!(a.send(1, &hdr, &p), Err(steadfast_paths::PathError::PeerLost(1, _))));
}

/// The launcher's key-value space, in memory.
#[derive(Default)]
struct MapExchange(std::collections::HashMap<String, String>);

impl Exchange for MapExchange {
    fn put(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.0.insert(key.to_owned(), value.to_owned());
        Ok(())
    }
    fn get(&mut self, key: &str) -> Result<String, String> {
        self.0.get(key).cloned().ok_or_else(|| format!("{key} was never published"))
    }
    fn fence(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Rank `rank` in incarnation `inc` over UDP loopback, its endpoints published in `kv`,
/// its peer's taken from there (as path setup does).
fn udp_rank(kv: &mut MapExchange, rank: u32, inc: u16, cfg: &ReliableConfig) -> ReliablePath<UdpWire> {
    let eps = [LocalEndpoint { ip: Ipv4Addr::LOCALHOST, key: "r0".into() }];
    let w = UdpWire::bind(&eps, 2).unwrap();
    kv.put(&format!("udp.{rank}"), &udp::with_incarnation(inc, &w.published())).unwrap();
    let mut p = ReliablePath::new(w, rank, 2, cfg.clone()).unwrap();
    p.set_incarnation(inc);
    let peer = 1 - rank;
    if let Ok(v) = kv.get(&format!("udp.{peer}")) {
        let (pinc, endpoints) = udp::split_incarnation(&v).unwrap();
        p.wire_mut().set_peer(peer, endpoints).unwrap();
        p.set_peer_incarnation(peer, pinc);
    }
    p
}

/// Packet `i` of the stream from `from`, generation `gen`: the header names all three.
fn tagged(from: u32, gen: u32, i: u32) -> (RawHeader, Vec<u8>) {
    let mut hdr = [0u8; HDR_LEN];
    hdr[..4].copy_from_slice(&from.to_le_bytes());
    hdr[4..8].copy_from_slice(&gen.to_le_bytes());
    hdr[8..12].copy_from_slice(&i.to_le_bytes());
    let len = (i as usize * 613 + gen as usize * 7) % 9000;
    (hdr, (0..len).map(|j| (j as u32 ^ i ^ (gen << 3) ^ from) as u8).collect())
}

/// Sends `count` packets each way between `x` (rank 0) and `y` (rank 1), all of
/// generation `gen`, and checks both receive exactly those, in order, intact.
fn both_ways(x: &mut dyn Path, y: &mut dyn Path, gen: u32, count: u32, got_x: &mut Collect, got_y: &mut Collect) {
    let start = Instant::now();
    let (mut i, mut j) = (0, 0);
    while i < count || j < count || got_x.0.len() < count as usize || got_y.0.len() < count as usize {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "stuck: sent {i}/{j}, got {}/{}",
            got_y.0.len(),
            got_x.0.len()
        );
        if i < count {
            let (h, p) = tagged(0, gen, i);
            if x.send(1, &h, &p).unwrap() == SendStatus::Done {
                i += 1;
            }
        }
        if j < count {
            let (h, p) = tagged(1, gen, j);
            if y.send(0, &h, &p).unwrap() == SendStatus::Done {
                j += 1;
            }
        }
        x.poll(got_x).unwrap();
        y.poll(got_y).unwrap();
        if i == count && j == count {
            x.wait(Duration::from_micros(300)).unwrap();
        }
    }
    for (got, from, peer) in [(&*got_x, 1u32, 1u32), (&*got_y, 0, 0)] {
        assert_eq!(got.0.len(), count as usize, "every packet from rank {from} exactly once");
        for (k, (p, hdr, payload)) in got.0.iter().enumerate() {
            let (eh, ep) = tagged(from, gen, k as u32);
            assert_eq!(*p, peer);
            assert_eq!(hdr, &eh, "packet {k} from rank {from}: header (order kept, no stale packet)");
            assert!(payload == &ep, "packet {k} from rank {from}: payload differs");
        }
    }
}

#[test]
fn a_restarted_peer_is_reconnected_and_its_old_frames_refused() {
    let cfg = fast_config(0x5eed);
    let mut kv = MapExchange::default();
    let mut a = udp_rank(&mut kv, 0, 0, &cfg);
    let mut b0 = udp_rank(&mut kv, 1, 0, &cfg);
    a.wire_mut().set_peer(1, udp::split_incarnation(&kv.get("udp.1").unwrap()).unwrap().1).unwrap();
    let (mut got_a, mut got_b) = (Collect::default(), Collect::default());
    both_ways(&mut a, &mut b0, 0, 30, &mut got_a, &mut got_b);

    // Rank 1 (incarnation 0) sends more, and a hears that it failed: what arrives from
    // it now is refused.
    let send_batch = |b: &mut ReliablePath<UdpWire>, from: u32, n: u32| {
        for i in from..from + n {
            let (h, p) = tagged(1, 0, 100 + i);
            assert_eq!(b.send(0, &h, &p).unwrap(), SendStatus::Done);
        }
        b.poll(&mut Collect::default()).unwrap();
    };
    send_batch(&mut b0, 0, 5);
    a.peer_failed(1);
    let mut stray = Collect::default();
    for _ in 0..5 {
        a.poll(&mut stray).unwrap();
    }
    let stale = a.counters().stale_dropped;
    assert!(stale >= 5, "frames of a failed incarnation are counted: {}", a.counters());
    // It sends a last batch, which stays in a's socket buffer, and dies.
    send_batch(&mut b0, 5, 10);
    drop(b0);

    // Incarnation 1 starts, learns a's endpoints and speaks first; then the engine
    // reports the restart and a takes the new endpoints and starts over, before it
    // reads the old incarnation's last frames.
    let mut b1 = udp_rank(&mut kv, 1, 1, &cfg);
    let (h, p) = tagged(1, 1, 0);
    assert_eq!(b1.send(0, &h, &p).unwrap(), SendStatus::Done);
    a.peer_rejoined(1, &mut kv).unwrap();
    let (mut got_a, mut got_b) = (Collect::default(), Collect::default());
    // b1's first packet is retransmitted and now taken: it is the first of generation 1.
    let start = Instant::now();
    while got_a.0.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "the new incarnation's first packet never arrived");
        a.poll(&mut got_a).unwrap();
        b1.poll(&mut got_b).unwrap();
        a.wait(Duration::from_micros(500)).unwrap();
    }
    assert!(stray.0.is_empty(), "nothing of the failed incarnation is delivered");
    assert_eq!(got_a.0[0].1, h, "the first packet taken is the new incarnation's first");
    assert_eq!(got_a.0[0].2, p);
    assert!(
        a.counters().stale_dropped >= stale + 10,
        "the old incarnation's frames left in the socket are refused by the new channel: {}",
        a.counters()
    );
    got_a.0.clear();
    both_ways(&mut a, &mut b1, 2, 40, &mut got_a, &mut got_b);

    // A frame addressed to rank 1's earlier incarnation (as a sender that missed the
    // restart would send it) is refused by the new one.
    let mut ghost = udp_rank(&mut MapExchange::default(), 0, 0, &cfg);
    ghost.wire_mut().set_peer(1, udp::split_incarnation(&kv.get("udp.1").unwrap()).unwrap().1).unwrap();
    let before = b1.counters().stale_dropped;
    let (h, p) = tagged(0, 9, 0);
    assert_eq!(ghost.send(1, &h, &p).unwrap(), SendStatus::Done);
    ghost.poll(&mut Collect::default()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let mut stray = Collect::default();
    for _ in 0..5 {
        b1.poll(&mut stray).unwrap();
    }
    assert!(stray.0.is_empty(), "a packet meant for the earlier incarnation was delivered");
    assert!(b1.counters().stale_dropped > before, "{}", b1.counters());

    // And the stream goes on after that.
    let (mut got_a, mut got_b) = (Collect::default(), Collect::default());
    both_ways(&mut a, &mut b1, 3, 20, &mut got_a, &mut got_b);
}

//! Deterministic simulation of reliable channels over a faulty network.
//!
//! Promise checked: no corrupt, lost, duplicated or misordered byte ever reaches an
//! application, whatever the network does (drop, duplicate, reorder, delay, corrupt bits
//! the wire does not detect, flip bits after the checksum was computed, take routes
//! down, inject frames from another job) — and once faults stop, every message is
//! delivered exactly once and acknowledged within a bound.
//!
//! Each seed draws its own network, fault rates and channel configuration ("swarm"
//! testing) and replays exactly. Invariants are checked after every step; a failure
//! prints a one-line replay command.
//!
//! - `STEADFAST_SEED=<n>`: run only that seed.
//! - `STEADFAST_SIM_SEEDS=<n>`: number of seeds per test (default: 300 in debug builds,
//!   3000 in release builds).
//! - `STEADFAST_SIM_TRACE=1`: print every frame that arrives; `STEADFAST_SIM_DUMP=1`:
//!   dump channel state on failure; `STEADFAST_SIM_PROFILE=1`: time per seed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rand::{Rng, RngCore};
use steadfast_proto::sweep;
use steadfast_reliable::frame::{Frame, FrameKey, FrameRepr, Kind};
use steadfast_reliable::{Channel, Config, Counters, Delivery, Event, MsgId};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;
const KEY: u64 = 0x5eed_f00d_cafe_d00d;

/// The shared SplitMix64 generator (tiny, fast even unoptimized, and its stream never
/// changes with a dependency upgrade, so a seed replays the same run forever), seen
/// through `rand`'s traits for `gen_range` and `gen_bool`.
struct SimRng(steadfast_proto::Rng);

impl RngCore for SimRng {
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// Fault rates and network shape drawn for one seed.
#[derive(Debug, Clone)]
struct Faults {
    drop: f64,
    dup: f64,
    /// Probability a packet gets a large extra delay (reordering).
    reorder: f64,
    delay_min: u64,
    delay_max: u64,
    reorder_max: u64,
    /// Probability the wire damages a packet; `wire_detects` of those are caught by the
    /// wire's own check (and dropped), the rest pass on undetected.
    wire_corrupt: f64,
    wire_detects: f64,
    /// Probability of a bit flip in the outgoing buffer after the channel computed its
    /// checksum (a DMA or bus error): the wire's check is computed over the damaged
    /// bytes and passes.
    bus_error: f64,
    /// Probability per packet that a process from another job injects a frame.
    foreign: f64,
    /// Route outages: (route, from, until).
    outages: Vec<(u8, u64, u64)>,
    /// Links keep packets in order (a FIFO queue) unless the reorder fault hits; when
    /// false every packet gets an independent delay (harsh jitter).
    fifo: bool,
}

/// Simulation parameters for one seed.
#[derive(Debug, Clone)]
struct Setup {
    endpoints: usize,
    cfg: Config,
    faults: Faults,
    /// Applications send new messages until this time; faults stop then too.
    fault_end: u64,
    send_interval: u64,
    max_msg: usize,
    /// Delay before a failed route is probed again (restore_route).
    probe_delay: u64,
    /// Some receiver is configured below its peer's send window: progress per round
    /// is one buffer's worth, and the liveness bound accounts for it.
    slow_receiver: bool,
}

fn swarm(rng: &mut SimRng, endpoints: usize) -> Setup {
    let mut cfg = Config::new(KEY, 0, 1);
    cfg.routes = rng.gen_range(1..=3);
    cfg.max_payload = [16, 64, 200, 512][rng.gen_range(0..4)];
    cfg.send_window_frags = rng.gen_range(1..=48);
    cfg.send_window_bytes = rng.gen_range(1..=64) * cfg.max_payload;
    cfg.send_buffer_bytes = rng.gen_range(4..=64) * cfg.max_payload;
    cfg.send_buffer_frags = rng.gen_range(8..=256);
    cfg.recv_window_frags = cfg.send_window_frags + rng.gen_range(0..=16);
    cfg.recv_buffer_bytes = cfg.send_window_bytes + rng.gen_range(0..=16) * cfg.max_payload;
    cfg.rto_initial_ns = rng.gen_range(2..=20) * MS;
    cfg.rto_min_ns = MS;
    cfg.rto_max_ns = cfg.rto_initial_ns * rng.gen_range(2..=16);
    cfg.adaptive_rto = rng.gen_bool(0.7);
    cfg.retries_per_route = rng.gen_range(2..=6);
    cfg.reorder_threshold = [0, 1, 3, 8][rng.gen_range(0..4)];
    cfg.answer_queue = rng.gen_range(1..=16);
    let fault_end = rng.gen_range(200..=1000) * MS;
    let calm = rng.gen_bool(0.1);
    let p = |rng: &mut SimRng, max: f64| if calm { 0.0 } else { rng.gen_range(0.0..max) };
    let delay_min = rng.gen_range(5..=500) * US;
    let mut faults = Faults {
        drop: p(rng, 0.25),
        dup: p(rng, 0.15),
        reorder: p(rng, 0.3),
        delay_min,
        delay_max: delay_min + rng.gen_range(0..=2000) * US,
        reorder_max: rng.gen_range(1..=50) * MS,
        wire_corrupt: p(rng, 0.15),
        wire_detects: rng.gen_range(0.0..1.0),
        bus_error: p(rng, 0.1),
        foreign: p(rng, 0.05),
        outages: Vec::new(),
        fifo: rng.gen_bool(0.8),
    };
    if !calm {
        for _ in 0..rng.gen_range(0..=4) {
            let route = rng.gen_range(0..cfg.routes);
            let from = rng.gen_range(0..fault_end);
            let until = (from + rng.gen_range(10..=600) * MS).min(fault_end);
            faults.outages.push((route, from, until));
        }
    }
    let max_msg = cfg.max_payload * [0, 1, 2, 4, 8][rng.gen_range(0..5)] + rng.gen_range(0..=2);
    Setup {
        endpoints,
        cfg,
        faults,
        fault_end,
        send_interval: rng.gen_range(1..=40) * MS,
        max_msg,
        probe_delay: rng.gen_range(20..=300) * MS,
        slow_receiver: false,
    }
}

/// A packet in flight.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Packet {
    from: usize,
    to: usize,
    /// True when the bytes differ from what the channel emitted.
    corrupted: bool,
    foreign: bool,
    bytes: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    Arrive(Packet),
    /// Endpoint's application sends a message.
    AppSend(usize),
    /// Endpoint `.0` probes route `.2` towards peer `.1` again.
    Probe(usize, usize, u8),
}

/// What each application sent and what each received so far, per ordered pair.
struct Ledger {
    /// sent[i][j]: messages endpoint i sent to j, in order (index = msg id - 1).
    sent: Vec<Vec<Vec<Vec<u8>>>>,
    /// recv[i][j]: progress of j's reception from i: (complete messages, offset in next).
    recv: Vec<Vec<(usize, u64)>>,
    /// acked[i][j]: how many of i's messages to j were reported Acked.
    acked: Vec<Vec<usize>>,
}

impl Ledger {
    fn new(n: usize) -> Ledger {
        Ledger {
            sent: vec![vec![Vec::new(); n]; n],
            recv: vec![vec![(0, 0); n]; n],
            acked: vec![vec![0; n]; n],
        }
    }

    /// A delivery at `to` from `from` must be exactly the next bytes that `from` sent.
    fn check_delivery(&mut self, from: usize, to: usize, d: &Delivery) -> Result<(), String> {
        let (done, off) = self.recv[from][to];
        let Some(msg) = self.sent[from][to].get(done) else {
            return Err(format!(
                "{from}->{to}: delivery of a message never sent: {:?}",
                summary(d)
            ));
        };
        if d.msg != MsgId(done as u64 + 1) {
            return Err(format!(
                "{from}->{to}: expected msg {} got {:?}",
                done + 1,
                summary(d)
            ));
        }
        if d.offset != off || d.msg_len != msg.len() as u64 {
            return Err(format!(
                "{from}->{to}: expected offset {off} of {} bytes, got {:?}",
                msg.len(),
                summary(d)
            ));
        }
        let end = off as usize + d.data.len();
        if end > msg.len() || d.data[..] != msg[off as usize..end] {
            return Err(format!(
                "{from}->{to}: delivered bytes differ from sent bytes: {:?}",
                summary(d)
            ));
        }
        if d.data.is_empty() && !msg.is_empty() {
            return Err(format!(
                "{from}->{to}: empty fragment of a non-empty message"
            ));
        }
        self.recv[from][to] = if end == msg.len() {
            (done + 1, 0)
        } else {
            (done, end as u64)
        };
        Ok(())
    }

    /// `from` learned that message `msg` to `to` was delivered: it must be, and acks come
    /// once each, in order.
    fn check_acked(&mut self, from: usize, to: usize, msg: MsgId) -> Result<(), String> {
        let n = self.acked[from][to];
        if msg != MsgId(n as u64 + 1) {
            return Err(format!(
                "{from}->{to}: Acked {msg:?} out of order, expected {}",
                n + 1
            ));
        }
        if self.recv[from][to].0 < n + 1 {
            return Err(format!(
                "{from}->{to}: Acked {msg:?} before the receiver had all of it"
            ));
        }
        self.acked[from][to] = n + 1;
        Ok(())
    }

    fn all_done(&self) -> bool {
        let n = self.sent.len();
        (0..n).all(|i| {
            (0..n).all(|j| {
                self.recv[i][j].0 == self.sent[i][j].len()
                    && self.acked[i][j] == self.sent[i][j].len()
            })
        })
    }
}

fn summary(d: &Delivery) -> (MsgId, u64, u64, u64, usize) {
    (d.msg, d.seq, d.offset, d.msg_len, d.data.len())
}

struct Sim {
    seed: u64,
    setup: Setup,
    rng: SimRng,
    now: u64,
    queue: BinaryHeap<Reverse<(u64, u64, What)>>,
    serial: u64,
    /// chans[i][j]: endpoint i's channel to j (None on the diagonal).
    chans: Vec<Vec<Option<Channel>>>,
    ledger: Ledger,
    steps: u64,
    /// Latest scheduled arrival per (from, to, route) link, for FIFO links.
    link_tail: HashMap<(usize, usize, u8), u64>,
    injected_corrupt: u64,
    injected_foreign: u64,
}

impl Sim {
    fn new(seed: u64, endpoints: usize) -> Sim {
        Sim::build(seed, endpoints, |_| {}, |_, _| {})
    }

    /// A simulation whose drawn setup is adjusted by `tweak`, and each endpoint's
    /// channel configuration by `per_endpoint`.
    fn build(
        seed: u64,
        endpoints: usize,
        tweak: impl Fn(&mut Setup),
        per_endpoint: impl Fn(usize, &mut Config),
    ) -> Sim {
        let mut rng = SimRng(steadfast_proto::Rng::from_state(seed));
        let mut setup = swarm(&mut rng, endpoints);
        tweak(&mut setup);
        let mut chans: Vec<Vec<Option<Channel>>> = Vec::new();
        for i in 0..endpoints {
            let mut row = Vec::new();
            for j in 0..endpoints {
                row.push((i != j).then(|| {
                    let mut cfg = Config {
                        local_id: i as u32,
                        peer_id: j as u32,
                        ..setup.cfg.clone()
                    };
                    per_endpoint(i, &mut cfg);
                    Channel::new(cfg).expect("valid config")
                }));
            }
            chans.push(row);
        }
        let mut sim = Sim {
            seed,
            setup,
            rng,
            now: 0,
            queue: BinaryHeap::new(),
            serial: 0,
            chans,
            ledger: Ledger::new(endpoints),
            steps: 0,
            link_tail: HashMap::new(),
            injected_corrupt: 0,
            injected_foreign: 0,
        };
        for i in 0..endpoints {
            let t = sim.rng.gen_range(0..=sim.setup.send_interval);
            sim.schedule(t, What::AppSend(i));
        }
        sim
    }

    fn schedule(&mut self, at: u64, what: What) {
        self.serial += 1;
        self.queue.push(Reverse((at, self.serial, what)));
    }

    fn faulty(&self) -> bool {
        self.now < self.setup.fault_end
    }

    fn route_down(&self, route: u8) -> bool {
        self.faulty()
            && self
                .setup
                .faults
                .outages
                .iter()
                .any(|&(r, a, b)| r == route && a <= self.now && self.now < b)
    }

    /// Damages 1–3 bits, or overwrites a burst of up to 4 bytes. CRC32C detects both
    /// with certainty (Hamming distance 4 up to 2^31 bits; bursts up to 32 bits), so a
    /// damaged frame reaching the application is a bug, not bad luck.
    fn damage(&mut self, bytes: &mut [u8]) -> bool {
        if bytes.is_empty() {
            return false;
        }
        let before = bytes.to_vec();
        if self.rng.gen_bool(0.7) {
            for _ in 0..self.rng.gen_range(1..=3) {
                let bit = self.rng.gen_range(0..bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
            }
        } else {
            let len = self.rng.gen_range(1..=4usize).min(bytes.len());
            let at = self.rng.gen_range(0..=bytes.len() - len);
            for b in &mut bytes[at..at + len] {
                *b = self.rng.gen();
            }
        }
        bytes != &before[..]
    }

    /// Puts a frame on the simulated wire, with faults.
    fn wire(&mut self, from: usize, to: usize, route: u8, mut bytes: Vec<u8>) {
        let f = &self.setup.faults;
        let (bus_error, drop, wire_corrupt, wire_detects, dup, reorder, foreign) = (
            f.bus_error,
            f.drop,
            f.wire_corrupt,
            f.wire_detects,
            f.dup,
            f.reorder,
            f.foreign,
        );
        let (delay_min, delay_max, reorder_max, fifo) =
            (f.delay_min, f.delay_max, f.reorder_max, f.fifo);
        let faulty = self.faulty();
        // At most one damage per frame: two could add up to more than CRC32C detects
        // with certainty (or cancel out).
        let mut corrupted = false;
        if faulty && self.rng.gen_bool(bus_error) {
            corrupted = self.damage(&mut bytes);
        }
        if self.route_down(route) || (faulty && self.rng.gen_bool(drop)) {
            return;
        }
        if faulty && !corrupted && self.rng.gen_bool(wire_corrupt) {
            if self.rng.gen_bool(wire_detects) {
                return; // the wire's own checksum caught it
            }
            corrupted = self.damage(&mut bytes);
        }
        let copies = if faulty && self.rng.gen_bool(dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = self.now + self.rng.gen_range(delay_min..=delay_max);
            if faulty && self.rng.gen_bool(reorder) {
                at += self.rng.gen_range(0..=reorder_max);
            } else if fifo {
                let tail = self.link_tail.entry((from, to, route)).or_insert(0);
                at = at.max(*tail);
                *tail = at;
            }
            if corrupted {
                self.injected_corrupt += 1;
            }
            let p = Packet {
                from,
                to,
                corrupted,
                foreign: false,
                bytes: bytes.clone(),
            };
            self.schedule(at, What::Arrive(p));
        }
        if faulty && self.rng.gen_bool(foreign) {
            self.inject_foreign(to, from);
        }
    }

    /// A process of another job forges a well-formed frame aimed at `to`.
    fn inject_foreign(&mut self, to: usize, claimed_from: usize) {
        let is_data = self.rng.gen_bool(0.8);
        let len = if is_data {
            self.rng.gen_range(0..=self.setup.cfg.max_payload)
        } else {
            0
        };
        let mut payload = vec![0u8; len];
        self.rng.fill_bytes(&mut payload);
        let seq = self.rng.gen_range(1..=64);
        let repr = FrameRepr {
            kind_code: if is_data {
                Kind::Data.code()
            } else {
                Kind::Ack.code()
            },
            src: claimed_from as u32,
            dst: to as u32,
            seq: if is_data { seq } else { 0 },
            timestamp: self.now,
            send_count: 1,
            msg_id: if is_data { 1 } else { 0 },
            msg_len: len as u64,
            max_received: if self.rng.gen_bool(0.5) { seq } else { 0 },
            ..FrameRepr::default()
        };
        let bytes = repr
            .to_sealed_frame(&FrameKey::from_job_key(KEY ^ self.rng.gen_range(1..=u64::MAX)), &payload)
            .expect("forged frame is well formed");
        self.injected_foreign += 1;
        let p = Packet {
            from: claimed_from,
            to,
            corrupted: false,
            foreign: true,
            bytes,
        };
        let at = self.now + self.setup.faults.delay_min;
        self.schedule(at, What::Arrive(p));
    }

    fn fail(&self, msg: &str) -> ! {
        if std::env::var("STEADFAST_SIM_DUMP").is_ok() {
            for ch in self.chans.iter().flatten().flatten() {
                eprintln!("{ch:#?}");
            }
        }
        panic!(
            "seed {} failed at t={}ns step {}: {msg}\nsetup: {:?}",
            self.seed, self.now, self.steps, self.setup
        );
    }

    fn chan(&mut self, i: usize, j: usize) -> &mut Channel {
        self.chans[i][j].as_mut().expect("no channel to self")
    }

    /// Drains transmits and events of every channel until nothing moves, checking each
    /// delivery and acknowledgment.
    fn drain(&mut self) {
        let n = self.setup.endpoints;
        loop {
            let mut moved = false;
            for i in 0..n {
                for j in 0..n {
                    if i == j {
                        continue;
                    }
                    while let Some(e) = self.chan(i, j).poll_event() {
                        moved = true;
                        self.on_event(i, j, e);
                    }
                    let now = self.now;
                    while let Some(t) = self.chan(i, j).poll_transmit(now) {
                        moved = true;
                        self.wire(i, j, t.route, t.to_vec());
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn on_event(&mut self, me: usize, peer: usize, e: Event) {
        let r = match e {
            Event::Delivered(d) => self.ledger.check_delivery(peer, me, &d),
            Event::Acked { msg } => self.ledger.check_acked(me, peer, msg),
            Event::RetransmitExhausted { route, .. } => {
                // The path scheduler's part: fail the route, probe it again later.
                self.chan(me, peer).fail_route(route);
                let at = self.now + self.setup.probe_delay;
                self.schedule(at, What::Probe(me, peer, route));
                Ok(())
            }
            Event::CorruptDropped { .. } | Event::ForeignDropped { .. } => Ok(()),
            Event::ProtocolError { what } => Err(format!("{peer}->{me}: protocol error: {what}")),
        };
        if let Err(msg) = r {
            self.fail(&msg);
        }
    }

    fn app_send(&mut self, i: usize) {
        let n = self.setup.endpoints;
        let mut j = self.rng.gen_range(0..n - 1);
        if j >= i {
            j += 1;
        }
        let len = self.rng.gen_range(0..=self.setup.max_msg);
        let k = self.ledger.sent[i][j].len();
        let mut msg = vec![0u8; len];
        self.rng.fill_bytes(&mut msg);
        let now = self.now;
        let r = if self.rng.gen_bool(0.3) {
            self.chan(i, j)
                .send_bytes(now, bytes::Bytes::from(msg.clone()))
        } else {
            self.chan(i, j).send(now, &msg)
        };
        // On WouldBlock the application simply tries again later.
        if let Ok(id) = r {
            if id != MsgId(k as u64 + 1) {
                self.fail(&format!("send returned {id:?}, expected {}", k + 1));
            }
            self.ledger.sent[i][j].push(msg);
        }
        let next = self.now + self.rng.gen_range(0..=2 * self.setup.send_interval);
        if next < self.setup.fault_end {
            self.schedule(next, What::AppSend(i));
        }
    }

    fn arrive(&mut self, p: Packet) {
        if std::env::var("STEADFAST_SIM_TRACE").is_ok() {
            if let Ok(f) = Frame::new_checked(&p.bytes[..]) {
                let r = f.repr();
                eprintln!(
                    "t={} {}->{} {:?} seq={} sc={} cum={}/{}/{} corrupt={} foreign={}",
                    self.now,
                    p.from,
                    p.to,
                    r.kind(),
                    r.seq,
                    r.send_count,
                    r.cum_received,
                    r.cum_delivered,
                    r.max_received,
                    p.corrupted,
                    p.foreign
                );
            }
        }
        let before = *self.chan(p.to, p.from).counters();
        let now = self.now;
        self.chan(p.to, p.from).handle(now, &p.bytes);
        let after = *self.chan(p.to, p.from).counters();
        if p.corrupted || p.foreign {
            // Negative space: a damaged or forged frame is never accepted, and it is
            // accounted for as dropped.
            if after.frags_received != before.frags_received {
                self.fail(&format!(
                    "accepted a damaged/forged frame ({:?})",
                    (p.corrupted, p.foreign)
                ));
            }
            let dropped = |c: &Counters| {
                c.malformed_dropped
                    + c.corrupt_payload
                    + c.foreign_dropped
                    + c.dup_dropped
                    + c.window_dropped
                    + c.misdirected_dropped
            };
            if dropped(&after) != dropped(&before) + 1 {
                self.fail("damaged/forged frame not counted as dropped");
            }
            if p.foreign && after.foreign_dropped != before.foreign_dropped + 1 {
                self.fail("forged frame not counted as foreign");
            }
        }
    }

    /// The earliest thing that happens next: a queued item or a channel timer.
    fn next_time(&mut self) -> Option<u64> {
        let n = self.setup.endpoints;
        let mut t = self.queue.peek().map(|Reverse((at, _, _))| *at);
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    if let Some(d) = self.chan(i, j).poll_timeout() {
                        t = Some(t.map_or(d, |t| t.min(d)));
                    }
                }
            }
        }
        t
    }

    fn step(&mut self) -> bool {
        let Some(t) = self.next_time() else {
            return false;
        };
        if t < self.now {
            self.fail(&format!("time went backwards: {t}"));
        }
        self.now = t;
        self.steps += 1;
        let n = self.setup.endpoints;
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    self.chan(i, j).handle_timeout(t);
                }
            }
        }
        while let Some(Reverse((at, _, _))) = self.queue.peek() {
            if *at > t {
                break;
            }
            let Some(Reverse((_, _, what))) = self.queue.pop() else {
                break;
            };
            match what {
                What::Arrive(p) => self.arrive(p),
                What::AppSend(i) => self.app_send(i),
                What::Probe(i, j, route) => self.chan(i, j).restore_route(route),
            }
            self.drain();
        }
        self.drain();
        true
    }

    fn total_frags(&self) -> usize {
        let mp = self.setup.cfg.max_payload;
        self.ledger
            .sent
            .iter()
            .flatten()
            .flatten()
            .map(|m| m.len().div_ceil(mp).max(1))
            .sum()
    }

    /// Upper bound on the time needed after faults stop: the longest backoff, a route
    /// probe, then the queued data at one window per (generous) round trip.
    fn liveness_bound(&self) -> u64 {
        let c = &self.setup.cfg;
        let f = &self.setup.faults;
        let rtt = 2 * (f.delay_max + f.reorder_max) + 2 * MS;
        let window = if self.setup.slow_receiver {
            1
        } else {
            c.send_window_frags.max(1)
        };
        let rounds = (self.total_frags() / window + 2) as u64;
        let per_round = if self.setup.slow_receiver {
            rtt + c.rto_max_ns
        } else {
            rtt + c.rto_max_ns.min(rtt * 4)
        };
        2 * c.rto_max_ns + self.setup.probe_delay + rounds * per_round + 100 * MS
    }

    fn run(&mut self) {
        let max_steps = 2_000_000;
        while self.now < self.setup.fault_end {
            if !self.step() {
                break;
            }
            if self.steps > max_steps {
                self.fail("too many steps during the fault phase");
            }
        }
        // Liveness: faults are off; everything must be delivered and acked in time.
        let deadline = self.setup.fault_end + self.liveness_bound();
        while !self.ledger.all_done() {
            if !self.step() {
                self.fail("nothing left to do but messages are undelivered");
            }
            if self.now > deadline {
                let n = self.setup.endpoints;
                let undelivered: Vec<String> = (0..n)
                    .flat_map(|i| (0..n).map(move |j| (i, j)))
                    .filter(|&(i, j)| i != j)
                    .map(|(i, j)| {
                        format!(
                            "{i}->{j} sent {} delivered {:?} acked {}",
                            self.ledger.sent[i][j].len(),
                            self.ledger.recv[i][j],
                            self.ledger.acked[i][j]
                        )
                    })
                    .collect();
                self.fail(&format!(
                    "liveness bound exceeded: {}",
                    undelivered.join("; ")
                ));
            }
            if self.steps > max_steps {
                self.fail("too many steps during the liveness phase");
            }
        }
        // Quiescence: once everything is acknowledged, the channels settle with no
        // owed answers.
        for _ in 0..1000 {
            if !self.step() {
                break;
            }
        }
        let n = self.setup.endpoints;
        for i in 0..n {
            for j in 0..n {
                if i != j && !self.chan(i, j).is_idle() {
                    self.fail(&format!(
                        "channel {i}->{j} not idle after everything was acked"
                    ));
                }
            }
        }
    }

    fn totals(&self) -> Counters {
        let mut c = Counters::default();
        for ch in self.chans.iter().flatten().flatten() {
            c.add(ch.counters());
        }
        c
    }
}

/// Seeds to run: the one in `STEADFAST_SEED`, else `count` seeds from `first`.
fn seeds(first: u64) -> Vec<u64> {
    let default = if cfg!(debug_assertions) { 300 } else { 3000 };
    sweep::seeds(default, |i| first + i)
}

/// Runs `make(seed)` for every seed; on a failure prints the replay command and
/// re-raises.
fn run_seeds(test: &str, seeds: Vec<u64>, make: impl Fn(u64) -> Sim) -> Counters {
    let replay = format!("cargo test -p steadfast-reliable --test sim {test} -- --nocapture");
    let runs = sweep::sweep(test, &replay, &seeds, |seed| {
        let mut sim = make(seed);
        let t0 = std::time::Instant::now();
        sim.run();
        if std::env::var("STEADFAST_SIM_PROFILE").is_ok() {
            eprintln!(
                "seed {seed}: {:?} steps {} frags {} simtime {}ms",
                t0.elapsed(),
                sim.steps,
                sim.total_frags(),
                sim.now / MS
            );
        }
        Ok((sim.totals(), sim.injected_corrupt, sim.injected_foreign))
    });
    let mut total = Counters::default();
    let (mut corrupt, mut foreign) = (0u64, 0u64);
    for (c, ic, ifo) in &runs {
        total.add(c);
        corrupt += ic;
        foreign += ifo;
    }
    eprintln!("{test}: injected {corrupt} damaged and {foreign} forged frames; totals: {total}");
    total
}

#[test]
fn two_endpoints_survive_faults() {
    let c = run_seeds("two_endpoints_survive_faults", seeds(0), |seed| {
        Sim::new(seed, 2)
    });
    // The fault mix must actually have exercised the recovery paths.
    if std::env::var("STEADFAST_SEED").is_err() {
        assert!(
            c.timeouts > 0 && c.nack_retransmits > 0 && c.dup_dropped > 0,
            "{c}"
        );
        assert!(
            c.corrupt_payload > 0 && c.malformed_dropped > 0 && c.foreign_dropped > 0,
            "{c}"
        );
        assert!(
            c.rebound > 0 && c.receipts_received > 0 && c.retransmits_held > 0,
            "{c}"
        );
        assert!(c.fast_retransmits > 0 && c.exhausted > 0, "{c}");
    }
}

#[test]
fn many_endpoints_survive_faults() {
    run_seeds("many_endpoints_survive_faults", seeds(1_000_000), |seed| {
        Sim::new(seed, 3 + (seed % 2) as usize)
    });
}

/// A receiver configured smaller than its peer's send window drops fragments for lack of
/// space every round; data must still arrive intact and in order, only slower.
#[test]
fn undersized_receiver_still_delivers() {
    let seeds: Vec<u64> = seeds(2_000_000).into_iter().take(60).collect();
    let c = run_seeds("undersized_receiver_still_delivers", seeds, |seed| {
        Sim::build(
            seed,
            2,
            |s| s.slow_receiver = true,
            |i, c| {
                if i == 1 {
                    c.send_window_frags = 1;
                    c.send_window_bytes = c.max_payload;
                    c.recv_window_frags = 1;
                    c.recv_buffer_bytes = c.max_payload;
                } else {
                    c.send_window_frags = c.send_window_frags.max(8);
                    c.send_window_bytes = c.send_window_bytes.max(8 * c.max_payload);
                    c.recv_window_frags = c.recv_window_frags.max(c.send_window_frags);
                    c.recv_buffer_bytes = c.recv_buffer_bytes.max(c.send_window_bytes);
                }
            },
        )
    });
    if std::env::var("STEADFAST_SEED").is_err() {
        assert!(
            c.window_dropped > 0,
            "the small receiver must have dropped for space: {c}"
        );
    }
}

#[test]
fn no_faults_means_no_retransmissions() {
    for seed in 0..20 {
        let mut sim = Sim::build(
            seed,
            2,
            |s| {
                s.faults = Faults {
                    drop: 0.0,
                    dup: 0.0,
                    reorder: 0.0,
                    wire_corrupt: 0.0,
                    bus_error: 0.0,
                    foreign: 0.0,
                    outages: Vec::new(),
                    fifo: true,
                    delay_max: s.faults.delay_min,
                    ..s.faults.clone()
                };
                s.cfg.rto_initial_ns = 200 * MS; // well above any queueing delay here
                s.cfg.rto_min_ns = 200 * MS;
                s.cfg.rto_max_ns = 400 * MS;
            },
            |_, _| {},
        );
        sim.run();
        let c = sim.totals();
        assert_eq!(c.retransmits, 0, "seed {seed}: {c}");
        assert_eq!(
            c.dup_dropped + c.corrupt_detected() + c.window_dropped,
            0,
            "seed {seed}: {c}"
        );
        assert_eq!(c.msgs_delivered, c.msgs_sent, "seed {seed}: {c}");
    }
}

/// The checker itself must reject bad deliveries, or the simulation proves nothing.
#[test]
fn ledger_rejects_bad_deliveries() {
    let mut l = Ledger::new(2);
    l.sent[0][1].push(b"abcdef".to_vec());
    l.sent[0][1].push(b"gh".to_vec());
    let d = |msg, offset, data: &[u8], msg_len| Delivery {
        msg: MsgId(msg),
        seq: 1,
        offset,
        msg_len,
        data: data.to_vec(),
    };
    assert!(
        l.check_delivery(0, 1, &d(1, 0, b"abX", 6)).is_err(),
        "corrupt byte"
    );
    assert!(
        l.check_delivery(0, 1, &d(2, 0, b"gh", 2)).is_err(),
        "message skipped"
    );
    assert!(
        l.check_delivery(0, 1, &d(1, 3, b"def", 6)).is_err(),
        "fragment skipped"
    );
    assert!(
        l.check_acked(0, 1, MsgId(1)).is_err(),
        "ack before delivery"
    );
    l.check_delivery(0, 1, &d(1, 0, b"abc", 6)).unwrap();
    assert!(
        l.check_delivery(0, 1, &d(1, 0, b"abc", 6)).is_err(),
        "duplicate"
    );
    l.check_delivery(0, 1, &d(1, 3, b"def", 6)).unwrap();
    l.check_acked(0, 1, MsgId(1)).unwrap();
    assert!(l.check_acked(0, 1, MsgId(1)).is_err(), "double ack");
    l.check_delivery(0, 1, &d(2, 0, b"gh", 2)).unwrap();
    assert!(
        l.check_delivery(0, 1, &d(3, 0, b"", 0)).is_err(),
        "never sent"
    );
    assert!(!l.all_done());
    l.check_acked(0, 1, MsgId(2)).unwrap();
    assert!(l.all_done());
}

//! A deterministic test bed for the engine: N engines in one process and one thread, over an
//! in-memory path, driven step by step from one seeded generator.
//!
//! - **Network** ([`Net`]): every ordered pair (from, to) has a FIFO link of packets in
//!   flight, so per-pair order (what MPI's non-overtaking rule rests on) is kept; which pair
//!   delivers next is the driver's seeded choice, so packets are reordered *across* peers.
//!   Each packet gets a latency on a virtual clock; a link may be bounded
//!   ([`BedConfig::capacity`]), so `SendStatus::Full` and the engine's output queues are
//!   exercised. A delivered packet waits in the receiver's inbox until its engine polls.
//! - **Driver** ([`Bed::drive`]): each step either delivers one packet, runs one round of
//!   progress on one engine, or lets the test act; after a step bound it panics naming the
//!   seed (quinn-proto's `Pair::drive_bounded` is the model). Only nonblocking engine calls
//!   are used: a blocking call would spin for ever in one thread.
//! - **Crash and restart** ([`Bed::crash`], [`Bed::notify_failed`], [`Bed::restart`]):
//!   a crash drops the engine; of what it had in flight to each peer a seeded prefix stays
//!   deliverable, a seeded part is held back and delivered only after the peer learned of
//!   the restart (those must be dropped by the door), the rest is lost. Packets to a dead
//!   rank are discarded. A restart assembles a new engine for the same world rank with the
//!   next incarnation.
//! - **Seeds** ([`sweep`]): a test runs over `BED_SEEDS` seeds (default 200); a failure
//!   prints the seed, and `BED_SEED=n` replays just that one.
//!
//! The arrival log ([`Net::arrivals`]) records, per receiver, every message packet
//! (`Eager`/`Rts`) in the order the engine was handed it, and the tests record their own
//! posts and probes in it; [`RefMatcher`] replays that log with MPI's matching rules to say
//! which message each receive must get.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use steadfast_core::config::Config;
pub use steadfast_core::matching::{accepts, ANY_SOURCE, ANY_TAG};
use steadfast_core::request::{Mode, RecvSpec, SendSpec, Status};
use steadfast_core::wire::{Header, Kind};
use steadfast_core::ft::Ft;
use steadfast_core::{Engine, Handle, Parts};
use steadfast_paths::{PacketSink, Path, PathCounters, PathError, RawHeader, SendStatus};

/// Shape of one bed.
#[derive(Debug, Clone)]
pub struct BedConfig {
    pub ranks: u32,
    /// Largest message sent eagerly.
    pub eager_limit: usize,
    /// Largest packet payload (rendezvous data moves in chunks of this size).
    pub max_payload: usize,
    /// Packets one link holds in flight before `send` says `Full` (None: unbounded).
    pub capacity: Option<usize>,
    /// Latency of a packet: 0 ..= this many ticks of the virtual clock.
    pub max_latency: u64,
    pub run_through: bool,
}

impl BedConfig {
    pub fn new(ranks: u32) -> BedConfig {
        BedConfig { ranks, eager_limit: 256, max_payload: 1024, capacity: None, max_latency: 8, run_through: false }
    }
}

struct Packet {
    from: u32,
    incarnation: u16,
    hdr: RawHeader,
    payload: Vec<u8>,
    ready_at: u64,
}

/// What the arrival log holds for one receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A message (`Eager` or `Rts`) on context `ctx` from comm rank `src` with `tag`, sent by
    /// world rank `from` as its `seq`-th message to this receiver.
    Arrived { ctx: u32, src: i32, tag: i32, from: u32, seq: u64 },
    /// The test posted receive number `id` for (`src`, `tag`) on context `ctx`.
    Posted { ctx: u32, src: i32, tag: i32, id: usize },
    /// The test took the earliest message matching (`src`, `tag`) with a matched probe
    /// (`id` names the probe).
    Probed { ctx: u32, src: i32, tag: i32, id: usize },
}

/// The in-memory network shared by every engine's path.
pub struct Net {
    n: usize,
    /// Virtual time.
    pub now: u64,
    /// In flight, per (from, to): index `from * n + to`.
    links: Vec<VecDeque<Packet>>,
    /// Delivered and not yet polled, per receiver.
    inbox: Vec<VecDeque<Packet>>,
    /// Packets of dead incarnations held back until their receiver knows of the restart,
    /// per (from, to).
    held: Vec<VecDeque<Packet>>,
    alive: Vec<bool>,
    incarnation: Vec<u16>,
    capacity: Option<usize>,
    max_latency: u64,
    rng: ChaCha8Rng,
    counters: Vec<PathCounters>,
    /// Per receiver, in the order its engine saw them.
    pub arrivals: Vec<Vec<Event>>,
    /// Packets sent to a dead rank, or lost in a crash.
    pub lost: u64,
    /// Sends refused with `Full`.
    pub full: u64,
    /// Held-back packets of dead incarnations delivered, per receiver.
    pub stale_delivered: Vec<u64>,
}

impl Net {
    fn link(&self, from: u32, to: u32) -> usize {
        from as usize * self.n + to as usize
    }

    fn in_flight(&self) -> usize {
        self.links.iter().map(|l| l.len()).sum::<usize>() + self.inbox.iter().map(|l| l.len()).sum::<usize>()
    }
}

/// One engine's end of the in-memory network.
pub struct BedPath {
    me: u32,
    incarnation: u16,
    max_payload: usize,
    net: Arc<Mutex<Net>>,
}

impl Path for BedPath {
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        let mut net = self.net.lock().unwrap();
        if peer as usize >= net.n {
            return Err(PathError::Config(format!("no rank {peer}")));
        }
        assert!(payload.len() <= self.max_payload, "payload of {} bytes above max_payload", payload.len());
        assert_eq!(net.incarnation[self.me as usize], self.incarnation, "a dead incarnation sent");
        if !net.alive[peer as usize] {
            net.lost += 1;
            return Ok(SendStatus::Done);
        }
        let i = net.link(self.me, peer);
        if net.capacity.is_some_and(|c| net.links[i].len() >= c) {
            net.full += 1;
            return Ok(SendStatus::Full);
        }
        let max_latency = net.max_latency;
        let latency = net.rng.gen_range(0..=max_latency);
        let ready_at = net.now + latency;
        net.links[i].push_back(Packet { from: self.me, incarnation: self.incarnation, hdr: *hdr, payload: payload.to_vec(), ready_at });
        let c = &mut net.counters[self.me as usize];
        c.packets_sent += 1;
        c.bytes_sent += payload.len() as u64;
        Ok(SendStatus::Done)
    }

    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError> {
        let mut count = 0;
        loop {
            if !sink.wants_more() {
                break;
            }
            let p = {
                let mut net = self.net.lock().unwrap();
                let Some(p) = net.inbox[self.me as usize].pop_front() else { break };
                if let Some(h) = Header::decode(&p.hdr) {
                    if matches!(h.kind, Kind::Eager | Kind::Rts) {
                        let ev = Event::Arrived { ctx: h.ctx, src: h.src, tag: h.tag, from: p.from, seq: h.a };
                        net.arrivals[self.me as usize].push(ev);
                    }
                }
                let c = &mut net.counters[self.me as usize];
                c.packets_received += 1;
                c.bytes_received += p.payload.len() as u64;
                p
            };
            sink.packet(p.from, &p.hdr, &p.payload);
            count += 1;
        }
        Ok(count)
    }

    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn wait(&mut self, _timeout: Duration) -> Result<(), PathError> {
        panic!("a blocking engine call waited on the test bed (only nonblocking calls may be used)");
    }

    fn backlog(&self) -> usize {
        0
    }

    fn counters(&self) -> PathCounters {
        self.net.lock().unwrap().counters[self.me as usize]
    }
}

/// N engines over one [`Net`], and the driver.
pub struct Bed {
    pub seed: u64,
    pub cfg: BedConfig,
    pub rng: ChaCha8Rng,
    pub net: Arc<Mutex<Net>>,
    engines: Vec<Option<Engine>>,
    incarnation: Vec<u16>,
    pub steps: u64,
}

impl Bed {
    pub fn new(seed: u64, cfg: BedConfig) -> Bed {
        let n = cfg.ranks as usize;
        let net = Net {
            n,
            now: 0,
            links: (0..n * n).map(|_| VecDeque::new()).collect(),
            inbox: (0..n).map(|_| VecDeque::new()).collect(),
            held: (0..n * n).map(|_| VecDeque::new()).collect(),
            alive: vec![true; n],
            incarnation: vec![0; n],
            capacity: cfg.capacity,
            max_latency: cfg.max_latency,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6e65_7477_6f72_6b00),
            counters: vec![PathCounters::default(); n],
            arrivals: vec![Vec::new(); n],
            lost: 0,
            full: 0,
            stale_delivered: vec![0; n],
        };
        let mut bed = Bed {
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            net: Arc::new(Mutex::new(net)),
            engines: Vec::new(),
            incarnation: vec![0; n],
            steps: 0,
            cfg,
        };
        for r in 0..bed.cfg.ranks {
            let e = bed.assemble(r, 0);
            bed.engines.push(Some(e));
        }
        bed
    }

    fn assemble(&self, rank: u32, incarnation: u16) -> Engine {
        let size = self.cfg.ranks;
        let cfg = Config {
            eager_limit: Some(self.cfg.eager_limit),
            shm_ring: None,
            spin: 0,
            yields: 0,
            peer_spin: 0,
            sleep: Duration::from_millis(1),
            cma: Some(false),
            paths: Default::default(),
        };
        let net = BedPath { me: rank, incarnation, max_payload: self.cfg.max_payload, net: self.net.clone() };
        Engine::assemble(Parts {
            rank,
            size,
            incarnation,
            cfg,
            net: Some(Box::new(net)),
            boot: None,
            ft: Ft::fixed(size),
            run_through: self.cfg.run_through,
            // Failures and restarts come from the bed (`peer_failed`, `peer_rejoined`).
            relaunch: false,
            pids: vec![0; size as usize],
            cma_ok: vec![false; size as usize],
            eager_limit: self.cfg.eager_limit,
        })
    }

    pub fn size(&self) -> u32 {
        self.cfg.ranks
    }

    /// The engine of world rank `r` (which must be alive).
    pub fn e(&mut self, r: u32) -> &mut Engine {
        let seed = self.seed;
        self.engines[r as usize].as_mut().unwrap_or_else(|| panic!("seed {seed}: rank {r} is not running"))
    }

    pub fn alive(&self, r: u32) -> bool {
        self.engines[r as usize].is_some()
    }

    pub fn incarnation(&self, r: u32) -> u16 {
        self.incarnation[r as usize]
    }

    /// True with probability `p` (from the bed's generator).
    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    pub fn pick(&mut self, n: usize) -> usize {
        self.rng.gen_range(0..n)
    }

    /// A number in `lo ..= hi`.
    pub fn rng_range(&mut self, lo: usize, hi: usize) -> usize {
        self.rng.gen_range(lo..=hi)
    }

    /// Record an event in `rank`'s arrival log (posts and matched probes, for [`RefMatcher`]).
    pub fn log(&self, rank: u32, ev: Event) {
        self.net.lock().unwrap().arrivals[rank as usize].push(ev);
    }

    pub fn arrivals(&self, rank: u32) -> Vec<Event> {
        self.net.lock().unwrap().arrivals[rank as usize].clone()
    }

    /// Packets in flight from `from` to `to`, not yet delivered.
    pub fn link_len(&self, from: u32, to: u32) -> usize {
        let net = self.net.lock().unwrap();
        net.links[net.link(from, to)].len()
    }

    /// Packets in links and inboxes.
    pub fn in_flight(&self) -> usize {
        self.net.lock().unwrap().in_flight()
    }

    /// One step: deliver a packet (a link chosen at random among those whose head is due),
    /// or one round of progress on a random live engine. Time moves on when nothing is due.
    pub fn step(&mut self) {
        self.steps += 1;
        if self.rng.gen_bool(0.5) && self.deliver_one() {
            return;
        }
        let live: Vec<u32> = (0..self.size()).filter(|r| self.alive(*r)).collect();
        if live.is_empty() {
            return;
        }
        let r = live[self.rng.gen_range(0..live.len())];
        let seed = self.seed;
        if let Err(e) = self.e(r).progress() {
            panic!("seed {seed}: progress on rank {r} failed: {e:?}");
        }
    }

    /// Deliver one packet into its receiver's inbox; false when none could move.
    fn deliver_one(&mut self) -> bool {
        // Held-back packets of dead incarnations go once the receiver knows of the restart.
        let knows: Vec<Vec<u16>> = (0..self.size())
            .map(|to| (0..self.size()).map(|from| self.engines[to as usize].as_ref().map_or(0, |e| e.incarnation_of(from))).collect())
            .collect();
        let mut net = self.net.lock().unwrap();
        let n = net.n;
        let now = net.now;
        let mut due: Vec<(bool, usize)> = Vec::new();
        for i in 0..n * n {
            if net.links[i].front().is_some_and(|p| p.ready_at <= now) {
                due.push((false, i));
            }
            if net.held[i].front().is_some_and(|p| knows[i % n][i / n] > p.incarnation) {
                due.push((true, i));
            }
        }
        if due.is_empty() {
            // Nothing due: let time pass to the next packet's arrival.
            if let Some(t) = net.links.iter().filter_map(|l| l.front().map(|p| p.ready_at)).min() {
                net.now = t.max(now + 1);
            } else {
                net.now += 1;
            }
            return false;
        }
        let (held, i) = due[self.rng.gen_range(0..due.len())];
        let to = i % n;
        let p = if held { net.held[i].pop_front() } else { net.links[i].pop_front() };
        let Some(p) = p else { return false };
        if held {
            net.stale_delivered[to] += 1;
        }
        net.inbox[to].push_back(p);
        net.now += 1;
        true
    }

    /// Drive until `done` holds, letting the test act through it every step; panics naming
    /// the seed after `max_steps` steps.
    pub fn drive(&mut self, what: &str, max_steps: u64, mut done: impl FnMut(&mut Bed) -> bool) {
        let start = self.steps;
        loop {
            if done(self) {
                return;
            }
            if self.steps - start >= max_steps {
                panic!(
                    "seed {}: '{what}' not reached after {max_steps} steps ({} packets in flight, virtual time {})",
                    self.seed,
                    self.in_flight(),
                    self.net.lock().unwrap().now
                );
            }
            self.step();
        }
    }

    /// Drive until nothing is in flight and every live engine is idle.
    pub fn settle(&mut self, max_steps: u64) {
        let mut quiet = 0;
        self.drive("quiescence", max_steps, |b| {
            if b.in_flight() > 0 {
                quiet = 0;
                return false;
            }
            let mut busy = false;
            for r in 0..b.size() {
                if b.alive(r) {
                    busy |= b.e(r).progress().expect("progress");
                }
            }
            quiet = if busy { 0 } else { quiet + 1 };
            quiet >= 2 && b.in_flight() == 0
        });
    }

    /// World rank `w` dies: its engine is dropped. Of what it had in flight to each peer, a
    /// seeded prefix stays deliverable, the next part is held back (delivered only once
    /// the receiver knows of a restart, for the door to drop) and the rest is lost, as on
    /// a connection that breaks. What was on its way to it is lost.
    pub fn crash(&mut self, w: u32) {
        self.crash_with(w, false)
    }

    /// [`Bed::crash`], but with `keep_all` everything the dead rank had in flight stays
    /// deliverable.
    pub fn crash_with(&mut self, w: u32, keep_all: bool) {
        let e = self.engines[w as usize].take();
        assert!(e.is_some(), "seed {}: rank {w} crashed twice", self.seed);
        drop(e);
        let mut net = self.net.lock().unwrap();
        let n = net.n;
        net.alive[w as usize] = false;
        let mut lost = 0;
        for to in 0..n {
            let i = w as usize * n + to;
            let len = net.links[i].len();
            let keep = if keep_all { len } else { net.rng.gen_range(0..=len) };
            let hold = net.rng.gen_range(0..=len - keep);
            let mut tail = net.links[i].split_off(keep);
            let rest = tail.split_off(hold);
            lost += rest.len();
            net.held[i].extend(tail);
            // What reached the inbox of a peer but was not polled stays: it arrived.
            let j = to * n + w as usize;
            lost += net.links[j].len();
            net.links[j].clear();
            let held_to = net.held[j].len();
            lost += held_to;
            net.held[j].clear();
        }
        lost += net.inbox[w as usize].len();
        net.inbox[w as usize].clear();
        net.lost += lost as u64;
    }

    /// Tell every live engine that world rank `w` failed (run-through mode).
    pub fn notify_failed(&mut self, w: u32) {
        for r in 0..self.size() {
            if r != w && self.alive(r) {
                self.e(r).peer_failed(w);
            }
        }
    }

    /// Start world rank `w` again as its next incarnation; returns the incarnation. The
    /// new engine knows the incarnations of the others from the start.
    pub fn restart(&mut self, w: u32) -> u16 {
        assert!(!self.alive(w), "seed {}: rank {w} restarted while alive", self.seed);
        let inc = self.incarnation[w as usize] + 1;
        self.incarnation[w as usize] = inc;
        {
            let mut net = self.net.lock().unwrap();
            net.alive[w as usize] = true;
            net.incarnation[w as usize] = inc;
            // What the old incarnation sent and is still on its way travels on a connection
            // of its own: it may come after the new incarnation's packets, and only once the
            // receiver knows of the restart (the door must drop it then).
            let n = net.n;
            for to in 0..n {
                let i = w as usize * n + to;
                let old: Vec<Packet> = net.links[i].drain(..).collect();
                net.held[i].extend(old);
            }
        }
        let mut e = self.assemble(w, inc);
        for r in 0..self.size() {
            if r != w && self.incarnation[r as usize] > 0 {
                e.peer_rejoined(r, self.incarnation[r as usize]);
            }
        }
        self.engines[w as usize] = Some(e);
        inc
    }

    /// Tell every other live engine that world rank `w` came back.
    pub fn notify_rejoined(&mut self, w: u32) {
        let inc = self.incarnation[w as usize];
        for r in 0..self.size() {
            if r != w && self.alive(r) {
                self.e(r).peer_rejoined(w, inc);
            }
        }
    }
}

/// Run `test` for every seed of the sweep: `BED_SEED=n` runs seed n only, else seeds
/// `0 .. BED_SEEDS` (default `default_seeds`). A failure names the seed that replays it.
pub fn sweep(name: &str, default_seeds: u64, test: impl Fn(u64)) {
    let seeds: Vec<u64> = match std::env::var("BED_SEED").ok().and_then(|v| v.trim().parse().ok()) {
        Some(s) => vec![s],
        None => {
            let n = std::env::var("BED_SEEDS").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default_seeds);
            (0..n).collect()
        }
    };
    for seed in seeds {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(seed)));
        if let Err(e) = r {
            eprintln!("{name}: failed with seed {seed}; replay with BED_SEED={seed} cargo test --release -p steadfast-core --test engine_bed {name}");
            std::panic::resume_unwind(e);
        }
    }
}

// ---- messages with checkable contents --------------------------------------------------------

/// Bytes a message carries in front of its filler: who sent it and which it was.
pub const STAMP: usize = 16;

/// Identity stamped into a message: sender world rank, its incarnation, and the message's
/// number among those this sender incarnation sent to that receiver (from 1, like the door's
/// sequence numbers), plus the tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub from: u32,
    pub incarnation: u16,
    pub seq: u32,
    pub tag: i32,
}

/// A message body of `len >= STAMP` bytes: the stamp, then filler derived from it.
pub fn body(s: Stamp, len: usize) -> Vec<u8> {
    assert!(len >= STAMP);
    let mut v = vec![0u8; len];
    v[0..4].copy_from_slice(&s.from.to_le_bytes());
    v[4..6].copy_from_slice(&s.incarnation.to_le_bytes());
    v[8..12].copy_from_slice(&s.seq.to_le_bytes());
    v[12..16].copy_from_slice(&s.tag.to_le_bytes());
    for (i, b) in v[STAMP..].iter_mut().enumerate() {
        *b = filler(&s, i);
    }
    v
}

fn filler(s: &Stamp, i: usize) -> u8 {
    (i as u32).wrapping_mul(31).wrapping_add(s.from * 7 + s.seq * 13 + s.incarnation as u32 * 101) as u8
}

/// The stamp of a received body of `len` bytes, after checking its filler.
pub fn check_body(data: &[u8], len: usize) -> Result<Stamp, String> {
    if len < STAMP || data.len() < len {
        return Err(format!("message of {len} bytes has no stamp"));
    }
    let s = Stamp {
        from: u32::from_le_bytes(data[0..4].try_into().unwrap()),
        incarnation: u16::from_le_bytes(data[4..6].try_into().unwrap()),
        seq: u32::from_le_bytes(data[8..12].try_into().unwrap()),
        tag: i32::from_le_bytes(data[12..16].try_into().unwrap()),
    };
    for (i, b) in data[STAMP..len].iter().enumerate() {
        if *b != filler(&s, i) {
            return Err(format!("{s:?}: byte {} is {b}, expected {}", STAMP + i, filler(&s, i)));
        }
    }
    Ok(s)
}

/// A send spec over `buf` on `comm`.
pub fn send_spec(e: &Engine, buf: &[u8], dest: i32, tag: i32, mode: Mode) -> SendSpec {
    SendSpec { buf: buf.as_ptr(), count: buf.len(), dtype: steadfast_core::coll::byte_type(), comm: e.world, dest, tag, mode }
}

/// A receive spec into `buf` on `comm`.
pub fn recv_spec(e: &Engine, buf: &mut [u8], src: i32, tag: i32) -> RecvSpec {
    RecvSpec { buf: buf.as_mut_ptr(), count: buf.len(), dtype: steadfast_core::coll::byte_type(), comm: e.world, src, tag }
}

/// The status of `h` if it completed (the request is released then).
pub fn test(e: &mut Engine, h: Handle) -> Option<Status> {
    if e.is_complete(h).expect("valid request") {
        let s = e.status(h).expect("status");
        e.release(h);
        Some(s)
    } else {
        None
    }
}

// ---- reference matcher --------------------------------------------------------------------

/// MPI's matching rules written plainly, replayed over a receiver's arrival log: which
/// message (sender world rank, sequence number) each posted receive and each matched probe
/// must get. `world_of` maps a comm rank to a world rank (the identity on COMM_WORLD).
pub struct RefMatcher;

/// What the reference says a receive or probe got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefMatch {
    pub from: u32,
    pub seq: u64,
}

impl RefMatcher {
    /// Returns, for every receive id and probe id in the log, the message it matched
    /// (None: still pending at the end of the log). Receive ids index the first vector,
    /// probe ids the second.
    pub fn replay(log: &[Event], receives: usize, probes: usize) -> (Vec<Option<RefMatch>>, Vec<Option<RefMatch>>) {
        let mut recv = vec![None; receives];
        let mut probe = vec![None; probes];
        // (ctx, src, tag, id) posted and unmatched, in posting order.
        let mut posted: Vec<(u32, i32, i32, usize)> = Vec::new();
        // (ctx, src, tag, message) arrived and unmatched, in arrival order.
        let mut unexpected: Vec<(u32, i32, i32, RefMatch)> = Vec::new();
        for ev in log {
            match *ev {
                Event::Arrived { ctx, src, tag, from, seq } => {
                    let m = RefMatch { from, seq };
                    match posted.iter().position(|p| p.0 == ctx && accepts(p.1, p.2, src, tag)) {
                        Some(i) => {
                            let (_, _, _, id) = posted.remove(i);
                            recv[id] = Some(m);
                        }
                        None => unexpected.push((ctx, src, tag, m)),
                    }
                }
                Event::Posted { ctx, src, tag, id } => {
                    match unexpected.iter().position(|u| u.0 == ctx && accepts(src, tag, u.1, u.2)) {
                        Some(i) => recv[id] = Some(unexpected.remove(i).3),
                        None => posted.push((ctx, src, tag, id)),
                    }
                }
                Event::Probed { ctx, src, tag, id } => {
                    if let Some(i) = unexpected.iter().position(|u| u.0 == ctx && accepts(src, tag, u.1, u.2)) {
                        probe[id] = Some(unexpected.remove(i).3);
                    }
                }
            }
        }
        (recv, probe)
    }
}

//! The engine's behaviours on the deterministic test bed (`bed/mod.rs`): many engines in one
//! thread over an in-memory network with seeded reordering across peers, bounded links and
//! crash/restart of ranks. Every test runs over a sweep of seeds; a failure prints the seed,
//! and `BED_SEED=n cargo test --release -p steadfast-core --test engine_bed NAME` replays it.

mod bed;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bed::*;
use steadfast_core::door::{Determinant, Interpose};
use steadfast_core::request::{Mode, Status};
use steadfast_core::{ErrorClass, Handle};

/// Seeds per test when `BED_SEEDS` is not set.
const SEEDS: u64 = 500;
/// Step bound of one drive.
const STEPS: u64 = 200_000;

// ---- traffic: planned sends and receives, run in program order per rank ------------------

struct SendOp {
    from: u32,
    to: u32,
    tag: i32,
    mode: Mode,
    buf: Vec<u8>,
    stamp: Stamp,
    h: Option<Handle>,
    status: Option<Status>,
    /// Made with `send_init` and started (else `isend`).
    persistent: bool,
}

struct RecvOp {
    at: u32,
    src: i32,
    tag: i32,
    buf: Vec<u8>,
    h: Option<Handle>,
    status: Option<Status>,
    /// Position among the receives of its rank (the reference matcher's id).
    id: usize,
    /// Made with `recv_init` and started (else `irecv`).
    persistent: bool,
}

#[derive(Clone, Copy)]
enum Action {
    Send(usize),
    Recv(usize),
}

#[derive(Default)]
struct Traffic {
    sends: Vec<SendOp>,
    recvs: Vec<RecvOp>,
    /// Per rank, what it still has to call, in order.
    programs: Vec<VecDeque<Action>>,
    /// Messages planned per (from, to), for stamps.
    count: HashMap<(u32, u32), u32>,
    /// Receives planned per rank.
    recv_ids: HashMap<u32, usize>,
}

impl Traffic {
    fn new(ranks: u32) -> Traffic {
        Traffic { programs: (0..ranks).map(|_| VecDeque::new()).collect(), ..Default::default() }
    }

    /// Plan a message; returns its index.
    fn send(&mut self, bed: &Bed, from: u32, to: u32, tag: i32, len: usize, mode: Mode) -> usize {
        let c = self.count.entry((from, to)).or_insert(0);
        *c += 1;
        let stamp = Stamp { from, incarnation: bed.incarnation(from), seq: *c, tag };
        self.sends.push(SendOp { from, to, tag, mode, buf: body(stamp, len), stamp, h: None, status: None, persistent: false });
        self.sends.len() - 1
    }

    /// Plan a receive of up to `cap` bytes; returns its index.
    fn recv(&mut self, at: u32, src: i32, tag: i32, cap: usize) -> usize {
        let id = self.recv_ids.entry(at).or_insert(0);
        self.recvs.push(RecvOp { at, src, tag, buf: vec![0; cap], h: None, status: None, id: *id, persistent: false });
        *id += 1;
        self.recvs.len() - 1
    }

    fn program(&mut self, rank: u32, a: Action) {
        self.programs[rank as usize].push_back(a);
    }

    /// Shuffle every rank's program, keeping the order of its sends among themselves and of
    /// its receives among themselves.
    fn interleave(&mut self, bed: &mut Bed) {
        for p in self.programs.iter_mut() {
            let (mut s, mut r): (VecDeque<Action>, VecDeque<Action>) = p.drain(..).partition(|a| matches!(a, Action::Send(_)));
            while !s.is_empty() || !r.is_empty() {
                let take_send = r.is_empty() || (!s.is_empty() && bed.chance(0.5));
                p.push_back(if take_send { s.pop_front() } else { r.pop_front() }.unwrap());
            }
        }
    }

    fn pending_actions(&self, bed: &Bed) -> bool {
        self.programs.iter().enumerate().any(|(r, p)| !p.is_empty() && bed.alive(r as u32))
    }

    /// Perform the next action of a random rank that has one.
    fn act(&mut self, bed: &mut Bed) {
        let ready: Vec<u32> = (0..bed.size()).filter(|r| bed.alive(*r) && !self.programs[*r as usize].is_empty()).collect();
        if ready.is_empty() {
            return;
        }
        let r = ready[bed.pick(ready.len())];
        let a = self.programs[r as usize].pop_front().unwrap();
        self.perform(bed, a);
    }

    fn perform(&mut self, bed: &mut Bed, a: Action) {
        let seed = bed.seed;
        match a {
            Action::Send(i) => {
                let s = &mut self.sends[i];
                let e = bed.e(s.from);
                let spec = send_spec(e, &s.buf, s.to as i32, s.tag, s.mode);
                let h = if s.persistent {
                    let h = e.send_init(spec, true).unwrap_or_else(|err| panic!("seed {seed}: send_init: {err:?}"));
                    e.start(h).unwrap_or_else(|err| panic!("seed {seed}: start: {err:?}"));
                    h
                } else {
                    e.isend(spec).unwrap_or_else(|err| panic!("seed {seed}: isend: {err:?}"))
                };
                s.h = Some(h);
            }
            Action::Recv(i) => {
                let r = &mut self.recvs[i];
                let e = bed.e(r.at);
                let spec = recv_spec(e, &mut r.buf, r.src, r.tag);
                let h = if r.persistent {
                    let h = e.recv_init(spec, true).unwrap_or_else(|err| panic!("seed {seed}: recv_init: {err:?}"));
                    e.start(h).unwrap_or_else(|err| panic!("seed {seed}: start: {err:?}"));
                    h
                } else {
                    e.irecv(spec).unwrap_or_else(|err| panic!("seed {seed}: irecv: {err:?}"))
                };
                r.h = Some(h);
                bed.log(r.at, Event::Posted { ctx: 0, src: r.src, tag: r.tag, id: r.id });
            }
        }
    }

    /// Collect the completions of every started request of live ranks.
    fn poll(&mut self, bed: &mut Bed) {
        for s in self.sends.iter_mut() {
            if let (Some(h), None) = (s.h, s.status) {
                if bed.alive(s.from) {
                    s.status = test(bed.e(s.from), h);
                }
            }
        }
        for r in self.recvs.iter_mut() {
            if let (Some(h), None) = (r.h, r.status) {
                if bed.alive(r.at) {
                    r.status = test(bed.e(r.at), h);
                }
            }
        }
    }

    /// Every planned call made and every request complete.
    fn done(&self, bed: &Bed) -> bool {
        !self.pending_actions(bed)
            && self.sends.iter().all(|s| s.status.is_some() || !bed.alive(s.from))
            && self.recvs.iter().all(|r| r.status.is_some() || !bed.alive(r.at))
    }

    /// Drive until [`Traffic::done`], acting with probability `p` per step.
    fn run(&mut self, bed: &mut Bed, what: &str, p: f64) {
        bed.drive(what, STEPS, |b| {
            if self.pending_actions(b) && b.chance(p) {
                self.act(b);
            }
            self.poll(b);
            self.done(b)
        });
    }

    /// The stamp of a receive that completed with a message, with its contents and status
    /// checked (a buffer shorter than the message holds its start, with `Truncate`).
    fn received(&self, seed: u64, i: usize) -> Stamp {
        let r = &self.recvs[i];
        let st = r.status.unwrap_or_else(|| panic!("seed {seed}: receive {i} did not complete"));
        assert!(matches!(st.error, None | Some(ErrorClass::Truncate)), "seed {seed}: receive {i} at rank {} from {}: {st:?}", r.at, r.src);
        assert!(!st.cancelled, "seed {seed}: receive {i} cancelled");
        let stamp = check_body(&r.buf, st.bytes as usize).unwrap_or_else(|e| panic!("seed {seed}: receive {i}: {e}"));
        assert_eq!(st.source, stamp.from as i32, "seed {seed}: receive {i}: status source");
        assert_eq!(st.tag, stamp.tag, "seed {seed}: receive {i}: status tag");
        let sent = self.find(stamp, r.at).unwrap_or_else(|| panic!("seed {seed}: receive {i} got a message never sent to it: {stamp:?}"));
        let len = self.sends[sent].buf.len();
        if r.buf.len() < len {
            assert_eq!((st.error, st.bytes as usize), (Some(ErrorClass::Truncate), r.buf.len()), "seed {seed}: receive {i}: truncation");
        } else {
            assert_eq!((st.error, st.bytes as usize), (None, len), "seed {seed}: receive {i}: length");
        }
        stamp
    }

    /// The planned send of the message `stamp` to `to`.
    fn find(&self, stamp: Stamp, to: u32) -> Option<usize> {
        self.sends.iter().position(|s| s.stamp == stamp && s.to == to)
    }

    /// Non-overtaking: the receives at each rank for one (source, tag), in posting order,
    /// got that stream's messages in sending order. Only receives naming both source and tag
    /// are considered; `ok` says which receives completed with a message.
    fn check_streams(&self, seed: u64, ok: impl Fn(&RecvOp) -> bool) {
        let mut next: HashMap<(u32, i32, i32), usize> = HashMap::new();
        for (i, r) in self.recvs.iter().enumerate() {
            if r.src < 0 || r.tag < 0 || !ok(r) {
                continue;
            }
            let stamp = self.received(seed, i);
            let k = next.entry((r.at, r.src, r.tag)).or_insert(0);
            let stream: Vec<&SendOp> =
                self.sends.iter().filter(|s| s.to == r.at && s.from as i32 == r.src && s.tag == r.tag && s.stamp.incarnation == stamp.incarnation).collect();
            let want = stream.get(*k).map(|s| s.stamp);
            assert_eq!(Some(stamp), want, "seed {seed}: rank {} receive {i} from {} tag {}: message out of order", r.at, r.src, r.tag);
            *k += 1;
        }
    }
}

fn message_len(bed: &mut Bed) -> usize {
    let (eager, chunk) = (bed.cfg.eager_limit, bed.cfg.max_payload);
    match bed.pick(10) {
        0 => eager,
        1 => eager + 1,
        2..=5 => bed.rng_range(STAMP, eager),
        _ => bed.rng_range(eager + 1, 3 * chunk + 7),
    }
}

fn random_cfg(bed_seed: u64, ranks: u32) -> BedConfig {
    use rand::{Rng, SeedableRng};
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(bed_seed ^ 0xc0f1_6000);
    let mut cfg = BedConfig::new(ranks);
    cfg.capacity = if r.gen_bool(0.5) { Some(r.gen_range(1..4)) } else { None };
    cfg.max_latency = r.gen_range(0..20);
    cfg.eager_limit = [64, 256, 1000][r.gen_range(0..3)];
    cfg.max_payload = cfg.eager_limit * r.gen_range(1..5) + r.gen_range(0..3) * 8;
    cfg
}

// ---- point-to-point ------------------------------------------------------------------------

/// Eager and rendezvous messages (above the eager limit, in several chunks; standard,
/// synchronous and buffered modes; persistent requests; to oneself too) between every pair,
/// receives posted before and after arrival, some too short: every message arrives whole (or
/// its start, with `Truncate`), and messages of one (sender, tag) are received in sending
/// order.
#[test]
fn eager_rendezvous_and_non_overtaking() {
    sweep("eager_rendezvous_and_non_overtaking", SEEDS, |seed| {
        let n = 2 + (seed % 5) as u32;
        let mut bed = Bed::new(seed, random_cfg(seed, n));
        for r in 0..n {
            bed.e(r).bsend_capacity = 1 << 24;
        }
        let mut t = Traffic::new(n);
        for from in 0..n {
            for _ in 0..bed.rng_range(6, 14) {
                let to = bed.pick(n as usize) as u32;
                let tag = bed.pick(3) as i32;
                let len = message_len(&mut bed);
                let mode = match bed.pick(20) {
                    0..=2 => Mode::Synchronous,
                    3 | 4 => Mode::Buffered,
                    _ => Mode::Standard,
                };
                let s = t.send(&bed, from, to, tag, len, mode);
                t.sends[s].persistent = bed.chance(0.2);
                t.program(from, Action::Send(s));
                // Room to spare, exactly the message, or too little (truncation).
                let cap = match bed.pick(10) {
                    0..=2 => len + bed.pick(64),
                    3 if len > STAMP => len - 1 - bed.pick((len - STAMP).min(100)),
                    _ => len,
                };
                let r = t.recv(to, from as i32, tag, cap);
                t.recvs[r].persistent = bed.chance(0.2);
                t.program(to, Action::Recv(r));
            }
        }
        t.interleave(&mut bed);
        t.run(&mut bed, "all messages received", 0.2);
        for s in &t.sends {
            assert_eq!(s.status.unwrap().error, None, "seed {seed}: send {:?}", s.stamp);
        }
        t.check_streams(seed, |_| true);
        bed.settle(STEPS);
        for r in 0..n {
            assert_eq!(bed.e(r).queue_depth(0), (0, 0), "seed {seed}: rank {r} has leftovers");
        }
    });
}

/// Receives with `ANY_SOURCE` and `ANY_TAG` next to specific ones, against the reference
/// matcher replaying each receiver's log of posts and arrivals: every receive gets exactly
/// the message MPI's rules give it (or stays pending when the rules leave it unmatched), and
/// a rendezvous send completes exactly when its message was matched.
#[test]
fn wildcards_match_like_the_reference() {
    sweep("wildcards_match_like_the_reference", SEEDS, |seed| {
        let n = 2 + (seed % 5) as u32;
        let mut bed = Bed::new(seed, random_cfg(seed, n));
        let mut t = Traffic::new(n);
        let cap = 3 * bed.cfg.max_payload + 8;
        for from in 0..n {
            for _ in 0..bed.rng_range(5, 12) {
                let to = (from + 1 + bed.pick(n as usize - 1) as u32) % n;
                let tag = bed.pick(3) as i32;
                let len = message_len(&mut bed);
                let s = t.send(&bed, from, to, tag, len, Mode::Standard);
                t.program(from, Action::Send(s));
                let (src, rtag) = match bed.pick(4) {
                    0 => (from as i32, tag),
                    1 => (ANY_SOURCE, tag),
                    2 => (from as i32, ANY_TAG),
                    _ => (ANY_SOURCE, ANY_TAG),
                };
                let r = t.recv(to, src, rtag, cap);
                t.program(to, Action::Recv(r));
            }
        }
        t.interleave(&mut bed);
        bed.drive("every call made", STEPS, |b| {
            if b.chance(0.2) {
                t.act(b);
            }
            t.poll(b);
            !t.pending_actions(b)
        });
        bed.settle(STEPS);
        t.poll(&mut bed);
        let mut matched_sends = vec![false; t.sends.len()];
        for at in 0..n {
            let nrecv = t.recvs.iter().filter(|r| r.at == at).count();
            let (want, _) = RefMatcher::replay(&bed.arrivals(at), nrecv, 0);
            for (i, r) in t.recvs.iter().enumerate().filter(|(_, r)| r.at == at) {
                match want[r.id] {
                    None => assert!(r.status.is_none(), "seed {seed}: rank {at} receive {i} completed, the reference has it pending"),
                    Some(m) => {
                        let got = t.received(seed, i);
                        assert_eq!((got.from, got.seq as u64), (m.from, m.seq), "seed {seed}: rank {at} receive {i} ({}, {})", r.src, r.tag);
                        matched_sends[t.find(got, at).unwrap()] = true;
                    }
                }
            }
        }
        let eager = bed.cfg.eager_limit;
        for (i, s) in t.sends.iter().enumerate() {
            let complete = s.status.is_some();
            let expect = s.buf.len() <= eager || matched_sends[i];
            assert_eq!(complete, expect, "seed {seed}: send {:?} of {} bytes: complete {complete}", s.stamp, s.buf.len());
        }
        // Withdraw what the rules left pending.
        for r in t.recvs.iter_mut().filter(|r| r.status.is_none()) {
            let e = bed.e(r.at);
            e.cancel(r.h.unwrap()).unwrap();
            let st = test(e, r.h.unwrap()).unwrap_or_else(|| panic!("seed {seed}: cancelled receive not complete"));
            assert!(st.cancelled, "seed {seed}");
        }
    });
}

/// `iprobe` reports the earliest matching message without taking it; `improbe` takes it out
/// of matching and `imrecv` receives exactly it; an `irecv` after a probe gets the probed
/// message. Checked against the reference matcher and the stamps.
#[test]
fn probe_and_matched_probe() {
    sweep("probe_and_matched_probe", SEEDS, |seed| {
        let n = 3;
        let mut bed = Bed::new(seed, random_cfg(seed, n));
        let mut t = Traffic::new(n);
        let mut expected = vec![0usize; n as usize];
        for from in 0..n {
            for _ in 0..bed.rng_range(4, 10) {
                let to = (from + 1 + bed.pick(n as usize - 1) as u32) % n;
                let tag = bed.pick(3) as i32;
                let len = message_len(&mut bed);
                let s = t.send(&bed, from, to, tag, len, Mode::Standard);
                t.program(from, Action::Send(s));
                expected[to as usize] += 1;
            }
        }
        // Per rank: (probe id, stamp got, status the probe reported) and receives posted.
        struct Taken {
            at: u32,
            probe: Option<usize>,
            recv: Option<usize>,
            h: Handle,
            buf: Vec<u8>,
            reported: Status,
            status: Option<Status>,
        }
        let mut taken: Vec<Taken> = Vec::new();
        let mut probes = vec![0usize; n as usize];
        let mut recvs = vec![0usize; n as usize];
        let mut got = vec![0usize; n as usize];
        bed.drive("every message probed and received", STEPS, |b| {
            if b.chance(0.2) {
                t.act(b);
            }
            t.poll(b);
            if b.chance(0.3) {
                let at = b.pick(n as usize) as u32;
                if got[at as usize] < expected[at as usize] {
                    let (src, tag) = match b.pick(3) {
                        0 => (ANY_SOURCE, ANY_TAG),
                        1 => (ANY_SOURCE, b.pick(3) as i32),
                        _ => (b.pick(n as usize) as i32, ANY_TAG),
                    };
                    let world = b.e(at).world;
                    if let Some(st) = b.e(at).iprobe(world, src, tag).unwrap() {
                        // Take the probed message, naming it by its source and tag.
                        got[at as usize] += 1;
                        let mut buf = vec![0u8; st.bytes as usize];
                        let (h, probe, recv) = if b.chance(0.5) {
                            let (m, st2) = b.e(at).improbe(world, st.source, st.tag).unwrap().expect("probed message gone");
                            assert_eq!((st2.source, st2.tag, st2.bytes), (st.source, st.tag, st.bytes), "seed {}", b.seed);
                            let id = probes[at as usize];
                            probes[at as usize] += 1;
                            b.log(at, Event::Probed { ctx: 0, src: st.source, tag: st.tag, id });
                            let spec = recv_spec(b.e(at), &mut buf, st.source, st.tag);
                            (b.e(at).imrecv(m, spec).unwrap(), Some(id), None)
                        } else {
                            let spec = recv_spec(b.e(at), &mut buf, st.source, st.tag);
                            let h = b.e(at).irecv(spec).unwrap();
                            let id = recvs[at as usize];
                            recvs[at as usize] += 1;
                            b.log(at, Event::Posted { ctx: 0, src: st.source, tag: st.tag, id });
                            (h, None, Some(id))
                        };
                        taken.push(Taken { at, probe, recv, h, buf, reported: st, status: None });
                    }
                }
            }
            for k in taken.iter_mut().filter(|k| k.status.is_none()) {
                k.status = test(b.e(k.at), k.h);
            }
            !t.pending_actions(b) && got == expected && taken.iter().all(|k| k.status.is_some()) && t.done(b)
        });
        for at in 0..n {
            // Probes by iprobe are not matches: the reference replays posts and matched probes.
            let (wr, wp) = RefMatcher::replay(&bed.arrivals(at), recvs[at as usize], probes[at as usize]);
            for k in taken.iter().filter(|k| k.at == at) {
                let st = k.status.unwrap();
                assert_eq!(st.error, None, "seed {seed}");
                assert_eq!((st.source, st.tag, st.bytes), (k.reported.source, k.reported.tag, k.reported.bytes), "seed {seed}: probe reported another message");
                let stamp = check_body(&k.buf, st.bytes as usize).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let want = match (k.probe, k.recv) {
                    (Some(p), _) => wp[p],
                    (_, Some(r)) => wr[r],
                    _ => unreachable!(),
                };
                let want = want.unwrap_or_else(|| panic!("seed {seed}: reference found nothing for a probed message"));
                assert_eq!((stamp.from, stamp.seq as u64), (want.from, want.seq), "seed {seed}: rank {at}");
            }
        }
        bed.settle(STEPS);
        for r in 0..n {
            assert_eq!(bed.e(r).queue_depth(0), (0, 0), "seed {seed}: rank {r} has leftovers");
        }
    });
}

/// MPI_Cancel of a posted receive (alone, or racing with its message) and of sends (eager
/// and rendezvous, racing with the receive): a cancelled receive gets nothing and the message
/// goes to the next receive; a cancelled send is never received, a send that was not
/// cancelled is received exactly once.
#[test]
fn cancel_receives_and_sends() {
    sweep("cancel_receives_and_sends", SEEDS, |seed| {
        let n = 3;
        let mut bed = Bed::new(seed, random_cfg(seed, n));
        let world = bed.e(0).world;
        // A receive nobody sends to is cancelled at once.
        let mut lone = vec![0u8; 32];
        let spec = recv_spec(bed.e(1), &mut lone, ANY_SOURCE, 99);
        let h = bed.e(1).irecv(spec).unwrap();
        bed.e(1).cancel(h).unwrap();
        let st = test(bed.e(1), h).expect("cancelled receive completes at once");
        assert!(st.cancelled, "seed {seed}");

        // Pairs (sender, receiver, tag): the receive of the first message races a cancel of
        // the receive; the second message's send races a cancel of the send.
        struct Case {
            from: u32,
            to: u32,
            tag: i32,
            data: Vec<u8>,
            send: Option<Handle>,
            send_status: Option<Status>,
            cancel_send_at: u64,
            cancel_recv: bool,
            recv_buf: Vec<u8>,
            recv: Option<Handle>,
            recv_status: Option<Status>,
            post_at: u64,
            cancel_at: u64,
        }
        let mut cases = Vec::new();
        for k in 0..6 {
            let from = bed.pick(n as usize) as u32;
            let to = (from + 1 + bed.pick(n as usize - 1) as u32) % n;
            let len = message_len(&mut bed);
            let stamp = Stamp { from, incarnation: 0, seq: k + 1, tag: 10 + k as i32 };
            cases.push(Case {
                from,
                to,
                tag: 10 + k as i32,
                data: body(stamp, len),
                send: None,
                send_status: None,
                cancel_send_at: bed.rng_range(0, 200) as u64,
                cancel_recv: bed.chance(0.5),
                recv_buf: vec![0; len],
                recv: None,
                recv_status: None,
                post_at: bed.rng_range(0, 200) as u64,
                cancel_at: bed.rng_range(0, 300) as u64,
            });
        }
        for c in cases.iter_mut() {
            let spec = send_spec(bed.e(c.from), &c.data, c.to as i32, c.tag, Mode::Standard);
            c.send = Some(bed.e(c.from).isend(spec).unwrap());
        }
        let start = bed.steps;
        let mut cancelled_sends = vec![false; cases.len()];
        let mut cancelled_recvs = vec![false; cases.len()];
        bed.drive("cancels answered", STEPS, |b| {
            let now = b.steps - start;
            for (i, c) in cases.iter_mut().enumerate() {
                if c.cancel_recv {
                    // This case cancels the receive: post it, then cancel it.
                    if c.recv.is_none() && now >= c.post_at {
                        let spec = recv_spec(b.e(c.to), &mut c.recv_buf, c.from as i32, c.tag);
                        c.recv = Some(b.e(c.to).irecv(spec).unwrap());
                    }
                    if let Some(h) = c.recv.filter(|_| !cancelled_recvs[i] && now >= c.post_at + c.cancel_at) {
                        if c.recv_status.is_none() {
                            b.e(c.to).cancel(h).unwrap();
                        }
                        cancelled_recvs[i] = true;
                    }
                    if let (None, Some(h)) = (c.send_status, c.send) {
                        c.send_status = test(b.e(c.from), h);
                    }
                } else if !cancelled_sends[i] && now >= c.cancel_send_at {
                    // This case cancels the send (the request is kept until then).
                    b.e(c.from).cancel(c.send.unwrap()).unwrap();
                    cancelled_sends[i] = true;
                } else if cancelled_sends[i] && c.send_status.is_none() {
                    c.send_status = test(b.e(c.from), c.send.unwrap());
                }
                if !c.cancel_recv && c.recv.is_none() && now >= c.post_at && b.chance(0.5) {
                    let spec = recv_spec(b.e(c.to), &mut c.recv_buf, c.from as i32, c.tag);
                    c.recv = Some(b.e(c.to).irecv(spec).unwrap());
                }
                if let (Some(h), None) = (c.recv, c.recv_status) {
                    c.recv_status = test(b.e(c.to), h);
                }
            }
            cases.iter().enumerate().all(|(i, c)| {
                if c.cancel_recv {
                    cancelled_recvs[i] && c.recv_status.is_some()
                } else {
                    c.send_status.is_some()
                }
            })
        });
        // Whatever is left unreceived is now in place at its receiver (per-pair order: a
        // marker sent after it arrives after it).
        let marker = body(Stamp { from: 0, incarnation: 0, seq: 0, tag: 77 }, STAMP);
        let mut marks = Vec::new();
        for c in &cases {
            let spec = send_spec(bed.e(c.from), &marker, c.to as i32, 77, Mode::Standard);
            let s = bed.e(c.from).isend(spec).unwrap();
            let mut buf = vec![0u8; STAMP];
            let spec = recv_spec(bed.e(c.to), &mut buf, c.from as i32, 77);
            let r = bed.e(c.to).irecv(spec).unwrap();
            marks.push((c.from, s, c.to, r, buf));
        }
        bed.drive("markers received", STEPS, |b| {
            for (from, s, to, r, _) in marks.iter() {
                if !b.e(*from).is_complete(*s).unwrap() || !b.e(*to).is_complete(*r).unwrap() {
                    return false;
                }
            }
            true
        });
        for c in cases.iter_mut() {
            let (to, from, tag) = (c.to, c.from as i32, c.tag);
            if c.cancel_recv {
                let rs = c.recv_status.unwrap();
                if rs.cancelled {
                    // The message must still be there for another receive.
                    let st = bed.e(to).iprobe(world, from, tag).unwrap();
                    assert!(st.is_some(), "seed {seed}: message of a cancelled receive vanished");
                    let mut buf = vec![0u8; c.data.len()];
                    let spec = recv_spec(bed.e(to), &mut buf, from, tag);
                    let h = bed.e(to).irecv(spec).unwrap();
                    bed.drive("receive after a cancelled one", STEPS, |b| b.e(to).is_complete(h).unwrap());
                    let st = test(bed.e(to), h).unwrap();
                    assert_eq!((st.error, st.bytes as usize), (None, c.data.len()), "seed {seed}");
                    assert_eq!(buf, c.data, "seed {seed}");
                } else {
                    assert_eq!(rs.error, None, "seed {seed}");
                    assert_eq!(c.recv_buf, c.data, "seed {seed}: receive cancelled too late got other data");
                    assert!(bed.e(to).iprobe(world, from, tag).unwrap().is_none(), "seed {seed}: message received twice");
                }
                continue;
            }
            let ss = c.send_status.unwrap();
            assert_eq!(ss.error, None, "seed {seed}");
            let probed = bed.e(to).iprobe(world, from, tag).unwrap();
            if ss.cancelled {
                assert!(probed.is_none(), "seed {seed}: a cancelled send is still receivable");
                if let Some(h) = c.recv {
                    if c.recv_status.is_none() {
                        c.recv_status = test(bed.e(to), h);
                    }
                    assert!(c.recv_status.is_none(), "seed {seed}: a cancelled send was received");
                    bed.e(to).cancel(h).unwrap();
                    assert!(test(bed.e(to), h).unwrap().cancelled, "seed {seed}");
                }
            } else {
                let h = match c.recv {
                    Some(h) => h,
                    None => {
                        assert!(probed.is_some(), "seed {seed}: a send that was not cancelled is not receivable");
                        let spec = recv_spec(bed.e(to), &mut c.recv_buf, from, tag);
                        bed.e(to).irecv(spec).unwrap()
                    }
                };
                if c.recv_status.is_none() {
                    bed.drive("receive of an uncancelled send", STEPS, |b| b.e(to).is_complete(h).unwrap());
                    c.recv_status = test(bed.e(to), h);
                }
                assert_eq!(c.recv_status.unwrap().error, None, "seed {seed}");
                assert_eq!(c.recv_buf, c.data, "seed {seed}");
            }
        }
        bed.settle(STEPS);
        for r in 0..n {
            assert_eq!(bed.e(r).queue_depth(0), (0, 0), "seed {seed}: rank {r} has leftovers");
        }
    });
}

// ---- the interposition hook ----------------------------------------------------------------

struct Record(Arc<Mutex<Vec<Determinant>>>);

impl Interpose for Record {
    fn matched(&mut self, det: &Determinant) {
        self.0.lock().unwrap().push(*det);
    }
}

/// The door reports one determinant per reception, with the reception clock counting
/// 1, 2, 3, ..., naming the message received (sender, its sequence number, tag).
#[test]
fn interposition_sees_every_reception() {
    sweep("interposition_sees_every_reception", SEEDS, |seed| {
        let n = 4;
        let mut bed = Bed::new(seed, random_cfg(seed, n));
        let logs: Vec<Arc<Mutex<Vec<Determinant>>>> = (0..n).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        for r in 0..n {
            bed.e(r).set_interpose(Some(Box::new(Record(logs[r as usize].clone()))));
        }
        let mut t = Traffic::new(n);
        // Per receiver: every receive names its message, or every receive is a wildcard
        // (mixing them could leave a named receive without its message).
        let wild: Vec<bool> = (0..n).map(|_| bed.chance(0.3)).collect();
        for from in 0..n {
            for _ in 0..bed.rng_range(4, 10) {
                let to = (from + 1 + bed.pick(n as usize - 1) as u32) % n;
                let tag = bed.pick(2) as i32;
                let len = message_len(&mut bed);
                let s = t.send(&bed, from, to, tag, len, Mode::Standard);
                t.program(from, Action::Send(s));
                let src = if wild[to as usize] { ANY_SOURCE } else { from as i32 };
                let r = t.recv(to, src, if src == ANY_SOURCE { ANY_TAG } else { tag }, 3 * bed.cfg.max_payload + 8);
                t.program(to, Action::Recv(r));
            }
        }
        t.interleave(&mut bed);
        t.run(&mut bed, "all messages received", 0.2);
        for at in 0..n {
            let dets = logs[at as usize].lock().unwrap().clone();
            let mut got: Vec<(u32, u64, i32)> = Vec::new();
            for (i, _) in t.recvs.iter().enumerate().filter(|(_, r)| r.at == at) {
                let s = t.received(seed, i);
                got.push((s.from, s.seq as u64, s.tag));
            }
            assert_eq!(dets.len(), got.len(), "seed {seed}: rank {at}: one determinant per reception");
            for (k, d) in dets.iter().enumerate() {
                assert_eq!(d.clock, k as u64 + 1, "seed {seed}: rank {at}: reception clock");
                assert_eq!(d.ctx, 0, "seed {seed}");
                assert_eq!(d.src, d.from.world as i32, "seed {seed}");
                assert_eq!(d.from.incarnation, 0, "seed {seed}");
            }
            let mut a: Vec<(u32, u64, i32)> = dets.iter().map(|d| (d.from.world, d.from.seq, d.tag)).collect();
            a.sort();
            got.sort();
            assert_eq!(a, got, "seed {seed}: rank {at}: determinants name the messages received");
            assert_eq!(bed.e(at).ft().epoch(), 0);
        }
    });
}

// ---- nonblocking collectives ---------------------------------------------------------------

/// A nonblocking broadcast (eager or rendezvous sized) then a barrier, over the bed.
#[test]
fn nonblocking_broadcast_and_barrier() {
    use steadfast_core::coll::{Buf, Coll};
    sweep("nonblocking_broadcast_and_barrier", SEEDS / 2, |seed| {
        let n = 1 + (seed % 5) as u32;
        let mut bed = Bed::new(seed, random_cfg(seed, n));
        let root = bed.pick(n as usize) as i32;
        let len = message_len(&mut bed);
        let data = body(Stamp { from: root as u32, incarnation: 0, seq: 1, tag: 0 }, len);
        let mut bufs: Vec<Vec<u8>> = (0..n).map(|r| if r as i32 == root { data.clone() } else { vec![0; len] }).collect();
        let mut reqs = Vec::new();
        for r in 0..n {
            let world = bed.e(r).world;
            let buf = Buf { ptr: bufs[r as usize].as_mut_ptr(), count: len, dtype: steadfast_core::coll::byte_type() };
            let b = bed.e(r).icoll(world, Coll::Bcast { buf, root }).unwrap();
            let bar = bed.e(r).icoll(world, Coll::Barrier).unwrap();
            reqs.push((b, bar));
        }
        bed.drive("collectives complete", STEPS, |b| {
            (0..n).all(|r| {
                let (x, y) = reqs[r as usize];
                b.e(r).is_complete(x).unwrap() && b.e(r).is_complete(y).unwrap()
            })
        });
        for (r, buf) in bufs.iter().enumerate() {
            let (x, y) = reqs[r];
            let e = bed.e(r as u32);
            assert_eq!(e.status(x).unwrap().error, None, "seed {seed}");
            assert_eq!(e.status(y).unwrap().error, None, "seed {seed}");
            assert_eq!(buf, &data, "seed {seed}: rank {r} broadcast contents");
        }
    });
}

// ---- run-through errors, revoke, crash and restart ------------------------------------------

/// In run-through mode, a rank dies while messages to and from it are in flight (the
/// failure notice comes some steps later): receives from it get a gap-free prefix of what it
/// sent or `ProcFailed`; sends to it complete (`ProcFailed` once it is known dead); an
/// `ANY_SOURCE` receive reports `ProcFailedPending` until the failure is acknowledged and is
/// then matched by a live sender.
#[test]
fn run_through_errors() {
    sweep("run_through_errors", SEEDS, |seed| {
        let n = 4;
        let mut cfg = random_cfg(seed, n);
        cfg.run_through = true;
        let mut bed = Bed::new(seed, cfg);
        let w = 1 + bed.pick(n as usize - 1) as u32;
        let mut t = Traffic::new(n);
        for from in 0..n {
            for _ in 0..bed.rng_range(4, 10) {
                let to = (from + 1 + bed.pick(n as usize - 1) as u32) % n;
                let tag = bed.pick(2) as i32;
                let len = message_len(&mut bed);
                let s = t.send(&bed, from, to, tag, len, Mode::Standard);
                t.program(from, Action::Send(s));
                // Room for any message: one from a failed rank may come in place of another.
                let r = t.recv(to, from as i32, tag, 3 * bed.cfg.max_payload + 8);
                t.program(to, Action::Recv(r));
            }
        }
        t.interleave(&mut bed);
        // An ANY_SOURCE receive at rank 0 that nothing matches before the failure.
        let mut any_buf = vec![0u8; 64];
        let spec = recv_spec(bed.e(0), &mut any_buf, ANY_SOURCE, 42);
        let any = bed.e(0).irecv(spec).unwrap();
        let crash_at = bed.rng_range(0, 400) as u64;
        let notice_delay = bed.rng_range(0, 100) as u64;
        let start = bed.steps;
        let mut crashed_at = None;
        bed.drive("survivors' requests complete", STEPS, |b| {
            let now = b.steps - start;
            if crashed_at.is_none() && now >= crash_at {
                b.crash(w);
                crashed_at = Some(now);
            }
            if crashed_at.is_some_and(|c| now == c + notice_delay) {
                b.notify_failed(w);
            }
            if t.pending_actions(b) && b.chance(0.2) {
                t.act(b);
            }
            t.poll(b);
            crashed_at.is_some_and(|c| now > c + notice_delay) && t.done(b)
        });
        let failed = |s: &Option<Status>| s.is_some_and(|s| s.error == Some(ErrorClass::ProcFailed));
        for s in t.sends.iter().filter(|s| s.from != w) {
            let st = s.status.unwrap();
            assert!(st.error.is_none() || (s.to == w && failed(&s.status)), "seed {seed}: send to {}: {st:?}", s.to);
        }
        // Survivors among themselves: everything arrives, in order.
        t.check_streams(seed, |r| r.at != w && r.src != w as i32);
        // From the failed rank: its messages in order; one is skipped only where a receive
        // failed (it may have matched a message whose transfer the failure cut).
        let mut next: HashMap<(u32, i32), (usize, usize)> = HashMap::new();
        for (i, r) in t.recvs.iter().enumerate().filter(|(_, r)| r.at != w && r.src == w as i32) {
            let (k, failures) = next.entry((r.at, r.tag)).or_insert((0, 0));
            if failed(&r.status) {
                assert_eq!(r.status.unwrap().source, w as i32, "seed {seed}");
                *failures += 1;
                continue;
            }
            let s = t.received(seed, i);
            let stream: Vec<u32> = t.sends.iter().filter(|x| x.from == w && x.to == r.at && x.tag == r.tag).map(|x| x.stamp.seq).collect();
            let pos = stream.iter().position(|q| *q == s.seq).unwrap();
            assert!(pos >= *k && pos - *k <= *failures, "seed {seed}: rank {} from the failed rank: message {pos} after {k} with {failures} failed receives", r.at);
            *failures -= pos - *k;
            *k = pos + 1;
        }
        // New operations on the failed rank fail at once.
        let probe_buf = vec![0u8; STAMP];
        let spec = send_spec(bed.e(0), &probe_buf, w as i32, 5, Mode::Standard);
        let h = bed.e(0).isend(spec).unwrap();
        assert!(failed(&test(bed.e(0), h)), "seed {seed}: send to a failed rank");
        // The ANY_SOURCE receive is pending on the unacknowledged failure.
        let world = bed.e(0).world;
        assert!(!bed.e(0).is_complete(any).unwrap(), "seed {seed}: ANY_SOURCE receive completed");
        assert_eq!(bed.e(0).comm_failed(world, false).unwrap(), vec![w as i32]);
        let err = bed.e(0).wait(any).expect_err("ANY_SOURCE receive must report the pending failure");
        assert_eq!(err.class, ErrorClass::ProcFailedPending, "seed {seed}");
        bed.e(0).comm_ack_failures(world, None).unwrap();
        let from = if w == 1 { 2 } else { 1 };
        let data = body(Stamp { from, incarnation: 0, seq: 1000, tag: 42 }, 64);
        let spec = send_spec(bed.e(from), &data, 0, 42, Mode::Standard);
        let s = bed.e(from).isend(spec).unwrap();
        bed.drive("ANY_SOURCE receive after the acknowledgement", STEPS, |b| b.e(0).is_complete(any).unwrap());
        let st = test(bed.e(0), any).unwrap();
        assert_eq!((st.error, st.source), (None, from as i32), "seed {seed}");
        assert_eq!(any_buf, data, "seed {seed}");
        bed.drive("send done", STEPS, |b| b.e(from).is_complete(s).unwrap());
    });
}

/// MPIX_Comm_revoke from one rank reaches every other: their pending receives on the
/// communicator complete with `Revoked`, and new operations on it fail the same way.
#[test]
fn revoke_reaches_every_rank() {
    sweep("revoke_reaches_every_rank", SEEDS / 2, |seed| {
        let n = 4;
        let mut cfg = random_cfg(seed, n);
        cfg.run_through = true;
        let mut bed = Bed::new(seed, cfg);
        let mut bufs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; 32]).collect();
        let mut pending = Vec::new();
        for r in 0..n {
            let spec = recv_spec(bed.e(r), &mut bufs[r as usize], ANY_SOURCE, 3);
            pending.push(bed.e(r).irecv(spec).unwrap());
        }
        let revoker = bed.pick(n as usize) as u32;
        let at = bed.rng_range(0, 50) as u64;
        let start = bed.steps;
        let mut revoked = false;
        bed.drive("every rank sees the revoke", STEPS, |b| {
            if !revoked && b.steps - start >= at {
                let world = b.e(revoker).world;
                b.e(revoker).revoke(world).unwrap();
                revoked = true;
            }
            revoked && (0..n).all(|r| b.e(r).is_complete(pending[r as usize]).unwrap())
        });
        for r in 0..n {
            let st = test(bed.e(r), pending[r as usize]).unwrap();
            assert_eq!(st.error, Some(ErrorClass::Revoked), "seed {seed}: rank {r}");
            let world = bed.e(r).world;
            assert!(bed.e(r).comm_is_revoked(world), "seed {seed}");
            let data = vec![0u8; STAMP];
            let spec = send_spec(bed.e(r), &data, ((r + 1) % n) as i32, 1, Mode::Standard);
            let h = bed.e(r).isend(spec).unwrap();
            assert_eq!(test(bed.e(r), h).unwrap().error, Some(ErrorClass::Revoked), "seed {seed}");
        }
    });
}

static STALE_SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A rank dies in the middle of traffic and is started again as incarnation 1: survivors
/// learn of the restart from the launcher's notice or from the new incarnation's first
/// packet. Packets of the dead incarnation still in flight are dropped by the door (counted
/// in `dropped_packets`) and never reach a receive; the new incarnation then exchanges
/// messages with every survivor, in order, both ways.
#[test]
fn crash_and_restart() {
    STALE_SEEN.store(0, std::sync::atomic::Ordering::Relaxed);
    sweep("crash_and_restart", SEEDS, |seed| {
        let n = 4;
        let mut cfg = random_cfg(seed, n);
        cfg.run_through = true;
        let mut bed = Bed::new(seed, cfg);
        // A third of the seeds crash and restart twice (the same rank or another).
        for _ in 0..if seed % 3 == 0 { 2 } else { 1 } {
            crash_restart_cycle(&mut bed, seed);
        }
    });
    if std::env::var("BED_SEED").is_err() {
        assert!(STALE_SEEN.load(std::sync::atomic::Ordering::Relaxed) > 0, "no seed delivered a stale packet: the test checks nothing");
    }
}

/// One crash and restart of a random rank in the middle of traffic, then traffic with the
/// new incarnation (see [`crash_and_restart`]).
fn crash_restart_cycle(bed: &mut Bed, seed: u64) {
    let n = bed.size();
    let w = bed.pick(n as usize) as u32;
    let survivors: Vec<u32> = (0..n).filter(|r| *r != w).collect();

    // Phase 1: traffic among everybody; w dies in the middle of it.
    let mut t = Traffic::new(n);
    for from in 0..n {
        for _ in 0..bed.rng_range(4, 12) {
            let to = (from + 1 + bed.pick(n as usize - 1) as u32) % n;
            let tag = bed.pick(2) as i32;
            let len = message_len(bed);
            let s = t.send(bed, from, to, tag, len, Mode::Standard);
            t.program(from, Action::Send(s));
            // Room for any message: one from a failed rank may come in place of another.
            let r = t.recv(to, from as i32, tag, 3 * bed.cfg.max_payload + 8);
            t.program(to, Action::Recv(r));
        }
    }
    t.interleave(bed);
    let crash_at = bed.rng_range(0, 200) as u64;
    let notice_delay = bed.rng_range(0, 60) as u64;
    let start = bed.steps;
    let mut crashed_at = None;
    let mut last_words = Vec::new();
    bed.drive("phase 1", STEPS, |b| {
        let now = b.steps - start;
        if crashed_at.is_none() && now >= crash_at {
            // A burst just before dying, so that something is in flight.
            for &to in &survivors {
                let buf = body(Stamp { from: w, incarnation: b.incarnation(w), seq: 9000 + to, tag: 1 }, STAMP + 8);
                let spec = send_spec(b.e(w), &buf, to as i32, 1, Mode::Standard);
                let _ = b.e(w).isend(spec).unwrap();
                last_words.push(buf);
            }
            b.crash(w);
            crashed_at = Some(now);
        }
        if crashed_at.is_some_and(|c| now == c + notice_delay) {
            b.notify_failed(w);
        }
        if t.pending_actions(b) && b.chance(0.2) {
            t.act(b);
        }
        t.poll(b);
        crashed_at.is_some_and(|c| now > c + notice_delay) && t.done(b)
    });
    t.check_streams(seed, |r| r.at != w && r.src != w as i32);
    let dropped_before: Vec<u64> = (0..n).map(|r| if r == w { 0 } else { bed.e(r).dropped_packets() }).collect();
    let stale_before = bed.net.lock().unwrap().stale_delivered.clone();

    // Restart; the survivors hear of it now, later, or from the first packet.
    let inc = bed.restart(w);
    let tell_now = bed.chance(0.5);
    if tell_now {
        bed.notify_rejoined(w);
    }
    let tell_at = bed.rng_range(0, 200) as u64;

    // Phase 2: the new incarnation and the survivors exchange messages both ways.
    let mut t2 = Traffic::new(n);
    for &s in &survivors {
        for _ in 0..bed.rng_range(2, 6) {
            let tag = bed.pick(2) as i32;
            let len = message_len(bed);
            let (from, to) = if bed.chance(0.5) { (w, s) } else { (s, w) };
            let x = t2.send(bed, from, to, tag, len, Mode::Standard);
            t2.program(from, Action::Send(x));
            let r = t2.recv(to, from as i32, tag, len);
            t2.program(to, Action::Recv(r));
        }
    }
    // Until a survivor knows w is back, w is failed there: a send to it fails, and a
    // receive from it may still get what the dead incarnation sent before dying (MPI
    // allows that). Survivors therefore talk to w only once they know.
    t2.interleave(bed);
    let start = bed.steps;
    bed.drive("phase 2", STEPS, |b| {
        if !tell_now && b.steps - start == tell_at {
            b.notify_rejoined(w);
        }
        if b.chance(0.2) {
            // Ranks that do not know w is back yet hold their calls naming it.
            let ready: Vec<u32> = (0..n)
                .filter(|r| {
                    t2.programs[*r as usize].front().is_some_and(|a| match *a {
                        Action::Send(i) => t2.sends[i].to != w || b.e(*r).incarnation_of(w) == inc,
                        Action::Recv(i) => t2.recvs[i].src != w as i32 || b.e(*r).incarnation_of(w) == inc,
                    })
                })
                .collect();
            if !ready.is_empty() {
                let r = ready[b.pick(ready.len())];
                let a = t2.programs[r as usize].pop_front().unwrap();
                t2.perform(b, a);
            }
        }
        t2.poll(b);
        t2.done(b)
    });
    if !tell_now {
        bed.notify_rejoined(w);
    }
    // Let whatever the dead incarnation left in flight arrive.
    bed.settle(STEPS);
    for s in &t2.sends {
        assert_eq!(s.status.unwrap().error, None, "seed {seed}: phase 2 send {:?}", s.stamp);
    }
    // Every phase-2 receive got a message of the new incarnation, in order.
    t2.check_streams(seed, |_| true);
    for (i, r) in t2.recvs.iter().enumerate() {
        let s = t2.received(seed, i);
        if r.src == w as i32 {
            assert_eq!(s.incarnation, inc, "seed {seed}: a message of a dead incarnation was received");
        }
    }
    // Stale packets were dropped by the door, not acted on.
    let stale_after = bed.net.lock().unwrap().stale_delivered.clone();
    for &s in &survivors {
        let stale = stale_after[s as usize] - stale_before[s as usize];
        let dropped = bed.e(s).dropped_packets() - dropped_before[s as usize];
        assert!(dropped >= stale, "seed {seed}: rank {s}: {stale} stale packets delivered, {dropped} dropped");
        assert_eq!(bed.e(s).incarnation_of(w), inc, "seed {seed}");
        assert!(!bed.e(s).is_failed(w), "seed {seed}: rank {s} still sees {w} failed");
        STALE_SEEN.fetch_add(stale, std::sync::atomic::Ordering::Relaxed);
        // Nothing of the old incarnation is left to be received.
        assert_eq!(bed.e(s).queue_depth(0), (0, 0), "seed {seed}: rank {s} has leftovers");
    }
}

/// A rendezvous send to a rank that dies right after answering it: the answer (`Cts`) is
/// still in flight when the survivor learns of the failure and fails the send. When the
/// answer arrives after that, the send stays failed and nothing is streamed to the dead
/// rank (its data would otherwise reach a later incarnation, naming a receive of the dead
/// one).
#[test]
fn late_answer_of_a_dead_receiver_is_ignored() {
    sweep("late_answer_of_a_dead_receiver_is_ignored", SEEDS / 4, |seed| {
        let mut cfg = BedConfig::new(2);
        cfg.run_through = true;
        cfg.max_latency = 0;
        let mut bed = Bed::new(seed, cfg);
        let len = 4 * bed.cfg.max_payload;
        let data = body(Stamp { from: 0, incarnation: 0, seq: 1, tag: 0 }, len);
        let spec = send_spec(bed.e(0), &data, 1, 0, Mode::Standard);
        let s = bed.e(0).isend(spec).unwrap();
        let mut buf = vec![0u8; len];
        let spec = recv_spec(bed.e(1), &mut buf, 0, 0);
        let _r = bed.e(1).irecv(spec).unwrap();
        // Until rank 1 answered: its Cts is on the way back.
        bed.drive("clear to send in flight", STEPS, |b| b.link_len(1, 0) > 0);
        bed.crash_with(1, true);
        bed.notify_failed(1);
        assert!(bed.e(0).is_complete(s).unwrap(), "seed {seed}: send to a failed rank did not complete");
        let lost = bed.net.lock().unwrap().lost;
        bed.settle(STEPS);
        let st = bed.e(0).status(s).unwrap();
        assert_eq!(st.error, Some(ErrorClass::ProcFailed), "seed {seed}: a failed send was completed again");
        assert_eq!(bed.net.lock().unwrap().lost, lost, "seed {seed}: data was streamed to a dead rank");
    });
}

/// MPIX_Comm_iagree over the bed: the AND of every live member's flag, the same on all;
/// with a member that failed before the call (known to all), the survivors still agree and
/// the request reports `ProcFailed` (the failure is not acknowledged); with a member that
/// dies during the agreement, every survivor still decides, and decides the same value.
#[test]
fn agreement_of_survivors() {
    sweep("agreement_of_survivors", SEEDS / 2, |seed| {
        let n = 2 + (seed % 4) as u32;
        let mut cfg = random_cfg(seed, n);
        cfg.run_through = true;
        let mut bed = Bed::new(seed, cfg);
        let dead = if n > 2 && bed.chance(0.5) { Some(bed.pick(n as usize) as u32) } else { None };
        // Half of the failures happen before anyone calls, half during the agreement.
        let during = dead.is_some() && bed.chance(0.5);
        let crash_at = bed.rng_range(0, 100) as u64;
        let notice_delay = bed.rng_range(0, 30) as u64;
        if let (Some(w), false) = (dead, during) {
            bed.crash(w);
            bed.notify_failed(w);
        }
        let live: Vec<u32> = (0..n).filter(|r| Some(*r) != dead).collect();
        let callers: Vec<u32> = if during { (0..n).collect() } else { live.clone() };
        let flags: Vec<i32> = (0..n).map(|_| if bed.chance(0.8) { 0b111 } else { 0b101 }).collect();
        let mut outs: Vec<Box<i32>> = (0..n).map(|_| Box::new(-1)).collect();
        let mut reqs = vec![None; n as usize];
        let mut started = 0;
        let start = bed.steps;
        let mut crashed = None;
        bed.drive("agreement", STEPS, |b| {
            let now = b.steps - start;
            if let (Some(w), true, None) = (dead, during, crashed) {
                if now >= crash_at {
                    b.crash(w);
                    crashed = Some(now);
                }
            }
            if let (Some(w), Some(c)) = (dead, crashed) {
                if now == c + notice_delay {
                    b.notify_failed(w);
                }
            }
            while started < callers.len() && !b.alive(callers[started]) {
                started += 1;
            }
            if started < callers.len() && b.chance(0.3) {
                let r = callers[started];
                let world = b.e(r).world;
                let out: *mut i32 = &mut *outs[r as usize];
                reqs[r as usize] = Some(b.e(r).iagree(world, flags[r as usize], out).unwrap());
                started += 1;
            }
            let noticed = !during || crashed.is_some_and(|c| now > c + notice_delay);
            noticed && started == callers.len() && live.iter().all(|r| b.e(*r).is_complete(reqs[*r as usize].unwrap()).unwrap())
        });
        let live_and = live.iter().fold(!0, |acc, r| acc & flags[*r as usize]);
        let first = *outs[live[0] as usize];
        for &r in &live {
            let st = test(bed.e(r), reqs[r as usize].unwrap()).unwrap();
            // Uniform agreement: every survivor decides the same value; it is the AND of the
            // survivors' flags, and of the dead rank's if its vote counted.
            assert_eq!(*outs[r as usize], first, "seed {seed}: rank {r} agreed on another value");
            let with_dead = dead.map_or(live_and, |w| live_and & flags[w as usize]);
            assert!(first == live_and || first == with_dead, "seed {seed}: agreed value {first:#b}");
            if !during {
                assert_eq!(first, live_and, "seed {seed}");
                let expect = dead.map(|_| ErrorClass::ProcFailed);
                assert_eq!(st.error, expect, "seed {seed}: rank {r}");
            } else {
                assert!(matches!(st.error, None | Some(ErrorClass::ProcFailed)), "seed {seed}: rank {r}: {st:?}");
            }
        }
    });
}

// ---- completion decisions --------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Seen {
    Matched(Determinant),
    Completed(steadfast_core::door::Completion),
}

struct RecordAll(Arc<Mutex<Vec<Seen>>>);

impl Interpose for RecordAll {
    fn matched(&mut self, det: &Determinant) {
        self.0.lock().unwrap().push(Seen::Matched(*det));
    }
    fn completed(&mut self, c: &steadfast_core::door::Completion) {
        self.0.lock().unwrap().push(Seen::Completed(c.clone()));
    }
}

/// Receives completed through `test`, `test_any` and `test_some`: `test_any` reports the
/// lowest completed index, and the hook sees every successful call with the number of
/// unsuccessful ones before it and the reception clock at the decision.
#[test]
fn completion_choices_reach_the_hook() {
    use steadfast_core::door::CompletionCall;
    sweep("completion_choices_reach_the_hook", SEEDS / 2, |seed| {
        let n = 3;
        let mut bed = Bed::new(seed, random_cfg(seed, n));
        let logs: Vec<Arc<Mutex<Vec<Seen>>>> = (0..n).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        for r in 0..n {
            bed.e(r).set_interpose(Some(Box::new(RecordAll(logs[r as usize].clone()))));
        }
        let mut t = Traffic::new(n);
        for from in 0..n {
            for _ in 0..bed.rng_range(3, 8) {
                let to = (from + 1 + bed.pick(n as usize - 1) as u32) % n;
                let len = message_len(&mut bed);
                let s = t.send(&bed, from, to, 0, len, Mode::Standard);
                t.program(from, Action::Send(s));
                // Named sources: receives from different senders complete in any order.
                let r = t.recv(to, from as i32, 0, 3 * bed.cfg.max_payload + 8);
                t.program(to, Action::Recv(r));
            }
        }
        t.interleave(&mut bed);
        // What the test expects the hook to see, per rank: (call, indices, failed before).
        let mut expect: Vec<Vec<(CompletionCall, Vec<usize>, u64)>> = vec![Vec::new(); n as usize];
        let mut failures = vec![0u64; n as usize];
        let mut finished = 0;
        let total = t.recvs.len();
        bed.drive("every receive reported", STEPS, |b| {
            if t.pending_actions(b) && b.chance(0.2) {
                t.act(b);
            }
            for s in t.sends.iter_mut() {
                if let (Some(h), None) = (s.h, s.status) {
                    s.status = test(b.e(s.from), h);
                }
            }
            let at = b.pick(n as usize) as u32;
            // This rank's started, unreported receives, by position.
            let mine: Vec<usize> = (0..t.recvs.len()).filter(|&i| t.recvs[i].at == at && t.recvs[i].h.is_some() && t.recvs[i].status.is_none()).collect();
            if mine.is_empty() || !b.chance(0.3) {
                return finished == total && t.done(b);
            }
            let hs: Vec<Option<Handle>> = mine.iter().map(|&i| t.recvs[i].h).collect();
            let which = b.pick(3);
            let e = b.e(at);
            let (call, got): (CompletionCall, Vec<usize>) = match which {
                0 => {
                    let ok = e.test(hs[0].unwrap()).unwrap();
                    (CompletionCall::Test, if ok { vec![0] } else { vec![] })
                }
                1 => {
                    let got = e.test_any(&hs).unwrap();
                    if let Some(i) = got {
                        for (j, h) in hs.iter().enumerate().take(i) {
                            assert!(!e.is_complete(h.unwrap()).unwrap(), "seed {seed}: test_any skipped completed index {j} for {i}");
                        }
                    }
                    (CompletionCall::Testany, got.into_iter().collect())
                }
                _ => {
                    let got = e.test_some(&hs).unwrap();
                    for (j, h) in hs.iter().enumerate() {
                        assert_eq!(got.contains(&j), e.is_complete(h.unwrap()).unwrap(), "seed {seed}: test_some index {j}");
                    }
                    (CompletionCall::Testsome, got)
                }
            };
            if got.is_empty() {
                failures[at as usize] += 1;
            } else {
                expect[at as usize].push((call, got.clone(), std::mem::take(&mut failures[at as usize])));
                for k in got {
                    let i = mine[k];
                    t.recvs[i].status = test(e, hs[k].unwrap());
                    assert!(t.recvs[i].status.is_some(), "seed {seed}: reported request not complete");
                    finished += 1;
                }
            }
            false
        });
        for at in 0..n {
            let seen = logs[at as usize].lock().unwrap().clone();
            let mut clock = 0;
            let mut completions = Vec::new();
            for ev in &seen {
                match ev {
                    Seen::Matched(d) => {
                        clock += 1;
                        assert_eq!(d.clock, clock, "seed {seed}: rank {at}: reception clock");
                    }
                    Seen::Completed(c) => {
                        assert_eq!(c.clock, clock, "seed {seed}: rank {at}: clock of a completion");
                        completions.push((c.call, c.indices.clone(), c.failed_before));
                    }
                }
            }
            assert_eq!(completions, expect[at as usize], "seed {seed}: rank {at}: completion decisions");
        }
        for i in 0..t.recvs.len() {
            t.received(seed, i);
        }
    });
}

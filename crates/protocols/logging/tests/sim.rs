//! Deterministic simulation of message logging: ranks run a program whose results depend
//! on the order messages arrive in (ANY_SOURCE receives and probes that fail or succeed),
//! over FIFO links delivered in a seeded random order, with the event logger as one more
//! node. Ranks crash (one, several at once, again while replaying) and are started again
//! from the beginning; the event logger crashes too and comes back from its journals.
//! The survivors go on; they keep a sender-based log and send a restarted rank every
//! message it was sent, and drop the messages it sends again (by sequence number).
//!
//! In half of the seeds ranks also take process images of themselves (a snapshot of the
//! whole simulated process) when their events are all stored: the image is reported to the
//! event logger, the launcher keeps it once the logger accepts it, and on the logger's
//! `ImageKept` the rank tells its senders to free their logs up to what the image holds. A
//! crashed rank with an image is restored from it, sends its own log again (a message may
//! have been in transit when it died) and replays only the events after the image.
//!
//! Channel memories (MPICH-V1): the links are replaced by a channel memory server (the real
//! `ChannelMemory` machine) that keeps every rank's stream; messages reach a rank only from
//! its stream, in its order; nobody keeps a sender-based log or resends anything, and a
//! restarted rank reads its stream from the start (here its whole earlier history must come
//! back first, in the same order).
//!
//! Checked after every step: no rank takes a message in twice. Checked at the end: every
//! rank finished; no orphan (every message any rank received carries what its sender's
//! last process sent under that sequence number); nothing lost (every message of a
//! sender's last process was received); a restarted rank received the logged messages in
//! the logged order. `STEADFAST_SEED=n` replays one seed; `STEADFAST_SIM_SEEDS=n` widens
//! the sweep.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use steadfast_logging::channel::ChannelMemory;
use steadfast_logging::logger::journal;
use steadfast_logging::{Event, EventLogger, Forced, FromLogger, Mode, Peer, RankLog, ToLogger};
use steadfast_proto::{sweep, Rng};

const N: usize = 4;
const ROUNDS: u64 = 5;
const PROBE: u8 = 6;

#[derive(Clone, Debug)]
struct Msg {
    from: u32,
    inc: u16,
    seq: u64,
    val: u64,
    dets: Vec<(u32, u64, Event)>,
}

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(1099511628211)
}

/// The program: ROUNDS rounds of "send one message to every other rank, then receive N-1
/// with ANY_SOURCE, probing before each receive"; a message's value depends on everything
/// received before, so any change of order or content shows.
#[derive(Clone, Debug, PartialEq)]
enum Pc {
    Send { round: u64, k: usize },
    Probe { round: u64, j: usize },
    Recv { round: u64, j: usize },
    Done,
}

#[derive(Clone)]
struct Admitted {
    upto: u64,
    above: BTreeSet<u64>,
}

impl Admitted {
    fn contains(&self, seq: u64) -> bool {
        seq <= self.upto || self.above.contains(&seq)
    }

    fn admit(&mut self, seq: u64) -> bool {
        if seq <= self.upto || !self.above.insert(seq) {
            return false;
        }
        while self.above.remove(&(self.upto + 1)) {
            self.upto += 1;
        }
        true
    }
}

#[derive(Clone)]
struct Proc {
    inc: u16,
    /// Number of the newest image this process (or the one it was restored from) took.
    image: u64,
    log: RankLog,
    pc: Pc,
    state: u64,
    next_seq: Vec<u64>,
    sender_log: Vec<BTreeMap<u64, u64>>,
    admitted: Vec<Admitted>,
    known_inc: Vec<u16>,
    unexpected: VecDeque<(u32, u64, u64)>,
    held: Vec<(u32, u64, u64)>,
    fetching: bool,
    gathering: BTreeSet<u32>,
    failed_tests: u64,
    history: Vec<(u32, u64, u64)>,
    sends: BTreeMap<(u32, u64), u64>,
    /// Matches replayed from the log (for the fidelity check).
    replayed: usize,
}

impl Proc {
    fn new(mode: Mode, rank: u32, inc: u16) -> Proc {
        Proc {
            inc,
            image: 0,
            log: RankLog::new(mode, rank, N as u32),
            pc: Pc::Send { round: 0, k: 0 },
            state: 0xcbf29ce484222325 ^ u64::from(rank),
            next_seq: vec![0; N],
            sender_log: vec![BTreeMap::new(); N],
            admitted: (0..N).map(|_| Admitted { upto: 0, above: BTreeSet::new() }).collect(),
            known_inc: vec![0; N],
            unexpected: VecDeque::new(),
            held: Vec::new(),
            fetching: false,
            gathering: BTreeSet::new(),
            failed_tests: 0,
            history: Vec::new(),
            sends: BTreeMap::new(),
            replayed: 0,
        }
    }
}

struct World {
    mode: Mode,
    rng: Rng,
    procs: Vec<Option<Proc>>,
    links: Vec<Vec<VecDeque<Msg>>>,
    /// Gather / Held traffic of the causal recovery: (from, to, Some(dets) = Held, None = Gather).
    peer: VecDeque<(u32, u32, Option<Vec<(u64, Event)>>)>,
    to_logger: VecDeque<(u32, ToLogger)>,
    from_logger: VecDeque<(u32, FromLogger)>,
    logger: Option<EventLogger>,
    journals: Vec<Vec<u8>>,
    /// Per rank: the histories of its dead processes and how many events the logger had.
    dead: Vec<Vec<(Vec<(u32, u64, u64)>, usize)>>,
    restart_at: Vec<Option<u64>>,
    logger_back_at: Option<u64>,
    trace: bool,
    /// Ranks take images in this run.
    images_on: bool,
    /// Images reported to the logger, not yet accepted: per rank, number → (snapshot, upto).
    reported: Vec<BTreeMap<u64, (Proc, Vec<u64>)>>,
    /// The launcher's newest accepted image of each rank.
    kept: Vec<Option<Proc>>,
    /// `Peer::Checkpointed` on its way: (from, to, encoded).
    frees: VecDeque<(usize, usize, Vec<u8>)>,
    images_taken: u64,
    restores: u64,
    /// Channel memory mode: the server, and each rank's current connection to it.
    cm: Option<ChannelMemory>,
    cm_conn: Vec<u64>,
    next_conn: u64,
}

fn encode(m: &Msg) -> Vec<u8> {
    let mut v = Vec::with_capacity(22);
    v.extend_from_slice(&m.from.to_le_bytes());
    v.extend_from_slice(&m.inc.to_le_bytes());
    v.extend_from_slice(&m.seq.to_le_bytes());
    v.extend_from_slice(&m.val.to_le_bytes());
    v
}

fn decode(b: &[u8]) -> Msg {
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    Msg { from: u32::from_le_bytes(b[0..4].try_into().unwrap_or([0; 4])), inc: u16::from_le_bytes([b[4], b[5]]), seq: u64at(6), val: u64at(14), dets: Vec::new() }
}

impl World {
    /// Channel memory: the next message of rank `to`'s stream reaches it.
    fn deliver_cm(&mut self, to: usize) {
        let Some(cm) = self.cm.as_mut() else { return };
        let Some(p) = self.procs[to].as_mut() else { return };
        let conn = self.cm_conn[to];
        let Some((from, bytes)) = cm.next_for(conn) else { return };
        let m = decode(bytes);
        assert_eq!(m.from, from, "the server names the sender it admitted");
        cm.advance(conn);
        // Nothing is held: the stream's order is the order.
        if p.admitted[from as usize].admit(m.seq) {
            p.unexpected.push_back((m.from, m.seq, m.val));
        }
    }

    fn step_proc(&mut self, r: usize) -> Result<bool, String> {
        let mode = self.mode;
        let Some(p) = self.procs[r].as_mut() else { return Ok(false) };
        if p.fetching || !p.gathering.is_empty() {
            return Ok(false);
        }
        p.log.close_gather();
        if self.trace && p.inc > 0 && p.history.is_empty() && p.pc == (Pc::Send { round: 0, k: 0 }) {
            eprintln!("rank {r} incarnation {} starts with {} events to replay, {} held", p.inc, p.log.replay_left(), p.held.len());
        }
        // The replay gate: the message the next logged event names, once it is here.
        loop {
            if p.log.replaying() {
                // Restored from an image: the message arrived before the image and waits
                // among the unexpected ones already.
                if let Some(want) = p.log.to_release().filter(|w| p.admitted[w.0 as usize].contains(w.1)) {
                    p.log.released(want);
                    continue;
                }
            }
            if p.held.is_empty() {
                break;
            }
            let i = if p.log.replaying() {
                let Some(want) = p.log.to_release() else { break };
                let Some(i) = p.held.iter().position(|m| (m.0, m.1) == want) else { break };
                p.log.released(want);
                i
            } else {
                (0..p.held.len()).min_by_key(|&i| (p.held[i].0, p.held[i].1)).unwrap_or(0)
            };
            let m = p.held.remove(i);
            if p.admitted[m.0 as usize].admit(m.1) {
                p.unexpected.push_back(m);
            }
        }
        let pc = p.pc.clone();
        match pc {
            Pc::Done => return Ok(false),
            Pc::Send { round, k } => {
                if !p.log.may_send() {
                    return Ok(false);
                }
                let to = (r + 1 + k) % N;
                p.next_seq[to] += 1;
                let seq = p.next_seq[to];
                let val = mix(mix(p.state, round), to as u64);
                p.sender_log[to].insert(seq, val);
                p.sends.insert((to as u32, seq), val);
                let dets = p.log.piggyback_for(to as u32);
                let inc = p.inc;
                p.pc = if k + 2 < N { Pc::Send { round, k: k + 1 } } else { Pc::Probe { round, j: 0 } };
                if let Some(cm) = self.cm.as_mut() {
                    // Kept by the receiver's channel memory, whatever state the receiver is in.
                    assert!(cm.deposit(self.cm_conn[r], to as u32, encode(&Msg { from: r as u32, inc, seq, val, dets })), "a live process's deposit was refused");
                } else {
                    let _ = mode;
                    // To a dead rank it is lost; the restarted one gets it from the log.
                    self.links[r][to].push_back(Msg { from: r as u32, inc, seq, val, dets });
                }
            }
            Pc::Probe { round, j } => {
                let forced = p.log.forced(PROBE, p.failed_tests);
                let found = p.unexpected.front().map(|m| (m.0, m.1));
                let success = match forced {
                    Some(Forced::Fail) => false,
                    Some(Forced::Report { probed, .. }) => {
                        if found.is_none() {
                            return Ok(false);
                        }
                        if found != probed {
                            return Err(format!("rank {r} replay: probe sees {found:?}, the log says {probed:?}"));
                        }
                        true
                    }
                    None => found.is_some(),
                };
                if success {
                    let e = Event::Choice { call: PROBE, indices: vec![0], failed_before: p.failed_tests, probed: found };
                    p.failed_tests = 0;
                    p.log.record(e).map_err(|d| format!("rank {r}: {d}"))?;
                    p.pc = Pc::Recv { round, j };
                } else {
                    p.failed_tests += 1;
                }
            }
            Pc::Recv { round, j } => {
                let Some((from, seq, val)) = p.unexpected.pop_front() else {
                    return Err(format!("rank {r}: a probed message vanished"));
                };
                if p.log.replaying() {
                    p.replayed += 1;
                }
                p.log.record(Event::Match { from, seq }).map_err(|d| format!("rank {r}: {d}"))?;
                if p.history.iter().any(|h| (h.0, h.1) == (from, seq)) {
                    return Err(format!("rank {r} took message {seq} of rank {from} twice"));
                }
                p.history.push((from, seq, val));
                p.state = mix(mix(mix(p.state, u64::from(from)), seq), val);
                p.pc = if j + 2 < N {
                    Pc::Probe { round, j: j + 1 }
                } else if round + 1 < ROUNDS {
                    Pc::Send { round: round + 1, k: 0 }
                } else {
                    Pc::Done
                };
            }
        }
        if let Some(b) = p.log.take_batch() {
            self.to_logger.push_back((r as u32, b));
        }
        Ok(true)
    }

    fn deliver_link(&mut self, from: usize, to: usize) {
        let Some(m) = self.links[from][to].pop_front() else { return };
        let Some(p) = self.procs[to].as_mut() else { return };
        if m.inc < p.known_inc[from] {
            return;
        }
        p.log.piggybacked_from(m.from, m.dets);
        if p.fetching || !p.gathering.is_empty() || p.log.replaying() || !p.held.is_empty() {
            p.held.push((m.from, m.seq, m.val));
        } else if p.admitted[from].admit(m.seq) {
            p.unexpected.push_back((m.from, m.seq, m.val));
        }
    }

    fn logger_step(&mut self) {
        let Some(l) = self.logger.as_mut() else { return };
        let Some((r, msg)) = self.to_logger.pop_front() else { return };
        let before = l.image(r);
        l.handle(r, msg);
        if let Some(img) = l.image(r).filter(|i| Some(*i) != before) {
            // The launcher keeps the image the logger accepted.
            if let Some((snap, _)) = self.reported[r as usize].get(&img.number) {
                self.kept[r as usize] = Some(snap.clone());
            }
        }
        while let Some((rank, first, events)) = l.poll_persist() {
            let upto = first + events.len() as u64 - 1;
            self.journals[rank as usize].extend(journal::record(first, events));
            l.stored(rank, upto);
        }
        while let Some(t) = l.poll_transmit() {
            self.from_logger.push_back((t.to, t.message));
        }
    }

    fn from_logger_step(&mut self) {
        let Some((r, msg)) = self.from_logger.pop_front() else { return };
        let Some(p) = self.procs[r as usize].as_mut() else { return };
        if matches!(msg, FromLogger::Events { .. }) {
            if !p.fetching {
                return;
            }
            p.fetching = false;
        }
        if let FromLogger::ImageKept { number } = msg {
            // Only the process that took the image tells its senders.
            if p.image == number {
                if let Some((_, upto)) = self.reported[r as usize].get(&number) {
                    for (q, &u) in upto.iter().enumerate() {
                        if q != r as usize && u > 0 {
                            self.frees.push_back((r as usize, q, Peer::Checkpointed { upto: u }.encode()));
                        }
                    }
                }
            }
            return;
        }
        p.log.from_logger(msg);
    }

    /// A rank takes an image of itself, if it may now.
    fn take_image(&mut self, r: usize) {
        let Some(p) = self.procs[r].as_mut() else { return };
        let quiet = !p.fetching && p.gathering.is_empty() && !p.log.replaying() && p.held.is_empty();
        if !quiet || p.log.acked() < p.log.clock() {
            return;
        }
        p.image += 1;
        let upto = p.admitted.iter().map(|a| a.upto).collect();
        let msg = ToLogger::Checkpointed { incarnation: p.inc, number: p.image, clock: p.log.clock() };
        self.reported[r].insert(p.image, (p.clone(), upto));
        self.to_logger.push_back((r as u32, msg));
        self.images_taken += 1;
    }

    /// A sender learns that a receiver's image holds its messages up to a number.
    fn free_step(&mut self) {
        let Some((from, to, bytes)) = self.frees.pop_front() else { return };
        let Ok(Peer::Checkpointed { upto }) = Peer::decode(&bytes) else { panic!("a Checkpointed message does not decode") };
        let Some(q) = self.procs[to].as_mut() else { return };
        q.sender_log[from].retain(|&seq, _| seq > upto);
    }

    fn peer_step(&mut self) {
        let Some((from, to, held)) = self.peer.pop_front() else { return };
        match held {
            None => {
                // A Gather: answer with what is held of the asker's determinants.
                let Some(p) = self.procs[to as usize].as_ref() else { return };
                let dets = p.log.held_of(from);
                self.peer.push_back((to, from, Some(dets)));
            }
            Some(dets) => {
                let Some(p) = self.procs[to as usize].as_mut() else { return };
                if p.gathering.remove(&from) {
                    p.log.held_by_others(dets);
                }
            }
        }
    }

    fn crash(&mut self, r: usize, now: u64) {
        let Some(p) = self.procs[r].take() else { return };
        if self.trace {
            eprintln!("{now}: rank {r} (incarnation {}) crashes after {} receptions {:?}, clock {} acked {}", p.inc, p.history.len(), p.history, p.log.clock(), p.log.acked());
            for q in self.procs.iter().flatten() {
                eprintln!("   held of rank {r} elsewhere: {:?}", q.log.held_of(r as u32).iter().map(|x| x.0).collect::<Vec<_>>());
            }
        }
        let logged = self.logger.as_ref().map_or(0, |l| l.events(r as u32).len());
        self.dead[r].push((p.history, logged));
        if let Some(cm) = self.cm.as_mut() {
            cm.closed(self.cm_conn[r]);
        }
        for q in 0..N {
            self.links[q][r].clear();
        }
        self.from_logger.retain(|(to, _)| *to as usize != r);
        self.frees.retain(|(from, _, _)| *from != r);
        for q in self.procs.iter_mut().flatten() {
            // A rank it was gathering from will not answer.
            q.gathering.remove(&(r as u32));
        }
        self.restart_at[r] = Some(now + 1 + self.rng.below(400));
    }

    fn restart(&mut self, r: usize, now: u64) {
        let inc = self.dead[r].len() as u16;
        let image = self.kept[r].clone();
        let restored = image.is_some();
        let mut p = match image {
            Some(mut snap) => {
                snap.inc = inc;
                snap.held.clear();
                // The image's receptions are the old process's first ones.
                snap.replayed = snap.history.len();
                self.restores += 1;
                snap
            }
            None => Proc::new(self.mode, r as u32, inc),
        };
        let clock = p.log.clock();
        let fetch = p.log.restarted(inc, clock);
        p.fetching = true;
        if self.mode == Mode::Causal {
            for q in 0..N {
                if q != r && self.procs[q].is_some() {
                    p.gathering.insert(q as u32);
                    self.peer.push_back((r as u32, q as u32, None));
                }
            }
        }
        // It learns the others' incarnations from the launcher.
        for q in 0..N {
            p.known_inc[q] = self.procs[q].as_ref().map_or(0, |x| x.inc);
        }
        self.to_logger.push_back((r as u32, fetch));
        if let Some(cm) = self.cm.as_mut() {
            // It reads its stream from the start; nobody else does anything.
            self.next_conn += 1;
            self.cm_conn[r] = self.next_conn;
            cm.hello(self.next_conn, r as u32, inc, Some(0)).map_err(|e| e.to_string()).expect("the new process is admitted");
            self.procs[r] = Some(p);
            self.restart_at[r] = None;
            return;
        }
        if self.trace {
            eprintln!("{now}: rank {r} restarts as incarnation {inc}{}", if restored { format!(" from its image {} (clock {clock})", p.image) } else { String::new() });
        }
        if restored {
            // Its own log goes again: a message may have been on its way when it died.
            for q in (0..N).filter(|&q| q != r) {
                for (&seq, &val) in &p.sender_log[q] {
                    self.links[r][q].push_back(Msg { from: r as u32, inc, seq, val, dets: Vec::new() });
                }
            }
        }
        // The others hear of it: they send it every message it was ever sent.
        for q in 0..N {
            let Some(s) = self.procs[q].as_mut() else { continue };
            if q == r {
                continue;
            }
            s.known_inc[r] = inc;
            s.log.peer_restarted(r as u32);
            self.links[q][r].clear();
            let sinc = s.inc;
            for (&seq, &val) in &s.sender_log[r] {
                self.links[q][r].push_back(Msg { from: q as u32, inc: sinc, seq, val, dets: Vec::new() });
            }
        }
        self.procs[r] = Some(p);
        self.restart_at[r] = None;
    }

    fn crash_logger(&mut self, now: u64) {
        if self.logger.take().is_none() {
            return;
        }
        if self.trace {
            eprintln!("{now}: the event logger crashes");
        }
        self.to_logger.clear();
        self.from_logger.clear();
        self.logger_back_at = Some(now + 1 + self.rng.below(200));
    }

    fn restart_logger(&mut self) {
        let per_rank = self.journals.iter().map(|j| journal::read(j)).collect();
        self.logger = Some(EventLogger::recovered(per_rank));
        self.logger_back_at = None;
        // The ranks hand over what was not acknowledged, and a restarted one asks again.
        for (r, p) in self.procs.iter().enumerate() {
            let Some(p) = p else { continue };
            if p.fetching {
                self.to_logger.push_back((r as u32, ToLogger::Fetch { incarnation: p.inc, from: 1 }));
            } else if let Some(b) = p.log.resend() {
                self.to_logger.push_back((r as u32, b));
            }
        }
    }
}

fn run(mode: Mode, seed: u64) -> Result<u64, String> {
    run_world(mode, seed).map(|(steps, _)| steps)
}

/// One run; returns its steps and how many restores came from an image.
fn run_world(mode: Mode, seed: u64) -> Result<(u64, u64), String> {
    let mut rng = Rng::new(seed);
    let trace = sweep::replay().is_some();
    let mut w = World {
        mode,
        rng: Rng::new(rng.next_u64()),
        procs: (0..N).map(|r| Some(Proc::new(mode, r as u32, 0))).collect(),
        links: vec![vec![VecDeque::new(); N]; N],
        peer: VecDeque::new(),
        to_logger: VecDeque::new(),
        from_logger: VecDeque::new(),
        logger: Some(EventLogger::new(N as u32)),
        journals: vec![Vec::new(); N],
        dead: vec![Vec::new(); N],
        restart_at: vec![None; N],
        logger_back_at: None,
        trace,
        images_on: mode != Mode::ChannelMemory && rng.chance(500),
        reported: vec![BTreeMap::new(); N],
        kept: vec![None; N],
        frees: VecDeque::new(),
        images_taken: 0,
        restores: 0,
        cm: None,
        cm_conn: (1..=N as u64).collect(),
        next_conn: N as u64,
    };
    if mode == Mode::ChannelMemory {
        let mut cm = ChannelMemory::new(N as u32, 0..N as u32);
        for r in 0..N {
            cm.hello(w.cm_conn[r], r as u32, 0, Some(0)).map_err(|e| e.to_string())?;
        }
        w.cm = Some(cm);
    }
    // The failure plan: up to three crashes of one or two ranks, sometimes of the logger.
    let mut plan: Vec<(u64, Vec<usize>)> = Vec::new();
    for _ in 0..rng.below(4) {
        let at = rng.below(3000);
        let mut who = vec![rng.below(N as u64) as usize];
        if rng.chance(250) {
            who.push(rng.below(N as u64) as usize);
        }
        plan.push((at, who));
    }
    let logger_crash = rng.chance(200).then(|| rng.below(3000));
    let mut now = 0u64;
    while now < 400_000 {
        now += 1;
        for (at, who) in &plan {
            if *at == now {
                for &r in who {
                    w.crash(r, now);
                }
            }
        }
        if logger_crash == Some(now) {
            w.crash_logger(now);
        }
        for r in 0..N {
            if w.restart_at[r] == Some(now) {
                w.restart(r, now);
            }
        }
        if w.logger_back_at == Some(now) {
            w.restart_logger();
        }
        // One random action.
        match w.rng.below(10) {
            0..=3 => {
                let (a, b) = (w.rng.below(N as u64) as usize, w.rng.below(N as u64) as usize);
                if w.cm.is_some() {
                    w.deliver_cm(b);
                } else {
                    w.deliver_link(a, b);
                }
            }
            4 => w.logger_step(),
            5 => w.from_logger_step(),
            6 => w.peer_step(),
            7 if w.images_on && w.rng.chance(100) => {
                let r = w.rng.below(N as u64) as usize;
                w.take_image(r);
            }
            7 => w.free_step(),
            _ => {
                let r = w.rng.below(N as u64) as usize;
                w.step_proc(r)?;
            }
        }
        let finished = w.procs.iter().all(|p| p.as_ref().is_some_and(|p| p.pc == Pc::Done))
            && w.restart_at.iter().all(Option::is_none);
        if finished {
            break;
        }
    }
    let mut unfinished = Vec::new();
    for (r, p) in w.procs.iter().enumerate() {
        match p {
            Some(p) if p.pc == Pc::Done => {}
            Some(p) => unfinished.push(format!("rank {r} at {:?} (replaying {}, held {}, fetching {})", p.pc, p.log.replay_left(), p.held.len(), p.fetching)),
            None => unfinished.push(format!("rank {r} dead")),
        }
    }
    if !unfinished.is_empty() {
        return Err(format!("not finished after {now} steps: {}", unfinished.join("; ")));
    }
    let procs: Vec<&Proc> = w.procs.iter().flatten().collect();
    for (r, p) in procs.iter().enumerate() {
        for &(from, seq, val) in &p.history {
            match procs[from as usize].sends.get(&(r as u32, seq)) {
                Some(&v) if v == val => {}
                other => return Err(format!("orphan: rank {r} received {val} as message {seq} of rank {from}, whose last process sent {other:?}")),
            }
        }
        for (&(to, seq), _) in &p.sends {
            if !procs[to as usize].history.iter().any(|h| (h.0, h.1) == (r as u32, seq)) {
                return Err(format!("lost: message {seq} of rank {r} to rank {to}"));
            }
        }
        // Channel memory: every process of the rank took in its stream's messages in the same
        // order, so the earlier processes' receptions come back first, all of them.
        if w.cm.is_some() {
            for (old, _) in &w.dead[r] {
                if p.history.len() < old.len() || p.history[..old.len()] != old[..] {
                    return Err(format!("rank {r}: the new process did not receive what its stream gave the earlier one, in order"));
                }
            }
            continue;
        }
        // A restarted rank received the logged messages in the logged order.
        if let Some((old, logged)) = w.dead[r].last() {
            let n = p.replayed.min(old.len());
            if p.history[..n] != old[..n] {
                return Err(format!("rank {r}: the replay did not repeat the logged receptions"));
            }
            let _ = logged;
        }
    }
    if w.trace {
        eprintln!("{} images taken, {} restores from an image", w.images_taken, w.restores);
    }
    Ok((now, w.restores))
}

fn sweep_mode(mode: Mode, salt: u64) {
    let seeds = sweep::seeds(400, |i| sweep::spread(i, salt));
    let label = format!("{mode:?} logging simulation");
    let steps = sweep::sweep(&label, "cargo test --release -p steadfast-logging --test sim", &seeds, |s| run(mode, s));
    assert_eq!(steps.len(), seeds.len());
}

#[test]
fn pessimistic_recovers_crashed_ranks_without_orphans() {
    sweep_mode(Mode::Pessimistic, 0x5e55);
}

#[test]
fn causal_recovers_crashed_ranks_without_orphans() {
    sweep_mode(Mode::Causal, 0xca5a1);
}

#[test]
fn channel_memories_recover_crashed_ranks_without_orphans() {
    sweep_mode(Mode::ChannelMemory, 0xc4a77e1);
}

/// The sweeps above must include restores from images, or they would not test them.
#[test]
fn the_sweeps_restore_ranks_from_images() {
    for (mode, salt) in [(Mode::Pessimistic, 0x5e55), (Mode::Causal, 0xca5a1)] {
        let restores: u64 = (0..200).filter_map(|i| run_world(mode, sweep::spread(i, salt)).ok()).map(|(_, n)| n).sum();
        assert!(restores >= 10, "{mode:?}: only {restores} restores from an image in 200 seeds");
    }
}

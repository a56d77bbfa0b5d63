//! A deterministic simulation of one communicator's channel broadcasts: `n` ranks call the
//! same list of broadcasts (roots and sizes drawn from the seed), blocking or with several
//! outstanding (`MPI_Ibcast`), over a primitive that loses, damages, duplicates and reorders
//! frames and may stop working mid-stream (reported to one rank by a write error, or
//! silently), and a reliable ordered point-to-point path with random delays. One rank may be
//! slow: everything it receives and every call it makes is late.
//!
//! Checked after every step: every delivery at a rank is the next broadcast of the list, from
//! its root, with its data (so each exactly once and in order); every write of broadcast `s`
//! to channel `s mod N` happens only once every rank completed broadcast `s - N`, the one the
//! channel held before. Checked at the end: every rank completed every broadcast within the
//! time limit.

#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::Duration;

use crate::frame;
use crate::machine::{Event, Machine, Transmit};
use crate::{Config, Message, Rank, Seq, Time};
use steadfast_proto::Rng;

/// Shape of a run.
#[derive(Clone, Debug)]
pub struct Params {
    pub ranks: u32,
    pub bcasts: u32,
    /// Broadcasts a rank may have outstanding (1: blocking `MPI_Bcast`).
    pub depth: u32,
    pub config: Config,
    /// Per mille of frame copies lost, damaged (one bit flipped), duplicated.
    pub loss: u64,
    pub corrupt: u64,
    pub dup: u64,
    /// The primitive stops delivering anything at this time.
    pub cut_at: Option<Duration>,
    /// Whether a rank writing after the cut is told (a write error) or the cut is silent.
    pub cut_reported: bool,
    /// This rank's inputs and calls are late by up to `slow_by`.
    pub slow: Option<Rank>,
    pub slow_by: Duration,
    /// Largest broadcast, in bytes.
    pub max_len: u32,
    /// The primitive is a multicast stream: each frame goes as datagrams of at most this
    /// many bytes ([`crate::datagram`]), each lost, damaged, duplicated and delayed on its
    /// own, and every receiver reassembles them (as the multicast driver does).
    pub fragment: Option<u32>,
    /// Ranks take the shared-memory driver's direct calls where they apply
    /// ([`Machine::bcast_root_now`], [`Machine::bcast_in_place`]): a frame lands in its
    /// channel and a receiver reads it only once it calls that broadcast.
    pub direct: bool,
    /// What a rank does once it completed every broadcast (the application frees the
    /// communicator).
    pub free: Free,
}

/// A rank's machine after its last broadcast ([`Params::free`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Free {
    /// Kept and driven until every rank is done (the communicator is not freed).
    Never,
    /// Dropped at once: the rank takes no more input (what the driver did before
    /// [`Machine::close`]); a rank still waiting for a lost frame may be stranded.
    AtOnce,
    /// Closed ([`Machine::close`]) and driven until [`Machine::quiet`], then dropped; every
    /// rank must get there.
    WhenQuiet,
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

impl Params {
    /// Parameters drawn from `seed`.
    pub fn from_seed(seed: u64) -> Params {
        let mut r = Rng::new(seed.wrapping_mul(0x2545_f491));
        let ranks = r.range(1, 9) as u32;
        let channels = *[1u32, 2, 3, 4, 8, 16]
            .get(r.below(6) as usize)
            .unwrap_or(&4);
        let bcasts = r.range(1, 120) as u32;
        // Half the runs synchronize early (every 1 .. N broadcasts), the rest every N.
        let sync_every = if r.chance(500) { r.range(1, u64::from(channels) + 1) as u32 } else { 0 };
        let faulty = r.chance(700);
        Params {
            ranks,
            bcasts,
            depth: if r.chance(500) {
                1
            } else {
                r.range(2, 6) as u32
            },
            config: Config {
                channels,
                sync_every,
                crc: true,
                repair_timeout: us(r.range(50, 400)),
                max_repairs: r.range(2, 8) as u32,
                sync_backoff: us(r.range(10, 200)),
                max_backoff: us(r.range(200, 3000)),
            },
            loss: if faulty { r.range(0, 150) } else { 0 },
            corrupt: if faulty { r.range(0, 150) } else { 0 },
            dup: if faulty { r.range(0, 200) } else { 0 },
            cut_at: r.chance(250).then(|| us(r.range(0, 3000))),
            cut_reported: r.chance(500),
            slow: r.chance(300).then(|| r.below(u64::from(ranks)) as u32),
            slow_by: us(r.range(10, 500)),
            max_len: *[8u32, 64, 4096].get(r.below(3) as usize).unwrap_or(&8),
            fragment: r.chance(500).then(|| r.range(16, 1500) as u32),
            direct: r.chance(500),
            free: Free::Never,
        }
    }
}

/// Counts over a run, to show which paths the sweep went through.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub deliveries: u64,
    pub writes: u64,
    pub retransmits: u64,
    pub bad_frames: u64,
    pub repeats: u64,
    pub early: u64,
    pub repairs: u64,
    pub syncs: u64,
    pub sync_nacks: u64,
    pub deferred: u64,
    pub failovers_reported: u64,
    pub failovers_detected: u64,
    pub tree_sends: u64,
    pub lost_after_cut: u64,
    /// Datagrams sent (multicast runs), and of them the refused ones (damaged).
    pub datagrams: u64,
    pub bad_datagrams: u64,
    /// Frames of several datagrams put back together.
    pub reassembled: u64,
    /// Calls completed the direct way: roots that wrote at once, receivers that found
    /// their broadcast in its channel.
    pub direct_writes: u64,
    pub direct_reads: u64,
    /// Broadcasts called before their frame came, read straight to the caller when it did
    /// ([`Machine::take_in_place`]).
    pub in_place: u64,
}

/// A run that broke an invariant or did not finish.
#[derive(Debug)]
pub struct Failure {
    pub reason: String,
    pub trace: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\nlast steps:\n{}", self.reason, self.trace)
    }
}

#[derive(Debug)]
enum Input {
    Frame(Vec<u8>),
    Datagram(Vec<u8>),
    Msg(Rank, Message),
    Call,
    Timer,
}

/// The payload of broadcast `seq`: a function of the seed and `seq`, so every receiver can
/// check what it got.
fn payload(seed: u64, seq: Seq, len: u32) -> Vec<u8> {
    let mut r = Rng::new(seed ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (0..len).map(|_| r.next_u64() as u8).collect()
}

/// One simulated run.
pub struct Sim {
    p: Params,
    seed: u64,
    rng: Rng,
    now: Time,
    order: u64,
    queue: BinaryHeap<Reverse<(Time, u64, Rank)>>,
    inputs: std::collections::HashMap<u64, Input>,
    machines: Vec<Machine>,
    /// The broadcasts: (root, length).
    list: Vec<(Rank, u32)>,
    /// Per rank: broadcasts called, and completed (next expected completion).
    called: Vec<Seq>,
    done: Vec<Seq>,
    /// Per ordered pair: when the last point-to-point message arrives (keeps them in order).
    fifo: Vec<Time>,
    /// Per rank: the earliest timer event already queued.
    timer_at: Vec<Option<Time>>,
    trace: VecDeque<String>,
    out: Outcome,
    /// Direct runs: per rank, the last frame that landed in each channel before that rank
    /// called its broadcast.
    slots: Vec<Vec<Option<Vec<u8>>>>,
    /// Multicast runs: the datagrams' key and each rank's reassembly.
    key: crate::datagram::Key,
    reasm: Vec<crate::datagram::Reassembly>,
    /// Ranks whose machine was dropped ([`Params::free`]): their inputs are lost.
    gone: Vec<bool>,
}

const TRACE: usize = 60;
/// Gives up (a liveness failure) after this much simulated time.
const LIMIT: Duration = Duration::from_secs(60);
/// ... or after this many steps (a livelock).
const STEP_LIMIT: u64 = 2_000_000;

impl Sim {
    pub fn new(p: Params, seed: u64) -> Sim {
        let mut rng = Rng::new(seed);
        let n = p.ranks;
        let list = (0..p.bcasts)
            .map(|_| {
                (
                    rng.below(u64::from(n)) as Rank,
                    rng.range(0, u64::from(p.max_len)) as u32,
                )
            })
            .collect();
        let machines = (0..n).map(|i| Machine::new(i, n, p.config)).collect();
        let mut s = Sim {
            seed,
            rng,
            now: Duration::ZERO,
            order: 0,
            queue: BinaryHeap::new(),
            inputs: Default::default(),
            machines,
            list,
            called: vec![0; n as usize],
            done: vec![0; n as usize],
            fifo: vec![Duration::ZERO; (n * n) as usize],
            timer_at: vec![None; n as usize],
            trace: VecDeque::new(),
            out: Outcome::default(),
            key: crate::datagram::Key::from_job_key(seed),
            reasm: (0..n).map(|_| crate::datagram::Reassembly::new(2 * p.config.channels as usize + 2)).collect(),
            slots: vec![vec![None; p.config.channels as usize]; n as usize],
            gone: vec![false; n as usize],
            p,
        };
        for i in 0..n {
            s.push(Duration::ZERO, i, Input::Call);
        }
        s
    }

    fn push(&mut self, at: Time, to: Rank, input: Input) {
        let at = if self.p.slow == Some(to) {
            at + self.rng.duration(Duration::ZERO, self.p.slow_by)
        } else {
            at
        };
        self.order += 1;
        self.queue.push(Reverse((at, self.order, to)));
        self.inputs.insert(self.order, input);
    }

    fn note(&mut self, line: String) {
        if self.trace.len() == TRACE {
            self.trace.pop_front();
        }
        self.trace.push_back(line);
    }

    fn fail(&self, reason: String) -> Failure {
        Failure {
            reason,
            trace: self.trace.iter().cloned().collect::<Vec<_>>().join("\n"),
        }
    }

    fn cut(&self) -> bool {
        self.p.cut_at.is_some_and(|t| self.now >= t)
    }

    /// Runs to the end; the outcome, or the first broken invariant.
    pub fn run(mut self) -> Result<Outcome, Failure> {
        let total = u64::from(self.p.bcasts);
        let mut steps = 0u64;
        while let Some(Reverse((at, order, rank))) = self.queue.pop() {
            steps += 1;
            if steps > STEP_LIMIT {
                return Err(self.fail(format!(
                    "more than {STEP_LIMIT} steps by {:?} (livelock)",
                    self.now
                )));
            }
            if self.done.iter().all(|d| *d == total) && (self.p.free == Free::Never || self.gone.iter().all(|g| *g)) {
                break;
            }
            if at > LIMIT {
                break;
            }
            self.now = at;
            let input = self.inputs.remove(&order).expect("queued with an input");
            self.step(rank, input)?;
        }
        for (i, d) in self.done.iter().enumerate() {
            if *d != total {
                return Err(self.fail(format!(
                    "rank {i} completed {d} of {total} broadcasts by {:?} (stuck): released {}, syncing {}, failed {}",
                    self.now,
                    self.machines[i].released(),
                    self.machines[i].syncing(),
                    self.machines[i].failed()
                )));
            }
        }
        if let Some(i) = self.gone.iter().position(|g| !*g).filter(|_| self.p.free == Free::WhenQuiet) {
            let m = &self.machines[i];
            return Err(self.fail(format!(
                "rank {i} completed every broadcast but its closed machine never became quiet by {:?}: released {}, syncing {}, failed {}",
                self.now,
                m.released(),
                m.syncing(),
                m.failed()
            )));
        }
        for m in &self.machines {
            let s = m.stats();
            self.out.writes += s.writes;
            self.out.retransmits += s.retransmits;
            self.out.bad_frames += s.bad_frames;
            self.out.repeats += s.repeats;
            self.out.early += s.early;
            self.out.repairs += s.repairs_sent;
            self.out.sync_nacks += s.sync_nacks;
            self.out.deferred += s.deferred;
            self.out.tree_sends += s.tree_sends;
        }
        if !self.p.cut_reported {
            self.out.failovers_detected +=
                self.machines.iter().filter(|m| m.failed()).count() as u64;
        }
        // Attempts are counted by every rank; successful synchronizations once.
        self.out.syncs += self.machines[0].released() / self.machines[0].sync_step();
        Ok(self.out)
    }

    fn step(&mut self, rank: Rank, input: Input) -> Result<(), Failure> {
        let now = self.now;
        let r = rank as usize;
        if self.gone[r] {
            let what = match &input {
                Input::Msg(from, m) => format!("message from r{from}: {}", short(m)),
                Input::Frame(_) | Input::Datagram(_) => "frame".into(),
                Input::Call | Input::Timer => "call".into(),
            };
            self.note(format!("{now:?} r{rank} gone: {what} lost"));
            return Ok(());
        }
        match input {
            Input::Call => {
                let total = u64::from(self.p.bcasts);
                while self.called[r] < total
                    && self.called[r] - self.done[r] < u64::from(self.p.depth)
                {
                    let seq = self.called[r];
                    let (root, len) = self.list[seq as usize];
                    let data = (root == rank).then(|| payload(self.seed, seq, len));
                    // A blocking call's driver: only with no earlier call outstanding.
                    if self.p.direct && self.called[r] == self.done[r] && self.call_direct(rank, seq, root, data.as_deref())? {
                        continue;
                    }
                    let got = self.machines[r].bcast(now, root, data.as_deref());
                    if got != Ok(seq) {
                        return Err(self.fail(format!("rank {rank} call {seq}: {got:?}")));
                    }
                    self.note(format!(
                        "{now:?} r{rank} calls bcast {seq} root {root} len {len}"
                    ));
                    self.called[r] += 1;
                    // The driver now waits for it, reading its channel.
                    let ch = (seq % u64::from(self.p.config.channels)) as usize;
                    if let Some(f) = self.slots[r][ch].take() {
                        self.arrive(rank, f)?;
                    }
                }
            }
            Input::Frame(f) => {
                self.note(format!("{now:?} r{rank} frame {:?}", frame::decode(&f)));
                self.arrive(rank, f)?;
            }
            Input::Datagram(d) => match crate::datagram::parse(&self.key, &d) {
                Err(e) => {
                    self.out.bad_datagrams += 1;
                    self.note(format!("{now:?} r{rank} datagram refused: {e:?}"));
                }
                Ok((h, payload)) => {
                    if let Some(f) = self.reasm[r].add(&h, payload) {
                        if h.count > 1 {
                            self.out.reassembled += 1;
                        }
                        self.note(format!("{now:?} r{rank} frame {:?} from datagrams", frame::decode(&f)));
                        self.arrive(rank, f)?;
                    }
                }
            },
            Input::Msg(from, m) => {
                self.note(format!("{now:?} r{rank} <- r{from} {}", short(&m)));
                self.machines[r].handle(now, from, m);
            }
            Input::Timer => {
                self.timer_at[r] = None;
                if self.machines[r].poll_timeout().is_some_and(|t| t <= now) {
                    self.note(format!("{now:?} r{rank} timeout"));
                    self.machines[r].handle_timeout(now);
                }
            }
        }
        self.drain(rank)
    }

    /// A frame reaches `rank`'s channel buffer. In a direct run one for a broadcast this
    /// rank has not called yet stays in its channel (the sequence number as written, which
    /// damage may change: such a frame lands in another channel, like one lost) until the
    /// call; anything else goes to the machine, as the waiting driver reads it.
    fn arrive(&mut self, rank: Rank, f: Vec<u8>) -> Result<(), Failure> {
        let r = rank as usize;
        if self.p.direct {
            if let Some(head) = f.first_chunk::<8>() {
                let seq = u64::from_le_bytes(*head);
                if seq >= self.called[r] {
                    let ch = (seq % u64::from(self.p.config.channels)) as usize;
                    self.slots[r][ch] = Some(f);
                    return Ok(());
                }
                // A broadcast called and waited for: the driver reads the frame straight
                // into the caller's buffer where the machine lets it (the next to complete).
                let want = self.done[r];
                let (root, len) = self.list.get(want as usize).copied().unwrap_or((u32::MAX, 0));
                let ch = (want % u64::from(self.p.config.channels)) as u32;
                let mut read = None;
                let now = self.now;
                let took = root != rank
                    && self.machines[r].take_in_place(now, want, |c| {
                        let ok = c == ch && frame::decode(&f).is_ok_and(|h| h.seq == want && h.root == root);
                        if ok {
                            read = Some(f[frame::HEADER..].to_vec());
                        }
                        ok
                    });
                if took {
                    if read.as_deref() != Some(&payload(self.seed, want, len)[..]) {
                        return Err(self.fail(format!("rank {rank} delivered broadcast {want} in place with other data")));
                    }
                    self.note(format!("{now:?} r{rank} took {want} in place"));
                    self.out.deliveries += 1;
                    self.out.in_place += 1;
                    self.done[r] += 1;
                    self.push(now, rank, Input::Call);
                    return Ok(());
                }
            }
        }
        self.machines[r].frame_arrived(self.now, &f);
        Ok(())
    }

    /// Call broadcast `seq` the driver's direct way; whether it completed so (else nothing
    /// changed and the call goes the usual way).
    fn call_direct(&mut self, rank: Rank, seq: Seq, root: Rank, data: Option<&[u8]>) -> Result<bool, Failure> {
        let (r, now) = (rank as usize, self.now);
        if let Some(data) = data {
            let got = self.machines[r].bcast_root_now(now, data);
            let Some((s, channel, f)) = got.map_err(|e| self.fail(format!("rank {rank} direct call {seq}: {e:?}")))? else {
                return Ok(false);
            };
            if s != seq || s != self.done[r] {
                return Err(self.fail(format!("rank {rank} wrote broadcast {s} directly at call {seq} with {} done", self.done[r])));
            }
            self.note(format!("{now:?} r{rank} calls bcast {seq} as root, written at once"));
            self.called[r] += 1;
            self.done[r] += 1;
            self.out.direct_writes += 1;
            self.write(rank, channel, &f)?;
            return Ok(true);
        }
        let ch = (seq % u64::from(self.p.config.channels)) as usize;
        let slot = self.slots[r][ch].take();
        let mut read = None;
        let got = self.machines[r].bcast_in_place(now, root, |s, c| {
            let Some(f) = slot.as_deref() else { return false };
            let ok = c as usize == ch && frame::decode(f).is_ok_and(|h| h.seq == s && h.root == root);
            if ok {
                read = Some(f[frame::HEADER..].to_vec());
            }
            ok
        });
        match got {
            Ok(Some(s)) => {
                let (_, len) = self.list[seq as usize];
                if s != seq || s != self.done[r] || read.as_deref() != Some(&payload(self.seed, seq, len)[..]) {
                    return Err(self.fail(format!("rank {rank} delivered broadcast {s} from its channel at call {seq} ({} done) with other data", self.done[r])));
                }
                self.note(format!("{now:?} r{rank} calls bcast {seq} root {root}, found in its channel"));
                self.out.deliveries += 1;
                self.out.direct_reads += 1;
                self.called[r] += 1;
                self.done[r] += 1;
                Ok(true)
            }
            Ok(None) => {
                self.slots[r][ch] = slot;
                Ok(false)
            }
            Err(e) => Err(self.fail(format!("rank {rank} direct call {seq}: {e:?}"))),
        }
    }

    /// `rank` writes frame `f` into `channel` with the primitive (faults applied here).
    fn write(&mut self, rank: Rank, channel: u32, f: &[u8]) -> Result<(), Failure> {
        let n = self.p.ranks;
        let h = frame::decode(f).map_err(|e| self.fail(format!("rank {rank} wrote a bad frame: {e:?}")))?;
        let nch = u64::from(self.p.config.channels);
        if u64::from(channel) != h.seq % nch || h.root != rank {
            return Err(self.fail(format!(
                "rank {rank} wrote broadcast {} to channel {channel}",
                h.seq
            )));
        }
        // The channel held broadcast seq - N: every rank must have completed it.
        if h.seq >= nch {
            if let Some(j) = (0..n as usize).find(|&j| self.done[j] <= h.seq - nch) {
                return Err(self.fail(format!(
                    "rank {rank} wrote broadcast {} into channel {channel} while rank {j} had completed only {} broadcasts (channel reused before released)",
                    h.seq, self.done[j]
                )));
            }
        }
        self.note(format!(
            "{:?} r{rank} writes {} ch {channel}",
            self.now, h.seq
        ));
        if self.cut() {
            self.out.lost_after_cut += 1;
            if self.p.cut_reported && !self.machines[rank as usize].failed() {
                self.out.failovers_reported += 1;
                self.machines[rank as usize].primitive_failed();
            }
            return Ok(());
        }
        if let Some(frag) = self.p.fragment {
            let Some(ds) = crate::datagram::fragments(&self.key, 1, rank, h.seq, f, frag as usize) else {
                return Err(self.fail(format!("broadcast {} does not fit the datagrams", h.seq)));
            };
            // Losses and damage per datagram: a frame of k datagrams is lost
            // more often than one of a single datagram.
            for j in (0..n).filter(|&j| j != rank) {
                for d in &ds {
                    self.out.datagrams += 1;
                    if self.rng.chance(self.p.loss / 2) {
                        continue;
                    }
                    let copies = if self.rng.chance(self.p.dup) { 2 } else { 1 };
                    for _ in 0..copies {
                        let mut g = d.clone();
                        if self.rng.chance(self.p.corrupt / 2) {
                            let bit = self.rng.below(g.len() as u64 * 8) as usize;
                            g[bit / 8] ^= 1 << (bit % 8);
                        }
                        let at = self.now + self.rng.duration(us(1), us(40));
                        self.push(at, j, Input::Datagram(g));
                    }
                }
            }
            return Ok(());
        }
        for j in 0..n {
            if j == rank || self.rng.chance(self.p.loss) {
                continue;
            }
            let copies = if self.rng.chance(self.p.dup) { 2 } else { 1 };
            for _ in 0..copies {
                let mut g = f.to_vec();
                if self.rng.chance(self.p.corrupt) {
                    let bit = self.rng.below(g.len() as u64 * 8) as usize;
                    g[bit / 8] ^= 1 << (bit % 8);
                }
                let at = self.now + self.rng.duration(us(1), us(40));
                self.push(at, j, Input::Frame(g));
            }
        }
        Ok(())
    }

    fn drain(&mut self, rank: Rank) -> Result<(), Failure> {
        let r = rank as usize;
        let mut more_calls = false;
        while let Some(ev) = self.machines[r].poll_event() {
            match ev {
                Event::Delivered { seq, root, data } => {
                    let want = self.done[r];
                    let (lroot, len) = self
                        .list
                        .get(want as usize)
                        .copied()
                        .unwrap_or((u32::MAX, 0));
                    if seq != want
                        || root != lroot
                        || lroot == rank
                        || data != payload(self.seed, seq, len)
                    {
                        return Err(self.fail(format!(
                            "rank {rank} delivered broadcast {seq} from {root} ({} bytes); expected {want} from {lroot} with its data",
                            data.len()
                        )));
                    }
                    self.note(format!("{:?} r{rank} delivered {seq}", self.now));
                    self.out.deliveries += 1;
                    self.done[r] += 1;
                    more_calls = true;
                }
                Event::Sent { seq } => {
                    let want = self.done[r];
                    if seq != want || self.list[seq as usize].0 != rank {
                        return Err(self.fail(format!(
                            "rank {rank} completed its broadcast {seq}, expected {want}"
                        )));
                    }
                    self.done[r] += 1;
                    more_calls = true;
                }
                Event::Released { upto } => {
                    self.note(format!("{:?} r{rank} released below {upto}", self.now))
                }
                Event::FailedOver => self.note(format!("{:?} r{rank} failed over", self.now)),
            }
        }
        if self.p.free == Free::WhenQuiet && self.done[r] == u64::from(self.p.bcasts) && !self.machines[r].closing() {
            // What the last completion queued leaves first (the call returned before the
            // free); then the application frees the communicator: only `Released` (or
            // `FailedOver`) can follow.
            self.transmit(rank)?;
            self.note(format!("{:?} r{rank} closes its machine", self.now));
            self.machines[r].close(self.now);
            while let Some(ev) = self.machines[r].poll_event() {
                match ev {
                    Event::Released { upto } => self.note(format!("{:?} r{rank} released below {upto}", self.now)),
                    Event::FailedOver => self.note(format!("{:?} r{rank} failed over", self.now)),
                    other => return Err(self.fail(format!("rank {rank} closed its machine, then {other:?}"))),
                }
            }
        }
        self.transmit(rank)?;
        if more_calls {
            self.push(self.now, rank, Input::Call);
        }
        let finished = self.done[r] == u64::from(self.p.bcasts);
        let drop = match self.p.free {
            Free::Never => false,
            Free::AtOnce => finished,
            Free::WhenQuiet => finished && self.machines[r].closing() && self.machines[r].quiet(),
        };
        if drop {
            self.note(format!("{:?} r{rank} drops its machine", self.now));
            self.gone[r] = true;
            return Ok(());
        }
        if let Some(t) = self.machines[r].poll_timeout() {
            if self.timer_at[r].map_or(true, |q| t < q) {
                self.timer_at[r] = Some(t);
                // Not through `push`: a slow rank's clock is not late.
                self.order += 1;
                self.queue
                    .push(Reverse((t.max(self.now), self.order, rank)));
                self.inputs.insert(self.order, Input::Timer);
            }
        }
        Ok(())
    }

    /// Carries out what `rank`'s machine queued: its writes and messages.
    fn transmit(&mut self, rank: Rank) -> Result<(), Failure> {
        let r = rank as usize;
        let n = self.p.ranks;
        while let Some(t) = self.machines[r].poll_transmit() {
            // A released broadcast is complete at every rank: a frame of it sent again is
            // traffic nobody needs, which may still be on its way when the job ends (a rank
            // in MPI_Finalize receiving such a frame over the tree hung a job). A rank alone
            // releases its broadcast as soon as it is called, before its write goes out.
            let released = if n > 1 { self.machines[r].released() } else { 0 };
            let bytes: Option<&[u8]> = match &t {
                Transmit::Write { frame: f, .. } => Some(f),
                Transmit::Send { message: Message::Data { frame: f, .. }, .. } => Some(f),
                Transmit::Send { .. } => None,
            };
            let resent = bytes.and_then(|f| frame::decode(f).ok()).map(|h| h.seq).filter(|s| *s < released);
            if let Some(seq) = resent {
                let how = if matches!(t, Transmit::Write { .. }) { "wrote" } else { "sent over the tree" };
                return Err(self.fail(format!("rank {rank} {how} a frame of broadcast {seq}, which it released (below {released})")));
            }
            match t {
                Transmit::Write { channel, frame: f } => self.write(rank, channel, &f)?,
                Transmit::Send { to, message } => {
                    if to >= n || to == rank {
                        return Err(self.fail(format!("rank {rank} sent to {to}")));
                    }
                    // Through its encoding, as on the wire.
                    let m = Message::decode(&message.encode())
                        .map_err(|e| self.fail(format!("{message:?} does not decode: {e:?}")))?;
                    let k = (rank * n + to) as usize;
                    let at = (self.now + self.rng.duration(us(2), us(60))).max(self.fifo[k]);
                    self.fifo[k] = at;
                    self.push(at, to, Input::Msg(rank, m));
                }
            }
        }
        Ok(())
    }
}

fn short(m: &Message) -> String {
    match m {
        Message::Data { forward, frame } => format!(
            "Data(fwd {forward}) {:?}",
            frame::decode(frame).map(|h| h.seq)
        ),
        m => format!("{m:?}"),
    }
}

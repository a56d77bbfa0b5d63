//! Corrected broadcast as a sans-IO state machine per process.
//!
//! A broadcast has two phases (paper, section 3):
//!
//! 1. **Dissemination** colors as many processes as possible: along a [`Topology`] (with or
//!    without acknowledgments), or by gossip to random processes for a fixed time.
//! 2. **Correction** on the ring of ranks colors whoever dissemination missed. Only processes
//!    colored by dissemination (*participants*) send correction messages:
//!    * opportunistic: `d` messages to each side (optionally the tree optimization of
//!      section 3.3, which skips what a nearer participant already covers);
//!    * checked: keep sending to a side until a message came from a participant on that side
//!      which this process has already sent to; colors every live process whatever the gaps,
//!      provided no participant crashes during correction;
//!    * failure-proof: checked, but stop a side only after `f + 1` distinct participants
//!      there were reached and heard from; tolerates `f` crashes during correction (the
//!      rightmost live participant left of any live process must then cover it);
//!    * delayed: one message to the left; if nothing came from the right within a delay, send
//!      to the right until a participant there answers. One message per process fault-free.
//!
//!    Correction starts at a fixed time on all processes (*synchronized*) or as soon as a
//!    process has sent its tree messages (*overlapped*). With overlapped correction, a process
//!    reached by correction before any tree message still forwards the tree message to its
//!    children but does not take part in the correction.
//!
//! The driver pushes inputs with [`BcastState::handle`] / [`BcastState::handle_timeout`] and
//! pulls outputs with [`BcastState::poll_transmit`] / [`BcastState::poll_event`] /
//! [`BcastState::poll_timeout`]. [`BcastState::poll_transmit`] hands out **one** message per
//! call: call it whenever the transport can take one more message, and feed receptions in
//! between, because checked correction decides each next message from what it has received.
//! Time is an opaque `u64` supplied by the caller; nothing here reads a clock. A broadcast
//! must finish within `u32::MAX` time units of its start (per-process times are stored
//! relative to it), so pick the unit accordingly (e.g. microseconds).
//!
//! [`BcastState`] holds only per-process data and borrows the shared [`BcastConfig`] on each
//! call, so a simulator can keep millions of them compactly; [`Bcast`] bundles one state with
//! its configuration for drivers that run a single process.

use std::borrow::Borrow;

use steadfast_proto::rng::{splitmix64, Rng};

use crate::msg::{Dir, Msg};
use crate::tree::{ChildCursor, Topology, MAX_PROCS};

/// Generator state for gossip send number `send` of process `rank`: the configured seed
/// decorrelated across ranks by one SplitMix64 step, then the send number mixed in. Each
/// send draws from a fresh state, so a process keeps no generator between sends.
#[inline]
fn gossip_state(seed: u64, rank: u32, send: u32) -> u64 {
    let mut s = seed ^ (u64::from(rank).wrapping_mul(0xD6E8_FEB8_6659_FD93));
    splitmix64(&mut s) ^ u64::from(send)
}

/// How processes are colored in the first phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dissemination {
    /// Parents send to their children in send order.
    Tree {
        /// The tree (its process count must match the configuration's).
        topology: Topology,
        /// `Some` for an acknowledged tree: acknowledgments travel back up the tree.
        ack: Option<AckOptions>,
    },
    /// Every colored process sends to uniformly random others until `duration` has passed
    /// since the broadcast started (Corrected Gossip).
    Gossip {
        /// Length of the gossip phase.
        duration: u64,
        /// Seed of the per-process target generators.
        seed: u64,
    },
}

/// Acknowledged-tree options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckOptions {
    /// How long a parent waits, after its last tree send, for its children's acknowledgments
    /// before it sends directly to the children of every child that stayed silent.
    pub timeout: u64,
}

/// The correction algorithm run on the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Correction {
    /// No correction (plain or acknowledged tree, plain gossip).
    None,
    /// Send to the `distance` nearest processes on each side.
    Opportunistic {
        /// Correction distance `d`.
        distance: u32,
        /// Skip targets a nearer participant is known to cover (section 3.3).
        optimized: bool,
        /// With overlapped correction on a tree, processes reached by correction before any
        /// tree message also send their correction messages (after their tree messages), as
        /// the paper's simulator does; otherwise only tree-colored processes do.
        relay: bool,
    },
    /// Checked correction (Corrected Gossip, section 3.1).
    Checked,
    /// Checked correction that also tolerates up to `crashes` participants crashing during
    /// the correction phase: a process stops sending to a side only once it has sent to
    /// `crashes + 1` distinct participants on that side that have sent to it.
    FailureProof {
        /// Crashes during correction to tolerate.
        crashes: u32,
    },
    /// Delayed correction (section 3.3).
    Delayed {
        /// Time after the start of correction at which a process that heard nothing from its
        /// right starts sending to the right.
        delay: u64,
    },
}

/// When correction starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorrectionStart {
    /// Each participant starts right after its own dissemination sends.
    Overlapped,
    /// All participants start `at` time units after the broadcast started.
    Synchronized {
        /// Offset from the broadcast start.
        at: u64,
    },
}

/// Why a configuration was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The process count is zero or too large.
    #[error("process count {0} out of range 1..={max}", max = MAX_PROCS)]
    Procs(u32),
    /// The tree was built for another process count.
    #[error("tree has {tree} processes but the broadcast has {procs}")]
    TreeSize {
        /// Processes in the tree.
        tree: u32,
        /// Processes in the broadcast.
        procs: u32,
    },
    /// Gossip has no per-process end of dissemination; correction must be synchronized.
    #[error("gossip dissemination needs synchronized correction")]
    GossipNeedsSync,
    /// Acknowledged trees do not run a correction phase.
    #[error("acknowledged trees cannot be combined with correction")]
    AckWithCorrection,
    /// The opportunistic distance must be at least 1 and reach fewer than P processes.
    #[error("correction distance {distance} invalid for {procs} processes (need 1 <= 2d < P)")]
    Distance {
        /// Requested distance.
        distance: u32,
        /// Processes in the broadcast.
        procs: u32,
    },
}

/// Shared description of one broadcast, used by every process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BcastConfig {
    procs: u32,
    dissemination: Dissemination,
    correction: Correction,
    start: CorrectionStart,
}

impl BcastConfig {
    /// Checks and builds a configuration.
    pub fn new(
        procs: u32,
        dissemination: Dissemination,
        correction: Correction,
        start: CorrectionStart,
    ) -> Result<Self, ConfigError> {
        if procs == 0 || procs > MAX_PROCS {
            return Err(ConfigError::Procs(procs));
        }
        match &dissemination {
            Dissemination::Tree { topology, ack } => {
                if topology.procs() != procs {
                    return Err(ConfigError::TreeSize {
                        tree: topology.procs(),
                        procs,
                    });
                }
                if ack.is_some() && correction != Correction::None {
                    return Err(ConfigError::AckWithCorrection);
                }
            }
            Dissemination::Gossip { .. } => {
                if correction != Correction::None
                    && !matches!(start, CorrectionStart::Synchronized { .. })
                {
                    return Err(ConfigError::GossipNeedsSync);
                }
            }
        }
        if let Correction::Opportunistic { distance, .. } = correction {
            if distance == 0 || u64::from(distance) * 2 >= u64::from(procs) {
                return Err(ConfigError::Distance { distance, procs });
            }
        }
        Ok(BcastConfig {
            procs,
            dissemination,
            correction,
            start,
        })
    }

    /// Number of processes.
    pub fn procs(&self) -> u32 {
        self.procs
    }

    /// Dissemination phase.
    pub fn dissemination(&self) -> &Dissemination {
        &self.dissemination
    }

    /// Correction phase.
    pub fn correction(&self) -> Correction {
        self.correction
    }

    /// When correction starts.
    pub fn start(&self) -> CorrectionStart {
        self.start
    }

    fn topology(&self) -> Option<&Topology> {
        match &self.dissemination {
            Dissemination::Tree { topology, .. } => Some(topology),
            Dissemination::Gossip { .. } => None,
        }
    }

    /// The specialized kernel of this configuration (see [`Kernel`]).
    pub fn kernel(&self) -> u8 {
        match self.correction {
            Correction::Checked => Kernel::CHECKED,
            _ => Kernel::ANY,
        }
    }

    /// Whether per-process states need their out-of-line part.
    #[inline]
    fn needs_ext(&self) -> bool {
        self.ack().is_some() || matches!(self.correction, Correction::FailureProof { .. })
    }

    fn ack(&self) -> Option<AckOptions> {
        match &self.dissemination {
            Dissemination::Tree { ack, .. } => *ack,
            Dissemination::Gossip { .. } => None,
        }
    }
}

/// A message to put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination rank (relative to the root).
    pub dst: u32,
    /// The message.
    pub msg: Msg,
}

/// How a process was colored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    /// By a tree or gossip message (or as the root).
    Dissemination,
    /// By a correction message.
    Correction,
}

/// Something the driver should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The broadcast payload arrived (the root reports this at start).
    Colored {
        /// Time of coloring.
        at: u64,
        /// Which phase colored this process.
        via: Via,
    },
    /// The process has nothing left to send unless a new message arrives; for the root of an
    /// acknowledged tree, every acknowledgment is in. Reported by the `poll_transmit` call
    /// that found nothing to send.
    Finished,
}

const COLORED: u16 = 1 << 0;
const VIA_CORRECTION: u16 = 1 << 1;
const PARTICIPANT: u16 = 1 << 2;
const TREE: u16 = 1 << 3;
const GOSSIP: u16 = 1 << 4;
const CORR_RUNNING: u16 = 1 << 5;
const CORR_DONE: u16 = 1 << 6;
const DELAY_EXPIRED: u16 = 1 << 7;
const REPLY: u16 = 1 << 8;
const EV_COLORED: u16 = 1 << 9;
const EV_FINISHED: u16 = 1 << 10;
const FINISHED: u16 = 1 << 11;
/// `ext` holds acknowledged-tree state.
const ACK_MODE: u16 = 1 << 12;
/// `ext` holds the nearest participants per side (failure-proof correction).
const NEAR_MODE: u16 = 1 << 13;

const LEFT: usize = 0;
const RIGHT: usize = 1;
const NEVER: u64 = u64::MAX;

/// Specialized code paths of [`BcastState`], chosen once per broadcast by drivers that run
/// many processes (simulators): the `*_in::<K>` methods behave exactly like the plain ones
/// when `K` is [`BcastConfig::kernel`], with the configuration's variant checks folded away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel;

impl Kernel {
    /// Any configuration (reads everything from the configuration).
    pub const ANY: u8 = 0;
    /// Checked correction (hence no acknowledgments).
    pub const CHECKED: u8 = 1;
}

/// The correction of `cfg`, known at compile time for specialized kernels.
#[inline(always)]
fn corr<const K: u8>(cfg: &BcastConfig) -> Correction {
    if K == Kernel::CHECKED {
        Correction::Checked
    } else {
        cfg.correction
    }
}

/// State of the rarely used modes, kept out of line so the common state stays 64 bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Ext {
    ack: AckState,
    /// Failure-proof correction: distances of the nearest distinct participants heard from,
    /// per side, ascending, at most `crashes + 1`.
    near: [Vec<u32>; 2],
}

#[inline(always)]
fn ack_of<const K: u8>(ext: &mut Option<Box<Ext>>, flags: u16) -> Option<&mut AckState> {
    if K == Kernel::CHECKED || flags & ACK_MODE == 0 {
        return None;
    }
    ext.as_deref_mut().map(|e| &mut e.ack)
}

#[inline(always)]
fn ack_ref<const K: u8>(ext: &Option<Box<Ext>>, flags: u16) -> Option<&AckState> {
    if K == Kernel::CHECKED || flags & ACK_MODE == 0 {
        return None;
    }
    ext.as_deref().map(|e| &e.ack)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct AckState {
    /// Senders of tree messages to this process, acknowledged in order.
    ack_to: Vec<u32>,
    /// How many of `ack_to` have been acknowledged.
    acked: usize,
    /// Processes this one sent a tree message to and has no acknowledgment from.
    awaiting: Vec<u32>,
    /// Adopted processes (children of silent children) still to send to.
    adopt: Vec<u32>,
    /// When to give up on `awaiting`.
    deadline: u64,
}

/// Per-process broadcast state (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BcastState {
    rank: u32,
    flags: u16,
    /// Gossip phase: gossip messages sent so far (targets hash this counter). Delayed
    /// correction (which starts after gossip ends): nearest participant on the left that
    /// asked for a reply.
    aux: u32,
    cursor: ChildCursor,
    /// Correction distance already sent to, per side.
    sent: [u32; 2],
    /// Distance of the nearest participant heard from, per side (`u32::MAX`: none).
    stop: [u32; 2],
    /// Coloring time relative to `base`.
    colored_at: u32,
    /// When correction starts, relative to `base`; `u32::MAX` while unknown.
    corr_at: u32,
    /// Broadcast start time.
    base: u64,
    ext: Option<Box<Ext>>,
}

impl BcastState {
    /// State of process `rank` for a broadcast that starts at `now`. The root is colored at
    /// once.
    pub fn new(cfg: &BcastConfig, rank: u32, now: u64) -> Self {
        let mut s = BcastState::blank(rank, now);
        s.init(cfg, None);
        s
    }

    /// Reinitializes in place, reusing the heap allocation of acknowledged trees.
    #[inline]
    pub fn reset(&mut self, cfg: &BcastConfig, rank: u32, now: u64) {
        if self.ext.is_none() && !cfg.needs_ext() {
            // Common case (no acknowledgments, no failure-proof correction): nothing to
            // recycle, and only the root starts colored.
            *self = BcastState::blank(rank, now);
            if rank == 0 {
                self.color::<{ Kernel::ANY }>(cfg, now, Via::Dissemination, None);
            }
            return;
        }
        let ext = self.ext.take();
        *self = BcastState::blank(rank, now);
        self.init(cfg, ext);
    }

    fn blank(rank: u32, now: u64) -> Self {
        BcastState {
            rank,
            flags: 0,
            aux: 0,
            cursor: ChildCursor::default(),
            sent: [0; 2],
            stop: [u32::MAX; 2],
            colored_at: u32::MAX,
            corr_at: u32::MAX,
            base: now,
            ext: None,
        }
    }

    fn init(&mut self, cfg: &BcastConfig, reuse: Option<Box<Ext>>) {
        let ack = cfg.ack().is_some();
        let near = matches!(cfg.correction, Correction::FailureProof { .. });
        if ack || near {
            let mut ext = reuse.unwrap_or_default();
            let st = &mut ext.ack;
            st.ack_to.clear();
            st.acked = 0;
            st.awaiting.clear();
            st.adopt.clear();
            st.deadline = NEVER;
            ext.near[0].clear();
            ext.near[1].clear();
            self.ext = Some(ext);
            self.flags |= if ack { ACK_MODE } else { 0 } | if near { NEAR_MODE } else { 0 };
        }
        if self.rank == 0 && self.rank < cfg.procs {
            self.color::<{ Kernel::ANY }>(cfg, self.base, Via::Dissemination, None);
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Whether the payload has arrived.
    pub fn is_colored(&self) -> bool {
        self.flags & COLORED != 0
    }

    /// When and how the process was colored.
    pub fn colored(&self) -> Option<(u64, Via)> {
        self.is_colored().then(|| {
            let via = if self.flags & VIA_CORRECTION != 0 {
                Via::Correction
            } else {
                Via::Dissemination
            };
            (self.base + u64::from(self.colored_at), via)
        })
    }

    /// Whether the process takes part in correction (colored by dissemination, or relaying
    /// opportunistic correction).
    pub fn is_participant(&self) -> bool {
        self.flags & PARTICIPANT != 0
    }

    /// Whether [`Self::poll_transmit`] could return a message: `false` means it would return
    /// `None` without changing anything (uncolored, or finished with no new work).
    #[inline(always)]
    pub fn may_transmit(&self) -> bool {
        self.flags & COLORED != 0 && self.flags & FINISHED == 0
    }

    /// Whether, as of the last [`Self::poll_transmit`], the process will send nothing more
    /// unless a message arrives.
    pub fn is_finished(&self) -> bool {
        self.flags & FINISHED != 0
    }

    /// `t` relative to the broadcast start. Broadcasts must last less than `u32::MAX` time
    /// units (choose the unit accordingly, e.g. microseconds); later times saturate.
    #[inline]
    fn rel(&self, t: u64) -> u32 {
        t.saturating_sub(self.base).min(u64::from(u32::MAX - 1)) as u32
    }

    /// Absolute time of a relative one; `u32::MAX` means never.
    #[inline]
    fn abs(&self, r: u32) -> u64 {
        if r == u32::MAX {
            NEVER
        } else {
            self.base + u64::from(r)
        }
    }

    fn color<const K: u8>(&mut self, cfg: &BcastConfig, now: u64, via: Via, from: Option<u32>) {
        self.flags |= COLORED | EV_COLORED;
        self.colored_at = self.rel(now);
        match via {
            Via::Dissemination => {
                if corr::<K>(cfg) != Correction::None {
                    self.flags |= PARTICIPANT;
                    if let CorrectionStart::Synchronized { at } = cfg.start {
                        self.corr_at = self.rel(self.base.saturating_add(at).max(now));
                    }
                }
                match &cfg.dissemination {
                    Dissemination::Tree { topology, ack } => {
                        self.flags |= TREE;
                        self.cursor = topology.cursor(self.rank);
                        if ack.is_some() {
                            if let Some(st) = ack_of::<K>(&mut self.ext, self.flags) {
                                st.ack_to.clear();
                                st.ack_to.extend(from);
                            }
                        }
                    }
                    Dissemination::Gossip { duration, .. } => {
                        if now < self.base.saturating_add(*duration) {
                            self.flags |= GOSSIP;
                        }
                    }
                }
            }
            Via::Correction => {
                self.flags |= VIA_CORRECTION;
                // An early correction message does not stop the tree below this process.
                if let (Some(topology), CorrectionStart::Overlapped) = (cfg.topology(), cfg.start) {
                    self.flags |= TREE;
                    self.cursor = topology.cursor(self.rank);
                    if let Correction::Opportunistic { relay: true, .. } = corr::<K>(cfg) {
                        self.flags |= PARTICIPANT;
                    }
                }
            }
        }
    }

    /// Feeds a message received at `now` from `from`.
    #[inline]
    pub fn handle(&mut self, cfg: &BcastConfig, now: u64, from: u32, msg: Msg) {
        self.handle_in::<{ Kernel::ANY }>(cfg, now, from, msg)
    }

    /// Same as [`Self::handle`], specialized for kernel `K` (which must be
    /// [`BcastConfig::kernel`] of `cfg`, or [`Kernel::ANY`]).
    #[inline(always)]
    pub fn handle_in<const K: u8>(&mut self, cfg: &BcastConfig, now: u64, from: u32, msg: Msg) {
        debug_assert!(
            K == Kernel::ANY || K == cfg.kernel(),
            "kernel {K} for {:?}",
            cfg.correction
        );
        if from >= cfg.procs || from == self.rank {
            return;
        }
        match msg {
            Msg::Tree | Msg::Gossip => {
                if !self.is_colored() {
                    self.color::<K>(cfg, now, Via::Dissemination, Some(from));
                } else if let Some(st) = ack_of::<K>(&mut self.ext, self.flags) {
                    // Another process adopted us after a timeout: it waits for our subtree too.
                    if !st.ack_to.contains(&from) {
                        st.ack_to.push(from);
                        self.flags &= !FINISHED;
                    }
                }
            }
            Msg::Correction(dir) => {
                if !self.is_colored() {
                    self.color::<K>(cfg, now, Via::Correction, None);
                }
                self.record_correction::<K>(cfg, from, dir);
            }
            Msg::Ack => {
                if let Some(st) = ack_of::<K>(&mut self.ext, self.flags) {
                    if let Some(i) = st.awaiting.iter().position(|&c| c == from) {
                        st.awaiting.swap_remove(i);
                    }
                }
            }
        }
    }

    #[inline(always)]
    fn record_correction<const K: u8>(&mut self, cfg: &BcastConfig, from: u32, dir: Dir) {
        let (p, me) = (cfg.procs, self.rank);
        // Ring distance from a to b going right; both are below P.
        let ahead = |a: u32, b: u32| if b >= a { b - a } else { b + p - a };
        // A message travelling left comes from the right side, and vice versa.
        let (side, dist) = match dir {
            Dir::Left => (RIGHT, ahead(me, from)),
            Dir::Right => (LEFT, ahead(from, me)),
        };
        self.stop[side] = self.stop[side].min(dist);
        match corr::<K>(cfg) {
            Correction::Opportunistic {
                distance: d,
                optimized: true,
                ..
            } if dist <= d && side == RIGHT => {
                // Section 3.3: a participant j to our right covers j-d .. i+d, so we only
                // send left beyond j - d. Only messages from the right count: if both sides
                // skipped on each other's account, the ranks each expects the other to cover
                // would be covered by neither.
                self.sent[RIGHT] = self.sent[RIGHT].max(d);
                self.sent[LEFT] = self.sent[LEFT].max(d - dist);
            }
            Correction::FailureProof { crashes } => {
                if let Some(ext) = self.ext.as_deref_mut() {
                    let near = &mut ext.near[side];
                    if let Err(i) = near.binary_search(&dist) {
                        if i <= crashes as usize {
                            near.insert(i, dist);
                            near.truncate(crashes as usize + 1);
                        }
                    }
                }
            }
            Correction::Delayed { .. } if side == LEFT && self.is_participant() => {
                let nearer = self.flags & REPLY == 0 || dist < ahead(self.aux, me);
                if nearer {
                    self.aux = from;
                    self.flags |= REPLY;
                    self.flags &= !FINISHED;
                }
            }
            _ => {}
        }
    }

    /// Time-driven transitions; idempotent, called from every entry point.
    #[inline(always)]
    fn advance<const K: u8>(&mut self, cfg: &BcastConfig, now: u64) {
        // Running checked or opportunistic correction has no time-driven transitions left.
        if self.flags & ACK_MODE == 0 && !matches!(corr::<K>(cfg), Correction::Delayed { .. }) {
            // Without acknowledgments or delayed correction, the only time-driven transition
            // is the start of correction (the first step of `advance_slow`), inlined here.
            if self.flags & (PARTICIPANT | CORR_RUNNING | CORR_DONE | TREE | GOSSIP) == PARTICIPANT
                && self.abs(self.corr_at) <= now
            {
                self.flags |= CORR_RUNNING;
            }
            return;
        }
        self.advance_slow::<K>(cfg, now);
    }

    #[inline(never)]
    fn advance_slow<const K: u8>(&mut self, cfg: &BcastConfig, now: u64) {
        if self.flags & (PARTICIPANT | CORR_RUNNING | CORR_DONE) == PARTICIPANT
            && self.flags & (TREE | GOSSIP) == 0
            && self.abs(self.corr_at) <= now
        {
            self.flags |= CORR_RUNNING;
        }
        if let Correction::Delayed { delay } = corr::<K>(cfg) {
            if self.flags & CORR_RUNNING != 0 && self.abs(self.corr_at).saturating_add(delay) <= now
            {
                self.flags |= DELAY_EXPIRED;
            }
        }
        if let Some(st) = ack_of::<K>(&mut self.ext, self.flags) {
            if st.deadline <= now && self.flags & TREE == 0 && st.adopt.is_empty() {
                st.deadline = NEVER;
                if let Some(topology) = cfg.topology() {
                    // Take over the subtrees of silent children.
                    for c in std::mem::take(&mut st.awaiting) {
                        st.adopt.extend(topology.children(c));
                    }
                    st.adopt.reverse();
                }
            }
        }
    }

    /// Feeds the passage of time (call when [`Self::poll_timeout`] is reached).
    #[inline]
    pub fn handle_timeout(&mut self, cfg: &BcastConfig, now: u64) {
        self.handle_timeout_in::<{ Kernel::ANY }>(cfg, now)
    }

    /// Same as [`Self::handle_timeout`], specialized for kernel `K` (which must be
    /// [`BcastConfig::kernel`] of `cfg`, or [`Kernel::ANY`]).
    #[inline(always)]
    pub fn handle_timeout_in<const K: u8>(&mut self, cfg: &BcastConfig, now: u64) {
        debug_assert!(
            K == Kernel::ANY || K == cfg.kernel(),
            "kernel {K} for {:?}",
            cfg.correction
        );
        self.advance::<K>(cfg, now);
    }

    /// Earliest time at which [`Self::handle_timeout`] has work to do.
    #[inline]
    pub fn poll_timeout(&self, cfg: &BcastConfig) -> Option<u64> {
        self.poll_timeout_in::<{ Kernel::ANY }>(cfg)
    }

    /// Same as [`Self::poll_timeout`], specialized for kernel `K` (which must be
    /// [`BcastConfig::kernel`] of `cfg`, or [`Kernel::ANY`]).
    #[inline(always)]
    pub fn poll_timeout_in<const K: u8>(&self, cfg: &BcastConfig) -> Option<u64> {
        debug_assert!(
            K == Kernel::ANY || K == cfg.kernel(),
            "kernel {K} for {:?}",
            cfg.correction
        );
        if self.flags & ACK_MODE == 0
            && (self.flags & (PARTICIPANT | CORR_RUNNING | CORR_DONE) != PARTICIPANT
                || self.flags & (TREE | GOSSIP) != 0)
            && !matches!(corr::<K>(cfg), Correction::Delayed { .. })
        {
            return None;
        }
        let mut t = NEVER;
        // While dissemination sends are pending, correction starts from poll_transmit.
        if self.flags & (PARTICIPANT | CORR_RUNNING | CORR_DONE | TREE | GOSSIP) == PARTICIPANT {
            t = t.min(self.abs(self.corr_at));
        }
        if let Correction::Delayed { delay } = corr::<K>(cfg) {
            if self.flags & (CORR_RUNNING | DELAY_EXPIRED) == CORR_RUNNING {
                t = t.min(self.abs(self.corr_at).saturating_add(delay));
            }
        }
        if let Some(st) = ack_ref::<K>(&self.ext, self.flags) {
            t = t.min(st.deadline);
        }
        (t != NEVER).then_some(t)
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.flags & EV_COLORED != 0 {
            self.flags &= !EV_COLORED;
            let (at, via) = self.colored()?;
            return Some(Event::Colored { at, via });
        }
        if self.flags & EV_FINISHED != 0 {
            self.flags &= !EV_FINISHED;
            return Some(Event::Finished);
        }
        None
    }

    /// Next message to send at `now` (one per call), or `None` if there is nothing to send
    /// until the next input or timeout.
    #[inline]
    pub fn poll_transmit(&mut self, cfg: &BcastConfig, now: u64) -> Option<Transmit> {
        self.poll_transmit_in::<{ Kernel::ANY }>(cfg, now)
    }

    /// Same as [`Self::poll_transmit`], specialized for kernel `K` (which must be
    /// [`BcastConfig::kernel`] of `cfg`, or [`Kernel::ANY`]).
    #[inline(always)]
    pub fn poll_transmit_in<const K: u8>(
        &mut self,
        cfg: &BcastConfig,
        now: u64,
    ) -> Option<Transmit> {
        debug_assert!(
            K == Kernel::ANY || K == cfg.kernel(),
            "kernel {K} for {:?}",
            cfg.correction
        );
        // Uncolored processes have nothing to send; finished ones only get work back from
        // `handle` (which then clears FINISHED).
        if self.flags & COLORED == 0 || self.flags & FINISHED != 0 {
            return None;
        }
        // Fast path: running checked or opportunistic correction with nothing else to do
        // (most calls in a large broadcast). `next_correction` changes nothing when it
        // returns `None`, so that case simply takes the general path.
        const BUSY: u16 = FINISHED | REPLY | TREE | GOSSIP | ACK_MODE | CORR_RUNNING | CORR_DONE;
        if self.flags & BUSY == CORR_RUNNING
            && !matches!(corr::<K>(cfg), Correction::Delayed { .. })
        {
            if let Some(t) = self.next_correction::<K>(cfg) {
                return Some(t);
            }
        }
        self.advance::<K>(cfg, now);
        let out = self.next_transmit::<K>(cfg, now);
        if out.is_some() {
            self.flags &= !FINISHED;
        } else if self.flags & FINISHED == 0 && self.done_sending::<K>() {
            self.flags |= FINISHED | EV_FINISHED;
        }
        out
    }

    fn done_sending<const K: u8>(&self) -> bool {
        if self.flags & (TREE | GOSSIP | REPLY) != 0 {
            return false;
        }
        if self.flags & PARTICIPANT != 0 && self.flags & CORR_DONE == 0 {
            return false;
        }
        if let Some(st) = ack_ref::<K>(&self.ext, self.flags) {
            return st.awaiting.is_empty() && st.adopt.is_empty() && st.acked == st.ack_to.len();
        }
        true
    }

    #[inline(always)]
    fn next_transmit<const K: u8>(&mut self, cfg: &BcastConfig, now: u64) -> Option<Transmit> {
        if self.flags & REPLY != 0 {
            self.flags &= !REPLY;
            return Some(Transmit {
                dst: self.aux,
                msg: Msg::Correction(Dir::Left),
            });
        }
        if self.flags & TREE != 0 {
            if let Some(topology) = cfg.topology() {
                if let Some(child) = topology.next_child(&mut self.cursor) {
                    if let Some(st) = ack_of::<K>(&mut self.ext, self.flags) {
                        st.awaiting.push(child);
                    }
                    return Some(Transmit {
                        dst: child,
                        msg: Msg::Tree,
                    });
                }
            }
            self.flags &= !TREE;
            self.tree_done::<K>(cfg, now);
        }
        if self.flags & GOSSIP != 0 {
            if let Dissemination::Gossip { duration, seed } = cfg.dissemination {
                if now < self.base.saturating_add(duration) && cfg.procs > 1 {
                    let mut rng = Rng::from_state(gossip_state(seed, self.rank, self.aux));
                    self.aux += 1;
                    let mut dst = rng.below_u32(cfg.procs - 1);
                    if dst >= self.rank {
                        dst += 1;
                    }
                    return Some(Transmit {
                        dst,
                        msg: Msg::Gossip,
                    });
                }
            }
            self.flags &= !GOSSIP;
            self.aux = 0;
            self.advance::<K>(cfg, now);
        }
        if let Some(st) = ack_of::<K>(&mut self.ext, self.flags) {
            if let Some(dst) = st.adopt.pop() {
                st.awaiting.push(dst);
                if st.adopt.is_empty() {
                    st.deadline = now.saturating_add(cfg.ack().map_or(0, |a| a.timeout));
                }
                return Some(Transmit {
                    dst,
                    msg: Msg::Tree,
                });
            }
            if self.flags & TREE == 0 && st.awaiting.is_empty() && st.acked < st.ack_to.len() {
                let dst = st.ack_to[st.acked];
                st.acked += 1;
                return Some(Transmit { dst, msg: Msg::Ack });
            }
        }
        if self.flags & (CORR_RUNNING | CORR_DONE) == CORR_RUNNING {
            match self.next_correction::<K>(cfg) {
                Some(t) => return Some(t),
                None => {
                    // Delayed correction may still have to wait for its timer.
                    if !matches!(corr::<K>(cfg), Correction::Delayed { .. })
                        || self.flags & DELAY_EXPIRED != 0
                    {
                        self.flags |= CORR_DONE;
                    }
                }
            }
        }
        None
    }

    fn tree_done<const K: u8>(&mut self, cfg: &BcastConfig, now: u64) {
        if self.flags & PARTICIPANT != 0 && cfg.start == CorrectionStart::Overlapped {
            self.corr_at = self.rel(now);
        }
        // A synchronized start may already have passed while tree messages were going out.
        self.advance::<K>(cfg, now);
        if let (Some(st), Some(opts)) = (ack_of::<K>(&mut self.ext, self.flags), cfg.ack()) {
            if !st.awaiting.is_empty() {
                st.deadline = now.saturating_add(opts.timeout);
            }
        }
    }

    #[inline]
    fn target(&self, cfg: &BcastConfig, side: usize, dist: u32) -> u32 {
        // dist < P: callers never cover more than the whole ring.
        let (p, me) = (cfg.procs, self.rank);
        if side == LEFT {
            if me >= dist {
                me - dist
            } else {
                me + p - dist
            }
        } else {
            let t = me + dist;
            if t >= p {
                t - p
            } else {
                t
            }
        }
    }

    /// Picks the side to send to: the one with fewer messages so far, left on ties.
    fn pick(&self, left: bool, right: bool) -> Option<usize> {
        match (left, right) {
            (true, true) => Some(if self.sent[LEFT] <= self.sent[RIGHT] {
                LEFT
            } else {
                RIGHT
            }),
            (true, false) => Some(LEFT),
            (false, true) => Some(RIGHT),
            (false, false) => None,
        }
    }

    fn send_side(&mut self, cfg: &BcastConfig, side: usize) -> Transmit {
        self.sent[side] += 1;
        let dir = if side == LEFT { Dir::Left } else { Dir::Right };
        Transmit {
            dst: self.target(cfg, side, self.sent[side]),
            msg: Msg::Correction(dir),
        }
    }

    #[inline(always)]
    fn next_correction<const K: u8>(&mut self, cfg: &BcastConfig) -> Option<Transmit> {
        let p = cfg.procs;
        if p <= 1 {
            return None;
        }
        // Every other process already has a message from us.
        let covered = u64::from(self.sent[LEFT]) + u64::from(self.sent[RIGHT]) >= u64::from(p - 1);
        let side = match corr::<K>(cfg) {
            Correction::None => None,
            Correction::Opportunistic { distance: d, .. } => {
                self.pick(self.sent[LEFT] < d, self.sent[RIGHT] < d)
            }
            Correction::Checked => {
                if covered {
                    None
                } else {
                    self.pick(
                        self.sent[LEFT] < self.stop[LEFT],
                        self.sent[RIGHT] < self.stop[RIGHT],
                    )
                }
            }
            Correction::FailureProof { crashes } => {
                // Stop at the (crashes + 1)-th nearest distinct participant of each side.
                let limit = |near: &[Vec<u32>; 2], side: usize| {
                    near[side]
                        .get(crashes as usize)
                        .copied()
                        .unwrap_or(u32::MAX)
                };
                match self.ext.as_deref() {
                    Some(ext) if !covered => self.pick(
                        self.sent[LEFT] < limit(&ext.near, LEFT),
                        self.sent[RIGHT] < limit(&ext.near, RIGHT),
                    ),
                    _ => None,
                }
            }
            Correction::Delayed { .. } => {
                if self.sent[LEFT] == 0 {
                    Some(LEFT)
                } else if self.flags & DELAY_EXPIRED != 0
                    && !covered
                    // The gap up to the nearest right participant heard from is ours to cover.
                    && u64::from(self.sent[RIGHT]) + 1 < u64::from(self.stop[RIGHT])
                {
                    Some(RIGHT)
                } else {
                    None
                }
            }
        }?;
        Some(self.send_side(cfg, side))
    }
}

/// One process's broadcast: a [`BcastState`] bundled with its configuration.
///
/// `C` is anything that borrows a [`BcastConfig`]: `Arc<BcastConfig>` when many processes of
/// one runtime share it, `&BcastConfig` for short-lived drivers.
#[derive(Debug, Clone)]
pub struct Bcast<C: Borrow<BcastConfig>> {
    cfg: C,
    state: BcastState,
}

impl<C: Borrow<BcastConfig>> Bcast<C> {
    /// Process `rank` of a broadcast starting at `now`.
    pub fn new(cfg: C, rank: u32, now: u64) -> Self {
        let state = BcastState::new(cfg.borrow(), rank, now);
        Bcast { cfg, state }
    }

    /// Feeds a message received at `now` from `from`.
    pub fn handle(&mut self, now: u64, from: u32, msg: Msg) {
        self.state.handle(self.cfg.borrow(), now, from, msg);
    }

    /// Feeds the passage of time.
    pub fn handle_timeout(&mut self, now: u64) {
        self.state.handle_timeout(self.cfg.borrow(), now);
    }

    /// Next message to send at `now`.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Transmit> {
        self.state.poll_transmit(self.cfg.borrow(), now)
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.state.poll_event()
    }

    /// Earliest time at which [`Self::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.state.poll_timeout(self.cfg.borrow())
    }

    /// The per-process state.
    pub fn state(&self) -> &BcastState {
        &self.state
    }

    /// The configuration.
    pub fn config(&self) -> &BcastConfig {
        self.cfg.borrow()
    }
}

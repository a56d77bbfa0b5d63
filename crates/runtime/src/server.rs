//! Launcher side of the control protocol as a sans-IO state machine.
//!
//! The launcher's event loop feeds it frames (`handle_frame`), connection closures and
//! rank exits, and drains replies (`poll_transmit`), connections to drop (`poll_close`)
//! and job-level events (`poll_event`). No sockets, clocks or threads in here, so every
//! rule (authentication, key-value space, fence counting) is unit-tested directly.

use crate::event::{ExitStatus, LauncherEvent};
use crate::wire::{handshake_mac, mac_eq, ClientMsg, ServerMsg, WireError, HANDSHAKE_CHALLENGE, HANDSHAKE_PROOF, PROTOCOL_VERSION};
use std::collections::{HashMap, VecDeque};

/// Key prefix under which a process publishes its path to other worlds (`bridge.<index>`).
pub const BRIDGE_KEY: &str = "bridge.";

/// Identifies one accepted connection; chosen by the I/O layer, never reused.
pub type ConnId = u64;

/// Why a connection was dropped before it was authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectReason {
    /// The first frame did not decode.
    Malformed(WireError),
    /// The first message was not `Hello`.
    NotHello,
    /// Wrong protocol version.
    Version(u16),
    /// The key did not match the job key.
    BadKey,
    /// The claimed rank is outside the world.
    BadRank(u32),
    /// The rank already has a live connection, or has exited.
    DuplicateRank(u32),
    /// The peer closed or timed out before authenticating.
    Incomplete,
}

/// Job-level consequences of control traffic, for the launcher to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlEvent {
    /// A rank authenticated on connection `conn`.
    Connected { rank: u32, conn: ConnId },
    /// A rank called MPI_Abort.
    Abort { rank: u32, code: i32, msg: String },
    /// A rank reached MPI_Finalize.
    Finalized { rank: u32 },
    /// A connection was refused before authentication (counted in `rejected`).
    Rejected { conn: ConnId, reason: RejectReason },
    /// An authenticated rank sent something invalid; its connection is closed.
    ProtocolError { rank: u32, error: String },
    /// A barrier completed.
    FenceDone { epoch: u64 },
    /// A rank sent a message for the checkpoint scheduler.
    Recovery { rank: u32, bytes: Vec<u8> },
    /// A rank is at its cut of wave `wave` and waits (answer with [`ControlCore::send_to`]
    /// `OutputMarked` once its output pipes are drained).
    OutputMark { rank: u32, wave: u64 },
    /// A rank asked for a checkpoint wave now.
    CheckpointNow { rank: u32 },
    /// A process asks to start a new world (`MPI_Comm_spawn`); answer with
    /// [`ControlCore::send_to`] `Spawned`.
    Spawn { rank: u32, ctx: u32, parents: Vec<u32>, cmds: Vec<crate::wire::SpawnCmd> },
}

#[derive(Debug, Default, Clone)]
struct RankSlot {
    conn: Option<ConnId>,
    finalized: bool,
    exited: bool,
    in_fence: bool,
    /// Incarnation of the rank's current process (0: the first start).
    incarnation: u16,
    /// That process rejoined (its endpoints are published).
    rejoined: bool,
    /// The world the process belongs to (0: the processes started with the job; later
    /// ones were started by `MPI_Comm_spawn`). Fences are per world.
    world: usize,
}

/// A world's barrier state: the job's first processes, or the processes of one spawn.
#[derive(Debug, Clone, Copy)]
struct World {
    /// Job-wide index of the world's rank 0.
    base: u32,
    size: u32,
    fence_epoch: u64,
    /// Live ranks (not exited, not finalized) that have not yet entered the fence.
    fence_pending: u32,
    fence_arrived: u32,
}

impl World {
    fn new(base: u32, size: u32) -> World {
        World { base, size, fence_epoch: 0, fence_pending: size, fence_arrived: 0 }
    }
}

/// Control server state: authentication, key-value space, fences and notices.
#[derive(Debug)]
pub struct ControlCore {
    key: u64,
    ranks: Vec<RankSlot>,
    /// Authenticated connections and their rank.
    conns: HashMap<ConnId, u32>,
    kvs: HashMap<String, String>,
    /// Connections blocked in `get` on a key nobody has put yet.
    waiters: HashMap<String, Vec<ConnId>>,
    /// Slots are indexed by job-wide process index; `worlds[slot.world]` holds its fence.
    worlds: Vec<World>,
    out: VecDeque<(ConnId, ServerMsg)>,
    close: VecDeque<ConnId>,
    events: VecDeque<ControlEvent>,
    rejected: u64,
    /// Connections that sent `Hello` and were challenged: the claimed version and rank
    /// and both nonces, until their `Proof` arrives.
    challenged: HashMap<ConnId, Challenged>,
}

#[derive(Debug, Clone, Copy)]
struct Challenged {
    version: u16,
    rank: u32,
    nonce_rank: [u8; 16],
    nonce_launcher: [u8; 16],
}

impl ControlCore {
    /// A server for a job of `size` ranks protected by `key`.
    pub fn new(size: u32, key: u64) -> Self {
        ControlCore {
            key,
            ranks: vec![RankSlot::default(); size as usize],
            conns: HashMap::new(),
            kvs: HashMap::new(),
            waiters: HashMap::new(),
            worlds: vec![World::new(0, size)],
            out: VecDeque::new(),
            close: VecDeque::new(),
            events: VecDeque::new(),
            rejected: 0,
            challenged: HashMap::new(),
        }
    }

    /// Size of the job's first world.
    pub fn size(&self) -> u32 {
        self.worlds[0].size
    }

    /// Processes of the job so far, every world (the next world's first index).
    pub fn processes(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// Adds a world of `size` processes (started by `MPI_Comm_spawn`); returns the
    /// job-wide index of its rank 0.
    pub fn add_world(&mut self, size: u32) -> u32 {
        let base = self.processes();
        let world = self.worlds.len();
        self.worlds.push(World::new(base, size));
        self.ranks.extend((0..size).map(|_| RankSlot { world, ..RankSlot::default() }));
        base
    }

    /// Connections refused so far (bad key, malformed handshake, duplicates, ...).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Whether `rank` has authenticated at some point and still holds a connection.
    pub fn is_connected(&self, rank: u32) -> bool {
        self.slot(rank).is_some_and(|s| s.conn.is_some())
    }

    /// Whether `rank` reached MPI_Finalize.
    pub fn is_finalized(&self, rank: u32) -> bool {
        self.slot(rank).is_some_and(|s| s.finalized)
    }

    /// Whether `conn` sent a Hello and was challenged, its proof not in yet.
    pub fn is_challenged(&self, conn: ConnId) -> bool {
        self.challenged.contains_key(&conn)
    }

    /// The rank served by an authenticated connection.
    pub fn rank_of(&self, conn: ConnId) -> Option<u32> {
        self.conns.get(&conn).copied()
    }

    /// Feeds one frame body received on `conn`.
    pub fn handle_frame(&mut self, conn: ConnId, body: &[u8]) {
        let msg = ClientMsg::decode(body);
        match (self.conns.get(&conn).copied(), msg) {
            (None, Ok(ClientMsg::Hello { version, rank, nonce })) if !self.challenged.contains_key(&conn) => {
                self.handle_hello(conn, version, rank, nonce)
            }
            (None, Ok(ClientMsg::Proof { mac })) if self.challenged.contains_key(&conn) => {
                self.handle_proof(conn, mac)
            }
            (None, Ok(_)) => self.reject(conn, RejectReason::NotHello),
            (None, Err(e)) => self.reject(conn, RejectReason::Malformed(e)),
            // A connection of an earlier process of the rank (before a coordinated
            // rollback) is heard no more.
            (Some(rank), _) if self.ranks.get(rank as usize).is_some_and(|s| s.conn != Some(conn)) => {}
            (Some(rank), Ok(msg)) => self.handle_request(conn, rank, msg),
            (Some(rank), Err(e)) => self.protocol_error(conn, rank, e.to_string()),
        }
    }

    /// Reports that the framing of `conn`'s byte stream is broken (bad length prefix).
    pub fn framing_error(&mut self, conn: ConnId, error: WireError) {
        match self.conns.get(&conn).copied() {
            Some(rank) => self.protocol_error(conn, rank, error.to_string()),
            None => self.reject(conn, RejectReason::Malformed(error)),
        }
    }

    /// Reports that a connection that never authenticated was closed or timed out.
    pub fn unauthenticated_closed(&mut self, conn: ConnId) {
        if !self.conns.contains_key(&conn) {
            self.reject(conn, RejectReason::Incomplete);
        }
    }

    /// Reports that `conn` is gone (peer closed, I/O error, or after `poll_close`).
    pub fn conn_closed(&mut self, conn: ConnId) {
        self.challenged.remove(&conn);
        if let Some(rank) = self.conns.remove(&conn) {
            if let Some(slot) = self.ranks.get_mut(rank as usize) {
                if slot.conn == Some(conn) {
                    slot.conn = None;
                }
            }
        }
        for list in self.waiters.values_mut() {
            list.retain(|c| *c != conn);
        }
        self.waiters.retain(|_, list| !list.is_empty());
    }

    /// Records that `rank`'s process ended; notifies every connected survivor unless
    /// the rank finalized and exited cleanly, and lets a fence complete without it.
    pub fn rank_exited(&mut self, rank: u32, status: ExitStatus) {
        let Some(slot) = self.ranks.get_mut(rank as usize) else {
            return;
        };
        if slot.exited {
            return;
        }
        slot.exited = true;
        let finalized = slot.finalized;
        // Finalized ranks already left the fence count at finalize time.
        let wi = slot.world;
        if !finalized {
            let w = &mut self.worlds[wi];
            if slot.in_fence {
                w.fence_arrived = w.fence_arrived.saturating_sub(1);
            } else {
                w.fence_pending = w.fence_pending.saturating_sub(1);
            }
        }
        slot.in_fence = false;
        // A process that ended before it published its path to other worlds never will:
        // whoever waits for it (the parents of a spawned process that is no MPI program,
        // or died first) gets the empty address, which says so, instead of waiting forever.
        let key = format!("{BRIDGE_KEY}{rank}");
        if !self.kvs.contains_key(&key) {
            self.store(key, String::new());
        }
        if !(finalized && status.success()) {
            let ev = LauncherEvent::RankExited {
                rank,
                status,
                finalized,
            };
            let targets: Vec<ConnId> = self
                .ranks
                .iter()
                .filter(|s| !s.exited)
                .filter_map(|s| s.conn)
                .collect();
            for conn in targets {
                self.out.push_back((conn, ServerMsg::Event(ev.clone())));
            }
        }
        self.try_complete_fence(wi);
    }

    /// `rank` was started again as `incarnation` (relaunch policy): the new process may
    /// connect and takes part in later fences. It tells the others it is back with
    /// `Rejoin` once its addresses are published.
    pub fn rank_relaunched(&mut self, rank: u32, incarnation: u16) {
        let Some(slot) = self.ranks.get_mut(rank as usize) else {
            return;
        };
        if !slot.exited {
            return;
        }
        if let Some(c) = slot.conn.take() {
            self.conns.remove(&c);
        }
        let world = slot.world;
        *slot = RankSlot { incarnation, world, ..RankSlot::default() };
        self.worlds[world].fence_pending += 1;
    }

    /// Queue `msg` for world rank `rank`'s current connection; false if it has none.
    pub fn send_to(&mut self, rank: u32, msg: ServerMsg) -> bool {
        match self.ranks.get(rank as usize).and_then(|s| s.conn) {
            Some(conn) => {
                self.out.push_back((conn, msg));
                true
            }
            None => false,
        }
    }

    /// Every rank of the job is started again, as incarnation `incarnation`, from a global
    /// checkpoint (coordinated rollback, or `steadfast restart`): call once every earlier
    /// process has exited. The key-value space and fences start over, as at a first start.
    pub fn restart_job(&mut self, incarnation: u16) {
        let size = self.size();
        self.ranks.truncate(size as usize);
        for slot in &mut self.ranks {
            // The earlier processes' connections stay known until they close, so their
            // closing is not counted as a refused stranger.
            *slot = RankSlot { incarnation, ..RankSlot::default() };
        }
        self.kvs.clear();
        self.waiters.clear();
        self.worlds = vec![World::new(0, size)];
    }

    /// Next reply to write: (connection, message).
    pub fn poll_transmit(&mut self) -> Option<(ConnId, ServerMsg)> {
        self.out.pop_front()
    }

    /// Next connection to close (after writing what was queued for it before).
    pub fn poll_close(&mut self) -> Option<ConnId> {
        self.close.pop_front()
    }

    /// Next job-level event.
    pub fn poll_event(&mut self) -> Option<ControlEvent> {
        self.events.pop_front()
    }

    fn slot(&self, rank: u32) -> Option<&RankSlot> {
        self.ranks.get(rank as usize)
    }

    fn reject(&mut self, conn: ConnId, reason: RejectReason) {
        self.challenged.remove(&conn);
        self.rejected += 1;
        self.close.push_back(conn);
        self.events
            .push_back(ControlEvent::Rejected { conn, reason });
    }

    fn protocol_error(&mut self, conn: ConnId, rank: u32, error: String) {
        self.out
            .push_back((conn, ServerMsg::Error { msg: error.clone() }));
        self.close.push_back(conn);
        self.conn_closed(conn);
        self.events
            .push_back(ControlEvent::ProtocolError { rank, error });
    }

    /// A rank's `Hello`: answer with a challenge carrying our nonce and our proof that we
    /// know the job key. Nothing else is decided until the rank's proof arrives.
    fn handle_hello(&mut self, conn: ConnId, version: u16, rank: u32, nonce_rank: [u8; 16]) {
        if version != PROTOCOL_VERSION {
            return self.reject(conn, RejectReason::Version(version));
        }
        let mut nonce_launcher = [0u8; 16];
        if getrandom::getrandom(&mut nonce_launcher).is_err() {
            // No randomness, no handshake: refuse rather than reuse a nonce.
            return self.reject(conn, RejectReason::Incomplete);
        }
        let c = Challenged { version, rank, nonce_rank, nonce_launcher };
        let mac = handshake_mac(self.key, HANDSHAKE_CHALLENGE, version, rank, &nonce_rank, &nonce_launcher);
        self.challenged.insert(conn, c);
        self.out.push_back((conn, ServerMsg::Challenge { nonce: nonce_launcher, mac }));
    }

    /// A challenged connection's `Proof`: a rank of the job (it knows the key) is admitted.
    fn handle_proof(&mut self, conn: ConnId, mac: [u8; 32]) {
        let Some(c) = self.challenged.remove(&conn) else {
            return self.reject(conn, RejectReason::NotHello);
        };
        let expected = handshake_mac(self.key, HANDSHAKE_PROOF, c.version, c.rank, &c.nonce_rank, &c.nonce_launcher);
        if !mac_eq(&mac, &expected) {
            return self.reject(conn, RejectReason::BadKey);
        }
        let rank = c.rank;
        let Some(slot) = self.ranks.get_mut(rank as usize) else {
            return self.reject(conn, RejectReason::BadRank(rank));
        };
        let size = self.worlds[slot.world].size;
        if slot.conn.is_some() || slot.exited || slot.finalized {
            return self.reject(conn, RejectReason::DuplicateRank(rank));
        }
        slot.conn = Some(conn);
        self.conns.insert(conn, rank);
        self.out.push_back((conn, ServerMsg::Welcome { size }));
        self.events
            .push_back(ControlEvent::Connected { rank, conn });
    }

    fn handle_request(&mut self, conn: ConnId, rank: u32, msg: ClientMsg) {
        match msg {
            ClientMsg::Hello { .. } | ClientMsg::Proof { .. } => {
                self.protocol_error(conn, rank, "second handshake on a connection".into())
            }
            ClientMsg::Put { key, value } => self.store(key, value),
            ClientMsg::Get { key } => match self.kvs.get(&key) {
                Some(value) => {
                    let value = value.clone();
                    self.out.push_back((conn, ServerMsg::Value { key, value }));
                }
                None => self.waiters.entry(key).or_default().push(conn),
            },
            ClientMsg::Fence { epoch } => {
                let idx = rank as usize;
                let wi = self.ranks[idx].world;
                let expected = self.worlds[wi].fence_epoch;
                if epoch != expected {
                    let msg = format!("fence epoch {epoch}, expected {expected}");
                    return self.protocol_error(conn, rank, msg);
                }
                let slot = &mut self.ranks[idx];
                if slot.in_fence || slot.finalized {
                    return self.protocol_error(conn, rank, "fence entered twice".into());
                }
                slot.in_fence = true;
                let w = &mut self.worlds[wi];
                w.fence_pending = w.fence_pending.saturating_sub(1);
                w.fence_arrived += 1;
                self.try_complete_fence(wi);
            }
            ClientMsg::Abort { code, msg } => {
                self.out.push_back((conn, ServerMsg::AbortAck));
                self.events
                    .push_back(ControlEvent::Abort { rank, code, msg });
            }
            ClientMsg::Rejoin => {
                let inc = self.ranks[rank as usize].incarnation;
                if inc == 0 {
                    return self.protocol_error(conn, rank, "rejoin from a rank that was never restarted".into());
                }
                let fence_epoch = self.worlds[self.ranks[rank as usize].world].fence_epoch;
                self.out.push_back((conn, ServerMsg::RejoinAck { fence_epoch }));
                self.ranks[rank as usize].rejoined = true;
                // The new process learns of the other ranks started again before it (when
                // several failed), as the others learn of it.
                let earlier: Vec<LauncherEvent> = self
                    .ranks
                    .iter()
                    .enumerate()
                    .filter(|(r, s)| *r != rank as usize && !s.exited && s.rejoined)
                    .map(|(r, s)| LauncherEvent::RankRejoined { rank: r as u32, incarnation: s.incarnation })
                    .collect();
                for e in earlier {
                    self.out.push_back((conn, ServerMsg::Event(e)));
                }
                let ev = LauncherEvent::RankRejoined { rank, incarnation: inc };
                let targets: Vec<ConnId> = self
                    .ranks
                    .iter()
                    .enumerate()
                    .filter(|(r, s)| *r != rank as usize && !s.exited)
                    .filter_map(|(_, s)| s.conn)
                    .collect();
                for c in targets {
                    self.out.push_back((c, ServerMsg::Event(ev.clone())));
                }
            }
            ClientMsg::Recovery { bytes } => {
                self.events.push_back(ControlEvent::Recovery { rank, bytes });
            }
            ClientMsg::CheckpointNow => {
                self.events.push_back(ControlEvent::CheckpointNow { rank });
            }
            ClientMsg::Spawn { ctx, parents, cmds } => {
                if let Some(p) = parents.iter().find(|&&p| p >= self.processes()) {
                    return self.protocol_error(conn, rank, format!("spawn names process {p}, which does not exist"));
                }
                self.events.push_back(ControlEvent::Spawn { rank, ctx, parents, cmds });
            }
            ClientMsg::OutputMark { wave } => {
                self.events.push_back(ControlEvent::OutputMark { rank, wave });
            }
            ClientMsg::Finalize => {
                let slot = &mut self.ranks[rank as usize];
                if slot.finalized {
                    return self.protocol_error(conn, rank, "finalize called twice".into());
                }
                slot.finalized = true;
                // A finalized rank no longer takes part in fences.
                let wi = slot.world;
                let w = &mut self.worlds[wi];
                w.fence_pending = w.fence_pending.saturating_sub(1);
                self.out.push_back((conn, ServerMsg::FinalizeAck));
                self.events.push_back(ControlEvent::Finalized { rank });
                self.try_complete_fence(wi);
            }
        }
    }

    /// `key = value` in the key-value space; whoever waits for the key gets it now.
    fn store(&mut self, key: String, value: String) {
        if let Some(waiting) = self.waiters.remove(&key) {
            for w in waiting {
                self.out.push_back((w, ServerMsg::Value { key: key.clone(), value: value.clone() }));
            }
        }
        self.kvs.insert(key, value);
    }

    fn try_complete_fence(&mut self, wi: usize) {
        let w = self.worlds[wi];
        if w.fence_pending > 0 || w.fence_arrived == 0 {
            return;
        }
        let epoch = w.fence_epoch;
        let mut live = 0;
        let members = w.base as usize..(w.base + w.size) as usize;
        for slot in &mut self.ranks[members] {
            if slot.in_fence {
                slot.in_fence = false;
                if let Some(conn) = slot.conn {
                    self.out.push_back((conn, ServerMsg::FenceDone { epoch }));
                }
            }
            if !slot.exited && !slot.finalized {
                live += 1;
            }
        }
        let w = &mut self.worlds[wi];
        w.fence_epoch += 1;
        w.fence_pending = live;
        w.fence_arrived = 0;
        if wi == 0 {
            self.events.push_back(ControlEvent::FenceDone { epoch });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: u64 = 0x1234_5678_9abc_def0;

    fn frame(m: ClientMsg) -> Vec<u8> {
        m.encode().unwrap()[4..].to_vec()
    }

    /// A rank's side of the handshake, made with `key`: Hello, check the challenge (it
    /// must prove the launcher knows KEY), Proof.
    fn attempt(core: &mut ControlCore, conn: ConnId, rank: u32, key: u64) {
        let nonce = [conn as u8; 16];
        core.handle_frame(conn, &frame(ClientMsg::Hello { version: PROTOCOL_VERSION, rank, nonce }));
        let Some((c, ServerMsg::Challenge { nonce: theirs, mac })) = core.poll_transmit() else {
            panic!("no challenge");
        };
        assert_eq!(c, conn);
        let expected = handshake_mac(KEY, HANDSHAKE_CHALLENGE, PROTOCOL_VERSION, rank, &nonce, &theirs);
        assert!(mac_eq(&mac, &expected), "the launcher's challenge does not prove the key");
        let mac = handshake_mac(key, HANDSHAKE_PROOF, PROTOCOL_VERSION, rank, &nonce, &theirs);
        core.handle_frame(conn, &frame(ClientMsg::Proof { mac }));
    }

    fn hello(core: &mut ControlCore, conn: ConnId, rank: u32) {
        attempt(core, conn, rank, KEY);
        assert_eq!(
            core.poll_transmit(),
            Some((conn, ServerMsg::Welcome { size: core.size() }))
        );
        assert_eq!(
            core.poll_event(),
            Some(ControlEvent::Connected { rank, conn })
        );
    }

    fn drain(core: &mut ControlCore) -> Vec<(ConnId, ServerMsg)> {
        std::iter::from_fn(|| core.poll_transmit()).collect()
    }

    #[test]
    fn wrong_key_and_garbage_are_rejected_and_counted() {
        let mut core = ControlCore::new(2, KEY);
        attempt(&mut core, 1, 0, KEY ^ 1);
        core.handle_frame(2, &[0xee, 1, 2]);
        core.handle_frame(3, &frame(ClientMsg::Get { key: "x".into() }));
        attempt(&mut core, 4, 2, KEY);
        assert_eq!(core.rejected(), 4);
        assert_eq!(drain(&mut core), vec![]);
        let closed: Vec<_> = std::iter::from_fn(|| core.poll_close()).collect();
        assert_eq!(closed, vec![1, 2, 3, 4]);
        let events: Vec<_> = std::iter::from_fn(|| core.poll_event()).collect();
        assert_eq!(events.len(), 4);
        assert!(matches!(
            events[0],
            ControlEvent::Rejected {
                conn: 1,
                reason: RejectReason::BadKey
            }
        ));
        assert!(!core.is_connected(0));
        // The rank can still connect properly afterwards.
        hello(&mut core, 5, 0);
        // A second connection claiming the same rank is refused.
        attempt(&mut core, 6, 0, KEY);
        assert_eq!(core.rejected(), 5);
    }

    #[test]
    fn a_relaunched_rank_reconnects_rejoins_and_takes_part_in_fences() {
        let mut core = ControlCore::new(3, KEY);
        for r in 0..3 {
            hello(&mut core, r as u64, r);
        }
        for r in 0..3 {
            core.handle_frame(r as u64, &frame(ClientMsg::Fence { epoch: 0 }));
        }
        drain(&mut core);
        core.rank_exited(1, ExitStatus::Signaled(9));
        drain(&mut core);
        while core.poll_event().is_some() {}
        // A second Hello for rank 1 is refused until the launcher started it again ...
        attempt(&mut core, 7, 1, KEY);
        assert!(matches!(core.poll_event(), Some(ControlEvent::Rejected { conn: 7, .. })));
        assert_eq!(core.poll_close(), Some(7));
        core.rank_relaunched(1, 1);
        hello(&mut core, 8, 1);
        // ... and the restarted one learns the fence epoch while the others hear of it.
        core.handle_frame(8, &frame(ClientMsg::Rejoin));
        let out = drain(&mut core);
        assert!(out.contains(&(8, ServerMsg::RejoinAck { fence_epoch: 1 })));
        let ev = ServerMsg::Event(LauncherEvent::RankRejoined { rank: 1, incarnation: 1 });
        assert!(out.contains(&(2, ev.clone())));
        assert!(!out.iter().any(|(c, m)| *c == 8 && *m == ev));
        // The next fence waits for the new incarnation too.
        core.handle_frame(0, &frame(ClientMsg::Fence { epoch: 1 }));
        core.handle_frame(2, &frame(ClientMsg::Fence { epoch: 1 }));
        assert_eq!(drain(&mut core), vec![]);
        core.handle_frame(8, &frame(ClientMsg::Fence { epoch: 1 }));
        let out = drain(&mut core);
        assert!(out.contains(&(8, ServerMsg::FenceDone { epoch: 1 })));
        assert!(out.contains(&(2, ServerMsg::FenceDone { epoch: 1 })));
    }

    #[test]
    fn a_rank_that_rejoins_learns_of_others_started_again_before_it() {
        let mut core = ControlCore::new(3, KEY);
        for r in 0..3 {
            hello(&mut core, r as u64, r);
        }
        drain(&mut core);
        for r in [1, 2] {
            core.rank_exited(r, ExitStatus::Signaled(9));
            core.rank_relaunched(r, 1);
        }
        drain(&mut core);
        while core.poll_event().is_some() {}
        hello(&mut core, 11, 1);
        hello(&mut core, 12, 2);
        drain(&mut core);
        core.handle_frame(11, &frame(ClientMsg::Rejoin));
        let first = drain(&mut core);
        // Rank 2's process has not rejoined yet (its endpoints may not be published).
        assert!(!first.iter().any(|(c, m)| *c == 11 && matches!(m, ServerMsg::Event(LauncherEvent::RankRejoined { .. }))));
        core.handle_frame(12, &frame(ClientMsg::Rejoin));
        let out = drain(&mut core);
        assert!(out.contains(&(12, ServerMsg::Event(LauncherEvent::RankRejoined { rank: 1, incarnation: 1 }))));
        assert!(out.contains(&(11, ServerMsg::Event(LauncherEvent::RankRejoined { rank: 2, incarnation: 1 }))));
        assert!(out.contains(&(0, ServerMsg::Event(LauncherEvent::RankRejoined { rank: 2, incarnation: 1 }))));
    }

    #[test]
    fn a_spawned_world_has_its_own_fences_and_its_processes_their_own_slots() {
        let mut core = ControlCore::new(2, KEY);
        hello(&mut core, 0, 0);
        hello(&mut core, 1, 1);
        let cmds = vec![crate::wire::SpawnCmd { program: "p".into(), maxprocs: 2, ..Default::default() }];
        core.handle_frame(0, &frame(ClientMsg::Spawn { ctx: 6, parents: vec![0, 1], cmds: cmds.clone() }));
        assert!(matches!(core.poll_event(), Some(ControlEvent::Spawn { rank: 0, ctx: 6, .. })));
        assert_eq!(core.add_world(2), 2);
        assert_eq!(core.processes(), 4);
        // The children are welcomed with their own world's size.
        attempt(&mut core, 10, 2, KEY);
        assert_eq!(core.poll_transmit(), Some((10, ServerMsg::Welcome { size: 2 })));
        attempt(&mut core, 11, 3, KEY);
        assert_eq!(core.poll_transmit(), Some((11, ServerMsg::Welcome { size: 2 })));
        while core.poll_event().is_some() {}
        // The children's start-up fence completes without the parents...
        core.handle_frame(10, &frame(ClientMsg::Fence { epoch: 0 }));
        assert_eq!(drain(&mut core), vec![]);
        core.handle_frame(11, &frame(ClientMsg::Fence { epoch: 0 }));
        let out = drain(&mut core);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|(c, m)| (*c == 10 || *c == 11) && *m == ServerMsg::FenceDone { epoch: 0 }));
        // ... and the parents' without the children.
        core.handle_frame(0, &frame(ClientMsg::Fence { epoch: 0 }));
        core.handle_frame(1, &frame(ClientMsg::Fence { epoch: 0 }));
        assert_eq!(drain(&mut core).len(), 2);
        assert_eq!(core.poll_event(), Some(ControlEvent::FenceDone { epoch: 0 }));
        // A spawn naming a process that does not exist is a protocol error.
        core.handle_frame(0, &frame(ClientMsg::Spawn { ctx: 8, parents: vec![9], cmds }));
        assert!(matches!(core.poll_event(), Some(ControlEvent::ProtocolError { rank: 0, .. })));
    }

    #[test]
    fn whoever_waits_for_the_path_of_a_process_that_ended_first_is_told() {
        let mut core = ControlCore::new(2, KEY);
        hello(&mut core, 0, 0);
        hello(&mut core, 1, 1);
        core.handle_frame(0, &frame(ClientMsg::Get { key: "bridge.1".into() }));
        assert_eq!(drain(&mut core), vec![]);
        core.rank_exited(1, ExitStatus::Exited(0));
        let out = drain(&mut core);
        assert!(out.contains(&(0, ServerMsg::Value { key: "bridge.1".into(), value: String::new() })));
        // A published path stays as it was.
        core.handle_frame(0, &frame(ClientMsg::Put { key: "bridge.0".into(), value: "a".into() }));
        core.rank_exited(0, ExitStatus::Exited(0));
        core.handle_frame(1, &frame(ClientMsg::Get { key: "bridge.0".into() }));
        assert!(drain(&mut core).iter().all(|(_, m)| !matches!(m, ServerMsg::Value { value, .. } if value.is_empty())));
    }

    #[test]
    fn a_rank_that_was_never_restarted_cannot_rejoin() {
        let mut core = ControlCore::new(2, KEY);
        hello(&mut core, 0, 0);
        core.handle_frame(0, &frame(ClientMsg::Rejoin));
        assert!(matches!(core.poll_event(), Some(ControlEvent::ProtocolError { rank: 0, .. })));
    }

    #[test]
    fn get_blocks_until_put() {
        let mut core = ControlCore::new(2, KEY);
        hello(&mut core, 10, 0);
        hello(&mut core, 11, 1);
        core.handle_frame(11, &frame(ClientMsg::Get { key: "a".into() }));
        assert_eq!(drain(&mut core), vec![]);
        core.handle_frame(
            10,
            &frame(ClientMsg::Put {
                key: "a".into(),
                value: "1".into(),
            }),
        );
        let v = ServerMsg::Value {
            key: "a".into(),
            value: "1".into(),
        };
        assert_eq!(drain(&mut core), vec![(11, v.clone())]);
        core.handle_frame(10, &frame(ClientMsg::Get { key: "a".into() }));
        assert_eq!(drain(&mut core), vec![(10, v)]);
    }

    #[test]
    fn fence_releases_all_once_everyone_arrived() {
        let n = 4;
        let mut core = ControlCore::new(n, KEY);
        for r in 0..n {
            hello(&mut core, 100 + r as u64, r);
        }
        for epoch in 0..3 {
            for r in 0..n {
                assert_eq!(drain(&mut core), vec![], "released early");
                core.handle_frame(100 + r as u64, &frame(ClientMsg::Fence { epoch }));
            }
            let out = drain(&mut core);
            assert_eq!(out.len(), n as usize);
            assert!(out
                .iter()
                .all(|(_, m)| *m == ServerMsg::FenceDone { epoch }));
        }
        // A wrong epoch is a protocol error, answered and closed.
        core.handle_frame(100, &frame(ClientMsg::Fence { epoch: 7 }));
        assert!(matches!(
            drain(&mut core)[..],
            [(100, ServerMsg::Error { .. })]
        ));
        assert_eq!(core.poll_close(), Some(100));
    }

    #[test]
    fn fence_completes_without_dead_or_finalized_ranks() {
        let mut core = ControlCore::new(3, KEY);
        for r in 0..3 {
            hello(&mut core, r as u64, r);
        }
        core.handle_frame(0, &frame(ClientMsg::Fence { epoch: 0 }));
        core.rank_exited(2, ExitStatus::Signaled(9));
        let out = drain(&mut core);
        // Survivors 0 and 1 hear about rank 2; the fence still waits for rank 1.
        let ev = ServerMsg::Event(LauncherEvent::RankExited {
            rank: 2,
            status: ExitStatus::Signaled(9),
            finalized: false,
        });
        assert_eq!(out, vec![(0, ev.clone()), (1, ev)]);
        core.handle_frame(1, &frame(ClientMsg::Fence { epoch: 0 }));
        assert_eq!(
            drain(&mut core),
            vec![
                (0, ServerMsg::FenceDone { epoch: 0 }),
                (1, ServerMsg::FenceDone { epoch: 0 })
            ]
        );
        // Rank 1 finalizes; rank 0 fences alone.
        core.handle_frame(1, &frame(ClientMsg::Finalize));
        assert_eq!(drain(&mut core), vec![(1, ServerMsg::FinalizeAck)]);
        core.handle_frame(0, &frame(ClientMsg::Fence { epoch: 1 }));
        assert_eq!(
            drain(&mut core),
            vec![(0, ServerMsg::FenceDone { epoch: 1 })]
        );
        // A clean exit after finalize is not announced.
        core.rank_exited(1, ExitStatus::Exited(0));
        assert_eq!(drain(&mut core), vec![]);
    }

    #[test]
    fn a_rank_dying_inside_a_fence_does_not_block_the_next_one() {
        let mut core = ControlCore::new(3, KEY);
        for r in 0..3 {
            hello(&mut core, r as u64, r);
        }
        core.handle_frame(0, &frame(ClientMsg::Fence { epoch: 0 }));
        core.handle_frame(1, &frame(ClientMsg::Fence { epoch: 0 }));
        core.rank_exited(1, ExitStatus::Exited(3));
        drain(&mut core);
        core.handle_frame(2, &frame(ClientMsg::Fence { epoch: 0 }));
        let out = drain(&mut core);
        assert_eq!(
            out,
            vec![
                (0, ServerMsg::FenceDone { epoch: 0 }),
                (2, ServerMsg::FenceDone { epoch: 0 })
            ]
        );
        core.handle_frame(0, &frame(ClientMsg::Fence { epoch: 1 }));
        core.handle_frame(2, &frame(ClientMsg::Fence { epoch: 1 }));
        assert_eq!(drain(&mut core).len(), 2);
    }

    #[test]
    fn abort_is_acknowledged_and_reported() {
        let mut core = ControlCore::new(1, KEY);
        hello(&mut core, 9, 0);
        core.handle_frame(
            9,
            &frame(ClientMsg::Abort {
                code: 5,
                msg: "boom".into(),
            }),
        );
        assert_eq!(drain(&mut core), vec![(9, ServerMsg::AbortAck)]);
        assert_eq!(
            core.poll_event(),
            Some(ControlEvent::Abort {
                rank: 0,
                code: 5,
                msg: "boom".into()
            })
        );
    }

    #[test]
    fn closed_waiters_are_forgotten() {
        let mut core = ControlCore::new(2, KEY);
        hello(&mut core, 1, 0);
        hello(&mut core, 2, 1);
        core.handle_frame(2, &frame(ClientMsg::Get { key: "k".into() }));
        core.conn_closed(2);
        core.handle_frame(
            1,
            &frame(ClientMsg::Put {
                key: "k".into(),
                value: "v".into(),
            }),
        );
        assert_eq!(drain(&mut core), vec![]);
    }
}

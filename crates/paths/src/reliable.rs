//! The reliable path: one [`steadfast_reliable::Channel`] per peer over a datagram
//! [`Wire`] (UDP sockets, one per route), after LA-MPI's UDP path (seed 004).
//!
//! One engine packet (40-byte header + payload) is one channel message; the channel cuts
//! it into checksummed fragments, stripes them round-robin over the routes that are up,
//! retransmits what is lost or damaged, drops duplicates, and hands fragments back in
//! order, which this path joins into packets for the engine.
//!
//! **Path scheduler** (routes, failover, fail-back): a route to a peer is declared failed
//! when sending on it fails at the socket (e.g. `ENETUNREACH` when the interface went
//! down), when the channel reports [`Event::RetransmitExhausted`] for it, or when it
//! misses `heartbeat_misses` heartbeats in a row while another route to the same peer
//! answers (heartbeats: while data to a peer with several routes is unacknowledged, a
//! small probe frame — ids, nonce, a tag keyed from the job key, CRC32C — goes on every route each
//! `probe_interval`, and the peer answers on the same route). The channel then rebinds
//! that route's unacknowledged fragments to the surviving routes and resends them;
//! nothing is lost or duplicated because sequence numbers, not routes, identify
//! fragments. A failed route is probed every `probe_interval`; when the peer's answer
//! comes back on it the route is restored and new fragments are striped onto it again.
//!
//! **Incarnations.** A rank that died may be started again (`mpiexec --on-failure
//! relaunch`) as the next incarnation of the same rank, with new sockets. The ids a frame
//! carries (`src`, `dst`, in data frames and probes alike) are [`channel_id`]s: the world
//! rank in the low 24 bits and the incarnation (mod 256) above, so a channel refuses every
//! frame of an earlier incarnation (or one addressed to an earlier incarnation of this
//! rank) that is still in a socket buffer or on its way, without a byte more on the wire.
//! Such frames are counted as `stale_dropped`. When the engine reports the new
//! incarnation ([`Path::peer_rejoined`]), the path drops everything it held for the peer
//! (channel, sequence numbers, reassembly, blocked frames, route states), takes the
//! peer's new endpoints and incarnation from the launcher's key-value space
//! (`udp.<rank>`, see [`crate::udp::with_incarnation`]) and starts a fresh channel; the
//! new process built fresh channels to everyone at its start. Frames a new incarnation
//! sends before this rank heard of it are refused the same way and retransmitted by it.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use bytes::Bytes;
use steadfast_reliable::frame::{Frame, FrameKey, HEADER_LEN as FRAME_HEADER_LEN, MAX_FRAME};
use steadfast_reliable::{Channel, Config, Counters, Event, Transmit};

use crate::checksum::Checksum;
use crate::setup::Exchange;
use crate::{PacketSink, Path, PathCounters, PathError, RawHeader, SendStatus, HDR_LEN};

/// Outcome of [`Wire::send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireSend {
    /// Handed to the network (which may still lose it).
    Sent,
    /// No buffer space now; try again later.
    WouldBlock,
    /// The route cannot carry anything now (the reason, for the log).
    RouteDown(String),
}

/// A datagram transport with one or more routes to each peer.
pub trait Wire: Send {
    /// Number of routes to `peer` (0 = unknown peer).
    fn routes(&self, peer: u32) -> u8;
    /// Sends one datagram, `header` then `payload`, to `peer` on `route`.
    fn send(&mut self, peer: u32, route: u8, header: &[u8], payload: &[u8]) -> WireSend;
    /// Receives one datagram into `buf`; `Ok(None)` when nothing is waiting.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>>;
    /// Sleeps until a datagram may have arrived (or, with `want_write`, until sending
    /// may succeed again), at most `timeout`.
    fn wait(&mut self, timeout: Duration, want_write: bool);
    /// Called once per poll.
    fn tick(&mut self) {}
    /// Datagrams the wire itself still holds for sending.
    fn pending(&self) -> usize {
        0
    }
    /// Adds the wire's own counters (fault injection) to `c`.
    fn add_counters(&self, _c: &mut PathCounters) {}
    /// Lines describing the wire for the statistics report.
    fn describe(&self) -> Vec<String> {
        Vec::new()
    }
    /// Human-readable name of a route (`local -> remote`).
    fn route_label(&self, _peer: u32, route: u8) -> String {
        format!("route {route}")
    }
    /// Points the routes to `peer` at the endpoints it published (without the
    /// incarnation prefix): a restarted peer listens on new sockets.
    fn set_peer(&mut self, peer: u32, _published: &str) -> Result<(), PathError> {
        Err(PathError::Udp(format!("this wire cannot learn new endpoints of rank {peer}")))
    }
}

/// Bits of a [`channel_id`] that hold the world rank.
const RANK_BITS: u32 = 24;
const RANK_MASK: u32 = (1 << RANK_BITS) - 1;
/// Largest job the reliable path serves (ranks must fit in 24 bits).
pub const MAX_RANKS: u32 = 1 << RANK_BITS;

/// The id a frame carries for `rank` in its `incarnation`: the rank in the low 24 bits,
/// the incarnation modulo 256 above them. (Frames of an incarnation 256 restarts older
/// cannot still be on their way.)
pub fn channel_id(rank: u32, incarnation: u16) -> u32 {
    (rank & RANK_MASK) | ((u32::from(incarnation) & 0xff) << RANK_BITS)
}

/// Settings of a [`ReliablePath`].
#[derive(Debug, Clone)]
pub struct ReliableConfig {
    /// Fragment payload size (bytes per datagram after the 104-byte frame header).
    pub frag: usize,
    /// Largest engine payload per packet.
    pub max_payload: usize,
    /// End-to-end checksum of fragment payloads.
    pub checksum: Checksum,
    /// How often routes are probed: heartbeats on busy routes, fail-back probes on
    /// failed ones.
    pub probe_interval: Duration,
    /// Heartbeats a route may miss in a row (while another route answers) before it is
    /// declared failed.
    pub heartbeat_misses: u32,
    /// Channel configuration template (ids, routes and the above are filled in).
    pub channel: Config,
}

impl ReliableConfig {
    /// Defaults: 8 KiB fragments, 512 KiB packets, CRC32C, probes every 50 ms, a route
    /// failed after 3 missed heartbeats.
    pub fn new(job_key: u64) -> ReliableConfig {
        ReliableConfig {
            frag: steadfast_reliable::DEFAULT_MAX_PAYLOAD,
            max_payload: 512 << 10,
            checksum: Checksum::Crc32c,
            probe_interval: Duration::from_millis(50),
            heartbeat_misses: 3,
            channel: Config::new(job_key, 0, 1),
        }
    }
}

const PROBE_MAGIC: [u8; 4] = *b"SFPB";
const PROBE_LEN: usize = 40;
const PROBE: u8 = 1;
const PROBE_REPLY: u8 = 2;
/// Datagrams taken per poll before events are handled (bounds the poll's latency).
const RECV_BATCH: usize = 64;
/// Route events kept for the statistics report.
const ROUTE_LOG: usize = 64;

/// A probe: `[magic 4][kind 1][route 1][0 0][tag 8][src 4][dst 4][nonce 8][0 4][crc 4]`.
/// The tag ([`FrameKey::tag`] over every byte but the tag and the CRC) stands where the job
/// key stood; the key itself is never sent.
fn probe_frame(kind: u8, route: u8, key: &FrameKey, src: u32, dst: u32, nonce: u64) -> [u8; PROBE_LEN] {
    let mut b = [0u8; PROBE_LEN];
    b[0..4].copy_from_slice(&PROBE_MAGIC);
    b[4] = kind;
    b[5] = route;
    b[16..20].copy_from_slice(&src.to_le_bytes());
    b[20..24].copy_from_slice(&dst.to_le_bytes());
    b[24..32].copy_from_slice(&nonce.to_le_bytes());
    let tag = probe_tag(key, &b);
    b[8..16].copy_from_slice(&tag.to_le_bytes());
    let crc = steadfast_reliable::crc::crc32c(&b[..36]);
    b[36..40].copy_from_slice(&crc.to_le_bytes());
    b
}

fn probe_tag(key: &FrameKey, b: &[u8; PROBE_LEN]) -> u64 {
    let mut m = [0u8; PROBE_LEN - 12];
    m[..8].copy_from_slice(&b[..8]);
    m[8..].copy_from_slice(&b[16..36]);
    key.tag(&m)
}

struct Probe {
    kind: u8,
    route: u8,
    /// Whether the tag verified under our key.
    authentic: bool,
    src: u32,
    dst: u32,
    nonce: u64,
}

fn parse_probe(b: &[u8], key: &FrameKey) -> Option<Probe> {
    let b: &[u8; PROBE_LEN] = b.try_into().ok()?;
    if b[0..4] != PROBE_MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(b[36..40].try_into().ok()?);
    if crc != steadfast_reliable::crc::crc32c(&b[..36]) || b[6] != 0 || b[7] != 0 {
        return None;
    }
    Some(Probe {
        kind: b[4],
        route: b[5],
        authentic: u64::from_le_bytes(b[8..16].try_into().ok()?) == probe_tag(key, b),
        src: u32::from_le_bytes(b[16..20].try_into().ok()?),
        dst: u32::from_le_bytes(b[20..24].try_into().ok()?),
        nonce: u64::from_le_bytes(b[24..32].try_into().ok()?),
    })
}

#[derive(Debug, Clone, Default)]
struct RouteState {
    up: bool,
    next_probe: u64,
    nonce: u64,
    /// Heartbeats sent on this (up) route since the last answer.
    missed: u32,
    frames_sent: u64,
    /// Frames sent since the route was last restored (shows fail-back carried traffic).
    sent_since_restore: u64,
    failures: u64,
    restores: u64,
}

struct Peer {
    ch: Channel,
    routes: Vec<RouteState>,
    /// Frames pulled from the channel that found the socket full.
    blocked: VecDeque<Transmit>,
    /// The packet being joined from fragments.
    asm: Vec<u8>,
    asm_active: bool,
    deadline: Option<u64>,
    dirty: bool,
}

/// The reliable path over a datagram wire.
pub struct ReliablePath<W: Wire> {
    wire: W,
    rank: u32,
    /// Tags probes and checks every datagram (derived from the job key).
    key: FrameKey,
    cfg: ReliableConfig,
    peers: Vec<Option<Peer>>,
    active: Vec<u32>,
    epoch: Instant,
    rx: Vec<u8>,
    counters: PathCounters,
    /// Frames that failed their checks before a channel could be found for them.
    unattributed_corrupt: u64,
    unattributed_foreign: u64,
    unattributed_other: u64,
    any_route_down: bool,
    /// Peers reported failed: their traffic is ignored, sends to them refused.
    dead: Vec<bool>,
    /// This process's [`channel_id`] (rank and incarnation).
    local_id: u32,
    /// Each peer's [`channel_id`] as this path knows it (its current incarnation).
    peer_ids: Vec<u32>,
    /// Frames and probes of another incarnation than the one known (see the module docs).
    stale_dropped: u64,
    /// Counters of channels dropped when their peer failed or was restarted.
    retired: Counters,
    /// When heartbeats are next due.
    next_heartbeat: u64,
    log: VecDeque<String>,
}

impl<W: Wire> ReliablePath<W> {
    /// A path for `rank` of a job of `nranks` ranks over `wire` (peers must be known to
    /// the wire before traffic to them starts).
    pub fn new(wire: W, rank: u32, nranks: u32, cfg: ReliableConfig) -> Result<ReliablePath<W>, PathError> {
        let mut probe = cfg.channel.clone();
        probe.local_id = 0;
        probe.peer_id = 1;
        probe.max_payload = cfg.frag;
        probe.validate().map_err(|e| PathError::Config(e.to_string()))?;
        if nranks > MAX_RANKS {
            return Err(PathError::Config(format!("the udp path serves at most {MAX_RANKS} ranks, not {nranks}")));
        }
        if cfg.frag + FRAME_HEADER_LEN > 65507 {
            return Err(PathError::Config(format!("fragment size {} does not fit a UDP datagram", cfg.frag)));
        }
        Ok(ReliablePath {
            wire,
            rank,
            key: FrameKey::from_job_key(cfg.channel.job_key),
            cfg,
            peers: (0..nranks).map(|_| None).collect(),
            active: Vec::new(),
            epoch: Instant::now(),
            rx: vec![0u8; MAX_FRAME.min(65536)],
            counters: PathCounters::default(),
            unattributed_corrupt: 0,
            unattributed_foreign: 0,
            unattributed_other: 0,
            any_route_down: false,
            dead: vec![false; nranks as usize],
            local_id: channel_id(rank, 0),
            peer_ids: (0..nranks).map(|q| channel_id(q, 0)).collect(),
            stale_dropped: 0,
            retired: Counters::default(),
            next_heartbeat: 0,
            log: VecDeque::new(),
        })
    }

    /// Sets this process's incarnation (0, the default, for a job's first processes).
    /// Call it before any traffic: channels built earlier keep the old id.
    pub fn set_incarnation(&mut self, incarnation: u16) {
        self.local_id = channel_id(self.rank, incarnation);
    }

    /// Sets the incarnation `peer` runs as (0 by default); a channel to an earlier one is
    /// dropped.
    pub fn set_peer_incarnation(&mut self, peer: u32, incarnation: u16) {
        let id = channel_id(peer, incarnation);
        if self.peer_ids.get(peer as usize).is_some_and(|&old| old != id) {
            self.drop_channel(peer);
            self.peer_ids[peer as usize] = id;
        }
    }

    /// Forgets everything held for `peer`: its channel (sequence numbers, unacknowledged
    /// and reordered fragments), the packet being joined, blocked frames, route states.
    fn drop_channel(&mut self, peer: u32) {
        let Some(slot) = self.peers.get_mut(peer as usize) else { return };
        if let Some(p) = slot.take() {
            self.retired.add(p.ch.counters());
        }
        self.active.retain(|&q| q != peer);
        self.any_route_down = self.peers.iter().flatten().any(|p| p.routes.iter().any(|r| !r.up));
    }

    /// The wire.
    pub fn wire(&self) -> &W {
        &self.wire
    }

    /// The wire, mutably (e.g. to add peers).
    pub fn wire_mut(&mut self) -> &mut W {
        &mut self.wire
    }

    /// Nanoseconds since the path was created (never 0: channels treat 0 as "no time").
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    fn secs(&self, ns: u64) -> f64 {
        ns as f64 / 1e9
    }

    /// Channel counters of every peer, summed (with those of dropped channels).
    pub fn channel_counters(&self) -> Counters {
        let mut c = self.retired;
        for p in self.peers.iter().flatten() {
            c.add(p.ch.counters());
        }
        c
    }

    /// Whether `route` to `peer` is currently up.
    pub fn route_is_up(&self, peer: u32, route: u8) -> bool {
        self.peers
            .get(peer as usize)
            .and_then(|p| p.as_ref())
            .and_then(|p| p.routes.get(usize::from(route)))
            .is_some_and(|r| r.up)
    }

    /// Frames sent on `route` to `peer`: (total, since the route was last restored).
    pub fn route_frames(&self, peer: u32, route: u8) -> (u64, u64) {
        self.peers
            .get(peer as usize)
            .and_then(|p| p.as_ref())
            .and_then(|p| p.routes.get(usize::from(route)))
            .map_or((0, 0), |r| (r.frames_sent, r.sent_since_restore))
    }

    fn ensure_peer(&mut self, peer: u32) -> Result<(), PathError> {
        let idx = peer as usize;
        if idx >= self.peers.len() || peer == self.rank {
            return Err(PathError::Udp(format!("no such peer {peer}")));
        }
        if self.dead[idx] {
            return Err(PathError::PeerLost(peer, "reported failed".into()));
        }
        if self.peers[idx].is_some() {
            return Ok(());
        }
        let routes = self.wire.routes(peer);
        if routes == 0 {
            return Err(PathError::Udp(format!("no route to rank {peer}")));
        }
        let mut c = self.cfg.channel.clone();
        c.local_id = self.local_id;
        c.peer_id = self.peer_ids[idx];
        c.routes = routes;
        c.max_payload = self.cfg.frag;
        c.payload_checksum = self.cfg.checksum.enabled();
        let ch = Channel::new(c).map_err(|e| PathError::Config(e.to_string()))?;
        let rs = RouteState { up: true, ..RouteState::default() };
        self.peers[idx] = Some(Peer {
            ch,
            routes: vec![rs; usize::from(routes)],
            blocked: VecDeque::new(),
            asm: Vec::new(),
            asm_active: false,
            deadline: None,
            dirty: false,
        });
        self.active.push(peer);
        Ok(())
    }

    fn note(&mut self, line: String) {
        tracing::info!("{line}");
        if self.log.len() == ROUTE_LOG {
            self.log.pop_front();
        }
        self.log.push_back(line);
    }

    /// Declares `route` to `peer` failed and moves its fragments to the other routes.
    fn fail_route(&mut self, peer: u32, route: u8, why: &str) {
        let now = self.now();
        let interval = self.cfg.probe_interval.as_nanos() as u64;
        let Some(p) = self.peers.get_mut(peer as usize).and_then(|p| p.as_mut()) else { return };
        let Some(r) = p.routes.get_mut(usize::from(route)) else { return };
        if !r.up {
            return;
        }
        r.up = false;
        r.missed = 0;
        r.failures += 1;
        r.next_probe = now + interval;
        p.ch.fail_route(route);
        p.dirty = true;
        self.any_route_down = true;
        self.counters.route_failures += 1;
        let label = self.wire.route_label(peer, route);
        let t = self.secs(now);
        self.note(format!("rank {} route {route} to rank {peer} ({label}) failed at {t:.3} s: {why}", self.rank));
    }

    fn restore_route(&mut self, peer: u32, route: u8) {
        let now = self.now();
        let Some(p) = self.peers.get_mut(peer as usize).and_then(|p| p.as_mut()) else { return };
        let Some(r) = p.routes.get_mut(usize::from(route)) else { return };
        if r.up {
            return;
        }
        r.up = true;
        r.missed = 0;
        r.restores += 1;
        r.sent_since_restore = 0;
        p.ch.restore_route(route);
        p.dirty = true;
        self.counters.route_restores += 1;
        self.any_route_down = self.peers.iter().flatten().any(|p| p.routes.iter().any(|r| !r.up));
        let label = self.wire.route_label(peer, route);
        let t = self.secs(now);
        self.note(format!("rank {} route {route} to rank {peer} ({label}) restored at {t:.3} s", self.rank));
    }

    /// Sends probes on failed routes that are due (fail-back), and heartbeats on the up
    /// routes of peers with unacknowledged data; fails routes that stopped answering.
    fn probe(&mut self, now: u64) {
        let interval = self.cfg.probe_interval.as_nanos() as u64;
        let heartbeat = now >= self.next_heartbeat;
        if !self.any_route_down && !heartbeat {
            return;
        }
        if heartbeat {
            self.next_heartbeat = now + interval;
        }
        let mut silent: Vec<(u32, u8, u32)> = Vec::new();
        for i in 0..self.active.len() {
            let peer = self.active[i];
            let Some(p) = self.peers[peer as usize].as_mut() else { continue };
            let busy = heartbeat && p.routes.len() > 1 && p.ch.unacked_messages() > 0;
            // A route is only blamed when another one answered: a peer that answers on
            // no route is busy or gone, which is not a route problem.
            let some_answered = p.routes.iter().any(|r| r.up && r.missed == 0);
            for route in 0..p.routes.len() {
                let r = &mut p.routes[route];
                if r.up {
                    if !busy {
                        r.missed = 0;
                        continue;
                    }
                    if r.missed >= self.cfg.heartbeat_misses && some_answered {
                        silent.push((peer, route as u8, r.missed));
                        continue;
                    }
                    r.missed += 1;
                } else if now < r.next_probe {
                    continue;
                } else {
                    r.next_probe = now + interval;
                }
                r.nonce = r.nonce.wrapping_add(1);
                let to = self.peer_ids[peer as usize];
                let f = probe_frame(PROBE, route as u8, &self.key, self.local_id, to, r.nonce);
                // A probe that cannot be sent counts as unanswered.
                let _ = self.wire.send(peer, route as u8, &f, &[]);
            }
        }
        for (peer, route, missed) in silent {
            let ms = missed as u64 * interval / 1_000_000;
            self.fail_route(
                peer,
                route,
                &format!("{missed} heartbeats unanswered ({ms} ms) while another route answers"),
            );
        }
    }

    fn on_probe(&mut self, now: u64, pr: Probe) {
        let _ = now;
        if !pr.authentic {
            self.unattributed_foreign += 1;
            return;
        }
        let src = pr.src & RANK_MASK;
        if pr.dst & RANK_MASK != self.rank || src as usize >= self.peers.len() || src == self.rank {
            self.unattributed_other += 1;
            return;
        }
        if pr.src != self.peer_ids[src as usize] || pr.dst != self.local_id {
            self.stale_dropped += 1;
            return;
        }
        match pr.kind {
            PROBE => {
                if self.ensure_peer(src).is_ok() {
                    let f = probe_frame(PROBE_REPLY, pr.route, &self.key, self.local_id, pr.src, pr.nonce);
                    let _ = self.wire.send(src, pr.route, &f, &[]);
                }
            }
            PROBE_REPLY => {
                let Some(r) = self.peers[src as usize].as_mut().and_then(|p| p.routes.get_mut(usize::from(pr.route)))
                else {
                    return;
                };
                if r.up {
                    r.missed = 0;
                } else if r.nonce == pr.nonce {
                    self.restore_route(src, pr.route);
                }
            }
            _ => self.unattributed_other += 1,
        }
    }

    fn on_datagram(&mut self, now: u64, buf: &[u8]) {
        if buf.len() >= 4 && buf[0..4] == PROBE_MAGIC {
            match parse_probe(buf, &self.key) {
                Some(p) => self.on_probe(now, p),
                None => self.unattributed_corrupt += 1,
            }
            return;
        }
        let frame = match Frame::new_checked(buf) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!("reliable path: dropped a damaged or foreign datagram: {e}");
                self.unattributed_corrupt += 1;
                return;
            }
        };
        if !frame.verify_tag(&self.key) {
            self.unattributed_foreign += 1;
            return;
        }
        let (src_id, dst_id) = (frame.src(), frame.dst());
        let src = src_id & RANK_MASK;
        if dst_id & RANK_MASK != self.rank || src == self.rank || src as usize >= self.peers.len() {
            self.unattributed_other += 1;
            return;
        }
        // Another incarnation of the peer, or sent to another incarnation of this rank:
        // never for the channel (whose ids would refuse it too), but worth its own count.
        if src_id != self.peer_ids[src as usize] || dst_id != self.local_id {
            self.stale_dropped += 1;
            return;
        }
        if self.peers[src as usize].is_none() {
            if self.dead[src as usize] {
                // From the incarnation that was reported failed.
                self.stale_dropped += 1;
                return;
            }
            if self.ensure_peer(src).is_err() {
                self.unattributed_other += 1;
                return;
            }
        }
        if let Some(p) = self.peers[src as usize].as_mut() {
            // Tag checked above, once per datagram.
            p.ch.handle_authenticated_frame(now, &frame);
            p.dirty = true;
        }
    }

    /// Hands delivered packets to `sink` and acts on channel events.
    fn drain_events(&mut self, peer: u32, sink: &mut dyn PacketSink) -> usize {
        let mut delivered = 0;
        let limit = self.cfg.max_payload + HDR_LEN;
        let mut failed = Vec::new();
        let Some(p) = self.peers[peer as usize].as_mut() else { return 0 };
        while let Some(ev) = p.ch.poll_event() {
            match ev {
                Event::Delivered(d) => {
                    let (first, last) = (d.is_first(), d.is_last());
                    if first && last {
                        if d.data.len() >= HDR_LEN {
                            let hdr: &RawHeader = d.data[..HDR_LEN].try_into().unwrap_or(&[0; HDR_LEN]);
                            sink.packet(peer, hdr, &d.data[HDR_LEN..]);
                            self.counters.packets_received += 1;
                            self.counters.bytes_received += (d.data.len() - HDR_LEN) as u64;
                            delivered += 1;
                        } else {
                            self.unattributed_other += 1;
                        }
                        continue;
                    }
                    if first {
                        p.asm.clear();
                        p.asm.reserve((d.msg_len as usize).min(limit));
                        p.asm_active = true;
                    }
                    if !p.asm_active || p.asm.len() + d.data.len() > limit {
                        // A packet larger than any this path sends: a peer bug; skip it.
                        p.asm_active = false;
                        self.unattributed_other += 1;
                        continue;
                    }
                    p.asm.extend_from_slice(&d.data);
                    if last {
                        p.asm_active = false;
                        if p.asm.len() >= HDR_LEN {
                            let hdr: &RawHeader = p.asm[..HDR_LEN].try_into().unwrap_or(&[0; HDR_LEN]);
                            sink.packet(peer, hdr, &p.asm[HDR_LEN..]);
                            self.counters.packets_received += 1;
                            self.counters.bytes_received += (p.asm.len() - HDR_LEN) as u64;
                            delivered += 1;
                        }
                        // Keep the buffer's capacity for the next large packet unless huge.
                        if p.asm.capacity() > 4 << 20 {
                            p.asm = Vec::new();
                        }
                    }
                }
                Event::RetransmitExhausted { route, .. } => failed.push(route),
                Event::ProtocolError { what } => tracing::warn!(peer, "reliable path: peer protocol error: {what}"),
                Event::Acked { .. } | Event::CorruptDropped { .. } | Event::ForeignDropped { .. } => {}
            }
        }
        for route in failed {
            self.fail_route(peer, route, "retransmissions exhausted");
        }
        delivered
    }

    /// Pushes the channel's frames to the wire until it is empty or the socket is full.
    fn drain_transmits(&mut self, peer: u32, now: u64) {
        let mut down: Vec<(u8, String)> = Vec::new();
        {
            let Some(p) = self.peers[peer as usize].as_mut() else { return };
            while let Some(t) = p.blocked.front() {
                match self.wire.send(peer, t.route, &t.header, &t.payload) {
                    WireSend::Sent => {
                        if let Some(r) = p.routes.get_mut(usize::from(t.route)) {
                            r.frames_sent += 1;
                            r.sent_since_restore += 1;
                        }
                        p.blocked.pop_front();
                    }
                    WireSend::WouldBlock => break,
                    WireSend::RouteDown(why) => {
                        down.push((t.route, why));
                        p.blocked.pop_front();
                    }
                }
            }
            if p.blocked.is_empty() {
                while let Some(t) = p.ch.poll_transmit(now) {
                    match self.wire.send(peer, t.route, &t.header, &t.payload) {
                        WireSend::Sent => {
                            if let Some(r) = p.routes.get_mut(usize::from(t.route)) {
                                r.frames_sent += 1;
                                r.sent_since_restore += 1;
                            }
                        }
                        WireSend::WouldBlock => {
                            p.blocked.push_back(t);
                            break;
                        }
                        // Lost: the channel resends it, on another route once this one
                        // is failed below.
                        WireSend::RouteDown(why) => {
                            down.push((t.route, why));
                            break;
                        }
                    }
                }
            }
            p.deadline = p.ch.poll_timeout();
        }
        for (route, why) in down {
            if self.route_is_up(peer, route) {
                self.fail_route(peer, route, &why);
            }
        }
    }

    fn service(&mut self, sink: &mut dyn PacketSink) -> usize {
        let now = self.now();
        self.wire.tick();
        let mut rx = std::mem::take(&mut self.rx);
        for _ in 0..RECV_BATCH {
            match self.wire.recv(&mut rx) {
                Ok(Some(n)) => self.on_datagram(now, &rx[..n]),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("reliable path: receive failed: {e}");
                    break;
                }
            }
        }
        self.rx = rx;
        self.probe(now);
        let mut delivered = 0;
        for i in 0..self.active.len() {
            let peer = self.active[i];
            let Some(p) = self.peers[peer as usize].as_mut() else { continue };
            if p.deadline.is_some_and(|d| d <= now) {
                p.ch.handle_timeout(now);
                p.dirty = true;
            }
            if !p.dirty && p.blocked.is_empty() {
                continue;
            }
            p.dirty = false;
            delivered += self.drain_events(peer, sink);
            self.drain_transmits(peer, now);
            // Failing a route may have queued resends.
            if let Some(p) = self.peers[peer as usize].as_mut() {
                if p.dirty {
                    p.dirty = false;
                    delivered += self.drain_events(peer, sink);
                    self.drain_transmits(peer, now);
                }
            }
        }
        delivered
    }
}

impl<W: Wire> Path for ReliablePath<W> {
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        if payload.len() > self.cfg.max_payload {
            return Err(PathError::Udp(format!(
                "payload {} exceeds packet limit {}",
                payload.len(),
                self.cfg.max_payload
            )));
        }
        self.ensure_peer(peer)?;
        let now = self.now();
        let len = HDR_LEN + payload.len();
        {
            let Some(p) = self.peers[peer as usize].as_mut() else { return Ok(SendStatus::Full) };
            if !p.ch.can_send(len) {
                return Ok(SendStatus::Full);
            }
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(hdr);
            v.extend_from_slice(payload);
            if p.ch.send_bytes(now, Bytes::from(v)).is_err() {
                return Ok(SendStatus::Full);
            }
        }
        self.counters.packets_sent += 1;
        self.counters.bytes_sent += payload.len() as u64;
        self.drain_transmits(peer, now);
        Ok(SendStatus::Done)
    }

    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError> {
        Ok(self.service(sink))
    }

    fn max_payload(&self) -> usize {
        self.cfg.max_payload
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), PathError> {
        let now = self.now();
        let mut t = timeout.as_nanos() as u64;
        let mut want_write = false;
        for p in self.peers.iter().flatten() {
            if let Some(d) = p.deadline {
                t = t.min(d.saturating_sub(now));
            }
            want_write |= !p.blocked.is_empty();
            if p.routes.len() > 1 && p.ch.unacked_messages() > 0 {
                t = t.min(self.next_heartbeat.saturating_sub(now));
            }
            if self.any_route_down {
                for r in p.routes.iter().filter(|r| !r.up) {
                    t = t.min(r.next_probe.saturating_sub(now));
                }
            }
        }
        if t > 0 {
            self.wire.wait(Duration::from_nanos(t), want_write);
        }
        Ok(())
    }

    fn backlog(&self) -> usize {
        self.peers.iter().flatten().map(|p| p.ch.unacked_messages() + p.blocked.len()).sum::<usize>()
            + self.wire.pending()
    }

    fn counters_by_path(&self) -> Vec<(&'static str, PathCounters)> {
        vec![("udp", self.counters())]
    }

    fn counters(&self) -> PathCounters {
        let mut c = self.counters;
        let ch = self.channel_counters();
        c.corrupt_detected += ch.corrupt_detected() + self.unattributed_corrupt;
        c.foreign_dropped += ch.foreign_dropped + self.unattributed_foreign;
        c.dup_dropped += ch.dup_dropped;
        c.retransmits += ch.retransmits;
        c.rebound += ch.rebound;
        c.stale_dropped += self.stale_dropped;
        c.frames_dropped += self.stale_dropped
            + ch.corrupt_detected()
            + ch.foreign_dropped
            + ch.misdirected_dropped
            + ch.window_dropped
            + ch.unchecked_refused
            + self.unattributed_corrupt
            + self.unattributed_foreign
            + self.unattributed_other;
        self.wire.add_counters(&mut c);
        c
    }

    fn needs_linger(&self) -> bool {
        true
    }

    fn peer_rejoined(&mut self, peer: u32, ex: &mut dyn Exchange) -> Result<(), PathError> {
        let idx = peer as usize;
        if idx >= self.peers.len() || peer == self.rank {
            return Err(PathError::Udp(format!("no such peer {peer}")));
        }
        let published = ex.get(&format!("udp.{peer}")).map_err(|e| PathError::Config(format!("bootstrap: {e}")))?;
        let (incarnation, endpoints) = crate::udp::split_incarnation(&published)?;
        let id = channel_id(peer, incarnation);
        if !self.dead[idx] && self.peer_ids[idx] == id && self.peers[idx].is_some() {
            // Already talking to that incarnation (this process started after it).
            return Ok(());
        }
        self.wire.set_peer(peer, endpoints)?;
        self.drop_channel(peer);
        self.peer_ids[idx] = id;
        self.dead[idx] = false;
        self.ensure_peer(peer)?;
        self.note(format!("rank {} reconnected to rank {peer}, incarnation {incarnation}", self.rank));
        Ok(())
    }

    fn peer_failed(&mut self, peer: u32) {
        let idx = peer as usize;
        if idx < self.dead.len() && !self.dead[idx] {
            self.dead[idx] = true;
            self.drop_channel(peer);
        }
    }

    fn stats_detail(&self) -> Vec<String> {
        let mut out = self.wire.describe();
        for &peer in &self.active {
            let Some(p) = self.peers[peer as usize].as_ref() else { continue };
            out.push(format!("to rank {peer}: {}", p.ch.counters()));
            for (i, r) in p.routes.iter().enumerate() {
                out.push(format!(
                    "to rank {peer} route {i} ({}): {} frames sent, {} since last restore, {} failures, {} restores, {}",
                    self.wire.route_label(peer, i as u8),
                    r.frames_sent,
                    r.sent_since_restore,
                    r.failures,
                    r.restores,
                    if r.up { "up" } else { "down" }
                ));
            }
        }
        out.extend(self.log.iter().cloned());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_frames_roundtrip_and_reject_damage() {
        let key = FrameKey::from_job_key(42);
        let f = probe_frame(PROBE, 1, &key, 3, 4, 99);
        let p = parse_probe(&f, &key).unwrap();
        assert_eq!((p.kind, p.route, p.authentic, p.src, p.dst, p.nonce), (PROBE, 1, true, 3, 4, 99));
        assert!(!f.windows(8).any(|w| w == 42u64.to_le_bytes()), "job key in a probe");
        assert!(!parse_probe(&f, &FrameKey::from_job_key(43)).unwrap().authentic);
        for i in 0..PROBE_LEN {
            let mut g = f;
            g[i] ^= 0x10;
            assert!(parse_probe(&g, &key).is_none(), "byte {i}");
            if i >= 36 {
                continue;
            }
            // A forger who fixes up the CRC still lacks the tag.
            let crc = steadfast_reliable::crc::crc32c(&g[..36]);
            g[36..40].copy_from_slice(&crc.to_le_bytes());
            assert!(parse_probe(&g, &key).is_none_or(|p| !p.authentic), "byte {i}");
        }
        assert!(parse_probe(&f[..39], &key).is_none());
    }
}

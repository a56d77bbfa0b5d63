//! A path that also reaches processes outside this process's world: the worlds that
//! `MPI_Comm_spawn` starts at run time and their parents.
//!
//! The engine addresses peers by a local index: `0..world` are the world's ranks, served by
//! the path built at start-up; indices from `world` on are processes of other worlds of the
//! job, added as they become known, served by one TCP path whose peers are job-wide process
//! indices. A process of another world may send before this one has added it (a child
//! talks to its parents as soon as it starts, while a parent learns of the children only
//! when the spawn call returns there): such packets are held, in order, until it is added.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::tcp::TcpPath;
use crate::{PacketSink, Path, PathCounters, PathError, RawHeader, SendStatus, HDR_LEN};

/// How long one wait sleeps on the start-up path before looking at the bridge again: the
/// two cannot be waited on together (a futex and sockets), so traffic between worlds is
/// noticed within this time when the process sleeps.
const SLICE: Duration = Duration::from_millis(1);

/// Packets from processes not added yet: at most this many bytes are held, past which the
/// oldest are dropped (a sender that is never added is a bug or a stranger with the key).
const HELD_MAX_BYTES: usize = 64 << 20;

/// The start-up path plus a TCP path to processes of other worlds.
pub struct Bridged {
    inner: Option<Box<dyn Path>>,
    /// Local indices below this are the inner path's.
    world: u32,
    tcp: TcpPath,
    /// Job-wide index of local index `world + i`.
    remote: Vec<u32>,
    /// Local index of each added job-wide index.
    local: HashMap<u32, u32>,
    held: VecDeque<(u32, RawHeader, Vec<u8>)>,
    held_bytes: usize,
}

impl Bridged {
    /// Wraps `inner` (serving local indices `0..world`); `tcp` listens for the processes
    /// of other worlds and is indexed by job-wide process index.
    pub fn new(inner: Option<Box<dyn Path>>, world: u32, mut tcp: TcpPath) -> Bridged {
        tcp.accept_ranks_below(u32::MAX / 2);
        Bridged { inner, world, tcp, remote: Vec::new(), local: HashMap::new(), held: VecDeque::new(), held_bytes: 0 }
    }

    /// Adds the process with job-wide index `proc_index`, which listens at `contact`
    /// ([`TcpPath::contact`]); returns its local index (the same one if already added).
    pub fn add_peer(&mut self, proc_index: u32, contact: &str) -> Result<u32, PathError> {
        if let Some(&l) = self.local.get(&proc_index) {
            return Ok(l);
        }
        self.tcp.set_peer_contact(proc_index, contact)?;
        let l = self.world + self.remote.len() as u32;
        self.remote.push(proc_index);
        self.local.insert(proc_index, l);
        Ok(l)
    }

    /// Processes that sent packets but are not added yet (a process of another world that
    /// connects through a port or a socket: nobody told this one about it beforehand).
    pub fn strangers(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.held.iter().map(|(p, _, _)| *p).filter(|p| !self.local.contains_key(p)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Local index of job-wide index `proc_index`, if added.
    pub fn local_of(&self, proc_index: u32) -> Option<u32> {
        self.local.get(&proc_index).copied()
    }

    fn remote_of(&self, peer: u32) -> Result<u32, PathError> {
        peer.checked_sub(self.world)
            .and_then(|i| self.remote.get(i as usize).copied())
            .ok_or_else(|| PathError::Config(format!("no path to process {peer}")))
    }

    fn inner(&mut self) -> Result<&mut Box<dyn Path>, PathError> {
        self.inner.as_mut().ok_or_else(|| PathError::Config("no path within the world".into()))
    }
}

/// Hands the bridge's packets on under local indices; holds those of processes not added.
struct Renumber<'a> {
    sink: &'a mut dyn PacketSink,
    local: &'a HashMap<u32, u32>,
    held: &'a mut VecDeque<(u32, RawHeader, Vec<u8>)>,
    held_bytes: &'a mut usize,
    delivered: usize,
}

impl PacketSink for Renumber<'_> {
    fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) {
        match self.local.get(&peer) {
            Some(&l) => {
                self.delivered += 1;
                self.sink.packet(l, hdr, payload)
            }
            None => {
                *self.held_bytes += HDR_LEN + payload.len();
                self.held.push_back((peer, *hdr, payload.to_vec()));
                while *self.held_bytes > HELD_MAX_BYTES {
                    match self.held.pop_front() {
                        Some((_, _, p)) => *self.held_bytes -= HDR_LEN + p.len(),
                        None => break,
                    }
                }
            }
        }
    }

    fn wants_more(&self) -> bool {
        self.sink.wants_more()
    }
}

impl Path for Bridged {
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        if peer < self.world {
            return self.inner()?.send(peer, hdr, payload);
        }
        let r = self.remote_of(peer)?;
        self.tcp.send(r, hdr, payload)
    }

    unsafe fn send_held(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        if peer < self.world {
            // SAFETY: the caller's promise is passed on unchanged.
            return unsafe { self.inner()?.send_held(peer, hdr, payload) };
        }
        let r = self.remote_of(peer)?;
        // SAFETY: as above.
        unsafe { self.tcp.send_held(r, hdr, payload) }
    }

    fn room(&self, peer: u32) -> usize {
        if peer < self.world {
            return self.inner.as_ref().map_or(0, |p| p.room(peer));
        }
        self.remote_of(peer).map_or(0, |r| self.tcp.room(r))
    }

    fn set_awaiting(&self, peer: Option<u32>) {
        if let Some(p) = self.inner.as_ref() {
            p.set_awaiting(peer.filter(|&w| w < self.world));
        }
    }

    fn set_off_cpu(&self, off: bool) {
        if let Some(p) = self.inner.as_ref() {
            p.set_off_cpu(off);
        }
    }

    fn peer_sends_soon(&mut self, peer: u32) -> bool {
        peer < self.world && self.inner.as_mut().is_some_and(|p| p.peer_sends_soon(peer))
    }

    fn holds_references(&self, peer: u32) -> bool {
        if peer < self.world {
            return self.inner.as_ref().is_some_and(|p| p.holds_references(peer));
        }
        self.remote_of(peer).is_ok_and(|r| self.tcp.holds_references(r))
    }

    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError> {
        let mut n = match self.inner.as_mut() {
            Some(p) => p.poll(sink)?,
            None => 0,
        };
        // Held packets of processes added since go first, in their order of arrival.
        if !self.held.is_empty() {
            let mut keep = VecDeque::new();
            while let Some((from, hdr, payload)) = self.held.pop_front() {
                match self.local.get(&from) {
                    Some(&l) => {
                        self.held_bytes -= HDR_LEN + payload.len();
                        sink.packet(l, &hdr, &payload);
                        n += 1;
                    }
                    None => keep.push_back((from, hdr, payload)),
                }
            }
            self.held = keep;
        }
        let mut r = Renumber { sink, local: &self.local, held: &mut self.held, held_bytes: &mut self.held_bytes, delivered: 0 };
        self.tcp.poll(&mut r)?;
        Ok(n + r.delivered)
    }

    fn max_payload(&self) -> usize {
        let tcp = self.tcp.max_payload();
        self.inner.as_ref().map_or(tcp, |p| p.max_payload().min(tcp))
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), PathError> {
        if self.held.iter().any(|(from, _, _)| self.local.contains_key(from)) {
            return Ok(());
        }
        match self.inner.as_mut() {
            Some(p) => p.wait(timeout.min(SLICE)),
            None => self.tcp.wait(timeout),
        }
    }

    fn backlog(&self) -> usize {
        self.inner.as_ref().map_or(0, |p| p.backlog()) + self.tcp.backlog()
    }

    fn counters(&self) -> PathCounters {
        let mut c = self.inner.as_ref().map(|p| p.counters()).unwrap_or_default();
        c.add(&self.tcp.counters());
        c
    }

    fn counters_by_path(&self) -> Vec<(&'static str, PathCounters)> {
        let mut v = self.inner.as_ref().map(|p| p.counters_by_path()).unwrap_or_default();
        match v.iter_mut().find(|(n, _)| *n == "tcp") {
            Some((_, c)) => c.add(&self.tcp.counters()),
            None => v.push(("tcp", self.tcp.counters())),
        }
        v
    }

    fn needs_linger(&self) -> bool {
        self.inner.as_ref().is_some_and(|p| p.needs_linger())
    }

    fn peer_failed(&mut self, peer: u32) {
        if peer < self.world {
            if let Some(p) = self.inner.as_mut() {
                p.peer_failed(peer);
            }
        } else if let Ok(r) = self.remote_of(peer) {
            self.tcp.peer_failed(r);
        }
    }

    fn peer_rejoined(&mut self, peer: u32, ex: &mut dyn crate::setup::Exchange) -> Result<(), PathError> {
        if peer < self.world {
            return self.inner()?.peer_rejoined(peer, ex);
        }
        Err(PathError::Config(format!("process {peer} of another world cannot rejoin")))
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn stats_detail(&self) -> Vec<String> {
        let mut v = self.inner.as_ref().map(|p| p.stats_detail()).unwrap_or_default();
        v.push(format!("other worlds (tcp): {} processes, {}", self.remote.len(), self.tcp.counters()));
        v
    }
}

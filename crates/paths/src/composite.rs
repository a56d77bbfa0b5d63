//! Per-peer path selection: one path object that sends each peer's packets on the path
//! chosen for that peer (shared memory to ranks on this host, UDP or TCP to the others).
//!
//! Order between two ranks is kept because each pair uses exactly one path.

use std::time::Duration;

use crate::{PacketSink, Path, PathCounters, PathError, RawHeader, SendStatus};

/// Longest sleep on one sub-path while another may receive: a packet on the other one
/// waits at most this long when the rank is idle (it is found at once while spinning).
const SLICE: Duration = Duration::from_millis(1);

/// Several paths, each serving a set of peers.
pub struct CompositePath {
    parts: Vec<(&'static str, Box<dyn Path>)>,
    /// Index into `parts` for each peer (`None`: this rank itself or unreachable).
    via: Vec<Option<usize>>,
    max_payload: usize,
}

impl CompositePath {
    /// Combines `parts` (named for the report); `via[peer]` picks the part for `peer`.
    pub fn new(parts: Vec<(&'static str, Box<dyn Path>)>, via: Vec<Option<usize>>) -> Result<CompositePath, PathError> {
        if via.iter().flatten().any(|&i| i >= parts.len()) {
            return Err(PathError::Config("peer mapped to a missing path".into()));
        }
        let max_payload = parts.iter().map(|(_, p)| p.max_payload()).min().unwrap_or(1 << 20);
        Ok(CompositePath { parts, via, max_payload })
    }

    /// Name of the path serving `peer`.
    pub fn path_of(&self, peer: u32) -> Option<&'static str> {
        self.via.get(peer as usize).copied().flatten().map(|i| self.parts[i].0)
    }

    fn part(&mut self, peer: u32) -> Result<&mut Box<dyn Path>, PathError> {
        match self.via.get(peer as usize).copied().flatten() {
            Some(i) => Ok(&mut self.parts[i].1),
            None => Err(PathError::Config(format!("no path to rank {peer}"))),
        }
    }
}

impl Path for CompositePath {
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        self.part(peer)?.send(peer, hdr, payload)
    }

    unsafe fn send_held(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        // SAFETY: the caller's promise is passed on unchanged.
        unsafe { self.part(peer)?.send_held(peer, hdr, payload) }
    }

    fn holds_references(&self, peer: u32) -> bool {
        match self.via.get(peer as usize).copied().flatten() {
            Some(i) => self.parts[i].1.holds_references(peer),
            None => false,
        }
    }

    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError> {
        let mut n = 0;
        for (_, p) in self.parts.iter_mut() {
            n += p.poll(sink)?;
        }
        Ok(n)
    }

    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), PathError> {
        match self.parts.as_mut_slice() {
            [] => Ok(()),
            [(_, p)] => p.wait(timeout),
            // Sleep on the first part (shared memory when present: the latency-critical
            // one, woken by a futex) in short slices so the others are polled too.
            [(_, first), ..] => first.wait(timeout.min(SLICE)),
        }
    }

    fn wait_unless(&mut self, timeout: Duration, ready: &mut dyn FnMut() -> bool) -> Result<(), PathError> {
        match self.parts.as_mut_slice() {
            [] => Ok(()),
            [(_, p)] => p.wait_unless(timeout, ready),
            [(_, first), ..] => first.wait_unless(timeout.min(SLICE), ready),
        }
    }

    fn stream_piece(&self, peer: u32, len: usize) -> usize {
        match self.via.get(peer as usize).copied().flatten() {
            Some(i) => self.parts[i].1.stream_piece(peer, len).min(self.max_payload),
            None => self.max_payload,
        }
    }

    fn room(&self, peer: u32) -> usize {
        match self.via.get(peer as usize).copied().flatten() {
            Some(i) => self.parts[i].1.room(peer),
            None => 0,
        }
    }

    fn set_awaiting(&self, peer: Option<u32>) {
        for (_, p) in &self.parts {
            p.set_awaiting(peer);
        }
    }

    fn set_off_cpu(&self, off: bool) {
        for (_, p) in &self.parts {
            p.set_off_cpu(off);
        }
    }

    fn peer_sends_soon(&mut self, peer: u32) -> bool {
        self.part(peer).is_ok_and(|p| p.peer_sends_soon(peer))
    }

    fn backlog(&self) -> usize {
        self.parts.iter().map(|(_, p)| p.backlog()).sum()
    }

    fn counters(&self) -> PathCounters {
        let mut c = PathCounters::default();
        for (_, p) in &self.parts {
            c.add(&p.counters());
        }
        c
    }

    fn counters_by_path(&self) -> Vec<(&'static str, PathCounters)> {
        self.parts.iter().flat_map(|(_, p)| p.counters_by_path()).collect()
    }

    fn peer_failed(&mut self, peer: u32) {
        if let Ok(p) = self.part(peer) {
            p.peer_failed(peer);
        }
    }

    fn peer_rejoined(&mut self, peer: u32, ex: &mut dyn crate::setup::Exchange) -> Result<(), PathError> {
        self.part(peer)?.peer_rejoined(peer, ex)
    }

    fn needs_linger(&self) -> bool {
        self.parts.iter().any(|(_, p)| p.needs_linger())
    }

    fn stats_detail(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, p) in &self.parts {
            if self.parts.len() > 1 {
                out.push(format!("{name}: {}", p.counters()));
            }
            out.extend(p.stats_detail().into_iter().map(|l| format!("{name}: {l}")));
        }
        out
    }
}

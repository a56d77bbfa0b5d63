//! Seeded fault injection for any path (`STEADFAST_FAULTS`), after smoltcp's
//! `phy/fault_injector.rs`.
//!
//! One variable configures it, for example
//! `STEADFAST_FAULTS="path=udp,drop=0.01,dup=0.01,reorder=0.05,corrupt=0.001,bus=0.0001,seed=7"`:
//!
//! | key | meaning |
//! |---|---|
//! | `path` | `shm`, `tcp` or `udp`: the path whose traffic is damaged (default: every path) |
//! | `drop` | probability that a frame is not sent |
//! | `dup` | probability that a frame is sent twice |
//! | `reorder` | probability that a frame is held back and sent after 1–3 later ones |
//! | `corrupt` | probability that 1–3 bits of a frame are flipped on the wire, after the sender computed its checksum (on tcp anywhere in the frame, length word included; on shm header and payload of a record) |
//! | `bus` | probability that one bit of a received frame is flipped in the receiver's memory, after the wire and the kernel's checks and before the end-to-end check (an I/O bus or NIC DMA error; on tcp anywhere in the frame) |
//! | `seed` | seed of the generator (default 1); each rank mixes in its rank, so runs are deterministic per rank |
//! | `after` | number of frames each rank sends before faults start (default 0) |
//!
//! On udp every frame goes through the injector: data and acknowledgments alike.
//! `drop`, `dup` and `reorder` need a path that can lose frames (udp); on shm and tcp,
//! whose transport neither loses nor reorders, only `corrupt` and `bus` apply (others are
//! refused with a warning); the receiver detects the damage and the sender resends from
//! the copy it keeps. On tcp they hit every frame (data frames, their resent copies,
//! acknowledgments and the sync frames that carry repair requests and answers) anywhere
//! in it, the length word included, with checksums on (with `STEADFAST_CHECKSUM=tcp=none`
//! only header and payload, since nothing would find the frame boundaries again). On shm
//! they hit the records and their rewritten copies; the repair request there is a word in
//! shared memory, not a message that crosses a wire.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use crate::reliable::{Wire, WireSend};
use crate::{PathCounters, PathError};

/// What `STEADFAST_FAULTS` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    /// Path the faults apply to (`None` = every path).
    pub path: Option<String>,
    pub drop: f64,
    pub dup: f64,
    pub reorder: f64,
    pub corrupt: f64,
    pub bus: f64,
    pub seed: u64,
    /// Frames sent before faults start.
    pub after: u64,
}

impl Default for FaultSpec {
    fn default() -> Self {
        FaultSpec { path: None, drop: 0.0, dup: 0.0, reorder: 0.0, corrupt: 0.0, bus: 0.0, seed: 1, after: 0 }
    }
}

impl FaultSpec {
    /// Parses `key=value,key=value…`.
    pub fn parse(s: &str) -> Result<FaultSpec, PathError> {
        let mut f = FaultSpec::default();
        let bad = |why: String| PathError::Config(format!("STEADFAST_FAULTS={s:?}: {why}"));
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| bad(format!("{item:?} is not key=value")))?;
            let (k, v) = (k.trim(), v.trim());
            let prob = || -> Result<f64, PathError> {
                let p: f64 = v.parse().map_err(|_| bad(format!("{k}={v:?} is not a number")))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(bad(format!("{k}={v} is not a probability in [0, 1]")));
                }
                Ok(p)
            };
            match k {
                "path" => {
                    if !crate::checksum::PATH_NAMES.contains(&v) {
                        return Err(bad(format!("unknown path {v:?} (shm, tcp, udp)")));
                    }
                    f.path = Some(v.to_owned());
                }
                "drop" => f.drop = prob()?,
                "dup" => f.dup = prob()?,
                "reorder" => f.reorder = prob()?,
                "corrupt" => f.corrupt = prob()?,
                "bus" => f.bus = prob()?,
                "seed" => f.seed = v.parse().map_err(|_| bad(format!("seed={v:?} is not an integer")))?,
                "after" => f.after = v.parse().map_err(|_| bad(format!("after={v:?} is not an integer")))?,
                _ => return Err(bad(format!("unknown key {k:?}"))),
            }
        }
        Ok(f)
    }

    /// The spec from the environment, if set and non-empty.
    pub fn from_env() -> Result<Option<FaultSpec>, PathError> {
        match steadfast_config::lookup("STEADFAST_FAULTS") {
            Some(v) if !v.trim().is_empty() => FaultSpec::parse(&v).map(Some),
            _ => Ok(None),
        }
    }

    /// Whether the faults apply to `path`.
    pub fn applies_to(&self, path: &str) -> bool {
        self.path.as_deref().is_none_or(|p| p == path)
    }

    /// The spec restricted to what a path that neither loses nor reorders can see
    /// (`corrupt`, `bus`); warns once about what was left out.
    pub fn damage_only(&self, path: &str) -> FaultSpec {
        if self.drop > 0.0 || self.dup > 0.0 || self.reorder > 0.0 {
            eprintln!(
                "steadfast: STEADFAST_FAULTS: drop/dup/reorder need a path that retransmits (udp); \
                 only corrupt and bus are injected on {path}"
            );
        }
        FaultSpec { drop: 0.0, dup: 0.0, reorder: 0.0, ..self.clone() }
    }

    /// True if no fault has a non-zero probability.
    pub fn is_empty(&self) -> bool {
        self.drop == 0.0 && self.dup == 0.0 && self.reorder == 0.0 && self.corrupt == 0.0 && self.bus == 0.0
    }
}

/// SplitMix64: small, fast, and the same sequence on every platform.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Decisions and counts of one rank's injector.
#[derive(Debug, Clone)]
pub struct Injector {
    spec: FaultSpec,
    rng: Rng,
    sent: u64,
    /// What was injected (the `injected_*` fields).
    pub counts: PathCounters,
}

impl Injector {
    /// An injector for `rank` (the rank is mixed into the seed).
    pub fn new(spec: FaultSpec, rank: u32) -> Injector {
        let mut mix = Rng(spec.seed ^ (u64::from(rank) << 32 | 0x5EED));
        let seed = mix.next();
        Injector { spec, rng: Rng(seed), sent: 0, counts: PathCounters::default() }
    }

    /// The configuration.
    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    fn roll(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.unit() < p
    }

    /// Counts one outgoing frame; false while faults have not started (`after`).
    fn armed(&mut self) -> bool {
        self.sent += 1;
        self.sent > self.spec.after
    }

    fn flip(&mut self, buf: &mut [u8], from: usize) {
        if buf.is_empty() {
            return;
        }
        let from = if from < buf.len() { from } else { 0 };
        let i = from + self.rng.below(buf.len() - from);
        buf[i] ^= 1 << self.rng.below(8);
    }

    /// Send side of a path without retransmission: maybe damage the frame in `buf` (it
    /// already carries its checksum). Returns true if it did.
    pub fn corrupt_outgoing(&mut self, buf: &mut [u8]) -> bool {
        if !self.armed() || !self.roll(self.spec.corrupt) {
            return false;
        }
        let n = 1 + self.rng.below(3);
        for _ in 0..n {
            self.flip(buf, 0);
        }
        self.counts.injected_corrupt += 1;
        true
    }

    /// Whether the next outgoing frame will be damaged (so the caller can make a private
    /// copy first); follow with [`Injector::damage`] on that copy.
    pub fn will_corrupt(&mut self) -> bool {
        self.armed() && self.roll(self.spec.corrupt)
    }

    /// Flips 1–3 bits of `buf` and counts one corrupted frame.
    pub fn damage(&mut self, buf: &mut [u8]) {
        let n = 1 + self.rng.below(3);
        for _ in 0..n {
            self.flip(buf, 0);
        }
        self.counts.injected_corrupt += 1;
    }

    /// Receive side of a stream (tcp), once per frame of `len` bytes: maybe pick the byte
    /// of it (anywhere: length word, checksums, header, payload) whose bit a bus error
    /// flips; flip it with [`Injector::flip_bit`]. Counts one bus error when it does.
    pub fn bus_roll(&mut self, len: usize) -> Option<usize> {
        if len == 0 || self.sent < self.spec.after || !self.roll(self.spec.bus) {
            return None;
        }
        self.counts.injected_bus += 1;
        Some(self.rng.below(len))
    }

    /// Flips one bit of `b`, chosen by the generator.
    pub fn flip_bit(&mut self, b: &mut u8) {
        *b ^= 1 << self.rng.below(8);
    }

    /// Receive side: maybe flip one bit of a received frame in memory, preferring bytes
    /// at or after `payload_from` (the payload). Returns true if it did.
    pub fn bus_error(&mut self, buf: &mut [u8], payload_from: usize) -> bool {
        if self.sent < self.spec.after || !self.roll(self.spec.bus) {
            return false;
        }
        self.flip(buf, payload_from);
        self.counts.injected_bus += 1;
        true
    }
}

/// A frame held back by the reorder fault.
struct Held {
    peer: u32,
    route: u8,
    frame: Vec<u8>,
    /// Later frames to send before this one.
    after: u32,
    /// Polls survived without a later frame (released after 2: never stranded).
    ticks: u32,
}

/// A [`Wire`] that damages, drops, duplicates and reorders frames on their way out and
/// flips bits in received ones, as configured.
pub struct FaultyWire<W: Wire> {
    inner: W,
    inj: Injector,
    held: VecDeque<Held>,
}

impl<W: Wire> FaultyWire<W> {
    /// Wraps `inner`.
    pub fn new(inner: W, inj: Injector) -> FaultyWire<W> {
        FaultyWire { inner, inj, held: VecDeque::new() }
    }

    /// The wrapped wire.
    pub fn inner(&self) -> &W {
        &self.inner
    }

    /// The wrapped wire, mutably.
    pub fn inner_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    fn release_due(&mut self, force: bool) {
        let mut i = 0;
        while i < self.held.len() {
            let h = &self.held[i];
            if force || h.after == 0 || h.ticks >= 2 {
                if let Some(h) = self.held.remove(i) {
                    // A reordered frame that finds the socket full is simply lost (the
                    // channel resends it), like a late frame overrun on a real wire.
                    let _ = self.inner.send(h.peer, h.route, &h.frame, &[]);
                }
            } else {
                i += 1;
            }
        }
    }
}

impl<W: Wire> Wire for FaultyWire<W> {
    fn routes(&self, peer: u32) -> u8 {
        self.inner.routes(peer)
    }

    fn set_peer(&mut self, peer: u32, published: &str) -> Result<(), PathError> {
        // Held (reordered) frames for the peer's old endpoints are lost with them.
        self.held.retain(|h| h.peer != peer);
        self.inner.set_peer(peer, published)
    }

    fn send(&mut self, peer: u32, route: u8, header: &[u8], payload: &[u8]) -> WireSend {
        if !self.inj.armed() {
            return self.inner.send(peer, route, header, payload);
        }
        for h in self.held.iter_mut() {
            h.after = h.after.saturating_sub(1);
        }
        let spec = self.inj.spec.clone();
        if self.inj.roll(spec.drop) {
            self.inj.counts.injected_drop += 1;
            self.release_due(false);
            return WireSend::Sent;
        }
        let corrupt = self.inj.roll(spec.corrupt);
        let dup = self.inj.roll(spec.dup);
        let reorder = self.inj.roll(spec.reorder);
        let mut owned = None;
        if corrupt || reorder {
            let mut f = Vec::with_capacity(header.len() + payload.len());
            f.extend_from_slice(header);
            f.extend_from_slice(payload);
            if corrupt {
                self.inj.damage(&mut f);
            }
            owned = Some(f);
        }
        if reorder {
            self.inj.counts.injected_reorder += 1;
            let after = 1 + self.inj.rng.below(3) as u32;
            let frame = owned.unwrap_or_default();
            if dup {
                // The duplicate goes now, the original later.
                self.inj.counts.injected_dup += 1;
                let _ = self.inner.send(peer, route, &frame, &[]);
            }
            self.held.push_back(Held { peer, route, frame, after, ticks: 0 });
            return WireSend::Sent;
        }
        let r = match &owned {
            Some(f) => self.inner.send(peer, route, f, &[]),
            None => self.inner.send(peer, route, header, payload),
        };
        if dup && matches!(r, WireSend::Sent) {
            self.inj.counts.injected_dup += 1;
            let _ = match &owned {
                Some(f) => self.inner.send(peer, route, f, &[]),
                None => self.inner.send(peer, route, header, payload),
            };
        }
        self.release_due(false);
        r
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let got = self.inner.recv(buf)?;
        if let Some(n) = got {
            let from = steadfast_reliable::frame::HEADER_LEN;
            self.inj.bus_error(&mut buf[..n], from);
        }
        Ok(got)
    }

    fn wait(&mut self, timeout: Duration, want_write: bool) {
        let t = if self.held.is_empty() { timeout } else { timeout.min(Duration::from_millis(1)) };
        self.inner.wait(t, want_write)
    }

    fn tick(&mut self) {
        for h in self.held.iter_mut() {
            h.ticks += 1;
        }
        self.release_due(false);
        self.inner.tick();
    }

    fn pending(&self) -> usize {
        self.held.len() + self.inner.pending()
    }

    fn add_counters(&self, c: &mut PathCounters) {
        let i = &self.inj.counts;
        c.injected_drop += i.injected_drop;
        c.injected_dup += i.injected_dup;
        c.injected_reorder += i.injected_reorder;
        c.injected_corrupt += i.injected_corrupt;
        c.injected_bus += i.injected_bus;
        self.inner.add_counters(c);
    }

    fn describe(&self) -> Vec<String> {
        self.inner.describe()
    }

    fn route_label(&self, peer: u32, route: u8) -> String {
        self.inner.route_label(peer, route)
    }
}

impl<W: Wire> Drop for FaultyWire<W> {
    fn drop(&mut self) {
        self.release_due(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let f = FaultSpec::parse("path=udp,drop=0.01,dup=0.01,reorder=0.05,corrupt=0.001,bus=0.0001,seed=7").unwrap();
        assert_eq!(f.path.as_deref(), Some("udp"));
        assert_eq!((f.drop, f.dup, f.reorder, f.corrupt, f.bus, f.seed), (0.01, 0.01, 0.05, 0.001, 0.0001, 7));
        assert!(f.applies_to("udp") && !f.applies_to("shm"));
        assert!(FaultSpec::parse("drop=2").is_err());
        assert!(FaultSpec::parse("path=eth").is_err());
        assert!(FaultSpec::parse("loss=0.1").is_err());
        assert!(FaultSpec::parse("drop").is_err());
        assert!(FaultSpec::parse("").unwrap().is_empty());
    }

    #[test]
    fn same_seed_and_rank_same_decisions_other_rank_differs() {
        let spec = FaultSpec { corrupt: 0.3, ..FaultSpec::default() };
        let run = |rank| {
            let mut inj = Injector::new(spec.clone(), rank);
            (0..200).map(|_| inj.will_corrupt()).collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
        let hits = run(3).iter().filter(|&&b| b).count();
        assert!((30..90).contains(&hits), "{hits} of 200 at p=0.3");
    }

    #[test]
    fn bus_error_flips_exactly_one_bit_in_the_payload() {
        let spec = FaultSpec { bus: 1.0, ..FaultSpec::default() };
        let mut inj = Injector::new(spec, 0);
        let orig = vec![0u8; 300];
        let mut b = orig.clone();
        assert!(inj.bus_error(&mut b, 104));
        let diff: u32 = b.iter().zip(&orig).map(|(x, y)| (x ^ y).count_ones()).sum();
        assert_eq!(diff, 1);
        assert!(b[..104].iter().all(|&x| x == 0));
        assert_eq!(inj.counts.injected_bus, 1);
    }
}

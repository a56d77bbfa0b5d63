//! Cached or streaming stores for large shm ring records, chosen from the measured speed of
//! the copy (`STEADFAST_SHM_STORES`).
//!
//! A record written with ordinary stores stays in the sender's cache, and the receiver
//! takes its lines from there; the sender takes them back, a lap of the ring later, when
//! it writes the next records. Where the two CPUs exchange lines quickly this is the
//! fastest way through memory (1 MiB ping-pong in 38-54 µs on an AMD EPYC Zen 4 guest).
//! But a machine can put a process's CPUs far apart: that guest, for whole runs, moved
//! lines between its two CPUs about ten times slower, and 1 MiB took 270-600 µs. Streaming
//! (non-temporal) stores send the record to memory instead, without reading its lines for
//! ownership first, and the receiver reads it from memory: 75-90 µs in either state.
//!
//! So the sender times its cached copies of large records. Two slow ones in a row (below
//! [`SLOW_BYTES_PER_NS`]) start a run of streamed records; after the run one record is
//! copied cached again as a probe. A slow probe starts a run twice as long (up to
//! [`MAX_RUN`], so that probes cost little while the state lasts); a fast one ends
//! streaming. One slow copy alone (the process preempted in the middle of it, pages
//! touched for the first time) does not switch. The choice is a state machine fed with
//! sizes and durations; the path does the timing.

/// Records from this many payload bytes are timed and may be streamed: a copy this long
/// (microseconds) dwarfs the clock reads, and smaller records stay hot in the caches.
pub const MIN_BYTES: usize = 64 << 10;

/// A cached copy below this speed (bytes per nanosecond, i.e. GB/s) counts as slow.
/// Measured on the Zen 4 guest, 256 KiB records: 20-60 GB/s in the fast state, 2-5 in the
/// slow one.
pub const SLOW_BYTES_PER_NS: u64 = 8;

/// Streamed records after the first switch, before the first probe.
pub const FIRST_RUN: u32 = 16;

/// Longest run of streamed records between two probes.
pub const MAX_RUN: u32 = 512;

/// `STEADFAST_SHM_STORES`: how large ring records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreSetting {
    /// Choose from the measured copy speed (the default).
    Auto,
    /// Always ordinary stores.
    Cached,
    /// Always streaming stores (for records of [`MIN_BYTES`] or more).
    Streaming,
}

impl StoreSetting {
    /// Parses a `STEADFAST_SHM_STORES` value (`None` = unset).
    pub fn parse(value: Option<&str>) -> Result<StoreSetting, String> {
        match value.map(str::trim).unwrap_or("") {
            "" | "auto" => Ok(StoreSetting::Auto),
            "cached" => Ok(StoreSetting::Cached),
            "streaming" => Ok(StoreSetting::Streaming),
            _ => Err("expected auto, cached or streaming".to_owned()),
        }
    }
}

/// The choice for one sending rank (the state is the machine's, not a peer's).
#[derive(Debug, Clone)]
pub struct StoreChoice {
    setting: StoreSetting,
    /// Slow cached copies in a row.
    slow_in_row: u32,
    /// Records still to stream in the current run.
    streaming_left: u32,
    /// Length of the next run.
    next_run: u32,
    /// The next cached copy is the probe after a run.
    probing: bool,
    /// Records streamed so far.
    pub streamed: u64,
    /// Runs started so far.
    pub runs: u64,
}

impl StoreChoice {
    pub fn new(setting: StoreSetting) -> StoreChoice {
        StoreChoice { setting, slow_in_row: 0, streaming_left: 0, next_run: FIRST_RUN, probing: false, streamed: 0, runs: 0 }
    }

    /// Whether to stream a record of `bytes` payload bytes. The sender reports a streamed
    /// record with [`StoreChoice::streamed_one`]; a cached one that is [`StoreChoice::timed`]
    /// with [`StoreChoice::cached_copy_took`].
    pub fn stream(&self, bytes: usize) -> bool {
        bytes >= MIN_BYTES
            && match self.setting {
                StoreSetting::Cached => false,
                StoreSetting::Streaming => true,
                StoreSetting::Auto => self.streaming_left > 0,
            }
    }

    /// A record was streamed.
    pub fn streamed_one(&mut self) {
        self.streamed += 1;
        if self.streaming_left > 0 {
            self.streaming_left -= 1;
            self.probing = self.streaming_left == 0;
        }
    }

    /// Whether a cached copy of `bytes` payload bytes is to be timed.
    pub fn timed(&self, bytes: usize) -> bool {
        bytes >= MIN_BYTES && self.setting == StoreSetting::Auto
    }

    /// A timed cached copy of `bytes` took `nanos`.
    pub fn cached_copy_took(&mut self, bytes: usize, nanos: u64) {
        let slow = (bytes as u64) < nanos.saturating_mul(SLOW_BYTES_PER_NS);
        if !slow {
            self.slow_in_row = 0;
            self.next_run = FIRST_RUN;
            self.probing = false;
            return;
        }
        self.slow_in_row += 1;
        if self.probing || self.slow_in_row >= 2 {
            self.streaming_left = self.next_run;
            self.next_run = (self.next_run * 2).min(MAX_RUN);
            self.slow_in_row = 0;
            self.probing = false;
            self.runs += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: usize = 256 << 10;
    const FAST: u64 = 6_000; // 256 KiB in 6 µs: 44 GB/s
    const SLOW: u64 = 80_000; // 3.3 GB/s

    /// Sends `n` records whose cached copies take `nanos`; returns how many were streamed.
    fn send(c: &mut StoreChoice, n: u32, nanos: u64) -> u32 {
        let mut streamed = 0;
        for _ in 0..n {
            if c.stream(BIG) {
                c.streamed_one();
                streamed += 1;
            } else if c.timed(BIG) {
                c.cached_copy_took(BIG, nanos);
            }
        }
        streamed
    }

    #[test]
    fn fast_copies_never_stream_and_small_records_are_not_timed() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        assert_eq!(send(&mut c, 1000, FAST), 0);
        assert!(!c.timed(MIN_BYTES - 1));
        assert!(!c.stream(MIN_BYTES - 1));
    }

    #[test]
    fn one_slow_copy_alone_does_not_switch() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        for _ in 0..100 {
            assert_eq!(send(&mut c, 1, SLOW) + send(&mut c, 1, FAST), 0);
        }
    }

    #[test]
    fn a_slow_state_streams_with_ever_rarer_probes_and_a_fast_probe_ends_it() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        // Two slow copies, then the first run.
        assert_eq!(send(&mut c, 2, SLOW), 0);
        assert_eq!(send(&mut c, FIRST_RUN, SLOW), FIRST_RUN);
        // Each slow probe starts a run twice as long, up to MAX_RUN.
        let mut run = FIRST_RUN;
        let mut cached = 0;
        let mut streamed = 0;
        for _ in 0..12 {
            run = (run * 2).min(MAX_RUN);
            assert_eq!(send(&mut c, 1, SLOW), 0, "the probe is cached");
            cached += 1;
            assert_eq!(send(&mut c, run, SLOW), run);
            streamed += run;
        }
        assert!(cached * 100 < streamed, "probes {cached} of {streamed}");
        // The state ends: one fast probe, and nothing more is streamed.
        assert_eq!(send(&mut c, 1, FAST), 0);
        assert_eq!(send(&mut c, 1000, FAST), 0);
        // A later slow state starts again with the first run's length.
        assert_eq!(send(&mut c, 2, SLOW), 0);
        assert_eq!(send(&mut c, FIRST_RUN + 1, SLOW), FIRST_RUN);
    }

    #[test]
    fn fixed_settings_ignore_the_clock() {
        let mut c = StoreChoice::new(StoreSetting::Cached);
        assert!(!c.timed(BIG));
        assert_eq!(send(&mut c, 100, SLOW), 0);
        let mut s = StoreChoice::new(StoreSetting::Streaming);
        assert_eq!(send(&mut s, 100, FAST), 100);
        assert!(!s.stream(MIN_BYTES - 1));
    }

    #[test]
    fn settings_parse() {
        assert_eq!(StoreSetting::parse(None), Ok(StoreSetting::Auto));
        assert_eq!(StoreSetting::parse(Some(" cached ")), Ok(StoreSetting::Cached));
        assert_eq!(StoreSetting::parse(Some("streaming")), Ok(StoreSetting::Streaming));
        assert!(StoreSetting::parse(Some("fast")).is_err());
    }
}

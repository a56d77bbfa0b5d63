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
//! So the sender times its copies of large records. Two cached copies in a row below
//! [`SLOW_BYTES_PER_NS`] start a trial: the next [`TRIAL`] records are streamed and timed.
//! Where they ran faster per byte than the two slow cached copies, a run of streamed
//! records follows; after the run one record is copied cached again as a probe, and while
//! it is still slow and slower than the run's copies, the next run is twice as long (up to
//! [`MAX_RUN`], so that probes cost little while the state lasts). Otherwise the sender
//! stays with cached stores and waits longer before its next trial (from [`FIRST_GAP`]
//! large records, doubling to [`MAX_GAP`]): a machine whose streaming stores are slow
//! keeps its cached ones.
//!
//! Measured per 256 KiB record: far-apart CPUs (above) cached 40-72 µs, streamed 8-18.
//! Records that miss every cache anyway, a 1 MiB `MPI_Alltoall` on 4 ranks whose buffers
//! and rings far exceed the caches, cached 28-44 µs, streamed 12-24: there it streams too,
//! and neither gains nor loses (the receivers read from memory what the sender no longer
//! reads for ownership: 1262-2125 µs cached against 1285-1793 streamed over six launches).
//! Where the CPUs are near and the caches hold the records, cached copies run at 9-65 GB/s
//! and no trial starts; streaming would lose there (`MPI_Isend` windows of 1-4 MiB: 30 %
//! less bandwidth). One slow copy alone (the process preempted in the middle of it) does
//! not start a trial. The sender sees only its own side: a slow state in which only the
//! receiver's copies slow down goes unnoticed. The choice is a state machine fed with sizes
//! and durations; the path does the timing.

/// Records from this many payload bytes may be timed and streamed. A message between 16
/// and 256 KiB crosses the ring in pieces of 16 KiB (`shm.rs`, `STREAM_PIECE_MIN`), so
/// from 64 KiB only 1 MiB messages took part: in the far state of an AMD Zen 3 guest,
/// 2-rank ping-pong of 64 and 256 KiB took 15-17 and 50-57 µs cached, 8.9-9.3 and 27
/// with these pieces in the choice (Open MPI 8.4-8.6, 27-28), and streaming bandwidth went
/// from 4.7-4.9 to 9.9-10.6 GB/s at 64 KiB; where the CPUs are near nothing changed (within
/// ±5 %). Smaller records stay hot in the caches.
pub const MIN_BYTES: usize = 16 << 10;

/// Below this many payload bytes one record in [`SAMPLE_EVERY`] is timed (and every one of
/// a trial, and a probe): the two clock reads cost about 60 ns there, 9 % of a 16 KiB
/// copy near the receiver, which timing every record cost the bandwidth (6-12 % at 16-256
/// KiB on the Zen 3 guest).
pub const SAMPLE_BELOW: usize = 64 << 10;

/// See [`SAMPLE_BELOW`].
pub const SAMPLE_EVERY: u32 = 8;

/// A cached copy below this speed (bytes per nanosecond, i.e. GB/s) counts as slow.
/// Measured on the Zen 4 guest, 256 KiB records: 9-65 GB/s where the receiver's CPU is
/// near, 3.6-6.5 where it is far, 6-9 where the records miss the caches.
pub const SLOW_BYTES_PER_NS: u64 = 8;

/// Streaming wins where slow cached copies take more than this many times as long per byte
/// as streamed ones. Not more than 1: a trial is two records, and in the slow state the
/// first streamed records may still find their lines in the other CPU's cache. With 2, no
/// launch of 50 streamed past a trial, and a slow one lost its trial (4 MiB ping-pong
/// 406 µs, against 221-269 where streaming takes over).
pub const RATIO: u64 = 1;

/// Streamed records of a trial.
pub const TRIAL: u32 = 2;

/// Streamed records of the first run, before the first probe.
pub const FIRST_RUN: u32 = 16;

/// Longest run of streamed records between two probes.
pub const MAX_RUN: u32 = 512;

/// Large records after a trial that lost before the next trial; doubles with every loss.
pub const FIRST_GAP: u32 = 64;

/// Longest wait between two trials, in large records.
pub const MAX_GAP: u32 = 4096;

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
    /// Slow cached copies in a row; the last one's nanoseconds and bytes, and the two that
    /// started the current trial's together.
    slow_in_row: u32,
    last_slow: (u64, u64),
    /// Fast cached copies in a row.
    fast_in_row: u32,
    slow_cost: (u64, u64),
    /// Streamed records still to come in the current trial, and in the current run.
    trial_left: u32,
    run_left: u32,
    /// Nanoseconds and bytes of the streamed copies of the current trial or run.
    stream_cost: (u64, u64),
    /// The next cached copy is the probe after a run.
    probing: bool,
    /// Length of the next run.
    next_run: u32,
    /// Large cached records to go before another trial, and the wait after the next loss.
    no_trial_for: u32,
    gap: u32,
    /// Records below [`SAMPLE_BELOW`] considered for timing, for the sampling.
    sampled: u32,
    /// Records streamed so far.
    pub streamed: u64,
    /// Runs started so far.
    pub runs: u64,
}

/// Whether copies of `slow` (nanoseconds, bytes) took more than [`RATIO`] times as long
/// per byte as those of `fast`.
fn ratio_exceeded(slow: (u64, u64), fast: (u64, u64)) -> bool {
    fast.1 > 0 && slow.1 > 0 && u128::from(slow.0) * u128::from(fast.1) > u128::from(RATIO) * u128::from(fast.0) * u128::from(slow.1)
}

impl StoreChoice {
    pub fn new(setting: StoreSetting) -> StoreChoice {
        StoreChoice {
            setting,
            slow_in_row: 0,
            last_slow: (0, 0),
            fast_in_row: 0,
            slow_cost: (0, 0),
            trial_left: 0,
            run_left: 0,
            stream_cost: (0, 0),
            probing: false,
            next_run: FIRST_RUN,
            no_trial_for: 0,
            gap: FIRST_GAP,
            sampled: 0,
            streamed: 0,
            runs: 0,
        }
    }

    /// Whether to stream a record of `bytes` payload bytes. The sender reports every record
    /// of [`MIN_BYTES`] or more with [`StoreChoice::copied`], timed where
    /// [`StoreChoice::timed`] says so.
    pub fn stream(&self, bytes: usize) -> bool {
        bytes >= MIN_BYTES
            && match self.setting {
                StoreSetting::Cached => false,
                StoreSetting::Streaming => true,
                StoreSetting::Auto => self.trial_left > 0 || self.run_left > 0,
            }
    }

    /// Whether the copy of a record of `bytes` payload bytes is to be timed (below
    /// [`SAMPLE_BELOW`] one in [`SAMPLE_EVERY`], but every record of a trial and a probe).
    pub fn timed(&mut self, bytes: usize) -> bool {
        if bytes < MIN_BYTES || self.setting != StoreSetting::Auto {
            return false;
        }
        if bytes >= SAMPLE_BELOW || self.trial_left > 0 || self.probing {
            return true;
        }
        self.sampled = self.sampled.wrapping_add(1);
        self.sampled % SAMPLE_EVERY == 0
    }

    /// A record of `bytes` payload bytes was copied, `streamed` or not, in `nanos`
    /// (`None` where it was not timed: its pages were touched for the first time, or the
    /// setting is fixed).
    pub fn copied(&mut self, bytes: usize, streamed: bool, nanos: Option<u64>) {
        if bytes < MIN_BYTES {
            return;
        }
        self.streamed += u64::from(streamed);
        if self.setting != StoreSetting::Auto {
            return;
        }
        let cost = (nanos.unwrap_or(0), if nanos.is_some() { bytes as u64 } else { 0 });
        if streamed {
            self.stream_cost = (self.stream_cost.0 + cost.0, self.stream_cost.1 + cost.1);
            if self.trial_left > 0 {
                self.trial_left -= 1;
                if self.trial_left == 0 {
                    if ratio_exceeded(self.slow_cost, self.stream_cost) {
                        self.start_run();
                    } else {
                        self.lose();
                    }
                }
            } else if self.run_left > 0 {
                self.run_left -= 1;
                self.probing = self.run_left == 0;
            }
            return;
        }
        let Some(nanos) = nanos else { return };
        let slow = (bytes as u64) < nanos.saturating_mul(SLOW_BYTES_PER_NS);
        if std::mem::take(&mut self.probing) {
            if slow && ratio_exceeded(cost, self.stream_cost) {
                self.start_run();
            } else {
                self.next_run = FIRST_RUN;
                if slow {
                    self.lose();
                } else {
                    self.gap = FIRST_GAP;
                }
            }
            return;
        }
        self.no_trial_for = self.no_trial_for.saturating_sub(1);
        if !slow {
            self.slow_in_row = 0;
            self.last_slow = (0, 0);
            // A long stretch of fast copies: the conditions that lost the trials are gone.
            self.fast_in_row += 1;
            if self.fast_in_row >= FIRST_GAP {
                self.gap = FIRST_GAP;
            }
            return;
        }
        self.fast_in_row = 0;
        self.slow_in_row += 1;
        // The trial compares with the two slow copies just before it.
        let last = std::mem::replace(&mut self.last_slow, cost);
        if self.slow_in_row >= 2 && self.no_trial_for == 0 {
            self.slow_cost = (last.0 + cost.0, last.1 + cost.1);
            self.trial_left = TRIAL;
            self.stream_cost = (0, 0);
        }
    }

    /// Streaming won: a run, each one twice as long as the last.
    fn start_run(&mut self) {
        self.run_left = self.next_run;
        self.next_run = (self.next_run * 2).min(MAX_RUN);
        self.stream_cost = (0, 0);
        self.slow_in_row = 0;
        self.last_slow = (0, 0);
        self.runs += 1;
    }

    /// Streaming lost: cached stores, and a longer wait before the next trial.
    fn lose(&mut self) {
        self.no_trial_for = self.gap;
        self.gap = (self.gap * 2).min(MAX_GAP);
        self.slow_in_row = 0;
        self.last_slow = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: usize = 256 << 10;
    /// 256 KiB copy times, ns: near CPUs; far CPUs; a machine whose streaming stores are
    /// slow, with cached copies slow enough for trials.
    const FAST: u64 = 6_000;
    const FAR_CACHED: u64 = 55_000;
    const FAR_STREAMED: u64 = 13_000;
    const MISS_CACHED: u64 = 36_000;
    const MISS_STREAMED: u64 = 45_000;

    /// Sends `n` records whose cached copies take `cached` ns and streamed ones `streamed`;
    /// returns how many were streamed.
    fn send(c: &mut StoreChoice, n: u32, cached: u64, streamed: u64) -> u32 {
        let mut count = 0;
        for _ in 0..n {
            let s = c.stream(BIG);
            let nanos = if s { streamed } else { cached };
            let timed = c.timed(BIG);
            c.copied(BIG, s, timed.then_some(nanos));
            count += u32::from(s);
        }
        count
    }

    #[test]
    fn pieces_below_the_sample_size_are_timed_one_in_eight_and_stream_where_far() {
        const PIECE: usize = 16 << 10;
        let mut c = StoreChoice::new(StoreSetting::Auto);
        let timed = (0..64).filter(|_| c.timed(PIECE)).count();
        assert_eq!(timed, 64 / SAMPLE_EVERY as usize);
        // Far CPUs, 16 KiB pieces: cached 3.4 µs (4.8 GB/s), streamed 1.2 µs.
        let mut c = StoreChoice::new(StoreSetting::Auto);
        let mut streamed = 0;
        for _ in 0..4000 {
            let s = c.stream(PIECE);
            let timed = c.timed(PIECE);
            c.copied(PIECE, s, timed.then_some(if s { 1_200 } else { 3_400 }));
            streamed += u32::from(s);
        }
        assert!(streamed > 3000, "{streamed}");
    }

    #[test]
    fn fast_copies_never_stream_and_small_records_are_not_timed() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        assert_eq!(send(&mut c, 1000, FAST, FAR_STREAMED), 0);
        assert!(!c.timed(MIN_BYTES - 1));
        assert!(!c.stream(MIN_BYTES - 1));
    }

    #[test]
    fn one_slow_copy_alone_does_not_switch() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        for _ in 0..100 {
            assert_eq!(send(&mut c, 1, FAR_CACHED, FAR_STREAMED) + send(&mut c, 1, FAST, FAR_STREAMED), 0);
        }
    }

    #[test]
    fn untimed_copies_do_not_count() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        for _ in 0..10 {
            c.copied(BIG, false, None);
        }
        assert!(!c.stream(BIG));
    }

    #[test]
    fn far_cpus_stream_with_ever_rarer_probes_and_a_fast_probe_ends_it() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        // Two slow cached copies, a trial, then the first run.
        assert_eq!(send(&mut c, 2, FAR_CACHED, FAR_STREAMED), 0);
        assert_eq!(send(&mut c, TRIAL + FIRST_RUN, FAR_CACHED, FAR_STREAMED), TRIAL + FIRST_RUN);
        // Each slow probe starts a run twice as long, up to MAX_RUN.
        let mut run = FIRST_RUN;
        let (mut cached, mut streamed) = (0, 0);
        for _ in 0..12 {
            run = (run * 2).min(MAX_RUN);
            assert_eq!(send(&mut c, 1, FAR_CACHED, FAR_STREAMED), 0, "the probe is cached");
            cached += 1;
            assert_eq!(send(&mut c, run, FAR_CACHED, FAR_STREAMED), run);
            streamed += run;
        }
        assert!(cached * 100 < streamed, "probes {cached} of {streamed}");
        // The CPUs are near again: one fast probe, and nothing more is streamed.
        assert_eq!(send(&mut c, 1, FAST, FAR_STREAMED), 0);
        assert_eq!(send(&mut c, 1000, FAST, FAR_STREAMED), 0);
        // Far again later: a trial and the first run's length.
        assert_eq!(send(&mut c, 2, FAR_CACHED, FAR_STREAMED), 0);
        assert_eq!(send(&mut c, TRIAL + FIRST_RUN + 1, FAR_CACHED, FAR_STREAMED), TRIAL + FIRST_RUN);
    }

    #[test]
    fn slow_streaming_stays_cached_with_ever_rarer_trials() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        let streamed = send(&mut c, 20_000, MISS_CACHED, MISS_STREAMED);
        assert_eq!(c.runs, 0);
        assert!(streamed > 0 && streamed * 200 < 20_000, "{streamed} trial records");
        // The CPUs move apart: streaming takes over after at most one gap.
        let streamed = send(&mut c, MAX_GAP + 100, FAR_CACHED, FAR_STREAMED);
        assert!(c.runs > 0 && streamed > 0, "{streamed}");
        assert!(c.stream(BIG) || send(&mut c, 1, FAR_CACHED, FAR_STREAMED) == 0);
    }

    #[test]
    fn a_run_ends_when_its_probe_is_slow_but_not_slow_enough() {
        let mut c = StoreChoice::new(StoreSetting::Auto);
        send(&mut c, 2 + TRIAL + FIRST_RUN, FAR_CACHED, 40_000);
        assert_eq!(c.runs, 1);
        // The probe is slow (7.5 GB/s), but faster than the run's copies.
        assert_eq!(send(&mut c, 1, 35_000, 40_000), 0);
        assert_eq!(send(&mut c, 50, MISS_CACHED, MISS_STREAMED), 0, "cached, no trial within the gap");
    }

    /// Seeded phases of near CPUs, far CPUs and slow streaming stores, with copy times
    /// jittered by ±20 %: near phases stream at most what a run in progress has left; long
    /// far phases stream most of their records past the wait; a trial and a run never
    /// overlap.
    #[test]
    fn random_phases_keep_the_bounds() {
        use rand::{Rng, SeedableRng};
        for seed in 0..200u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut c = StoreChoice::new(StoreSetting::Auto);
            for _ in 0..30 {
                let kind = rng.gen_range(0..3);
                let len = rng.gen_range(1..20_000u32);
                let (cached, streamed) = [(FAST, FAR_STREAMED), (FAR_CACHED, FAR_STREAMED), (MISS_CACHED, MISS_STREAMED)][kind];
                let mut count = 0;
                for _ in 0..len {
                    let jitter = |t: u64, rng: &mut rand_chacha::ChaCha8Rng| t * rng.gen_range(80..120) / 100;
                    let (a, b) = (jitter(cached, &mut rng), jitter(streamed, &mut rng));
                    count += send(&mut c, 1, a, b);
                    assert!(c.trial_left == 0 || c.run_left == 0, "seed {seed}");
                }
                match kind {
                    0 => assert!(count <= MAX_RUN, "seed {seed}: near phase streamed {count}"),
                    // A far phase may first wait out the gap a miss phase left, and lose a
                    // trial to the jitter once.
                    1 if len > 3 * MAX_GAP => assert!(count * 2 > len - 2 * MAX_GAP, "seed {seed}: far phase of {len} streamed {count}"),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn fixed_settings_ignore_the_clock() {
        let mut c = StoreChoice::new(StoreSetting::Cached);
        assert!(!c.timed(BIG));
        assert_eq!(send(&mut c, 100, FAR_CACHED, FAR_STREAMED), 0);
        let mut s = StoreChoice::new(StoreSetting::Streaming);
        assert_eq!(send(&mut s, 100, FAST, FAST), 100);
        assert_eq!(s.streamed, 100);
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

//! Optional per-rank measurement trace (`STEADFAST_FT_TRACE=<dir>`): one line per event,
//! `<what> <CLOCK_MONOTONIC ns> <fields...>`, written to `<dir>/ft.<rank>.trace` when the
//! control thread stops. The measurement scripts (`scripts/membership-*.sh`) read it.
//!
//! Lines: `start t rank size fanout_log2`, `suspect t rank source`, `install t epoch
//! coordinator members`, `stable t epoch ts_ns members`, `rx t from message latency_ns`,
//! `handled t from message duration_ns`, `excluded t epoch`, `stop t foreign_frames`.
//! An `rx` line carries one more field, `runq_ns`: how long the control thread waited on
//! the CPU run queue between the kernel waking it from `poll(2)` and it running (from
//! `/proc/thread-self/schedstat`) — the wake-up latency part of the hop; `-` unless
//! `STEADFAST_FT_TRACE_SCHED=1`, which also adds `busy t wall_ns runq_ns` for every turn of
//! the loop that took over 100 µs between two polls (how much of it the thread spent
//! preempted, waiting for a CPU).

use std::io::Write;
use std::path::PathBuf;

/// Lines kept in memory at most (a long job must not grow without bound).
const MAX_LINES: usize = 200_000;

/// The trace of one rank; does nothing when off.
#[derive(Debug)]
pub struct Trace {
    path: Option<PathBuf>,
    lines: Vec<String>,
    dropped: u64,
}

impl Trace {
    /// A trace written to `dir/ft.<rank>.trace`, or off.
    pub fn new(dir: Option<&PathBuf>, rank: u32) -> Trace {
        Trace {
            path: dir.map(|d| d.join(format!("ft.{rank}.trace"))),
            lines: Vec::new(),
            dropped: 0,
        }
    }

    /// Whether lines are recorded.
    pub fn on(&self) -> bool {
        self.path.is_some()
    }

    /// Records one line (built only when the trace is on).
    pub fn line(&mut self, f: impl FnOnce() -> String) {
        if self.path.is_some() {
            if self.lines.len() < MAX_LINES {
                self.lines.push(f());
            } else {
                self.dropped += 1;
            }
        }
    }

    /// Appends the recorded lines to the file.
    pub fn flush(&mut self) {
        let Some(path) = &self.path else { return };
        if self.lines.is_empty() {
            return;
        }
        let mut text = self.lines.join("\n");
        text.push('\n');
        if self.dropped > 0 {
            text.push_str(&format!("dropped_lines 0 {}\n", self.dropped));
        }
        let res = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = res {
            tracing::warn!(error = %e, path = %path.display(), "cannot write the membership trace");
        }
        self.lines.clear();
        self.dropped = 0;
    }
}

/// Reads the calling thread's run-queue wait (`/proc/thread-self/schedstat`, second field:
/// nanoseconds spent runnable but not running), to split a hop's latency into transport
/// and wake-up latency. Open it on the thread it measures.
#[derive(Debug)]
pub struct RunDelay {
    file: Option<std::fs::File>,
}

impl RunDelay {
    /// Opens the calling thread's counter when `on`; otherwise (or if the kernel has no
    /// schedstat) every read gives `None`.
    pub fn open(on: bool) -> RunDelay {
        let file = on
            .then(|| std::fs::File::open("/proc/thread-self/schedstat").ok())
            .flatten();
        RunDelay { file }
    }

    /// Total run-queue wait of the thread so far, in nanoseconds.
    pub fn read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let f = self.file.as_ref()?;
        let mut buf = [0u8; 96];
        let n = f.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_whitespace().nth(1)?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_delay_is_monotonic_when_available() {
        let d = RunDelay::open(true);
        if let (Some(a), Some(b)) = (d.read(), d.read()) {
            assert!(b >= a);
        }
        assert_eq!(RunDelay::open(false).read(), None);
    }
}

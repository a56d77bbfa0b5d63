//! Optional per-rank measurement trace (`STEADFAST_FT_TRACE=<dir>`): one line per event,
//! `<what> <CLOCK_MONOTONIC ns> <fields...>`, written to `<dir>/ft.<rank>.trace` when the
//! control thread stops. The measurement scripts (`scripts/membership-*.sh`) read it.
//!
//! Lines: `start t rank size fanout_log2`, `suspect t rank source`, `install t epoch
//! coordinator members`, `stable t epoch ts_ns members`, `rx t from message latency_ns`,
//! `handled t from message duration_ns`, `excluded t epoch`, `stop t foreign_frames`.

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

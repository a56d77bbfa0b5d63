//! Fault tolerance in the engine, in one place:
//! - this module: the membership view (which ranks are alive, as agreed by every
//!   survivor, and how to hear about changes);
//! - [`state`]: what the engine knows of failed processes, per job and per communicator;
//! - `ulfm.rs`: revoke, agree and shrink (a child module of the engine, which it drives).
//!
//! The run-through (ULFM) and recovery work build on the membership view; today the
//! `MPIX_Steadfast_*` extension calls expose it.
//!
//! The view comes from the runtime's control thread (`steadfast_runtime::ft`), started at
//! MPI_Init when the job has more than one rank and stopped at MPI_Finalize, after the
//! final fence. Reading it never takes the engine lock, and the control thread never
//! takes it either: [`Ft::generation`] is one atomic load, so a progress loop can poll it.

use std::sync::Arc;
use std::time::Duration;

use steadfast_runtime::env::FtMode;
use steadfast_runtime::ft::{self as rt, FtConfig, ViewBoard};
pub use steadfast_runtime::ft::{Subscription, ViewId, ViewSnapshot, EXIT_EXCLUDED};

use crate::engine::{Bootstrap, JobInfo};

pub mod state;
use crate::error::{ErrorClass, MpiError, MpiResult};

/// The engine's handle on the membership service.
#[derive(Debug)]
pub struct Ft {
    board: Arc<ViewBoard>,
    control: Option<rt::ControlThread>,
}

/// Between [`Ft::prepare`] (before the start-up fence) and [`PendingFt::start`] (after it).
#[derive(Debug)]
pub struct PendingFt {
    prepared: Option<rt::Prepared>,
    size: u32,
    required: bool,
}

fn ft_mode() -> Option<FtMode> {
    std::env::var(steadfast_runtime::env::FT).ok().and_then(|v| v.parse::<FtMode>().ok())
}

/// This rank's address towards other hosts in a multi-host job (path settings as the
/// engine builds them: the environment, then what a PMI bootstrap derived).
fn remote_ip(job: &JobInfo) -> Option<std::net::IpAddr> {
    let mut st = crate::config::Config::from_env().paths;
    if let Some(o) = &job.path_overrides {
        st.hostmap = o.hostmap.clone();
        st.routes = o.routes.clone().or(st.routes);
    }
    steadfast_paths::setup::remote_ip(&st, job.size)
}

fn ft_error(e: impl std::fmt::Display) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("membership service: {e}"))
}

impl Ft {
    /// Binds this rank's control channel and publishes its address in the launcher's
    /// key-value space; must run before the start-up fence. Nothing to do for a singleton,
    /// a one-rank job, or with `STEADFAST_MEMBERSHIP=0`.
    pub fn prepare(
        job: Option<&JobInfo>,
        boot: Option<&mut Box<dyn Bootstrap>>,
    ) -> MpiResult<PendingFt> {
        let size = job.map_or(1, |j| j.size);
        let required = ft_mode() == Some(FtMode::RunThrough);
        let idle = PendingFt {
            prepared: None,
            size,
            required,
        };
        let (Some(job), Some(boot)) = (job, boot) else {
            return Ok(idle);
        };
        let (mut cfg, warnings) = FtConfig::from_env();
        for w in warnings {
            eprintln!("steadfast: {w}");
        }
        // In relaunch mode the launcher's notices are the failure detector (a restarted
        // rank cannot enter the others' membership group yet).
        if job.size < 2 || !cfg.enabled || job.relaunch || job.coordinated {
            return Ok(idle);
        }
        cfg.exit_when_excluded = required;
        // Across hosts the default loopback address cannot be reached: listen where the data
        // path does (an explicit STEADFAST_FT_HOST wins).
        if !steadfast_config::is_set(rt::config::FT_HOST) {
            if let Some(ip) = remote_ip(job) {
                cfg.host = ip;
            }
        }
        let started = rt::prepare(cfg, job.rank, job.size, job.job_key)
            .map_err(ft_error)
            .and_then(|p| {
                boot.put(&rt::kv_key(job.rank), &p.local_addr().to_string())
                    .map_err(ft_error)
                    .map(|()| p)
            });
        match started {
            Ok(p) => Ok(PendingFt {
                prepared: Some(p),
                size,
                required,
            }),
            Err(e) if required => Err(e),
            Err(e) => {
                // In abort mode the launcher still tears the job down on a failure.
                eprintln!("steadfast: {}; running without it", e.msg);
                Ok(idle)
            }
        }
    }

    /// A view that never changes (singleton, or the service is off).
    pub fn fixed(size: u32) -> Ft {
        Ft {
            board: Arc::new(ViewBoard::fixed(size)),
            control: None,
        }
    }

    /// The current view.
    pub fn snapshot(&self) -> ViewSnapshot {
        self.board.snapshot()
    }

    /// Number of the current view.
    pub fn view_id(&self) -> ViewId {
        self.board.snapshot().view_id
    }

    /// Epoch of the current view (0 = the start-up view; grows with every change).
    pub fn epoch(&self) -> u64 {
        self.board.snapshot().epoch()
    }

    /// Live members of the current view (world ranks, ascending).
    pub fn live(&self) -> Vec<u32> {
        self.board.snapshot().members
    }

    /// World ranks the group has declared failed (ascending).
    pub fn failed(&self) -> Vec<u32> {
        self.board.snapshot().failed
    }

    /// Whether the current view declares world rank `rank` failed.
    pub fn is_failed(&self, rank: u32) -> bool {
        self.board.is_failed(rank)
    }

    /// Whether the group declared *this* rank failed.
    pub fn excluded(&self) -> bool {
        self.board.snapshot().excluded
    }

    /// Changes published so far: one atomic load, for the progress loop.
    pub fn generation(&self) -> u64 {
        self.board.generation()
    }

    /// A subscription; `sub.changed(ft.board())` tells whether a new view arrived since.
    pub fn subscribe(&self) -> Subscription {
        self.board.subscribe()
    }

    /// Sleeps until the view's epoch reaches `min_epoch` (or this rank is excluded), at most
    /// `timeout`; returns the view then.
    pub fn wait_epoch(&self, min_epoch: u64, timeout: Duration) -> ViewSnapshot {
        self.board
            .wait_for(timeout, |s| s.epoch() >= min_epoch || s.excluded)
    }

    /// Failure-detector input for the reliable layer: retransmissions to world rank `rank`
    /// are exhausted. Never blocks.
    pub fn report_suspect(&self, rank: u32) {
        self.board.report_suspect(rank);
    }

    /// Relaunch mode: the engine keeps the view from the launcher's notices of exits and
    /// restarts; `members` (ascending world ranks) become the next view if they changed.
    pub fn publish_external(&self, members: Vec<u32>) {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes into the timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        let ns = (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64);
        self.board.publish_external(members, ns);
    }

    /// The shared board, to wait on it without holding the engine.
    pub fn board(&self) -> Arc<ViewBoard> {
        self.board.clone()
    }

    /// Whether a control thread maintains the view.
    pub fn is_live(&self) -> bool {
        self.control.is_some()
    }

    /// Stops the control thread (MPI_Finalize, after the final fence): peers are told this
    /// rank leaves normally. The last view stays readable.
    pub fn stop(&mut self) {
        if let Some(c) = self.control.take() {
            c.stop();
        }
    }
}

impl PendingFt {
    /// After the start-up fence: reads every rank's control address and starts the thread.
    pub fn start(self, boot: Option<&mut Box<dyn Bootstrap>>) -> MpiResult<Ft> {
        let (Some(p), Some(boot)) = (self.prepared, boot) else {
            return Ok(Ft::fixed(self.size));
        };
        let me = p.local_addr();
        let mut addrs = Vec::with_capacity(self.size as usize);
        let mut failure = None;
        for r in 0..self.size {
            let value = match boot.get(&rt::kv_key(r)) {
                Ok(v) => v,
                Err(e) => {
                    failure = Some(ft_error(e));
                    break;
                }
            };
            match value.parse() {
                Ok(a) => addrs.push(Some(a)),
                Err(_) => {
                    failure = Some(ft_error(rt::FtError::BadAddress { rank: r, value }));
                    break;
                }
            }
        }
        let result = match failure {
            Some(e) => Err(e),
            None => {
                tracing::debug!(%me, "starting the membership control thread");
                p.start(addrs, boot.launcher_link()).map_err(ft_error)
            }
        };
        match result {
            Ok(control) => Ok(Ft {
                board: control.board().clone(),
                control: Some(control),
            }),
            Err(e) if self.required => Err(e),
            Err(e) => {
                eprintln!("steadfast: {}; running without it", e.msg);
                Ok(Ft::fixed(self.size))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_view_is_everybody() {
        let ft = Ft::fixed(3);
        assert_eq!(ft.live(), vec![0, 1, 2]);
        assert!(ft.failed().is_empty());
        assert_eq!(ft.epoch(), 0);
        assert!(!ft.is_live());
        let mut sub = ft.subscribe();
        ft.report_suspect(1);
        assert!(!sub.changed(&ft.board()));
        let t = std::time::Instant::now();
        let s = ft.wait_epoch(1, Duration::from_millis(20));
        assert_eq!(s.epoch(), 0);
        assert!(t.elapsed() >= Duration::from_millis(20));
    }
}

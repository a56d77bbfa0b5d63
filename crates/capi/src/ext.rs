//! Steadfast extension calls of `mpi-ext.h` (`MPIX_Steadfast_*`, with `PMPIX_` twins): the
//! membership view kept by the failure detector, until the ULFM calls build on it.

use std::ffi::{c_double, c_int};
use std::time::Duration;

use steadfast_core::{ErrorClass, MpiError};

use crate::global::api;
use crate::mpix_api;

/// Copies `src` into the C array `dst` of `maxlen` entries (as many as fit).
///
/// # Safety
/// `dst` is null only if `maxlen` is 0, else valid for `maxlen` ints.
unsafe fn fill(dst: *mut c_int, maxlen: c_int, src: &[u32]) {
    let n = src.len().min(maxlen.max(0) as usize);
    for (i, &r) in src.iter().take(n).enumerate() {
        *dst.add(i) = r as c_int;
    }
}

fn check_array(ptr: *const c_int, maxlen: c_int, what: &str) -> Result<(), MpiError> {
    if maxlen < 0 {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("maxlen is negative ({maxlen})"),
        ));
    }
    if maxlen > 0 && ptr.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} is NULL but maxlen is {maxlen}"),
        ));
    }
    Ok(())
}

fn clamp_epoch(e: u64) -> c_int {
    e.min(c_int::MAX as u64) as c_int
}

mpix_api! {
    /// The current membership view: its epoch (0 = start-up view, grows with every change),
    /// the number of live ranks, and the first `maxlen` live world ranks in ascending order.
    /// `epoch` and `nlive` may be NULL; `live_world_ranks` may be NULL when `maxlen` is 0.
    fn Steadfast_view(epoch: *mut c_int, nlive: *mut c_int, live_world_ranks: *mut c_int, maxlen: c_int) -> c_int {
        api("MPIX_Steadfast_view", None, |g| {
            check_array(live_world_ranks, maxlen, "live_world_ranks")?;
            let s = g.eng.ft().snapshot();
            if !epoch.is_null() {
                *epoch = clamp_epoch(s.epoch());
            }
            if !nlive.is_null() {
                *nlive = s.members.len() as c_int;
            }
            fill(live_world_ranks, maxlen, &s.members);
            Ok(())
        })
    }

    /// `--ft coordinated`: a coordinated checkpoint now; returns once this rank took its
    /// part (also in a process restored from it).
    fn Checkpoint() -> c_int {
        api("MPIX_Checkpoint", None, |g| g.eng.request_checkpoint())
    }

    /// The incarnation of world rank `world_rank` this process knows: 0 for a first start,
    /// k when the launcher's relaunch policy started it again k times (for the calling
    /// rank itself, its own incarnation).
    fn Steadfast_incarnation(world_rank: c_int, incarnation: *mut c_int) -> c_int {
        api("MPIX_Steadfast_incarnation", None, |g| {
            if incarnation.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "incarnation is NULL"));
            }
            if world_rank < 0 || world_rank as u32 >= g.eng.size {
                return Err(MpiError::new(
                    ErrorClass::Rank,
                    format!("world rank {world_rank} is not in 0..{}", g.eng.size),
                ));
            }
            *incarnation = c_int::from(g.eng.incarnation_of(world_rank as u32));
            Ok(())
        })
    }

    /// World ranks the membership service declared failed: their number and the first
    /// `maxlen` of them in ascending order (`failed_world_ranks` may be NULL if `maxlen` is 0).
    fn Steadfast_failed(nfailed: *mut c_int, failed_world_ranks: *mut c_int, maxlen: c_int) -> c_int {
        api("MPIX_Steadfast_failed", None, |g| {
            check_array(failed_world_ranks, maxlen, "failed_world_ranks")?;
            let s = g.eng.ft().snapshot();
            if !nfailed.is_null() {
                *nfailed = s.failed.len() as c_int;
            }
            fill(failed_world_ranks, maxlen, &s.failed);
            Ok(())
        })
    }

    /// Blocks until the view's epoch is at least `min_epoch` or `timeout_s` seconds passed
    /// (a negative timeout waits without limit); `*epoch` (if not NULL) gets the epoch at
    /// return, so `*epoch < min_epoch` means the wait timed out. Does not hold the library
    /// lock while it waits, and does not progress MPI communication.
    fn Steadfast_wait_view(min_epoch: c_int, timeout_s: c_double, epoch: *mut c_int) -> c_int {
        let mut board = None;
        let rc = api("MPIX_Steadfast_wait_view", None, |g| {
            if timeout_s.is_nan() {
                return Err(MpiError::new(ErrorClass::Arg, "timeout_s is NaN"));
            }
            board = Some(g.eng.ft().board());
            Ok(())
        });
        let Some(board) = board else { return rc };
        let timeout = if timeout_s < 0.0 {
            Duration::MAX
        } else {
            Duration::try_from_secs_f64(timeout_s).unwrap_or(Duration::MAX)
        };
        let want = min_epoch.max(0) as u64;
        let s = board.wait_for(timeout, |s| s.epoch() >= want);
        if !epoch.is_null() {
            *epoch = clamp_epoch(s.epoch());
        }
        rc
    }
}

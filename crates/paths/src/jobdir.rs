//! Liveness and ownership of per-job directories (`steadfast-<jobid>` under /dev/shm or
//! the temporary directory), shared by the launcher and the ranks.
//!
//! Every process that uses a job directory (the launcher on its host, each rank on a
//! host the launcher reached through its agent) holds a shared `flock` on the directory's
//! `.live` file. The kernel drops the lock when the process dies, even by `kill -9`, so a
//! directory whose `.live` file can be locked exclusively has no user left: it is stale,
//! and the next job of the same user on that host removes it. A directory that already
//! exists is used only if it is a real directory (not a link), owned by us, and closed
//! to group and others.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Name of the liveness file inside a job directory.
pub const LIVE_FILE: &str = ".live";
/// Prefix of job directory names.
pub const PREFIX: &str = "steadfast-";

/// A shared hold on a job directory: while it exists the directory is not stale.
#[derive(Debug)]
pub struct Hold {
    file: File,
    dir: PathBuf,
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn flock(f: &File, op: libc::c_int) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

/// Fails unless `dir` is a directory (not a symbolic link) owned by us with no access
/// for group or others.
pub fn check_private(dir: &Path) -> io::Result<()> {
    let m = std::fs::symlink_metadata(dir)?;
    let why = if !m.file_type().is_dir() {
        "is not a directory"
    } else if m.uid() != euid() {
        "belongs to another user"
    } else if m.mode() & 0o077 != 0 {
        "is open to group or others"
    } else {
        return Ok(());
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("job directory {} {why}", dir.display()),
    ))
}

fn open_live(dir: &Path, create: bool) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(LIVE_FILE))
}

impl Hold {
    /// Takes a shared hold on `dir`, which must pass [`check_private`].
    pub fn take(dir: &Path) -> io::Result<Hold> {
        check_private(dir)?;
        let file = open_live(dir, true)?;
        if !flock(&file, libc::LOCK_SH) {
            return Err(io::Error::last_os_error());
        }
        Ok(Hold { file, dir: dir.to_path_buf() })
    }

    /// Releases the hold and removes the directory if nobody else holds it (the last
    /// rank on a host the launcher does not run on cleans up after the job).
    pub fn release_and_remove_if_last(self) {
        if flock(&self.file, libc::LOCK_EX | libc::LOCK_NB) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// How long a job directory's `.live` file must be unchanged before ranks that make their
/// host's directory themselves count an unheld one as stale ([`sweep_stale`]): a process
/// takes its hold in two steps (create the file, then lock it), and between them the
/// directory looks unheld.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// Removes this user's job directories under `base` that nobody holds any more (their
/// launcher or ranks were killed) and whose hold file is at least `min_age` old, except
/// `own`, the directory the caller is about to use. Returns how many were removed.
///
/// Ranks that make their host's directory themselves (`srun`, a host the launcher reached
/// through its agent) pass `own` and [`STALE_AFTER`]. Without them, a rank of a job under
/// `srun --mpi=pmix` swept the directory another rank of its host had just made, between
/// that rank's creating its hold file and locking it; the other rank then found no
/// directory for its segment and `MPI_Init` failed with ENOENT (once in a CI run of
/// `scripts/slurm-cluster-tests.sh`).
pub fn sweep_stale(base: &Path, own: &Path, min_age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let dir = e.path();
        if dir == own || check_private(&dir).is_err() {
            continue; // ours to use, or not ours (or not a plain private directory)
        }
        // A directory without the file is being set up, or predates it: left alone.
        let Ok(live) = open_live(&dir, false) else { continue };
        if !min_age.is_zero() {
            let young = live.metadata().and_then(|m| m.modified()).map_or(true, |t| t.elapsed().map_or(true, |age| age < min_age));
            if young {
                continue;
            }
        }
        if flock(&live, libc::LOCK_EX | libc::LOCK_NB) && std::fs::remove_dir_all(&dir).is_ok() {
            tracing::debug!(dir = %dir.display(), "removed a stale job directory");
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn base(name: &str) -> PathBuf {
        let b = std::env::temp_dir().join(format!("sf-jobdir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&b);
        std::fs::create_dir_all(&b).unwrap();
        b
    }

    fn private_dir(b: &Path, id: &str) -> PathBuf {
        let d = b.join(format!("{PREFIX}{id}"));
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[test]
    fn held_directories_stay_released_ones_are_swept() {
        let b = base("sweep");
        let live = private_dir(&b, "live");
        let dead = private_dir(&b, "dead");
        let fresh = private_dir(&b, "fresh"); // no .live yet: left alone
        let young = private_dir(&b, "young"); // .live made, not locked yet: left alone
        let own = private_dir(&b, "own"); // the caller's: left alone
        let hold = Hold::take(&live).unwrap();
        let old = std::time::SystemTime::now() - 2 * STALE_AFTER;
        for d in [&dead, &own] {
            drop(Hold::take(d).unwrap()); // as a killed process: lock gone, dir stays
            open_live(d, false).unwrap().set_modified(old).unwrap();
        }
        drop(open_live(&young, true).unwrap());
        std::fs::write(dead.join("shm-0"), b"segment").unwrap();
        assert_eq!(sweep_stale(&b, &own, STALE_AFTER), 1);
        assert!(live.exists() && fresh.exists() && young.exists() && own.exists() && !dead.exists());
        // The last holder removes the directory; an earlier one does not.
        let other = Hold::take(&live).unwrap();
        hold.release_and_remove_if_last();
        assert!(live.exists());
        other.release_and_remove_if_last();
        assert!(!live.exists());
        let _ = std::fs::remove_dir_all(&b);
    }

    #[test]
    fn open_or_foreign_directories_are_refused() {
        let b = base("check");
        let open = private_dir(&b, "open");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(Hold::take(&open).is_err());
        let link = b.join(format!("{PREFIX}link"));
        std::os::unix::fs::symlink(&open, &link).unwrap();
        assert!(check_private(&link).is_err());
        if euid() == 0 {
            let theirs = private_dir(&b, "theirs");
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(Hold::take(&theirs).is_err());
            assert_eq!(sweep_stale(&b, &b, std::time::Duration::ZERO), 0);
            assert!(theirs.exists());
        }
        let _ = std::fs::remove_dir_all(&b);
    }
}

//! The per-job private directory (`STEADFAST_JOBDIR`).

use super::sys;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A directory created for one job and removed when this value is dropped.
#[derive(Debug)]
pub struct JobDir {
    path: PathBuf,
    /// Shared hold on the directory: while the launcher lives, nobody sweeps it.
    _hold: steadfast_paths::jobdir::Hold,
}

impl JobDir {
    /// Creates `steadfast-<jobid>` with mode 0700 under /dev/shm when usable (ranks put
    /// shared-memory segments there), else under $TMPDIR, else /tmp.
    pub fn create(jobid: &str) -> io::Result<JobDir> {
        let mut bases = vec![PathBuf::from("/dev/shm")];
        if let Some(t) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
            bases.push(PathBuf::from(t));
        }
        bases.push(PathBuf::from("/tmp"));
        let mut last_err = io::Error::new(io::ErrorKind::NotFound, "no writable directory");
        for base in bases.iter().filter(|b| sys::is_writable_dir(b)) {
            // Directories of this user's jobs whose launcher was killed (`kill -9`
            // leaves no teardown) go first.
            let path = base.join(format!("steadfast-{jobid}"));
            steadfast_paths::jobdir::sweep_stale(base, &path, std::time::Duration::ZERO);
            // `create` (not `create_all`) fails if the name exists: never reuse a
            // directory someone else prepared.
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    // The umask may have cleared owner bits; set the mode exactly.
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
                    let hold = match steadfast_paths::jobdir::Hold::take(&path) {
                        Ok(h) => h,
                        Err(e) => {
                            let _ = std::fs::remove_dir_all(&path);
                            return Err(e);
                        }
                    };
                    tracing::debug!(path = %path.display(), "job directory created");
                    return Ok(JobDir { path, _hold: hold });
                }
                // An existing name is suspicious (ids are random): refuse, do not
                // fall back to another base.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(e),
                Err(e) => last_err = e,
            }
        }
        Err(last_err)
    }

    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!(
                    "steadfast run: cannot remove job directory {}: {e}",
                    self.path.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_private_and_removed() {
        let id = format!("{:016x}", sys::random_u64().unwrap());
        let path;
        {
            let dir = JobDir::create(&id).unwrap();
            path = dir.path().to_path_buf();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            std::fs::write(path.join("seg"), b"x").unwrap();
            // The same job id cannot be created twice.
            assert!(JobDir::create(&id).is_err());
        }
        assert!(!path.exists());
    }
}

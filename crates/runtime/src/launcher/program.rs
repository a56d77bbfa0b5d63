//! Finding the program to run, the way execvp(3) would.

use super::sys;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why the program cannot be started.
#[derive(Debug, Error)]
pub enum ProgramError {
    /// No such file (exit status 127, like a shell).
    #[error("{0}: command not found")]
    NotFound(String),
    /// The file exists but cannot be executed (exit status 126).
    #[error("{0}: permission denied")]
    NotExecutable(String),
}

impl ProgramError {
    /// Exit status a shell uses for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            ProgramError::NotFound(_) => 127,
            ProgramError::NotExecutable(_) => 126,
        }
    }
}

/// Resolves `program` to an absolute path. A name with a slash is taken relative to
/// `cwd` (the ranks' working directory); a bare name is searched in `path_var` (the
/// PATH the ranks will see), empty entries meaning the current directory.
pub fn resolve(
    program: &OsStr,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, ProgramError> {
    let shown = program.to_string_lossy().into_owned();
    if program.is_empty() {
        return Err(ProgramError::NotFound(shown));
    }
    if program.as_bytes().contains(&b'/') {
        let p = cwd.join(program);
        return check(&p).map(|()| p).map_err(|found| {
            if found {
                ProgramError::NotExecutable(shown.clone())
            } else {
                ProgramError::NotFound(shown.clone())
            }
        });
    }
    let default_path = OsString::from("/usr/local/bin:/usr/bin:/bin");
    let path_var = path_var.unwrap_or(&default_path);
    let mut saw_non_exec = false;
    for dir in path_var.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() {
            cwd.to_path_buf()
        } else {
            cwd.join(OsStr::from_bytes(dir))
        };
        let candidate = dir.join(program);
        match check(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(found) => saw_non_exec |= found,
        }
    }
    if saw_non_exec {
        Err(ProgramError::NotExecutable(shown))
    } else {
        Err(ProgramError::NotFound(shown))
    }
}

/// Ok if `p` is an executable regular file; Err(true) if it exists but is not.
fn check(p: &Path) -> Result<(), bool> {
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() && sys::is_executable(p) => Ok(()),
        Ok(_) => Err(true),
        Err(_) => Err(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_in_path_and_rejects_missing() {
        let cwd = std::env::current_dir().unwrap();
        let sh = resolve(
            OsStr::new("sh"),
            &cwd,
            Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
        )
        .unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"));
        assert!(matches!(
            resolve(OsStr::new("no-such-program-xyz"), &cwd, None),
            Err(ProgramError::NotFound(_))
        ));
        assert!(matches!(
            resolve(OsStr::new("./no-such"), &cwd, None),
            Err(ProgramError::NotFound(_))
        ));
        // A directory is found but is not executable as a program.
        assert!(matches!(
            resolve(OsStr::new("/tmp/"), &cwd, None),
            Err(ProgramError::NotExecutable(_))
        ));
        // Relative paths are relative to the given working directory.
        let p = resolve(OsStr::new("./sh"), Path::new("/bin"), None).unwrap();
        assert_eq!(p, Path::new("/bin/./sh"));
    }
}

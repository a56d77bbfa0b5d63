//! Errors of taking and restoring images.

use crate::format::FormatError;

/// Why a checkpoint or a restore did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("process images are implemented for x86-64 Linux only")]
    Unsupported,
    #[error(
        "the process runs with address-space randomization (start it with STEADFAST_NORANDMAPS=1 \
         or under `setarch -R`: images need the ADDR_NO_RANDOMIZE personality)"
    )]
    Randomized,
    #[error(
        "the process has {} thread(s) besides the caller (ids {tids:?}); only the calling thread \
         can be saved",
        tids.len()
    )]
    Threads { tids: Vec<i32> },
    #[error("{what}: {err}")]
    Io { what: String, err: String },
    #[error("the image writer failed: {0}")]
    Writer(String),
    #[error("the image writer ended without finishing (status {0:#x})")]
    WriterDied(i32),
    #[error("the image writer was already reaped")]
    Reaped,
    #[error("image {path}: {err}")]
    Format { path: String, err: FormatError },
    #[error("image {path}: {why}")]
    Damaged { path: String, why: String },
    #[error("image {path} does not fit this process: {why}")]
    Layout { path: String, why: String },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, err: std::io::Error) -> Error {
        Error::Io { what: what.into(), err: err.to_string() }
    }

    pub(crate) fn last_os(what: impl Into<String>) -> Error {
        Error::io(what, std::io::Error::last_os_error())
    }
}

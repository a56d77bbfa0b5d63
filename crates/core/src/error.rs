//! Errors of the MPI engine, by MPI error class. The C layer maps classes to ABI values.

/// MPI error classes the engine raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    Buffer,
    Count,
    Type,
    Tag,
    Comm,
    Rank,
    Request,
    Root,
    Group,
    Op,
    Topology,
    Dims,
    Arg,
    Unknown,
    Truncate,
    Other,
    Intern,
    InStatus,
    Pending,
    NoMem,
    Keyval,
    Info,
    InfoKey,
    InfoValue,
    InfoNokey,
    Size,
    Unsupported,
    ProcFailed,
    ProcFailedPending,
    Revoked,
    /// Invalid window (one-sided).
    Win,
    /// Wrong synchronization of one-sided calls.
    RmaSync,
    /// Target memory outside the window.
    RmaRange,
    /// Conflicting accesses to a window.
    RmaConflict,
    /// Memory cannot be attached to a dynamic window.
    RmaAttach,
    /// Memory cannot be shared.
    RmaShared,
    /// Operation not valid for the window's flavor.
    RmaFlavor,
    /// Invalid displacement unit or displacement.
    Disp,
    /// Invalid base address.
    Base,
    /// Invalid lock type.
    Locktype,
    /// Invalid assertion.
    Assert,
    /// Processes could not be spawned.
    Spawn,
    /// Invalid port name.
    Port,
    /// Service name not published.
    Name,
    /// Invalid service name.
    Service,
    /// Invalid session.
    Session,
    /// Invalid error handler.
    Errhandler,
}

/// An error with its class and a message saying what was wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{msg}")]
pub struct MpiError {
    pub class: ErrorClass,
    pub msg: String,
}

impl MpiError {
    /// Build an error of `class` with message `msg`.
    pub fn new(class: ErrorClass, msg: impl Into<String>) -> MpiError {
        MpiError { class, msg: msg.into() }
    }
}

/// Result type of engine operations.
pub type MpiResult<T> = Result<T, MpiError>;

/// Shorthand: `Err(MpiError)` of a class with a formatted message.
#[macro_export]
macro_rules! mpi_err {
    ($class:ident, $($fmt:tt)*) => {
        Err($crate::error::MpiError::new($crate::error::ErrorClass::$class, format!($($fmt)*)))
    };
}

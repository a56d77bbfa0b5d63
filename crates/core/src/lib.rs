//! Steadfast's MPI engine: communicators, datatypes, matching, requests and progress.
//!
//! The C layer (`capi`) checks arguments and maps handles; everything with MPI semantics
//! lives here. Transports come from `steadfast-paths`.

pub mod coll;
pub mod attr;
pub mod comm;
pub mod completion;
pub mod compound;
pub mod config;
pub mod datatype;
pub mod door;
pub mod engine;
pub mod error;
pub mod group;
pub mod info;
pub mod ft;
pub mod matching;
pub mod op;
pub mod request;
pub mod slab;
mod spare;
pub mod topo;
pub mod wire;

pub use engine::{Bootstrap, Engine, JobInfo, Parts, PathKind, PathOverrides, Service, PROC_NULL};
pub use error::{ErrorClass, MpiError, MpiResult};
pub use slab::Handle;
pub use steadfast_paths::PathCounters;

/// Bytes of bookkeeping each buffered send reserves in the attached buffer
/// (the standard ABI's MPI_BSEND_OVERHEAD).
pub const BSEND_OVERHEAD: usize = 512;

//! Errors of the bootstrap client.

use crate::wire::WireError;
use thiserror::Error;

/// Anything that can go wrong between a rank and its launcher.
#[derive(Debug, Error)]
pub enum BootstrapError {
    /// `STEADFAST_RANK` is set but another contract variable is not.
    #[error("environment variable {0} is not set")]
    MissingVar(&'static str),
    /// A contract variable could not be parsed.
    #[error("environment variable {name} is invalid: {reason}")]
    BadVar { name: &'static str, reason: String },
    /// The control server could not be reached.
    #[error("cannot connect to the launcher at {addr}: {source}")]
    Connect {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    /// The launcher closed the connection during the handshake (wrong job key, rank
    /// already connected, or protocol version mismatch), or its challenge did not prove
    /// it knows our job key.
    #[error(
        "the launcher rejected this process (wrong job key, duplicate rank, or version mismatch)"
    )]
    Rejected,
    /// The launcher's reply did not decode or was not the expected message.
    #[error("protocol error on the control connection: {0}")]
    Protocol(String),
    /// A frame failed to decode.
    #[error("malformed frame from the launcher: {0}")]
    Wire(#[from] WireError),
    /// The launcher reported an error and closed the connection.
    #[error("the launcher refused the request: {0}")]
    Launcher(String),
    /// The control connection was lost.
    #[error("the connection to the launcher was lost")]
    Disconnected,
    /// The rank already called `finalize`.
    #[error("bootstrap already finalized")]
    Finalized,
    /// The process manager's PMI service (PMI-1, PMI-2 or PMIx) failed or refused a request.
    #[error("PMI: {0}")]
    Pmi(String),
    /// Other I/O failure on the control connection.
    #[error("control connection I/O error: {0}")]
    Io(#[from] std::io::Error),
}

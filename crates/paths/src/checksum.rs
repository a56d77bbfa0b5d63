//! End-to-end checksum setting per path (`STEADFAST_CHECKSUM`).
//!
//! Accepted forms: one value for every path (`crc32c` or `none`), or a comma-separated
//! list of `path=value` items (`udp=crc32c,shm=none`); paths not named keep their
//! default. The default is `crc32c` everywhere:
//! - **udp, tcp**: every frame carries a CRC32C over header and payload, checked by the
//!   receiver before anything is delivered (the UDP/TCP checksums are 16-bit, computed by
//!   the NIC or kernel, and do not cover the bus between memory and NIC).
//! - **shm**: every ring record carries a CRC32C of its header and payload, computed
//!   while copying into the ring (one fused pass) and checked before delivery. A large
//!   message moved by single-copy `process_vm_readv` (`STEADFAST_CMA=1`) bypasses the
//!   ring: its sender sends the CRC32C of its data with the announcement (a separate pass
//!   over its buffer), and the receiver checks its copy against it (another pass) and
//!   reads again on a mismatch (the engine does this, `start_rndv`).

use crate::PathError;

pub use steadfast_reliable::crc::{copy_with_crc32c_append, crc32c, crc32c_append, extend_with_crc32c};

/// Checksum algorithm of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// CRC32C (Castagnoli) over header and payload.
    Crc32c,
    /// No payload checksum (for measuring what the checksum costs).
    None,
}

impl Checksum {
    /// Whether frames are checksummed.
    pub fn enabled(self) -> bool {
        self == Checksum::Crc32c
    }

    fn parse_value(v: &str) -> Option<Checksum> {
        match v.trim() {
            "crc32c" | "crc" | "on" | "1" => Some(Checksum::Crc32c),
            "none" | "off" | "0" => Some(Checksum::None),
            _ => None,
        }
    }
}

/// The names paths go by in `STEADFAST_CHECKSUM` and `STEADFAST_FAULTS`.
pub const PATH_NAMES: [&str; 3] = ["shm", "tcp", "udp"];

/// Setting for `path` ("shm", "tcp" or "udp") from a `STEADFAST_CHECKSUM` value
/// (`None` = variable unset).
pub fn for_path(value: Option<&str>, path: &str) -> Result<Checksum, PathError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Checksum::Crc32c);
    };
    let bad = || {
        PathError::Config(format!(
            "STEADFAST_CHECKSUM={value:?}: expected crc32c, none, or a list like udp=crc32c,shm=none"
        ))
    };
    if !value.contains('=') {
        return Checksum::parse_value(value).ok_or_else(bad);
    }
    let mut result = Checksum::Crc32c;
    for item in value.split(',').filter(|i| !i.trim().is_empty()) {
        let (k, v) = item.split_once('=').ok_or_else(bad)?;
        let k = k.trim();
        if !PATH_NAMES.contains(&k) {
            return Err(bad());
        }
        let c = Checksum::parse_value(v).ok_or_else(bad)?;
        if k == path {
            result = c;
        }
    }
    Ok(result)
}

/// Setting for `path` from the environment.
pub fn from_env(path: &str) -> Result<Checksum, PathError> {
    for_path(steadfast_config::lookup("STEADFAST_CHECKSUM").as_deref(), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_per_path_values() {
        assert_eq!(for_path(None, "shm").unwrap(), Checksum::Crc32c);
        assert_eq!(for_path(Some("none"), "udp").unwrap(), Checksum::None);
        assert_eq!(for_path(Some("crc32c"), "tcp").unwrap(), Checksum::Crc32c);
        assert_eq!(for_path(Some("udp=none,shm=crc32c"), "udp").unwrap(), Checksum::None);
        assert_eq!(for_path(Some("udp=none"), "tcp").unwrap(), Checksum::Crc32c);
        assert!(for_path(Some("md5"), "tcp").is_err());
        assert!(for_path(Some("eth=none"), "tcp").is_err());
        assert!(for_path(Some("udp=maybe"), "udp").is_err());
    }
}

//! Intercommunicator collectives.

use super::select::CollConfig;
use super::{Coll, Schedule, Topo};
use crate::error::{ErrorClass, MpiError, MpiResult};

/// Write this rank's part of intercommunicator collective `c` into `s`.
pub fn build(_s: &mut Schedule, _t: Topo, _c: &Coll, _cfg: &CollConfig) -> MpiResult<()> {
    Err(MpiError::new(ErrorClass::Unsupported, "collectives on intercommunicators are not implemented yet"))
}

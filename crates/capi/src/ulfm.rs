//! Run-through fault tolerance (ULFM): failure acknowledgement. The MPI-6 spellings
//! (`MPI_Comm_ack_failed`, ...) are declared in mpi-ext.h as aliases of these symbols.

use std::ffi::c_int;

use steadfast_core::{ErrorClass, MpiError};

use std::sync::Arc;

use crate::abi::{MPI_Comm, MPI_Group, MPI_Request};
use crate::global::{api, comm_handle, Global};
use crate::group::out_group;
use crate::mpix_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// World ranks of the failed (or only acknowledged) members of `comm`, as a group.
unsafe fn failed_group(g: &mut Global, comm: MPI_Comm, acked_only: bool, out: *mut MPI_Group) -> Result<(), MpiError> {
    let h = comm_handle(g, comm as usize)?;
    let ranks = g.eng.comm_failed(h, acked_only)?;
    let c = g.eng.comm(h)?;
    let grp = c.remote.as_ref().unwrap_or(&c.group);
    let world: Vec<u32> = ranks.iter().filter_map(|r| grp.get(*r as usize).copied()).collect();
    out_group(g, Arc::new(world), out)
}

mpix_api! {
    fn Comm_revoke(comm: MPI_Comm) -> c_int {
        api("MPIX_Comm_revoke", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            g.eng.revoke(h)
        })
    }

    fn Comm_is_revoked(comm: MPI_Comm, flag: *mut c_int) -> c_int {
        api("MPIX_Comm_is_revoked", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag is NULL"));
            }
            g.eng.progress()?;
            *flag = g.eng.comm_is_revoked(h) as c_int;
            Ok(())
        })
    }

    fn Comm_agree(comm: MPI_Comm, flag: *mut c_int) -> c_int {
        api("MPIX_Comm_agree", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag is NULL"));
            }
            let (value, proc_failed) = g.eng.agree(h, *flag)?;
            *flag = value;
            if proc_failed {
                return Err(err(ErrorClass::ProcFailed, "a member failed and its failure was not acknowledged"));
            }
            Ok(())
        })
    }

    fn Comm_shrink(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
        api("MPIX_Comm_shrink", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if newcomm.is_null() {
                return Err(err(ErrorClass::Arg, "newcomm is NULL"));
            }
            let n = g.eng.shrink(h)?;
            // The new communicator holds a reference on the error handler it inherits.
            let e = g.eng.comm(n)?.errhandler;
            crate::errhandler::retain(g, e);
            *newcomm = n.0 as MPI_Comm;
            Ok(())
        })
    }

    fn Comm_iagree(comm: MPI_Comm, flag: *mut c_int, request: *mut MPI_Request) -> c_int {
        api("MPIX_Comm_iagree", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if flag.is_null() || request.is_null() {
                return Err(err(ErrorClass::Arg, "flag or request is NULL"));
            }
            // The agreed value replaces *flag when the request completes.
            let r = g.eng.iagree(h, *flag, flag)?;
            *request = r.0 as MPI_Request;
            Ok(())
        })
    }

    fn Comm_ishrink(comm: MPI_Comm, newcomm: *mut MPI_Comm, request: *mut MPI_Request) -> c_int {
        api("MPIX_Comm_ishrink", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if newcomm.is_null() || request.is_null() {
                return Err(err(ErrorClass::Arg, "newcomm or request is NULL"));
            }
            // MPI_Comm is pointer-sized; the engine writes the handle when the shrink ends.
            let r = g.eng.ishrink(h, newcomm as *mut usize)?;
            *request = r.0 as MPI_Request;
            Ok(())
        })
    }

    fn Comm_failure_get_acked(comm: MPI_Comm, failedgrp: *mut MPI_Group) -> c_int {
        api("MPIX_Comm_failure_get_acked", Some(comm as usize), |g| failed_group(g, comm, true, failedgrp))
    }

    fn Comm_get_failed(comm: MPI_Comm, failedgrp: *mut MPI_Group) -> c_int {
        api("MPIX_Comm_get_failed", Some(comm as usize), |g| {
            g.eng.progress()?;
            failed_group(g, comm, false, failedgrp)
        })
    }

    fn Comm_failure_ack(comm: MPI_Comm) -> c_int {
        api("MPIX_Comm_failure_ack", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            g.eng.comm_ack_failures(h, None)?;
            Ok(())
        })
    }

    fn Comm_ack_failed(comm: MPI_Comm, num_to_ack: c_int, num_acked: *mut c_int) -> c_int {
        api("MPIX_Comm_ack_failed", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if num_to_ack < 0 {
                return Err(MpiError::new(ErrorClass::Arg, format!("num_to_ack {num_to_ack} is negative")));
            }
            if num_acked.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "num_acked is NULL"));
            }
            *num_acked = g.eng.comm_ack_failures(h, Some(num_to_ack as usize))? as c_int;
            Ok(())
        })
    }
}

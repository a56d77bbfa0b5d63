//! Run-through fault tolerance (ULFM): failure acknowledgement. The MPI-6 spellings
//! (`MPI_Comm_ack_failed`, ...) are declared in mpi-ext.h as aliases of these symbols.

use std::ffi::c_int;

use steadfast_core::{ErrorClass, MpiError};

use crate::abi::MPI_Comm;
use crate::global::{api, comm_handle};
use crate::mpix_api;

mpix_api! {
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

//! Communicator entry points needed by every program: rank, size, dup, free, barrier,
//! names and error handlers.

use std::ffi::{c_char, c_int};

use steadfast_core::{ErrorClass, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Errhandler};
use crate::env::write_cstr;
use crate::global::{api, comm_handle};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

fn is_predefined_errhandler(e: usize) -> bool {
    matches!(e, abi::MPI_ERRORS_ARE_FATAL | abi::MPI_ERRORS_RETURN | abi::MPI_ERRORS_ABORT)
}

mpi_api! {
    fn Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
        api("MPI_Comm_rank", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if rank.is_null() {
                return Err(err(ErrorClass::Arg, "rank pointer is NULL"));
            }
            *rank = g.eng.comm(h)?.rank;
            Ok(())
        })
    }

    fn Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
        api("MPI_Comm_size", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if size.is_null() {
                return Err(err(ErrorClass::Arg, "size pointer is NULL"));
            }
            *size = g.eng.comm(h)?.size();
            Ok(())
        })
    }

    fn Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
        api("MPI_Comm_dup", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if newcomm.is_null() {
                return Err(err(ErrorClass::Arg, "newcomm pointer is NULL"));
            }
            let n = g.eng.comm_dup(h)?;
            let eh = g.eng.comm(h)?.errhandler;
            g.eng.comm_mut(n)?.errhandler = eh;
            *newcomm = n.0 as MPI_Comm;
            Ok(())
        })
    }

    fn Comm_free(comm: *mut MPI_Comm) -> c_int {
        let c = if comm.is_null() { abi::MPI_COMM_NULL } else { *comm as usize };
        api("MPI_Comm_free", Some(c), |g| {
            if comm.is_null() {
                return Err(err(ErrorClass::Arg, "comm pointer is NULL"));
            }
            let h = comm_handle(g, c)?;
            g.eng.free_comm(h)?;
            *comm = abi::MPI_COMM_NULL as MPI_Comm;
            Ok(())
        })
    }

    fn Barrier(comm: MPI_Comm) -> c_int {
        api("MPI_Barrier", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            g.eng.barrier(h)
        })
    }

    fn Comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
        api("MPI_Comm_set_errhandler", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if !is_predefined_errhandler(errhandler as usize) {
                return Err(err(ErrorClass::Arg, format!("invalid error handler {:#x}", errhandler as usize)));
            }
            g.eng.comm_mut(h)?.errhandler = errhandler as u64;
            Ok(())
        })
    }

    fn Comm_get_errhandler(comm: MPI_Comm, errhandler: *mut MPI_Errhandler) -> c_int {
        api("MPI_Comm_get_errhandler", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if errhandler.is_null() {
                return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
            }
            *errhandler = g.eng.comm(h)?.errhandler as MPI_Errhandler;
            Ok(())
        })
    }

    fn Errhandler_free(errhandler: *mut MPI_Errhandler) -> c_int {
        api("MPI_Errhandler_free", None, |_| {
            if errhandler.is_null() {
                return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
            }
            *errhandler = abi::MPI_ERRHANDLER_NULL as MPI_Errhandler;
            Ok(())
        })
    }

    fn Comm_set_name(comm: MPI_Comm, comm_name: *const c_char) -> c_int {
        api("MPI_Comm_set_name", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if comm_name.is_null() {
                return Err(err(ErrorClass::Arg, "name is NULL"));
            }
            let name = std::ffi::CStr::from_ptr(comm_name).to_string_lossy().into_owned();
            let max = abi::MPI_MAX_OBJECT_NAME as usize - 1;
            g.eng.comm_mut(h)?.name = name.chars().take(max).collect();
            Ok(())
        })
    }

    fn Comm_get_name(comm: MPI_Comm, comm_name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api("MPI_Comm_get_name", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if comm_name.is_null() || resultlen.is_null() {
                return Err(err(ErrorClass::Arg, "name or resultlen is NULL"));
            }
            *resultlen = write_cstr(comm_name, &g.eng.comm(h)?.name, abi::MPI_MAX_OBJECT_NAME as usize);
            Ok(())
        })
    }

    fn Comm_test_inter(comm: MPI_Comm, flag: *mut c_int) -> c_int {
        api("MPI_Comm_test_inter", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag is NULL"));
            }
            *flag = g.eng.comm(h)?.remote.is_some() as c_int;
            Ok(())
        })
    }

    fn Comm_compare(comm1: MPI_Comm, comm2: MPI_Comm, result: *mut c_int) -> c_int {
        api("MPI_Comm_compare", Some(comm1 as usize), |g| {
            let a = comm_handle(g, comm1 as usize)?;
            let b = comm_handle(g, comm2 as usize)?;
            if result.is_null() {
                return Err(err(ErrorClass::Arg, "result is NULL"));
            }
            let (ca, cb) = (g.eng.comm(a)?, g.eng.comm(b)?);
            *result = if a == b {
                abi::MPI_IDENT
            } else if ca.group == cb.group || *ca.group == *cb.group {
                abi::MPI_CONGRUENT
            } else {
                let mut x: Vec<u32> = ca.group.to_vec();
                let mut y: Vec<u32> = cb.group.to_vec();
                x.sort_unstable();
                y.sort_unstable();
                if x == y { abi::MPI_SIMILAR } else { abi::MPI_UNEQUAL }
            };
            Ok(())
        })
    }
}

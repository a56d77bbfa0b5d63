//! Dynamic process management. Steadfast's launcher starts a job's processes once and keeps
//! them for the job's life; it cannot add processes to a running job or connect two jobs.
//! So MPI_Comm_spawn / spawn_multiple fail with MPI_ERR_SPAWN, and ports, name publishing
//! and MPI_Comm_join fail with MPI_ERR_UNSUPPORTED_OPERATION (MPI_ERR_NAME for a lookup,
//! whose name can never have been published), each with a message that says so.
//! MPI_Comm_get_parent (no parent: MPI_COMM_NULL) and MPI_Comm_disconnect work.

use std::ffi::{c_char, c_int};

use steadfast_core::{ErrorClass, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Info};
use crate::global::{api, comm_handle};
use crate::mpi_api;

fn unsupported(what: &str) -> MpiError {
    MpiError::new(
        ErrorClass::Unsupported,
        format!("{what}: Steadfast's launcher cannot add processes to a running job or connect separate jobs"),
    )
}

mpi_api! {
    fn Comm_spawn(_command: *const c_char, _argv: *mut *mut c_char, maxprocs: c_int, _info: MPI_Info, _root: c_int, comm: MPI_Comm,
                  intercomm: *mut MPI_Comm, array_of_errcodes: *mut c_int) -> c_int {
        api("MPI_Comm_spawn", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            if !intercomm.is_null() {
                *intercomm = abi::MPI_COMM_NULL as MPI_Comm;
            }
            if !array_of_errcodes.is_null() {
                for i in 0..maxprocs.max(0) as usize {
                    *array_of_errcodes.add(i) = abi::MPI_ERR_SPAWN;
                }
            }
            Err(MpiError::new(ErrorClass::Spawn, "spawning processes is not supported: Steadfast's launcher cannot add processes to a running job"))
        })
    }

    fn Comm_spawn_multiple(count: c_int, _array_of_commands: *mut *mut c_char, _array_of_argv: *mut *mut *mut c_char, array_of_maxprocs: *const c_int,
                           _array_of_info: *const MPI_Info, _root: c_int, comm: MPI_Comm, intercomm: *mut MPI_Comm, array_of_errcodes: *mut c_int) -> c_int {
        api("MPI_Comm_spawn_multiple", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            if !intercomm.is_null() {
                *intercomm = abi::MPI_COMM_NULL as MPI_Comm;
            }
            if !array_of_errcodes.is_null() && !array_of_maxprocs.is_null() {
                let total: i64 = (0..count.max(0) as usize).map(|i| (*array_of_maxprocs.add(i)).max(0) as i64).sum();
                for i in 0..total as usize {
                    *array_of_errcodes.add(i) = abi::MPI_ERR_SPAWN;
                }
            }
            Err(MpiError::new(ErrorClass::Spawn, "spawning processes is not supported: Steadfast's launcher cannot add processes to a running job"))
        })
    }

    fn Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
        api("MPI_Comm_get_parent", None, |_| {
            if parent.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "parent pointer is NULL"));
            }
            // No process of a Steadfast job was spawned by another.
            *parent = abi::MPI_COMM_NULL as MPI_Comm;
            Ok(())
        })
    }

    fn Comm_disconnect(comm: *mut MPI_Comm) -> c_int {
        if comm.is_null() {
            return api("MPI_Comm_disconnect", None, |_| Err(MpiError::new(ErrorClass::Arg, "comm pointer is NULL")));
        }
        let c = *comm;
        if matches!(c as usize, abi::MPI_COMM_WORLD | abi::MPI_COMM_SELF | abi::MPI_COMM_NULL) {
            return api("MPI_Comm_disconnect", Some(c as usize), |_| {
                Err(MpiError::new(ErrorClass::Comm, "MPI_Comm_disconnect needs a communicator the application created"))
            });
        }
        // Disconnect completes the communicator's pending traffic: every member arrives,
        // then the communicator is freed.
        let rc = crate::comm::PMPI_Barrier(c);
        if rc != abi::MPI_SUCCESS {
            return rc;
        }
        crate::comm::PMPI_Comm_free(comm)
    }

    fn Open_port(_info: MPI_Info, _port_name: *mut c_char) -> c_int {
        api("MPI_Open_port", None, |_| Err(unsupported("MPI_Open_port")))
    }
    fn Close_port(_port_name: *const c_char) -> c_int {
        api("MPI_Close_port", None, |_| Err(MpiError::new(ErrorClass::Port, "no port is open (MPI_Open_port is not supported)")))
    }
    fn Comm_accept(_port_name: *const c_char, _info: MPI_Info, _root: c_int, comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
        api("MPI_Comm_accept", Some(comm as usize), |_| {
            if !newcomm.is_null() {
                *newcomm = abi::MPI_COMM_NULL as MPI_Comm;
            }
            Err(unsupported("MPI_Comm_accept"))
        })
    }
    fn Comm_connect(_port_name: *const c_char, _info: MPI_Info, _root: c_int, comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
        api("MPI_Comm_connect", Some(comm as usize), |_| {
            if !newcomm.is_null() {
                *newcomm = abi::MPI_COMM_NULL as MPI_Comm;
            }
            Err(unsupported("MPI_Comm_connect"))
        })
    }
    fn Publish_name(_service_name: *const c_char, _info: MPI_Info, _port_name: *const c_char) -> c_int {
        api("MPI_Publish_name", None, |_| Err(unsupported("MPI_Publish_name")))
    }
    fn Unpublish_name(_service_name: *const c_char, _info: MPI_Info, _port_name: *const c_char) -> c_int {
        api("MPI_Unpublish_name", None, |_| Err(MpiError::new(ErrorClass::Service, "the service name is not published (MPI_Publish_name is not supported)")))
    }
    fn Lookup_name(_service_name: *const c_char, _info: MPI_Info, _port_name: *mut c_char) -> c_int {
        api("MPI_Lookup_name", None, |_| Err(MpiError::new(ErrorClass::Name, "no service name is published (MPI_Publish_name is not supported)")))
    }
    fn Comm_join(_fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
        api("MPI_Comm_join", None, |_| {
            if !intercomm.is_null() {
                *intercomm = abi::MPI_COMM_NULL as MPI_Comm;
            }
            Err(unsupported("MPI_Comm_join"))
        })
    }
}

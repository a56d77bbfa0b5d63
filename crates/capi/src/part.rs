//! Partitioned point-to-point communication (MPI_Psend_init, MPI_Precv_init, MPI_Pready*,
//! MPI_Parrived).
//!
//! A partitioned send is a persistent send of all partitions as one message: MPI_Start
//! arms it, and the message leaves once the last partition is marked ready. A partitioned
//! receive is a persistent receive of the whole buffer; MPI_Parrived reports a partition as
//! arrived once the whole message has (which the standard permits: arrival may be reported
//! late, never early). Partitioned messages travel on a view of the communicator with its
//! own context (`Engine::partitioned_view`), so ordinary receives, wildcards included,
//! never match them. Several partitioned operations with the same peer and tag on one
//! communicator match in the order they are started, not (as the standard asks) in the
//! order of their initialization calls (docs/conformance.md, `part/multipart`).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use steadfast_core::request::Mode;
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Count, MPI_Datatype, MPI_Info, MPI_Request};
use crate::global::{api, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

enum Part {
    Send { ready: Vec<bool>, armed: bool },
    Recv { partitions: usize },
}

static PARTS: Mutex<Option<HashMap<Handle, Part>>> = Mutex::new(None);

/// The partitioned view of each communicator used so far (engine handles).
static VIEWS: Mutex<Option<HashMap<Handle, Handle>>> = Mutex::new(None);

/// The view partitioned operations on engine communicator `c` travel on.
fn view(g: &mut Global, c: Handle) -> Result<Handle, MpiError> {
    let mut guard = VIEWS.lock().unwrap_or_else(|p| p.into_inner());
    let views = guard.get_or_insert_with(HashMap::new);
    if let Some(&v) = views.get(&c) {
        if g.eng.comm(v).is_ok() {
            return Ok(v);
        }
    }
    let v = g.eng.partitioned_view(c)?;
    views.insert(c, v);
    Ok(v)
}

fn with_parts<R>(f: impl FnOnce(&mut HashMap<Handle, Part>) -> R) -> R {
    let mut guard = PARTS.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(HashMap::new))
}

/// MPI_Start of request `h`: a partitioned send is armed instead of started (true); anything
/// else is left to the caller (false).
pub fn on_start(_g: &mut Global, h: Handle) -> Result<bool, MpiError> {
    with_parts(|m| match m.get_mut(&h) {
        Some(Part::Send { ready, armed }) => {
            if *armed {
                return Err(err(ErrorClass::Request, "the partitioned send is already active"));
            }
            ready.iter_mut().for_each(|r| *r = false);
            *armed = true;
            Ok(true)
        }
        _ => Ok(false),
    })
}

fn partitions_arg(p: c_int) -> Result<usize, MpiError> {
    if p < 1 {
        return Err(err(ErrorClass::Arg, format!("partitions {p} must be at least 1")));
    }
    Ok(p as usize)
}

unsafe fn psend_init(func: &str, buf: *const c_void, partitions: c_int, count: i64, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    api(func, Some(comm as usize), |g| {
        let parts = partitions_arg(partitions)?;
        if count < 0 {
            return Err(err(ErrorClass::Count, format!("count {count} is negative")));
        }
        if request.is_null() {
            return Err(err(ErrorClass::Arg, "request pointer is NULL"));
        }
        let total = count.checked_mul(parts as i64).ok_or_else(|| err(ErrorClass::Count, "partitions * count overflows"))?;
        let mut spec = crate::pt2pt::send_spec(g, buf, total, datatype, dest, tag, comm, Mode::Standard)?;
        spec.comm = view(g, spec.comm)?;
        let h = g.eng.send_init(spec, true)?;
        with_parts(|m| m.insert(h, Part::Send { ready: vec![false; parts], armed: false }));
        *request = h.0 as MPI_Request;
        Ok(())
    })
}

unsafe fn precv_init(func: &str, buf: *mut c_void, partitions: c_int, count: i64, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    api(func, Some(comm as usize), |g| {
        let parts = partitions_arg(partitions)?;
        if count < 0 {
            return Err(err(ErrorClass::Count, format!("count {count} is negative")));
        }
        if request.is_null() {
            return Err(err(ErrorClass::Arg, "request pointer is NULL"));
        }
        if source == abi::MPI_ANY_SOURCE || tag == abi::MPI_ANY_TAG {
            return Err(err(ErrorClass::Arg, "partitioned receives name their source and tag (no wildcards)"));
        }
        let total = count.checked_mul(parts as i64).ok_or_else(|| err(ErrorClass::Count, "partitions * count overflows"))?;
        let mut spec = crate::pt2pt::recv_spec(g, buf, total, datatype, source, tag, comm)?;
        spec.comm = view(g, spec.comm)?;
        let h = g.eng.recv_init(spec, true)?;
        with_parts(|m| m.insert(h, Part::Recv { partitions: parts }));
        *request = h.0 as MPI_Request;
        Ok(())
    })
}

/// Mark partitions ready; the message leaves when all are.
fn ready(g: &mut Global, request: MPI_Request, list: &mut dyn Iterator<Item = c_int>) -> Result<(), MpiError> {
    let h = Handle(request as u64);
    let go = with_parts(|m| -> Result<bool, MpiError> {
        let Some(Part::Send { ready, armed }) = m.get_mut(&h) else {
            return Err(err(ErrorClass::Request, "not a partitioned send request"));
        };
        if !*armed {
            return Err(err(ErrorClass::Request, "the partitioned send was not started (MPI_Start)"));
        }
        for p in list {
            let i = usize::try_from(p).ok().filter(|&i| i < ready.len()).ok_or_else(|| err(ErrorClass::Arg, format!("partition {p} out of range 0..{}", ready.len())))?;
            if ready[i] {
                return Err(err(ErrorClass::Arg, format!("partition {p} is already marked ready")));
            }
            ready[i] = true;
        }
        if ready.iter().all(|&r| r) {
            *armed = false;
            return Ok(true);
        }
        Ok(false)
    })?;
    if go {
        g.eng.start(h)?;
    }
    Ok(())
}

mpi_api! {
    fn Psend_init(buf: *const c_void, partitions: c_int, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm,
                  _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        psend_init("MPI_Psend_init", buf, partitions, count as i64, datatype, dest, tag, comm, request)
    }
    fn Psend_init_c(buf: *const c_void, partitions: c_int, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm,
                    _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        psend_init("MPI_Psend_init_c", buf, partitions, count, datatype, dest, tag, comm, request)
    }
    fn Precv_init(buf: *mut c_void, partitions: c_int, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm,
                  _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        precv_init("MPI_Precv_init", buf, partitions, count as i64, datatype, source, tag, comm, request)
    }
    fn Precv_init_c(buf: *mut c_void, partitions: c_int, count: MPI_Count, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm,
                    _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        precv_init("MPI_Precv_init_c", buf, partitions, count, datatype, source, tag, comm, request)
    }
    fn Pready(partition: c_int, request: MPI_Request) -> c_int {
        api("MPI_Pready", None, |g| ready(g, request, &mut std::iter::once(partition)))
    }
    fn Pready_range(partition_low: c_int, partition_high: c_int, request: MPI_Request) -> c_int {
        api("MPI_Pready_range", None, |g| {
            if partition_low > partition_high {
                return Err(err(ErrorClass::Arg, format!("empty partition range {partition_low}..={partition_high}")));
            }
            ready(g, request, &mut (partition_low..=partition_high))
        })
    }
    fn Pready_list(length: c_int, array_of_partitions: *const c_int, request: MPI_Request) -> c_int {
        api("MPI_Pready_list", None, |g| {
            if length < 0 || (length > 0 && array_of_partitions.is_null()) {
                return Err(err(ErrorClass::Arg, "invalid partition list"));
            }
            let list = if length == 0 { &[][..] } else { std::slice::from_raw_parts(array_of_partitions, length as usize) };
            ready(g, request, &mut list.iter().copied())
        })
    }
    fn Parrived(request: MPI_Request, partition: c_int, flag: *mut c_int) -> c_int {
        api("MPI_Parrived", None, |g| {
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag pointer is NULL"));
            }
            let h = Handle(request as u64);
            let parts = with_parts(|m| match m.get(&h) {
                Some(Part::Recv { partitions }) => Ok(*partitions),
                _ => Err(err(ErrorClass::Request, "not a partitioned receive request")),
            })?;
            if !(0..parts as c_int).contains(&partition) {
                return Err(err(ErrorClass::Arg, format!("partition {partition} out of range 0..{parts}")));
            }
            if g.eng.is_inactive(h)? {
                // An inactive request's partitions all count as arrived.
                *flag = 1;
                return Ok(());
            }
            if !g.eng.is_complete(h)? {
                g.eng.poll_progress()?;
            }
            *flag = g.eng.is_complete(h)? as c_int;
            Ok(())
        })
    }
}

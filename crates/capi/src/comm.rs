//! Communicator entry points: rank, size, dup (with attribute copying), free, split,
//! create, create_group, intercommunicators, comparison, names and info hints.
//!
//! Every new communicator inherits its parent's error handler (taking a reference on a user
//! handler). MPI_Comm_idup agrees on the new context in the background (see core's
//! `group.rs`); attribute copy callbacks run at the call.

use std::ffi::{c_char, c_int};

use steadfast_core::group::{self as grp, Comparison};
use steadfast_core::info::Info;
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Group, MPI_Info, MPI_Request};
use steadfast_core::coll::{Buf, Coll};
use crate::env::write_cstr;
use crate::errhandler;
use crate::global::{api, api_unlocked, comm_handle, locked, Failure, Global};
use crate::group::group_of;
use crate::info::{info_arg, out_info};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// Info hints a communicator keeps (the standard's assertions); others are ignored.
fn is_comm_hint(key: &str) -> bool {
    key.starts_with("mpi_assert_")
}

fn comm_hints(info: Option<&Info>) -> Info {
    let mut out = Info::new();
    for (k, v) in info.into_iter().flat_map(|i| i.iter()) {
        if is_comm_hint(k) {
            let _ = out.set(k, v);
        }
    }
    out
}

/// Hand a newly built communicator (or none) to the application.
unsafe fn adopt(g: &mut Global, n: Option<Handle>, out: *mut MPI_Comm) -> Result<(), MpiError> {
    match n {
        Some(n) => {
            let e = g.eng.comm(n)?.errhandler;
            errhandler::retain(g, e);
            *out = n.0 as MPI_Comm;
        }
        None => *out = abi::MPI_COMM_NULL as MPI_Comm,
    }
    Ok(())
}

/// The tag the processes calling a `*_from_group(s)` constructor agree on: a hash of the
/// string tag (two different string tags colliding would only matter for creations running
/// at the same time between the same processes).
unsafe fn stringtag_hash(tag: *const c_char) -> Result<c_int, MpiError> {
    if tag.is_null() {
        return Err(err(ErrorClass::Arg, "stringtag is NULL"));
    }
    let bytes = std::ffi::CStr::from_ptr(tag).to_bytes();
    let h = bytes.iter().fold(0x811c_9dc5u32, |h, b| (h ^ *b as u32).wrapping_mul(0x0100_0193));
    Ok((h & 0x1fff_ffff) as c_int)
}

fn check_out(p: *mut MPI_Comm) -> Result<(), MpiError> {
    if p.is_null() {
        return Err(err(ErrorClass::Arg, "newcomm pointer is NULL"));
    }
    Ok(())
}

/// THREAD_MULTIPLE: wait for request `h` with the lock released, release it, and make a
/// failed transfer the call's error.
fn wait_request(c: &mut crate::global::Call, h: Handle) -> Result<steadfast_core::request::Status, MpiError> {
    let r = c.wait(h).and_then(|s| match s.error {
        Some(class) => Err(MpiError::new(class, "a transfer of the communicator's construction failed")),
        None => Ok(s),
    });
    c.g().eng.release(h);
    r
}

/// THREAD_MULTIPLE: wait, with the lock released, for the background agreement `req` on the
/// context of new communicator `n`; on failure `n` is released.
fn wait_agreement(c: &mut crate::global::Call, n: Handle, req: Handle) -> Result<(), MpiError> {
    let r = wait_request(c, req);
    if r.is_err() {
        let _ = c.g().eng.release_comm(n);
    }
    r.map(|_| ())
}

/// A byte buffer as a collective's argument.
fn bytes_buf(g: &Global, p: *mut u8, len: usize) -> Buf {
    Buf { ptr: p, count: len, dtype: g.eng.byte_type() }
}

/// Whether the communicator constructors take their nonblocking form (an agreement by a
/// nonblocking duplicate, allgathers as requests), waited for with the lock released under
/// THREAD_MULTIPLE, rather than the engine's blocking form. The two forms exchange different
/// messages, so every member of a communicator must take the same one: the choice depends
/// on the job (its fault-tolerance mode), not on the thread level each process asked for —
/// processes of one job may ask for different levels, and a constructor that chose by the
/// level hung when they did. Run-through mode keeps the blocking forms (their failure
/// handling is what the run-through tests cover) except under THREAD_MULTIPLE, so there
/// the processes of a job must agree on the thread level (docs/mpi5.md).
pub(crate) fn nonblocking_constructors(g: &crate::global::Global) -> bool {
    crate::global::multiple() || !g.eng.run_through()
}

/// MPI_Comm_split and MPI_Comm_split_type on `h` (after argument checks): the engine's
/// blocking split, or one whose waits release the lock ([`nonblocking_constructors`]), so
/// threads splitting different communicators do not wait for each other across processes. The
/// (color, key) pairs travel by an allgather numbered with the parent's blocking collectives
/// (over the local group and across, for an intercommunicator), a nonblocking duplicate of
/// the parent agrees on the contexts, and it becomes the new communicator.
fn split(c: &mut crate::global::Call, h: Handle, color: c_int, key: c_int) -> Result<Option<Handle>, MpiError> {
    let g = c.g();
    if !nonblocking_constructors(g) {
        return g.eng.comm_split(h, color, key);
    }
    if color < 0 && color != abi::MPI_UNDEFINED {
        return Err(err(ErrorClass::Arg, format!("invalid color {color} (must be non-negative or MPI_UNDEFINED)")));
    }
    let parent = g.eng.comm(h)?.clone();
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&color.to_le_bytes());
    mine[4..].copy_from_slice(&key.to_le_bytes());
    let mut local = vec![0u8; 8 * parent.group.len()];
    let mut remote = vec![0u8; 8 * parent.remote.as_ref().map_or(0, |r| r.len())];
    let send = bytes_buf(g, mine.as_mut_ptr(), 8);
    let over = parent.local.unwrap_or(h);
    let a = g.eng.icoll_blocking(over, Coll::Allgather { send: Some(send.clone()), recv: bytes_buf(g, local.as_mut_ptr(), 8) })?;
    let b = match parent.remote {
        Some(_) => match g.eng.icoll_blocking(h, Coll::Allgather { send: Some(send), recv: bytes_buf(g, remote.as_mut_ptr(), 8) }) {
            Ok(b) => Some(b),
            Err(e) => {
                // The first allgather writes into `local`: let it finish before it goes.
                let _ = wait_request(c, a);
                return Err(e);
            }
        },
        None => None,
    };
    let ra = wait_request(c, a);
    let rb = b.map(|b| wait_request(c, b)).transpose();
    ra?;
    rb?;
    let (n, req) = c.g().eng.comm_idup(h)?;
    wait_agreement(c, n, req)?;
    c.g().eng.comm_split_adopt(n, color, &local, parent.remote.is_some().then_some(&remote[..]))
}

/// MPI_Intercomm_create under THREAD_MULTIPLE: the engine's form waits holding the lock, so
/// threads creating intercommunicators from different communicators could wait for each other
/// across processes. The same steps with waits that release it: the leaders swap their
/// groups, each broadcasts the other's to its group (numbered with the local communicator's
/// blocking collectives), and both groups agree on the contexts in the background. `peer`
/// matters at the local leader only.
fn intercomm_create_released(
    c: &mut crate::global::Call,
    l: Handle,
    local_leader: c_int,
    peer: Option<Handle>,
    remote_leader: c_int,
    tag: c_int,
) -> Result<Handle, MpiError> {
    let g = c.g();
    let lc = g.eng.comm(l)?;
    if lc.remote.is_some() {
        return Err(err(ErrorClass::Comm, "the local communicator must be an intracommunicator"));
    }
    if !(0..lc.size()).contains(&local_leader) {
        return Err(err(ErrorClass::Rank, format!("local leader {local_leader} is not a rank of the local communicator (size {})", lc.size())));
    }
    let is_leader = lc.rank == local_leader;
    let mut msg = Vec::new();
    let mut leader = None;
    if is_leader {
        let peer = peer.ok_or_else(|| err(ErrorClass::Comm, "the local leader needs a valid peer communicator"))?;
        let (mut out, mut theirs) = (Vec::new(), Vec::new());
        let [s, r] = g.eng.intercomm_leaders_start(l, peer, remote_leader, tag, &mut out, &mut theirs)?;
        let rs = wait_request(c, s);
        let rr = wait_request(c, r);
        rs?;
        theirs.truncate(rr?.bytes as usize);
        msg = c.g().eng.intercomm_group_message(peer, tag, &theirs)?;
        leader = Some((peer, remote_leader));
    }
    let g = c.g();
    let mut len = (msg.len() as u64).to_le_bytes();
    let b = g.eng.icoll_blocking(l, Coll::Bcast { buf: bytes_buf(g, len.as_mut_ptr(), 8), root: local_leader })?;
    wait_request(c, b)?;
    msg.resize(u64::from_le_bytes(len) as usize, 0);
    let g = c.g();
    let b = g.eng.icoll_blocking(l, Coll::Bcast { buf: bytes_buf(g, msg.as_mut_ptr(), msg.len()), root: local_leader })?;
    wait_request(c, b)?;
    let (n, req) = c.g().eng.intercomm_icreate(l, local_leader, leader, &msg)?;
    wait_agreement(c, n, req)?;
    Ok(n)
}

/// MPI_Comm_create on intercommunicator `h` under THREAD_MULTIPLE, with waits that release
/// the lock. Every process tells the other group, by an allgather across (numbered with the
/// intercommunicator's blocking collectives), where each member of its local group stands in
/// its `members` (absent: u32::MAX); the remote leader's answer is the remote group, as the
/// standard asks every member of a group to pass the same one. A nonblocking duplicate agrees
/// on the contexts and becomes the new intercommunicator.
fn create_inter_released(
    c: &mut crate::global::Call,
    h: Handle,
    local: &[u32],
    remote: &[u32],
    members: Vec<u32>,
) -> Result<Option<Handle>, MpiError> {
    let valid = members.iter().all(|w| local.contains(w));
    let mut mine: Vec<u8> = Vec::with_capacity(4 * local.len());
    for w in local {
        let at = members.iter().position(|m| m == w).filter(|_| valid).map_or(u32::MAX, |p| p as u32);
        mine.extend_from_slice(&at.to_le_bytes());
    }
    let mut theirs = vec![0u8; 4 * remote.len() * remote.len()];
    let g = c.g();
    let a = g.eng.icoll_blocking(h, Coll::Allgather {
        send: Some(bytes_buf(g, mine.as_mut_ptr(), mine.len())),
        recv: bytes_buf(g, theirs.as_mut_ptr(), 4 * remote.len()),
    })?;
    wait_request(c, a)?;
    let (n, req) = c.g().eng.comm_idup(h)?;
    wait_agreement(c, n, req)?;
    let g = c.g();
    if !valid {
        let _ = g.eng.release_comm(n);
        return Err(err(ErrorClass::Group, "the group is not a subgroup of the local group"));
    }
    // The remote leader's positions: block 0 of what arrived.
    let mut placed: Vec<(u32, u32)> = remote
        .iter()
        .enumerate()
        .filter_map(|(j, &w)| {
            let at = u32::from_le_bytes(theirs[4 * j..4 * j + 4].try_into().ok()?);
            (at != u32::MAX).then_some((at, w))
        })
        .collect();
    placed.sort_unstable();
    let remote_group = placed.into_iter().map(|(_, w)| w).collect();
    g.eng.intercomm_create_adopt(n, members, remote_group)
}

fn drop_comm(g: &mut Global, h: Handle) -> Result<(), MpiError> {
    let comm = g.eng.release_comm(h)?;
    errhandler::release(g, comm.errhandler);
    g.tables.comm_info.remove(&h);
    g.tables.comm_attrs.remove(&h);
    Ok(())
}

/// Comm_dup and its variants: duplicate, copy attributes through their callbacks, set hints.
/// With `request`, the duplication is nonblocking (the context agreement completes in the
/// background; attributes are copied at once).
unsafe fn dup(func: &str, comm: MPI_Comm, info: Option<MPI_Info>, newcomm: *mut MPI_Comm, request: Option<*mut MPI_Request>) -> Result<Handle, Failure> {
    check_out(newcomm)?;
    if request.is_some_and(|r| r.is_null()) {
        return Err(err(ErrorClass::Arg, "request pointer is NULL").into());
    }
    let (h, n) = locked(|g| {
        let h = comm_handle(g, comm as usize)?;
        let hints = match info {
            Some(i) => comm_hints(info_arg(g, i)?.as_ref()),
            None => g.tables.comm_info.get(&h).cloned().unwrap_or_default(),
        };
        let n = match request {
            Some(r) => {
                let (n, req) = g.eng.comm_idup(h)?;
                *r = req.0 as MPI_Request;
                n
            }
            None if nonblocking_constructors(g) => {
                // The context agreement runs in the background while this thread waits
                // with the lock released, so other threads' calls (perhaps the matching
                // dup on another communicator) go on.
                let (n, req) = g.eng.comm_idup(h)?;
                g.pending.push(req);
                n
            }
            None => g.eng.dup_comm(h)?,
        };
        adopt(g, Some(n), newcomm)?;
        if !hints.is_empty() {
            g.tables.comm_info.insert(n, hints);
        }
        Ok((h, n))
    })?;
    if let Err(e) = crate::attr::copy_attrs(comm, h, n, n.0 as MPI_Comm) {
        let _ = locked(|g| drop_comm(g, n));
        *newcomm = abi::MPI_COMM_NULL as MPI_Comm;
        tracing::debug!("{func}: an attribute copy callback failed");
        return Err(e);
    }
    Ok(n)
}

/// Color of this process for MPI_Comm_split_type with a shared-memory split: one per host.
fn host_color() -> c_int {
    let mut buf = [0u8; 256];
    // The launcher names each host of a job spanning hosts (hosts may share a kernel's host
    // name, as network namespaces do); else the host name decides.
    let named = steadfast_config::lookup(steadfast_runtime::env::HOST).filter(|h| !h.is_empty());
    // SAFETY: buf is 256 bytes.
    let host = if let Some(h) = named {
        h.into_bytes()
    } else if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut c_char, buf.len()) } == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        buf[..end].to_vec()
    } else {
        b"localhost".to_vec()
    };
    // FNV-1a, folded to a non-negative int.
    let mut h: u32 = 0x811c_9dc5;
    for b in host {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    (h & 0x7fff_ffff) as c_int
}

fn comparison(c: Comparison) -> c_int {
    match c {
        Comparison::Ident => abi::MPI_IDENT,
        Comparison::Congruent => abi::MPI_CONGRUENT,
        Comparison::Similar => abi::MPI_SIMILAR,
        Comparison::Unequal => abi::MPI_UNEQUAL,
    }
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

    fn Barrier(comm: MPI_Comm) -> c_int {
        api("MPI_Barrier", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if crate::global::multiple() {
                // Waited for after the body with the lock released (global::api_with).
                let r = g.eng.icoll_blocking_user(h, steadfast_core::coll::Coll::Barrier)?;
                g.pending.push(r);
                return Ok(());
            }
            g.eng.barrier(h)
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
            if comm_name.is_null() || resultlen.is_null() {
                return Err(err(ErrorClass::Arg, "name or resultlen is NULL"));
            }
            // MPI 4.1: the null handle's name is its constant's name.
            if comm as usize == abi::MPI_COMM_NULL {
                *resultlen = write_cstr(comm_name, "MPI_COMM_NULL", abi::MPI_MAX_OBJECT_NAME as usize);
                return Ok(());
            }
            let h = comm_handle(g, comm as usize)?;
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

    fn Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
        api_unlocked("MPI_Comm_dup", Some(comm as usize), || dup("MPI_Comm_dup", comm, None, newcomm, None).map(|_| ()))
    }

    fn Comm_dup_with_info(comm: MPI_Comm, info: MPI_Info, newcomm: *mut MPI_Comm) -> c_int {
        api_unlocked("MPI_Comm_dup_with_info", Some(comm as usize), || {
            dup("MPI_Comm_dup_with_info", comm, Some(info), newcomm, None).map(|_| ())
        })
    }

    fn Comm_idup(comm: MPI_Comm, newcomm: *mut MPI_Comm, request: *mut MPI_Request) -> c_int {
        api_unlocked("MPI_Comm_idup", Some(comm as usize), || dup("MPI_Comm_idup", comm, None, newcomm, Some(request)).map(|_| ()))
    }

    fn Comm_idup_with_info(comm: MPI_Comm, info: MPI_Info, newcomm: *mut MPI_Comm, request: *mut MPI_Request) -> c_int {
        api_unlocked("MPI_Comm_idup_with_info", Some(comm as usize), || {
            dup("MPI_Comm_idup_with_info", comm, Some(info), newcomm, Some(request)).map(|_| ())
        })
    }

    fn Comm_free(comm: *mut MPI_Comm) -> c_int {
        let c = if comm.is_null() { abi::MPI_COMM_NULL } else { *comm as usize };
        api_unlocked("MPI_Comm_free", Some(c), || {
            if comm.is_null() {
                return Err(err(ErrorClass::Arg, "comm pointer is NULL").into());
            }
            let h = locked(|g| {
                let h = comm_handle(g, c)?;
                if h == g.eng.world || h == g.eng.self_comm {
                    return Err(err(ErrorClass::Comm, "cannot free a predefined communicator"));
                }
                Ok(h)
            })?;
            // Attributes go first; a failing delete callback leaves the communicator alive.
            crate::attr::delete_all(c as MPI_Comm, h)?;
            locked(|g| drop_comm(g, h))?;
            *comm = abi::MPI_COMM_NULL as MPI_Comm;
            Ok(())
        })
    }

    fn Comm_split(comm: MPI_Comm, color: c_int, key: c_int, newcomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Comm_split", |_| Some(comm as usize), |c| {
            let h = comm_handle(c.g(), comm as usize)?;
            check_out(newcomm)?;
            let n = split(c, h, color, key)?;
            adopt(c.g(), n, newcomm)
        })
    }

    fn Comm_split_type(comm: MPI_Comm, split_type: c_int, key: c_int, info: MPI_Info, newcomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Comm_split_type", |_| Some(comm as usize), |c| {
            let g = c.g();
            let h = comm_handle(g, comm as usize)?;
            check_out(newcomm)?;
            let info = info_arg(g, info)?;
            let shared_requested = info
                .as_ref()
                .and_then(|i| i.get("mpi_hw_resource_type").ok().flatten().map(|v| v == "mpi_shared_memory"))
                .unwrap_or(false);
            // All ranks of a job share one host today; the host name still decides, so the
            // split stays right when ranks spread over hosts.
            let color = match split_type {
                abi::MPI_UNDEFINED => abi::MPI_UNDEFINED,
                abi::MPI_COMM_TYPE_SHARED => host_color(),
                abi::MPI_COMM_TYPE_HW_GUIDED | abi::MPI_COMM_TYPE_RESOURCE_GUIDED if shared_requested => host_color(),
                abi::MPI_COMM_TYPE_HW_GUIDED | abi::MPI_COMM_TYPE_RESOURCE_GUIDED => abi::MPI_UNDEFINED,
                abi::MPI_COMM_TYPE_HW_UNGUIDED => host_color(),
                t => {
                    // Take part in the agreement anyway, so the other members do not hang.
                    split(c, h, abi::MPI_UNDEFINED, key)?;
                    return Err(err(ErrorClass::Arg, format!("invalid split_type {t}")));
                }
            };
            let mut n = split(c, h, color, key)?;
            let g = c.g();
            if split_type == abi::MPI_COMM_TYPE_HW_UNGUIDED {
                // Unguided splits must return a strictly smaller group, or nothing.
                if let Some(x) = n {
                    if g.eng.comm(x)?.size() == g.eng.comm(h)?.size() {
                        g.eng.release_comm(x)?;
                        n = None;
                    }
                }
            }
            adopt(g, n, newcomm)
        })
    }

    fn Comm_create(comm: MPI_Comm, group: MPI_Group, newcomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Comm_create", |_| Some(comm as usize), |c| {
            let g = c.g();
            let h = comm_handle(g, comm as usize)?;
            check_out(newcomm)?;
            let members = group_of(g, group)?;
            let parent = g.eng.comm(h)?.clone();
            if !nonblocking_constructors(g) {
                let n = g.eng.comm_create(h, &members)?;
                return adopt(g, n, newcomm);
            }
            if let Some(remote) = parent.remote.clone() {
                let n = create_inter_released(c, h, &parent.group, &remote, members.to_vec())?;
                return adopt(c.g(), n, newcomm);
            }
            // THREAD_MULTIPLE: the engine's MPI_Comm_create waits holding the lock, so
            // threads creating communicators from different parents could wait for each
            // other across processes. A nonblocking dup of the parent agrees on a fresh
            // context instead, waited for with the lock released, and the dup becomes the
            // new communicator (context ids are never reused, so nothing else holds it).
            let valid = members.iter().all(|w| parent.group.contains(w));
            let (n, req) = g.eng.comm_idup(h)?;
            let r = c.wait(req);
            let g = c.g();
            g.eng.release(req);
            r?;
            let me = g.eng.rank;
            match members.iter().position(|w| *w == me) {
                Some(rank) if valid => {
                    let nc = g.eng.comm_mut(n)?;
                    nc.rank = rank as c_int;
                    nc.group = members;
                    nc.topo = None;
                    adopt(g, Some(n), newcomm)
                }
                _ => {
                    // Not a member: nothing will arrive on the context here.
                    g.eng.release_comm(n)?;
                    if !valid {
                        return Err(err(ErrorClass::Group, "the group is not a subgroup of the communicator's group"));
                    }
                    adopt(g, None, newcomm)
                }
            }
        })
    }

    fn Comm_create_group(comm: MPI_Comm, group: MPI_Group, tag: c_int, newcomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Comm_create_group", |_| Some(comm as usize), |c| {
            let g = c.g();
            let h = comm_handle(g, comm as usize)?;
            check_out(newcomm)?;
            if !(0..=crate::pt2pt::TAG_UB).contains(&tag) {
                return Err(err(ErrorClass::Tag, format!("invalid tag {tag}")));
            }
            let members = group_of(g, group)?;
            if !nonblocking_constructors(g) {
                let n = g.eng.comm_create_group(h, &members, tag)?;
                return adopt(g, n, newcomm);
            }
            // THREAD_MULTIPLE: the engine's blocking form waits holding the lock, so threads
            // creating communicators from different parents (or tags) could wait for each
            // other across processes. The members agree on the context in the background
            // instead, waited for with the lock released.
            let Some((n, req)) = g.eng.comm_icreate_group(h, &members, tag)? else {
                return adopt(g, None, newcomm);
            };
            wait_agreement(c, n, req)?;
            adopt(c.g(), Some(n), newcomm)
        })
    }

    fn Comm_remote_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
        api("MPI_Comm_remote_size", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if size.is_null() {
                return Err(err(ErrorClass::Arg, "size pointer is NULL"));
            }
            match &g.eng.comm(h)?.remote {
                Some(r) => *size = r.len() as c_int,
                None => return Err(err(ErrorClass::Comm, "MPI_Comm_remote_size needs an intercommunicator")),
            }
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
            let local = grp::compare(&ca.group, &cb.group);
            let remote = match (&ca.remote, &cb.remote) {
                (None, None) => Comparison::Ident,
                (Some(x), Some(y)) => grp::compare(x, y),
                _ => Comparison::Unequal,
            };
            *result = comparison(if a == b {
                Comparison::Ident
            } else if local == Comparison::Ident && remote == Comparison::Ident {
                Comparison::Congruent
            } else if local != Comparison::Unequal && remote != Comparison::Unequal {
                Comparison::Similar
            } else {
                Comparison::Unequal
            });
            Ok(())
        })
    }

    fn Intercomm_create(local_comm: MPI_Comm, local_leader: c_int, peer_comm: MPI_Comm, remote_leader: c_int, tag: c_int, newintercomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Intercomm_create", |_| Some(local_comm as usize), |c| {
            let g = c.g();
            let l = comm_handle(g, local_comm as usize)?;
            check_out(newintercomm)?;
            if !(0..=crate::pt2pt::TAG_UB).contains(&tag) {
                return Err(err(ErrorClass::Tag, format!("invalid tag {tag}")));
            }
            // The peer communicator only matters at the local leader.
            let is_leader = g.eng.comm(l)?.rank == local_leader;
            let peer = if is_leader {
                Some(comm_handle(g, peer_comm as usize)?)
            } else {
                comm_handle(g, peer_comm as usize).ok()
            };
            if !nonblocking_constructors(g) {
                let n = g.eng.intercomm_create(l, local_leader, peer, remote_leader, tag)?;
                return adopt(g, Some(n), newintercomm);
            }
            let n = intercomm_create_released(c, l, local_leader, peer, remote_leader, tag)?;
            adopt(c.g(), Some(n), newintercomm)
        })
    }

    fn Comm_create_from_group(group: MPI_Group, stringtag: *const c_char, _info: MPI_Info, errhandler: abi::MPI_Errhandler, newcomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Comm_create_from_group", |_| None, |c| {
            let g = c.g();
            check_out(newcomm)?;
            let tag = stringtag_hash(stringtag)?;
            errhandler::check_errhandler(g, errhandler as usize)?;
            let members = group_of(g, group)?;
            if grp::rank_of(&members, g.eng.rank).is_none() {
                return Err(err(ErrorClass::Group, "the calling process is not a member of the group"));
            }
            let world = g.eng.world;
            let n = if nonblocking_constructors(g) {
                // As MPI_Comm_create_group: agreed in the background, waited for with the
                // lock released, so threads creating from different tags do not block
                // each other across processes.
                match g.eng.comm_icreate_group(world, &members, tag)? {
                    None => None,
                    Some((n, req)) => {
                        wait_agreement(c, n, req)?;
                        Some(n)
                    }
                }
            } else {
                g.eng.comm_create_group(world, &members, tag)?
            };
            let g = c.g();
            if let Some(n) = n {
                g.eng.comm_mut(n)?.errhandler = errhandler as u64;
            }
            adopt(g, n, newcomm)
        })
    }

    fn Intercomm_create_from_groups(local_group: MPI_Group, local_leader: c_int, remote_group: MPI_Group, remote_leader: c_int,
                                    stringtag: *const c_char, _info: MPI_Info, errhandler: abi::MPI_Errhandler, newintercomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Intercomm_create_from_groups", |_| None, |c| {
            let g = c.g();
            check_out(newintercomm)?;
            let tag = stringtag_hash(stringtag)?;
            errhandler::check_errhandler(g, errhandler as usize)?;
            let local = group_of(g, local_group)?;
            let remote = group_of(g, remote_group)?;
            if grp::rank_of(&local, g.eng.rank).is_none() {
                return Err(err(ErrorClass::Group, "the calling process is not a member of the local group"));
            }
            if !(0..local.len() as c_int).contains(&local_leader) {
                return Err(err(ErrorClass::Rank, format!("local leader {local_leader} is not a rank of the local group (size {})", local.len())));
            }
            let Some(&remote_world) = usize::try_from(remote_leader).ok().and_then(|r| remote.get(r)) else {
                return Err(err(ErrorClass::Rank, format!("remote leader {remote_leader} is not a rank of the remote group (size {})", remote.len())));
            };
            // Every process of the job is in MPI_COMM_WORLD (no dynamic processes): the local
            // group agrees on a communicator, and the leaders meet over MPI_COMM_WORLD's
            // collective context. Under THREAD_MULTIPLE both steps wait with the lock
            // released, as MPI_Comm_create_group and MPI_Intercomm_create do.
            let world = g.eng.world;
            let nonblocking = nonblocking_constructors(g);
            let lc = if nonblocking {
                match g.eng.comm_icreate_group(world, &local, tag)? {
                    Some((n, req)) => {
                        wait_agreement(c, n, req)?;
                        Some(n)
                    }
                    None => None,
                }
            } else {
                g.eng.comm_create_group(world, &local, tag)?
            };
            let lc = lc.ok_or_else(|| err(ErrorClass::Intern, "local group communicator not created"))?;
            let r = if nonblocking {
                intercomm_create_released(c, lc, local_leader, Some(world), remote_world as c_int, tag)
            } else {
                c.g().eng.intercomm_create(lc, local_leader, Some(world), remote_world as c_int, tag)
            };
            let g = c.g();
            g.eng.release_comm(lc)?;
            let n = r?;
            g.eng.comm_mut(n)?.errhandler = errhandler as u64;
            adopt(g, Some(n), newintercomm)
        })
    }

    fn Intercomm_merge(intercomm: MPI_Comm, high: c_int, newintracomm: *mut MPI_Comm) -> c_int {
        crate::global::api_blocking("MPI_Intercomm_merge", |_| Some(intercomm as usize), |c| {
            let g = c.g();
            let h = comm_handle(g, intercomm as usize)?;
            check_out(newintracomm)?;
            if !nonblocking_constructors(g) {
                let n = g.eng.intercomm_merge(h, high != 0)?;
                return adopt(g, Some(n), newintracomm);
            }
            // THREAD_MULTIPLE: as MPI_Intercomm_create, with waits that release the lock.
            // An allgather across (numbered with the intercommunicator's blocking
            // collectives) tells each side the other's `high` (the remote leader's counts;
            // the standard asks for one value per group), and a nonblocking duplicate agrees
            // on the contexts and becomes the merged communicator.
            let Some(remote) = g.eng.comm(h)?.remote.clone() else {
                return Err(err(ErrorClass::Comm, "MPI_Intercomm_merge needs an intercommunicator"));
            };
            let mut mine = [(high != 0) as u8];
            let mut theirs = vec![0u8; remote.len()];
            let send = bytes_buf(g, mine.as_mut_ptr(), 1);
            let a = g.eng.icoll_blocking(h, Coll::Allgather { send: Some(send), recv: bytes_buf(g, theirs.as_mut_ptr(), 1) })?;
            wait_request(c, a)?;
            let (n, req) = c.g().eng.comm_idup(h)?;
            wait_agreement(c, n, req)?;
            let g = c.g();
            let n = match g.eng.intercomm_merge_adopt(n, high != 0, theirs.first().is_some_and(|&x| x != 0)) {
                Ok(n) => n,
                Err(e) => {
                    let _ = g.eng.release_comm(n);
                    return Err(e);
                }
            };
            adopt(g, Some(n), newintracomm)
        })
    }

    fn Comm_set_info(comm: MPI_Comm, info: MPI_Info) -> c_int {
        api("MPI_Comm_set_info", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            let i = info_arg(g, info)?;
            let hints = g.tables.comm_info.entry(h).or_default();
            for (k, v) in comm_hints(i.as_ref()).iter() {
                hints.set(k, v)?;
            }
            Ok(())
        })
    }

    fn Comm_get_info(comm: MPI_Comm, info_used: *mut MPI_Info) -> c_int {
        api("MPI_Comm_get_info", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            let i = g.tables.comm_info.get(&h).cloned().unwrap_or_default();
            out_info(g, i, info_used)
        })
    }
}

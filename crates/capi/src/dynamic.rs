//! Dynamic process management. Under our launcher MPI_Comm_spawn / spawn_multiple start a
//! new world of the job: the parents agree on the intercommunicator's context, the root
//! asks the launcher (the engine's `spawn_world`), broadcasts the outcome, and every parent
//! reaches the children (`connect_procs`); a spawned process builds the intercommunicator
//! to its parents in MPI_Init (`connect_parent`). Under a PMI process manager, in a
//! singleton and in fault-tolerant modes spawning fails with MPI_ERR_SPAWN and a message
//! that says why. Ports (MPI_Open_port, MPI_Comm_accept / MPI_Comm_connect), name
//! publishing (a file per name in the job directory) and MPI_Comm_join connect disjoint
//! groups of the job's first world into an intercommunicator.
//! A port or a socket peer of another job is refused with MPI_ERR_PORT /
//! MPI_ERR_UNSUPPORTED_OPERATION. MPI_Comm_get_parent (no parent: MPI_COMM_NULL) and
//! MPI_Comm_disconnect work.
//!
//! Accept/connect: the connecting root sends its world rank to the port's owner on
//! MPI_COMM_WORLD's collective context (tag from the port's number), the accepting root
//! answers with its own, each root broadcasts the other's world rank to its group, and both
//! groups build the intercommunicator with MPI_Intercomm_create over MPI_COMM_WORLD.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::io::Write;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use steadfast_core::{ErrorClass, Handle, MpiError};
use steadfast_runtime::wire::SpawnCmd;

use crate::abi::{self, MPI_Comm, MPI_Info};
use crate::global::{api, api_blocking, comm_handle, Call, Global};
use crate::mpi_api;

mpi_api! {
    fn Comm_spawn(command: *const c_char, argv: *mut *mut c_char, maxprocs: c_int, info: MPI_Info, root: c_int, comm: MPI_Comm,
                  intercomm: *mut MPI_Comm, array_of_errcodes: *mut c_int) -> c_int {
        api_blocking("MPI_Comm_spawn", |_| Some(comm as usize), |c| {
            let g = c.g();
            let at_root = spawn_checks(g, comm, root, intercomm)?;
            *intercomm = abi::MPI_COMM_NULL as MPI_Comm;
            let mut cmds = None;
            if at_root {
                if command.is_null() {
                    return Err(MpiError::new(ErrorClass::Arg, "command is NULL"));
                }
                if maxprocs <= 0 {
                    return Err(MpiError::new(ErrorClass::Arg, format!("maxprocs {maxprocs} is not positive")));
                }
                cmds = Some(vec![spawn_cmd(g, command, argv, maxprocs, info)?]);
            }
            spawn_world(c, comm, root, cmds, intercomm, array_of_errcodes)
        })
    }

    fn Comm_spawn_multiple(count: c_int, array_of_commands: *mut *mut c_char, array_of_argv: *mut *mut *mut c_char, array_of_maxprocs: *const c_int,
                           array_of_info: *const MPI_Info, root: c_int, comm: MPI_Comm, intercomm: *mut MPI_Comm, array_of_errcodes: *mut c_int) -> c_int {
        api_blocking("MPI_Comm_spawn_multiple", |_| Some(comm as usize), |c| {
            let g = c.g();
            let at_root = spawn_checks(g, comm, root, intercomm)?;
            *intercomm = abi::MPI_COMM_NULL as MPI_Comm;
            let mut cmds = None;
            if at_root {
                if count <= 0 {
                    return Err(MpiError::new(ErrorClass::Arg, format!("count {count} is not positive")));
                }
                if array_of_commands.is_null() || array_of_maxprocs.is_null() {
                    return Err(MpiError::new(ErrorClass::Arg, "array_of_commands or array_of_maxprocs is NULL"));
                }
                let mut v = Vec::with_capacity(count as usize);
                for i in 0..count as usize {
                    let cmd = *array_of_commands.add(i);
                    if cmd.is_null() {
                        return Err(MpiError::new(ErrorClass::Arg, format!("command {i} is NULL")));
                    }
                    let m = *array_of_maxprocs.add(i);
                    if m < 0 {
                        return Err(MpiError::new(ErrorClass::Arg, format!("maxprocs {m} of command {i} is negative")));
                    }
                    let argv = if array_of_argv.is_null() { std::ptr::null_mut() } else { *array_of_argv.add(i) };
                    let info = if array_of_info.is_null() { abi::MPI_INFO_NULL as MPI_Info } else { *array_of_info.add(i) };
                    if m > 0 {
                        v.push(spawn_cmd(g, cmd, argv, m, info)?);
                    }
                }
                if v.is_empty() {
                    return Err(MpiError::new(ErrorClass::Arg, "every maxprocs is 0: nothing to start"));
                }
                cmds = Some(v);
            }
            spawn_world(c, comm, root, cmds, intercomm, array_of_errcodes)
        })
    }

    fn Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
        api("MPI_Comm_get_parent", None, |g| {
            if parent.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "parent pointer is NULL"));
            }
            // The intercommunicator MPI_Init built, until the application freed or
            // disconnected it (handles are generation-checked: a freed one is gone).
            let h = PARENT.load(Ordering::Relaxed);
            let live = h != 0 && g.eng.comm(steadfast_core::slab::Handle(h)).is_ok();
            *parent = if live { h as MPI_Comm } else { abi::MPI_COMM_NULL as MPI_Comm };
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

    fn Open_port(_info: MPI_Info, port_name: *mut c_char) -> c_int {
        api("MPI_Open_port", None, |g| {
            if port_name.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "port_name is NULL"));
            }
            let id = NEXT_PORT.fetch_add(1, Ordering::Relaxed) & PORT_MASK;
            open_ports().push(id);
            let me = g.eng.proc_index(g.eng.rank);
            let name = format!("{PORT_PREFIX}{}:{me}:{id}", job_id());
            write_cstr(port_name, &name, abi::MPI_MAX_PORT_NAME as usize);
            Ok(())
        })
    }
    fn Close_port(port_name: *const c_char) -> c_int {
        api("MPI_Close_port", None, |g| {
            let port = parse_port(port_name)?;
            let mut open = open_ports();
            match open.iter().position(|p| *p == port.id) {
                Some(i) if port.owner == g.eng.proc_index(g.eng.rank) => {
                    open.swap_remove(i);
                    Ok(())
                }
                _ => Err(MpiError::new(ErrorClass::Port, "the port is not open in this process")),
            }
        })
    }
    fn Comm_accept(port_name: *const c_char, _info: MPI_Info, root: c_int, comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
        let mut meeting = Meeting::default();
        let mut at_root = false;
        let rc = api_blocking("MPI_Comm_accept", |_| Some(comm as usize), |c| {
            let Some(me) = root_check(c.g(), comm, root, newcomm)? else { return Ok(()) };
            at_root = true;
            let port = parse_port(port_name)?;
            if port.owner != me || !open_ports().contains(&port.id) {
                return Err(MpiError::new(ErrorClass::Port, "the port was not opened by this process, or was closed"));
            }
            // Any process of the job may connect: the request arrives on a channel "to
            // ourselves", whose context every port channel shares, from whichever sender.
            let listen = c.g().eng.port_channel(me)?;
            let mut buf = [0u8; 4];
            let got = (|| {
                let h = c.g().eng.coll_irecv(listen, abi::MPI_ANY_SOURCE, TAG_CONNECT + port.id, &mut buf)?;
                let st = c.wait(h);
                c.g().eng.release(h);
                st.map(|_| ())
            })();
            c.g().eng.drop_port_channel(listen);
            got?;
            let peer = u32::from_le_bytes(buf);
            let ch = c.g().eng.port_channel(peer)?;
            meeting.channel = Some(ch);
            let s = c.g().eng.coll_isend(ch, 0, TAG_ACCEPT + port.id, &me.to_le_bytes())?;
            let st = c.wait(s);
            c.g().eng.release(s);
            st?;
            meeting.peer_tag = [peer, port.id as u32];
            Ok(())
        });
        if rc != abi::MPI_SUCCESS {
            drop_meeting(&meeting);
            if at_root {
                announce_failure(comm, root, newcomm);
            }
            return rc;
        }
        meet("MPI_Comm_accept", comm, root, &mut meeting, newcomm)
    }
    fn Comm_connect(port_name: *const c_char, info: MPI_Info, root: c_int, comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
        let mut meeting = Meeting::default();
        let mut at_root = false;
        let rc = api_blocking("MPI_Comm_connect", |_| Some(comm as usize), |c| {
            let Some(me) = root_check(c.g(), comm, root, newcomm)? else { return Ok(()) };
            at_root = true;
            let port = parse_port(port_name)?;
            let timeout = connect_timeout(info)?;
            let ch = c.g().eng.port_channel(port.owner)?;
            meeting.channel = Some(ch);
            let mut buf = [0u8; 4];
            let h = c.g().eng.coll_irecv(ch, 0, TAG_ACCEPT + port.id, &mut buf)?;
            let s = c.g().eng.coll_isend(ch, 0, TAG_CONNECT + port.id, &me.to_le_bytes())?;
            let answered = match timeout {
                Some(t) => {
                    let deadline = Instant::now() + t;
                    c.until(|e| e.is_complete(h).unwrap_or(true) || Instant::now() >= deadline)?;
                    c.g().eng.is_complete(h).unwrap_or(true) || !withdraw_request(c, s, h)?
                }
                None => true,
            };
            if !answered {
                return Err(MpiError::new(ErrorClass::Port, format!("no MPI_Comm_accept on the port within {} s", timeout.map_or(0, |t| t.as_secs()))));
            }
            let sent = c.wait(s);
            c.g().eng.release(s);
            let got = c.wait(h);
            c.g().eng.release(h);
            sent?;
            got?;
            meeting.peer_tag = [u32::from_le_bytes(buf), port.id as u32];
            Ok(())
        });
        if rc != abi::MPI_SUCCESS {
            drop_meeting(&meeting);
            if at_root {
                announce_failure(comm, root, newcomm);
            }
            return rc;
        }
        meet("MPI_Comm_connect", comm, root, &mut meeting, newcomm)
    }
    fn Publish_name(service_name: *const c_char, _info: MPI_Info, port_name: *const c_char) -> c_int {
        api("MPI_Publish_name", None, |_| {
            let path = name_path(service_name)?;
            if port_name.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "port_name is NULL"));
            }
            let port = CStr::from_ptr(port_name).to_bytes();
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            // create_new: a name is published once until unpublished.
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&path).map_err(|e| {
                MpiError::new(ErrorClass::Service, format!("cannot publish the name ({}): {e}", path.display()))
            })?;
            f.write_all(port).map_err(|e| MpiError::new(ErrorClass::Service, format!("cannot publish the name: {e}")))
        })
    }
    fn Unpublish_name(service_name: *const c_char, _info: MPI_Info, _port_name: *const c_char) -> c_int {
        api("MPI_Unpublish_name", None, |_| {
            let path = name_path(service_name)?;
            std::fs::remove_file(&path).map_err(|_| MpiError::new(ErrorClass::Service, "the service name is not published"))
        })
    }
    fn Lookup_name(service_name: *const c_char, _info: MPI_Info, port_name: *mut c_char) -> c_int {
        api("MPI_Lookup_name", None, |_| {
            let path = name_path(service_name)?;
            if port_name.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "port_name is NULL"));
            }
            let port = std::fs::read_to_string(&path).map_err(|_| MpiError::new(ErrorClass::Name, "no port is published under this name"))?;
            write_cstr(port_name, &port, abi::MPI_MAX_PORT_NAME as usize);
            Ok(())
        })
    }
    fn Comm_join(fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
        let mut peer = 0u64;
        let rc = api("MPI_Comm_join", None, |g| {
            if intercomm.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "intercomm is NULL"));
            }
            *intercomm = abi::MPI_COMM_NULL as MPI_Comm;
            // Each side writes "job-id job-wide-process-index\n" and reads the other's.
            let me = g.eng.proc_index(g.eng.rank);
            let mine = format!("{} {me}\n", job_id());
            let theirs = exchange_line(fd, mine.as_bytes())?;
            let mut it = theirs.split_whitespace();
            let (job, rank) = (it.next().unwrap_or(""), it.next().and_then(|r| r.parse::<u32>().ok()));
            match rank {
                Some(r) if job == job_id() && r != me => {
                    peer = g.eng.port_channel(r)?.0;
                    Ok(())
                }
                Some(_) if job == job_id() => Err(MpiError::new(ErrorClass::Arg, "the socket leads back to this process")),
                _ => Err(MpiError::new(
                    ErrorClass::Unsupported,
                    "MPI_Comm_join: the socket's other end is not a process of this job; Steadfast's launcher cannot connect separate jobs",
                )),
            }
        });
        if rc != abi::MPI_SUCCESS {
            return rc;
        }
        let rc = crate::comm::PMPI_Intercomm_create(abi::MPI_COMM_SELF as MPI_Comm, 0, peer as MPI_Comm, 0, TAG_JOIN, intercomm);
        drop_meeting(&Meeting { channel: Some(steadfast_core::slab::Handle(peer)), peer_tag: [0; 2] });
        rc
    }
}

const PORT_PREFIX: &str = "steadfast-port:";

/// The intercommunicator to the parents of a spawned process (0: none).
static PARENT: AtomicU64 = AtomicU64::new(0);

/// One command of a spawn at the root: program, arguments (NULL-terminated `argv`, or
/// MPI_ARGV_NULL) and the info keys the launcher honours (`wdir`, `path`, `host`).
unsafe fn spawn_cmd(g: &Global, command: *const c_char, argv: *mut *mut c_char, maxprocs: c_int, info: MPI_Info) -> Result<SpawnCmd, MpiError> {
    let program = CStr::from_ptr(command).to_string_lossy().into_owned();
    if program.trim().is_empty() {
        return Err(MpiError::new(ErrorClass::Arg, "command is empty"));
    }
    let mut args = Vec::new();
    if !argv.is_null() {
        let mut i = 0;
        while !(*argv.add(i)).is_null() {
            args.push(CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned());
            i += 1;
        }
    }
    let mut cmd = SpawnCmd { program, args, maxprocs: maxprocs as u32, ..SpawnCmd::default() };
    if let Some(info) = crate::info::info_arg(g, info)? {
        cmd.wdir = info.get("wdir")?.map(str::to_owned);
        cmd.path = info.get("path")?.map(str::to_owned);
        cmd.host = info.get("host")?.map(str::to_owned);
    }
    Ok(cmd)
}

/// The collective part of the spawn calls: agree on the intercommunicator's context, let
/// the root ask the launcher, tell every member the outcome, reach the children and build
/// the intercommunicator. `cmds` is Some at the root only.
///
/// The context agreement and the root's outcome take the nonblocking forms the
/// communicator constructors take (`comm::nonblocking_constructors`: the same on every
/// parent whatever thread level it asked for). Under MPI_THREAD_MULTIPLE their waits release
/// the library lock, so threads of one process may spawn over different communicators at
/// once; the launcher's answer and the children's addresses are still waited for under the
/// lock (neither needs anything of this process).
unsafe fn spawn_world(c: &mut Call, comm: MPI_Comm, root: c_int, cmds: Option<Vec<SpawnCmd>>, intercomm: *mut MPI_Comm, errcodes: *mut c_int) -> Result<(), MpiError> {
    let h = comm_handle(c.g(), comm as usize)?;
    let nonblocking = crate::comm::nonblocking_constructors(c.g());
    let ctx = if nonblocking {
        // A nonblocking duplication agrees on a block of four contexts in the background;
        // the block then serves the intercommunicator (the duplicate is forgotten, and
        // whatever the children send on the block stays queued).
        let (n, req) = c.g().eng.comm_idup(h)?;
        let r = c.wait(req).and_then(|s| match s.error {
            Some(class) => Err(MpiError::new(class, "the agreement on the intercommunicator's context failed")),
            None => Ok(()),
        });
        let g = c.g();
        g.eng.release(req);
        let ctx = g.eng.comm(n).map(|x| x.ctx);
        g.eng.forget_comm(n);
        r?;
        ctx?
    } else {
        let g = c.g();
        let ctx = g.eng.new_context(h)?;
        g.eng.claim_contexts(ctx, 4);
        ctx
    };
    let g = c.g();
    // Every parent publishes its path to other worlds before the children look for it.
    let bridge = g.eng.open_bridge().err().map(|e| e.to_string());
    let group = g.eng.comm(h)?.group.to_vec();
    let mut msg = Vec::new();
    let mut why = String::new();
    if let Some(cmds) = cmds {
        let total: u32 = cmds.iter().map(|c| c.maxprocs).fold(0, u32::saturating_add);
        let parents: Vec<u32> = group.iter().map(|&p| g.eng.proc_index(p)).collect();
        let res = match &bridge {
            Some(e) => Err(MpiError::new(ErrorClass::Spawn, e.clone())),
            None => g.eng.spawn_world(ctx, parents, cmds),
        };
        match res {
            Ok((base, codes, m)) => {
                let ok = codes.iter().all(|&c| c == 0);
                msg.push(u8::from(ok));
                msg.extend_from_slice(&base.to_le_bytes());
                msg.extend_from_slice(&(codes.len() as u32).to_le_bytes());
                for c in &codes {
                    msg.extend_from_slice(&c.to_le_bytes());
                }
                why = m;
            }
            Err(e) => {
                // Nothing started: the count of processes asked for and no codes (a missing
                // code reads as a failure).
                msg.extend_from_slice(&[0; 5]);
                msg.extend_from_slice(&total.to_le_bytes());
                why = e.to_string();
            }
        }
    }
    if nonblocking {
        bcast_released(c, h, root, &mut msg)?;
    } else {
        c.g().eng.bcast_bytes(h, root, &mut msg)?;
    }
    let g = c.g();
    let word = |i: usize| msg.get(i..i + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    let bad = || MpiError::new(ErrorClass::Intern, "malformed spawn outcome from the root");
    let ok = msg.first().copied().ok_or_else(bad)? == 1;
    let base = word(1).ok_or_else(bad)?;
    let n = word(5).ok_or_else(bad)?;
    let fill = |reached: bool| {
        if !errcodes.is_null() {
            for i in 0..n as usize {
                let c = word(9 + 4 * i).unwrap_or(1);
                *errcodes.add(i) = if ok && reached && c == 0 { abi::MPI_SUCCESS } else { abi::MPI_ERR_SPAWN };
            }
        }
    };
    if !ok {
        fill(false);
        if why.is_empty() {
            why = "the launcher could not start the processes (the root's error says why)".into();
        }
        return Err(MpiError::new(ErrorClass::Spawn, why));
    }
    if let Some(e) = bridge {
        fill(false);
        return Err(MpiError::new(ErrorClass::Spawn, e));
    }
    let children: Vec<u32> = (base..base + n).collect();
    let remote = match g.eng.connect_procs(&children) {
        Ok(r) => r,
        Err(e) => {
            fill(false);
            return Err(e);
        }
    };
    fill(true);
    let errh = g.eng.comm(h)?.errhandler;
    let n = g.eng.worlds_intercomm(ctx, group, remote, errh)?;
    crate::errhandler::retain(g, errh);
    *intercomm = n.0 as MPI_Comm;
    Ok(())
}

/// Tags of the spawn outcome's broadcast under MPI_THREAD_MULTIPLE, on the collective
/// context of the parents' communicator (apart from the tags of ports and joins above).
const TAG_SPAWN_LEN: i32 = 0x7ffd_4000;
const TAG_SPAWN_DATA: i32 = 0x7ffd_4001;

/// Broadcast `msg` from `root` over intracommunicator `h`, waiting with the lock released
/// (the root sends to every member: parents are few).
fn bcast_released(c: &mut Call, h: Handle, root: c_int, msg: &mut Vec<u8>) -> Result<(), MpiError> {
    let (rank, size) = {
        let x = c.g().eng.comm(h)?;
        (x.rank, x.size())
    };
    let status = |s: steadfast_core::request::Status| match s.error {
        Some(class) => Err(MpiError::new(class, "the broadcast of the spawn outcome failed")),
        None => Ok(()),
    };
    if rank == root {
        let len = (msg.len() as u64).to_le_bytes();
        let mut sends = Vec::with_capacity(2 * size as usize);
        let mut first = Ok(());
        for r in (0..size).filter(|&r| r != root) {
            let g = c.g();
            sends.push(g.eng.coll_isend(h, r, TAG_SPAWN_LEN, &len)?);
            sends.push(g.eng.coll_isend(h, r, TAG_SPAWN_DATA, msg)?);
        }
        // The buffers stay put until every send is done.
        for s in sends {
            let r = c.wait(s).and_then(status);
            c.g().eng.release(s);
            if first.is_ok() {
                first = r;
            }
        }
        return first;
    }
    let mut len = [0u8; 8];
    let q = c.g().eng.coll_irecv(h, root, TAG_SPAWN_LEN, &mut len)?;
    let r = c.wait(q).and_then(status);
    c.g().eng.release(q);
    r?;
    let n = u64::from_le_bytes(len);
    if n > 1 << 24 {
        return Err(MpiError::new(ErrorClass::Intern, format!("spawn outcome of {n} bytes from the root")));
    }
    msg.resize(n as usize, 0);
    let q = c.g().eng.coll_irecv(h, root, TAG_SPAWN_DATA, msg)?;
    let r = c.wait(q).and_then(status);
    c.g().eng.release(q);
    r
}

/// In a process started by MPI_Comm_spawn (`STEADFAST_PARENT` set): reach the parents and
/// build the intercommunicator MPI_Comm_get_parent returns.
pub fn connect_parent(g: &mut Global) -> Result<(), MpiError> {
    let Some(spec) = steadfast_config::lookup(steadfast_runtime::env::PARENT).filter(|p| !p.trim().is_empty()) else {
        return Ok(());
    };
    let bad = || MpiError::new(ErrorClass::Intern, format!("{}={spec:?} is malformed", steadfast_runtime::env::PARENT));
    let (ctx, list) = spec.trim().split_once(':').ok_or_else(bad)?;
    let ctx: u32 = ctx.parse().map_err(|_| bad())?;
    let parents = list.split(',').map(|p| p.parse::<u32>().map_err(|_| bad())).collect::<Result<Vec<_>, _>>()?;
    g.eng.open_bridge()?;
    let remote = g.eng.connect_procs(&parents)?;
    let world = g.eng.world;
    let local = g.eng.comm(world)?.group.to_vec();
    let errh = g.eng.comm(world)?.errhandler;
    let n = g.eng.worlds_intercomm(ctx, local, remote, errh)?;
    // The standard's default name of the parent intercommunicator.
    g.eng.comm_mut(n)?.name = "MPI_COMM_PARENT".into();
    crate::errhandler::retain(g, errh);
    PARENT.store(n.0, Ordering::Relaxed);
    Ok(())
}

/// Argument checks common to the spawn calls, in the order MPI lists the errors; whether
/// this process is the root.
unsafe fn spawn_checks(g: &Global, comm: MPI_Comm, root: c_int, intercomm: *mut MPI_Comm) -> Result<bool, MpiError> {
    let h = comm_handle(g, comm as usize)?;
    let c = g.eng.comm(h)?;
    if c.remote.is_some() {
        return Err(MpiError::new(ErrorClass::Comm, "spawning needs an intracommunicator"));
    }
    if !(0..c.size()).contains(&root) {
        return Err(MpiError::new(ErrorClass::Root, format!("root {root} is not a rank of the communicator (size {})", c.size())));
    }
    if intercomm.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "intercomm is NULL"));
    }
    Ok(c.rank == root)
}
/// Port numbers wrap within the tag ranges below.
const PORT_MASK: i32 = 0xfff;
/// Handshake tags on MPI_COMM_WORLD's collective context, plus the port number (distinct
/// from the tags the collectives and communicator constructions use there).
const TAG_CONNECT: i32 = 0x7ffd_0000;
const TAG_ACCEPT: i32 = 0x7ffd_1000;
/// MPI_Intercomm_create tags of accept/connect (plus the port number) and of join.
const TAG_INTERCOMM: i32 = 0x7ffd_2000;
const TAG_JOIN: i32 = 0x7ffd_3000;

static NEXT_PORT: AtomicI32 = AtomicI32::new(0);
static OPEN_PORTS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// How long MPI_Comm_connect waits for an accept: the call's info key `timeout` (seconds),
/// else STEADFAST_CONNECT_TIMEOUT; None (0) waits forever.
fn connect_timeout(info: MPI_Info) -> Result<Option<Duration>, MpiError> {
    let secs = match crate::info::requested_value(info, "timeout") {
        Some(v) => v.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).ok_or_else(|| {
            MpiError::new(ErrorClass::InfoValue, format!("info key timeout = \"{v}\" is not a number of seconds"))
        })?,
        None => steadfast_config::parse_or("STEADFAST_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT, "a number of seconds"),
    };
    Ok((secs > 0.0).then(|| Duration::from_secs_f64(secs.min(1e9))))
}

/// MPI_Comm_connect's time-out in seconds unless configured (MPICH waits as long).
const DEFAULT_CONNECT_TIMEOUT: f64 = 180.0;

/// A connect timed out: withdraw its request from the port owner. Returns whether it was
/// withdrawn (no accept took it; the answer receive `h` is cancelled and both requests are
/// released); false when an accept took it in the meantime, so its answer is on the way.
fn withdraw_request(c: &mut Call, s: Handle, h: Handle) -> Result<bool, MpiError> {
    c.g().eng.cancel(s)?;
    let st = c.wait(s);
    if !st.as_ref().map_or(false, |st| st.cancelled) {
        return Ok(false);
    }
    c.g().eng.release(s);
    c.g().eng.cancel(h)?;
    let _ = c.wait(h);
    c.g().eng.release(h);
    Ok(true)
}

fn open_ports() -> MutexGuard<'static, Vec<i32>> {
    OPEN_PORTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The job's identity in port names (the launcher's job id; a singleton's process id).
fn job_id() -> String {
    std::env::var(steadfast_runtime::env::JOBID).unwrap_or_else(|_| format!("pid{}", std::process::id()))
}

struct Port {
    /// Job-wide process index of the process that opened it.
    owner: u32,
    id: i32,
}

unsafe fn parse_port(p: *const c_char) -> Result<Port, MpiError> {
    if p.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "port_name is NULL"));
    }
    let name = CStr::from_ptr(p).to_string_lossy();
    let bad = || MpiError::new(ErrorClass::Port, format!("\"{name}\" is not a port name MPI_Open_port returned"));
    let rest = name.strip_prefix(PORT_PREFIX).ok_or_else(bad)?;
    let mut parts = rest.rsplitn(3, ':');
    let id = parts.next().and_then(|x| x.parse::<i32>().ok()).ok_or_else(bad)?;
    let owner = parts.next().and_then(|x| x.parse::<u32>().ok()).ok_or_else(bad)?;
    let job = parts.next().ok_or_else(bad)?;
    if job != job_id() {
        return Err(MpiError::new(ErrorClass::Port, "the port belongs to another job; Steadfast's launcher cannot connect separate jobs"));
    }
    if !(0..=PORT_MASK).contains(&id) {
        return Err(bad());
    }
    Ok(Port { owner, id })
}

/// Checks of accept/connect; Some(job-wide process index) at the root, None elsewhere.
unsafe fn root_check(g: &Global, comm: MPI_Comm, root: c_int, newcomm: *mut MPI_Comm) -> Result<Option<u32>, MpiError> {
    let h = comm_handle(g, comm as usize)?;
    if newcomm.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "newcomm is NULL"));
    }
    let c = g.eng.comm(h)?;
    if c.remote.is_some() {
        return Err(MpiError::new(ErrorClass::Comm, "accept/connect needs an intracommunicator"));
    }
    if !(0..c.size()).contains(&root) {
        return Err(MpiError::new(ErrorClass::Root, format!("root {root} is not a rank of the communicator")));
    }
    Ok((c.rank == root).then_some(g.eng.proc_index(g.eng.rank)))
}

/// What the root of accept/connect learned: the channel to the other root (root only) and
/// (the other root's job-wide index, the port number).
#[derive(Default)]
struct Meeting {
    channel: Option<steadfast_core::slab::Handle>,
    peer_tag: [u32; 2],
}

fn drop_meeting(m: &Meeting) {
    if let Some(ch) = m.channel {
        let _ = api("MPI_Comm_disconnect", None, |g| {
            g.eng.drop_port_channel(ch);
            Ok(())
        });
    }
}

/// The roots met: every member learns the port number, and both groups build the
/// intercommunicator, the roots talking over their channel.
/// What the root of accept/connect broadcasts instead of the peer and port when its part
/// failed (a bad port name, a closed port): the others fail too instead of waiting.
const MEETING_FAILED: [u32; 2] = [u32::MAX, u32::MAX];

/// The root's part of accept/connect failed: tell the other ranks (they wait in `meet`),
/// and leave MPI_COMM_NULL.
unsafe fn announce_failure(comm: MPI_Comm, root: c_int, newcomm: *mut MPI_Comm) {
    if !newcomm.is_null() {
        *newcomm = abi::MPI_COMM_NULL as MPI_Comm;
    }
    let mut failed = MEETING_FAILED;
    if crate::coll::PMPI_Bcast(failed.as_mut_ptr() as *mut c_void, 2, abi::MPI_INT as _, root, comm) != abi::MPI_SUCCESS {
        tracing::debug!("accept/connect: telling the other ranks that the root failed did not work");
    }
}

unsafe fn meet(func: &str, comm: MPI_Comm, root: c_int, meeting: &mut Meeting, newcomm: *mut MPI_Comm) -> c_int {
    let rc = crate::coll::PMPI_Bcast(meeting.peer_tag.as_mut_ptr() as *mut c_void, 2, abi::MPI_INT as _, root, comm);
    if rc != abi::MPI_SUCCESS {
        tracing::debug!("{func}: broadcasting the port number failed");
        drop_meeting(meeting);
        return rc;
    }
    if meeting.peer_tag == MEETING_FAILED {
        drop_meeting(meeting);
        if !newcomm.is_null() {
            *newcomm = abi::MPI_COMM_NULL as MPI_Comm;
        }
        return api(func, Some(comm as usize), |_| Err(MpiError::new(ErrorClass::Port, format!("the root (rank {root}) could not make the connection"))));
    }
    // Only the root's peer communicator matters; elsewhere MPI_COMM_NULL is ignored.
    let peer = meeting.channel.map_or(abi::MPI_COMM_NULL as MPI_Comm, |h| h.0 as MPI_Comm);
    let rc = crate::comm::PMPI_Intercomm_create(comm, root, peer, 0, TAG_INTERCOMM + meeting.peer_tag[1] as i32, newcomm);
    drop_meeting(meeting);
    rc
}

/// File of a published service name in the job directory (the name hex-encoded).
unsafe fn name_path(service: *const c_char) -> Result<std::path::PathBuf, MpiError> {
    if service.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "service_name is NULL"));
    }
    let hex: String = CStr::from_ptr(service).to_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::var_os(steadfast_runtime::env::JOBDIR)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("steadfast-names-{}", job_id())));
    Ok(dir.join("names").join(hex))
}

unsafe fn write_cstr(out: *mut c_char, s: &str, cap: usize) {
    let n = s.len().min(cap.saturating_sub(1));
    std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, out, n);
    *out.add(n) = 0;
}

/// Write `line` to socket `fd` and read one line (at most 256 bytes) back.
fn exchange_line(fd: c_int, line: &[u8]) -> Result<String, MpiError> {
    let io = |e: std::io::Error| MpiError::new(ErrorClass::Other, format!("MPI_Comm_join: the socket failed: {e}"));
    let mut off = 0;
    while off < line.len() {
        // SAFETY: writes from a live buffer to a descriptor the application passed.
        let n = unsafe { libc::write(fd, line[off..].as_ptr() as *const c_void, line.len() - off) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io(e));
        }
        off += n as usize;
    }
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while got.len() < 256 {
        // SAFETY: reads one byte into a live buffer.
        let n = unsafe { libc::read(fd, b.as_mut_ptr() as *mut c_void, 1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io(e));
        }
        if n == 0 || b[0] == b'\n' {
            break;
        }
        got.push(b[0]);
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

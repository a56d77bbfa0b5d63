//! The MPI tool information interface (MPI_T).
//!
//! Control variables are the library's `STEADFAST_*` tunables, in one category named
//! `steadfast`: each is a string (MPI_CHAR) holding the value the library reads from the
//! environment at start-up (the documented default when unset). They are read-only
//! (MPI_T_SCOPE_READONLY): the library reads them once, so writing fails with
//! MPI_T_ERR_CVAR_SET_NEVER.
//!
//! Performance variables are the path counters (the ones `STEADFAST_STATS=1` prints), in a
//! second category `steadfast_paths`: for each counter one variable over every path
//! (`steadfast_<counter>`) and one per kind of path (`steadfast_shm_<counter>`, `_tcp_`,
//! `_udp_`; 0 for a kind the job does not use). All are MPI_T_PVAR_CLASS_COUNTER,
//! MPI_UNSIGNED_LONG_LONG, bound to no object, read-only, not continuous: a handle counts
//! what happened while it was started (MPI_T_pvar_start / stop), reset sets it to 0. The
//! library exports no events or event sources: their counts are 0 and index or handle
//! arguments are invalid.
//! MPI_T calls return MPI_T error codes and never invoke error handlers; they work before
//! MPI_Init and after MPI_Finalize, between MPI_T_init_thread and MPI_T_finalize.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::{self, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Info};
use crate::mpi_api;

mod pvars;

/// The STEADFAST_* tunables (README.md, "Tunables"): name, default, meaning.
const TUNABLES: &[(&str, &str, &str)] = &[
    ("STEADFAST_PATH", "shm", "path between ranks on one host: shm, tcp or udp (set by --path)"),
    ("STEADFAST_NET_PATH", "udp", "path between ranks on different hosts when STEADFAST_PATH=shm (udp or tcp)"),
    ("STEADFAST_CHECKSUM", "crc32c", "end-to-end CRC32C of every udp/tcp frame and shm ring record"),
    ("STEADFAST_FAULTS", "unset", "seeded fault injection, e.g"),
    ("STEADFAST_ROUTES", "job interface", "udp routes, one socket each: subnets, interface names or addresses (10.77.1.0/24,10.77.2.0/24), or auto (every shared subnet)"),
    ("STEADFAST_UDP_FRAG", "8192 (32768 on loopback)", "udp fragment payload bytes"),
    ("STEADFAST_UDP_WINDOW", "1 MiB (4 MiB on loopback), at most what the socket buffers hold", "unacknowledged udp bytes in flight per peer (no congestion control: keep it near the bandwidth-delay product)"),
    ("STEADFAST_PROBE_MS", "50", "route heartbeat / fail-back probe interval"),
    ("STEADFAST_RETRIES", "6", "sends of a fragment on one route before that route is declared failed"),
    ("STEADFAST_EAGER_LIMIT", "16 KiB shm, 64 KiB tcp", "largest message sent eagerly (more ranks than CPUs: shm up to 64 KiB while the ring has room)"),
    ("STEADFAST_SHM_RING", "128 MiB / ranks², 128 KiB–2 MiB (less, down to 4 KiB, when half the free space of `/dev/shm` holds no more)", "bytes per sender→receiver shared-memory ring (large messages stream through it in pieces of a sixteenth of the message, from 16 KiB up to a quarter of the ring or 256 KiB; whole quarters where ranks outnumber CPUs)"),
    ("STEADFAST_SHM_STORES", "auto", "how shm ring records of 16 KiB and more are written: cached, streaming (non-temporal stores), or auto (streaming while timed cached copies run below 8 GB/s and slower than streamed ones)"),
    ("STEADFAST_CMA", "unset", "single-copy process_vm_readv for large shm messages: 1 for every one, 0 for none; unset, only for the root's blocks of a linear Scatter on a host with more ranks than CPUs, but for those that fit the receiver's ring while the shm checksum is on (and, where this host's single copy is fast, of any linear Scatter, of a linear Bcast, of an Alltoall of 256 KiB blocks and of a binomial Reduce of 128 KiB vectors on a host with more ranks than CPUs), the rest through the pipelined copy through the ring"),
    ("STEADFAST_SPIN", "2000 (0 when ranks outnumber CPUs)", "idle progress polls before yielding the CPU"),
    ("STEADFAST_YIELDS", "20", "sched_yield rounds before sleeping on a futex / in poll"),
    ("STEADFAST_PEER_SPIN", "10", "where waits yield at once: polls a wait for one rank makes before each yield while that rank runs on another CPU"),
    ("STEADFAST_SLEEP_MS", "100", "longest single sleep while blocked"),
    ("STEADFAST_STATS", "unset", "1: print per-rank path counters at MPI_Finalize (faults injected, corruption detected, retransmissions, drops, per-route traffic and failover events)"),
    ("STEADFAST_LOG", "unset", "tracing filter, e.g"),
    ("STEADFAST_MEMBERSHIP", "1", "0: no membership control thread (the view stays the start-up one)"),
    ("STEADFAST_HEARTBEAT_MS", "200", "a silent tree neighbour is asked HOW_ARE_YOU after this long"),
    ("STEADFAST_SUSPECT_MS", "2000", ".."),
    ("STEADFAST_MEMBERSHIP_ACK_MS", "200", "FAILURE_ACK wait per tree level before a child counts as failed"),
    ("STEADFAST_MEMBERSHIP_REPORT_MS", "500", "FAILURE_DET_ACK wait before the coordinator counts as failed"),
    ("STEADFAST_MEMBERSHIP_SYNC_MS", "500", "member → parent view sync period (0: off)"),
    ("STEADFAST_FT_NOTICE_GRACE_MS", "100", "how long a non-coordinator holds the launcher's exit notice"),
    ("STEADFAST_FT_RT", "0", "1: real-time priority (SCHED_RR 1) for the control thread when permitted (faster view changes"),
    ("STEADFAST_FT_SLICE_US", "100", "time slice (µs) the membership control thread asks the fair scheduler for, so it preempts busy threads when woken (Linux ≥ 6.12"),
    ("STEADFAST_FT_TRACE_SCHED", "0", "1: membership traces also record the control thread's run-queue waits"),
    ("STEADFAST_FT_HOST", "127.0.0.1", "address of the membership control channel (multi-host jobs: the address of the path between hosts)"),
    ("STEADFAST_FT_TRACE", "unset", "directory for per-rank membership traces ft.<rank>.trace"),
];

/// Characters a control variable's buffer holds (count reported by MPI_T_cvar_handle_alloc).
const CVAR_CHARS: usize = 256;
const CATEGORY: &str = "steadfast";
const CATEGORY_DESC: &str = "Steadfast tunables (STEADFAST_* environment variables)";
const PVAR_CATEGORY: &str = "steadfast_paths";
const PVAR_CATEGORY_DESC: &str = "Steadfast path counters (what STEADFAST_STATS=1 prints at MPI_Finalize)";

static INITS: AtomicUsize = AtomicUsize::new(0);

type TResult = Result<(), c_int>;

fn done(r: TResult) -> c_int {
    match r {
        Ok(()) => abi::MPI_SUCCESS,
        Err(c) => c,
    }
}

fn initialized() -> TResult {
    if INITS.load(Ordering::Acquire) == 0 {
        Err(abi::MPI_T_ERR_NOT_INITIALIZED)
    } else {
        Ok(())
    }
}

fn cvar_value(i: usize) -> String {
    let (name, default, _) = TUNABLES[i];
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// MPI_T string output: copy `s` into `buf` (capacity `*len`) and set `*len` to the length
/// including the terminating NUL; a NULL buffer or zero length only reports the length.
unsafe fn put_str(s: &str, buf: *mut c_char, len: *mut c_int) {
    if len.is_null() {
        return;
    }
    if buf.is_null() || *len <= 0 {
        *len = s.len() as c_int + 1;
        return;
    }
    let n = s.len().min(*len as usize - 1);
    std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
    *buf.add(n) = 0;
    *len = n as c_int + 1;
}

unsafe fn set<T>(p: *mut T, v: T) {
    if !p.is_null() {
        *p = v;
    }
}

fn cvar_at(i: c_int) -> Result<usize, c_int> {
    usize::try_from(i).ok().filter(|&i| i < TUNABLES.len()).ok_or(abi::MPI_T_ERR_INVALID_INDEX)
}

/// Control variable handles are the index plus one (never NULL).
fn cvar_of_handle(h: *mut c_void) -> Result<usize, c_int> {
    let v = h as usize;
    if v == 0 || v > TUNABLES.len() {
        return Err(abi::MPI_T_ERR_INVALID_HANDLE);
    }
    Ok(v - 1)
}

unsafe fn name_arg<'a>(name: *const c_char) -> Result<&'a [u8], c_int> {
    if name.is_null() {
        return Err(abi::MPI_T_ERR_INVALID_NAME);
    }
    Ok(CStr::from_ptr(name).to_bytes())
}

unsafe fn indices(len: c_int, out: *mut c_int, all: &[c_int]) -> TResult {
    if len < 0 {
        return Err(abi::MPI_T_ERR_INVALID);
    }
    for (k, v) in all.iter().take(len as usize).enumerate() {
        if out.is_null() {
            return Err(abi::MPI_T_ERR_INVALID);
        }
        *out.add(k) = *v;
    }
    Ok(())
}

fn category(i: c_int) -> TResult {
    if i == 0 || i == 1 {
        Ok(())
    } else {
        Err(abi::MPI_T_ERR_INVALID_INDEX)
    }
}

mpi_api! {
    fn T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
        if provided.is_null() {
            return abi::MPI_T_ERR_INVALID;
        }
        INITS.fetch_add(1, Ordering::AcqRel);
        // The MPI_T state is immutable or atomic, so any thread may call.
        *provided = required.clamp(abi::MPI_THREAD_SINGLE, abi::MPI_THREAD_MULTIPLE);
        abi::MPI_SUCCESS
    }
    fn T_finalize() -> c_int {
        done(initialized().map(|_| {
            INITS.fetch_sub(1, Ordering::AcqRel);
        }))
    }

    fn T_enum_get_info(_enumtype: *mut c_void, _num: *mut c_int, _name: *mut c_char, _name_len: *mut c_int) -> c_int {
        done(initialized().and(Err(abi::MPI_T_ERR_INVALID_HANDLE)))
    }
    fn T_enum_get_item(_enumtype: *mut c_void, _indx: c_int, _value: *mut c_int, _name: *mut c_char, _name_len: *mut c_int) -> c_int {
        done(initialized().and(Err(abi::MPI_T_ERR_INVALID_HANDLE)))
    }

    fn T_cvar_get_num(num_cvar: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            if num_cvar.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *num_cvar = TUNABLES.len() as c_int;
            Ok(())
        }))
    }
    fn T_cvar_get_info(cvar_index: c_int, name: *mut c_char, name_len: *mut c_int, verbosity: *mut c_int, datatype: *mut MPI_Datatype,
                       enumtype: *mut *mut c_void, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int, scope: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            let i = cvar_at(cvar_index)?;
            let (n, default, meaning) = TUNABLES[i];
            put_str(n, name, name_len);
            put_str(&format!("{meaning} (default: {default})"), desc, desc_len);
            set(verbosity, abi::MPI_T_VERBOSITY_USER_BASIC);
            set(datatype, abi::MPI_CHAR as MPI_Datatype);
            set(enumtype, std::ptr::null_mut());
            set(bind, abi::MPI_T_BIND_NO_OBJECT);
            set(scope, abi::MPI_T_SCOPE_READONLY);
            Ok(())
        }))
    }
    fn T_cvar_get_index(name: *const c_char, cvar_index: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            let n = name_arg(name)?;
            let i = TUNABLES.iter().position(|t| t.0.as_bytes() == n).ok_or(abi::MPI_T_ERR_INVALID_NAME)?;
            set(cvar_index, i as c_int);
            Ok(())
        }))
    }
    fn T_cvar_handle_alloc(cvar_index: c_int, _obj_handle: *mut c_void, handle: *mut *mut c_void, count: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            let i = cvar_at(cvar_index)?;
            if handle.is_null() || count.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *handle = (i + 1) as *mut c_void;
            *count = CVAR_CHARS as c_int;
            Ok(())
        }))
    }
    fn T_cvar_handle_free(handle: *mut *mut c_void) -> c_int {
        done(initialized().and_then(|_| {
            if handle.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            cvar_of_handle(*handle)?;
            *handle = std::ptr::null_mut();
            Ok(())
        }))
    }
    fn T_cvar_read(handle: *mut c_void, buf: *mut c_void) -> c_int {
        done(initialized().and_then(|_| {
            let i = cvar_of_handle(handle)?;
            if buf.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            let mut len = CVAR_CHARS as c_int;
            put_str(&cvar_value(i), buf as *mut c_char, &mut len);
            Ok(())
        }))
    }
    fn T_cvar_write(handle: *mut c_void, _buf: *const c_void) -> c_int {
        done(initialized().and_then(|_| {
            cvar_of_handle(handle)?;
            Err(abi::MPI_T_ERR_CVAR_SET_NEVER)
        }))
    }

    fn T_pvar_get_num(num_pvar: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            if num_pvar.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *num_pvar = pvars::count() as c_int;
            Ok(())
        }))
    }
    fn T_pvar_get_info(pvar_index: c_int, name: *mut c_char, name_len: *mut c_int, verbosity: *mut c_int, var_class: *mut c_int,
                       datatype: *mut MPI_Datatype, enumtype: *mut *mut c_void, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int,
                       readonly: *mut c_int, continuous: *mut c_int, atomic: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            let v = pvars::at(pvar_index)?;
            put_str(&pvars::name(v), name, name_len);
            put_str(&pvars::desc(v), desc, desc_len);
            set(verbosity, abi::MPI_T_VERBOSITY_USER_BASIC);
            set(var_class, abi::MPI_T_PVAR_CLASS_COUNTER);
            set(datatype, abi::MPI_UNSIGNED_LONG_LONG as MPI_Datatype);
            set(enumtype, std::ptr::null_mut());
            set(bind, abi::MPI_T_BIND_NO_OBJECT);
            set(readonly, 1);
            set(continuous, 0);
            set(atomic, 0);
            Ok(())
        }))
    }
    fn T_pvar_get_index(name: *const c_char, var_class: c_int, pvar_index: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            let n = name_arg(name)?;
            if pvar_index.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            let i = pvars::find(n).ok_or(abi::MPI_T_ERR_INVALID_NAME)?;
            if var_class != abi::MPI_T_PVAR_CLASS_COUNTER {
                return Err(abi::MPI_T_ERR_INVALID_NAME);
            }
            *pvar_index = i as c_int;
            Ok(())
        }))
    }
    fn T_pvar_session_create(session: *mut *mut c_void) -> c_int {
        done(initialized().and_then(|_| {
            if session.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *session = pvars::session_create()? as *mut c_void;
            Ok(())
        }))
    }
    fn T_pvar_session_free(session: *mut *mut c_void) -> c_int {
        done(initialized().and_then(|_| {
            if session.is_null() {
                return Err(abi::MPI_T_ERR_INVALID_SESSION);
            }
            pvars::session_free(*session as usize)?;
            *session = std::ptr::null_mut();
            Ok(())
        }))
    }
    fn T_pvar_handle_alloc(session: *mut c_void, pvar_index: c_int, _obj_handle: *mut c_void, handle: *mut *mut c_void, count: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            let v = pvars::at(pvar_index)?;
            if handle.is_null() || count.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *handle = pvars::handle_alloc(session as usize, v)? as *mut c_void;
            *count = 1;
            Ok(())
        }))
    }
    fn T_pvar_handle_free(session: *mut c_void, handle: *mut *mut c_void) -> c_int {
        done(initialized().and_then(|_| {
            if handle.is_null() {
                return Err(abi::MPI_T_ERR_INVALID_HANDLE);
            }
            pvars::handle_free(session as usize, *handle as usize)?;
            *handle = std::ptr::null_mut();
            Ok(())
        }))
    }
    fn T_pvar_start(session: *mut c_void, handle: *mut c_void) -> c_int {
        done(initialized().and_then(|_| pvars::apply(session as usize, handle as usize, pvars::Action::Start)))
    }
    fn T_pvar_stop(session: *mut c_void, handle: *mut c_void) -> c_int {
        done(initialized().and_then(|_| pvars::apply(session as usize, handle as usize, pvars::Action::Stop)))
    }
    fn T_pvar_read(session: *mut c_void, handle: *mut c_void, buf: *mut c_void) -> c_int {
        done(initialized().and_then(|_| {
            if buf.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            let v = pvars::read(session as usize, handle as usize, false)?;
            // SAFETY: the tool passes room for `count` (1) MPI_UNSIGNED_LONG_LONG.
            std::ptr::write_unaligned(buf as *mut u64, v);
            Ok(())
        }))
    }
    fn T_pvar_write(session: *mut c_void, handle: *mut c_void, _buf: *const c_void) -> c_int {
        done(initialized().and_then(|_| {
            pvars::check_handle(session as usize, handle as usize)?;
            Err(abi::MPI_T_ERR_PVAR_NO_WRITE)
        }))
    }
    fn T_pvar_reset(session: *mut c_void, handle: *mut c_void) -> c_int {
        done(initialized().and_then(|_| pvars::apply(session as usize, handle as usize, pvars::Action::Reset)))
    }
    fn T_pvar_readreset(session: *mut c_void, handle: *mut c_void, buf: *mut c_void) -> c_int {
        done(initialized().and_then(|_| {
            if buf.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            let v = pvars::read(session as usize, handle as usize, true)?;
            // SAFETY: as in MPI_T_pvar_read.
            std::ptr::write_unaligned(buf as *mut u64, v);
            Ok(())
        }))
    }

    fn T_event_get_num(num_events: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            if num_events.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *num_events = 0;
            Ok(())
        }))
    }
    fn T_event_get_info(_event_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _array_of_datatypes: *mut MPI_Datatype,
                        _array_of_displacements: *mut MPI_Aint, _num_elements: *mut c_int, _enumtype: *mut *mut c_void, _info: *mut MPI_Info,
                        _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int) -> c_int {
        done(initialized().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }
    fn T_event_get_index(name: *const c_char, _event_index: *mut c_int) -> c_int {
        done(initialized().and_then(|_| name_arg(name).map(|_| ())).and(Err(abi::MPI_T_ERR_INVALID_NAME)))
    }
    fn T_event_handle_alloc(_event_index: c_int, _obj_handle: *mut c_void, _info: MPI_Info, _event_registration: *mut *mut c_void) -> c_int {
        done(initialized().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }
    fn T_event_handle_set_info(_event_registration: *mut c_void, _info: MPI_Info) -> c_int {
        no_handle()
    }
    fn T_event_handle_get_info(_event_registration: *mut c_void, _info_used: *mut MPI_Info) -> c_int {
        no_handle()
    }
    fn T_event_register_callback(_event_registration: *mut c_void, _cb_safety: c_int, _info: MPI_Info, _user_data: *mut c_void, _event_cb_function: usize) -> c_int {
        no_handle()
    }
    fn T_event_callback_set_info(_event_registration: *mut c_void, _cb_safety: c_int, _info: MPI_Info) -> c_int {
        no_handle()
    }
    fn T_event_callback_get_info(_event_registration: *mut c_void, _cb_safety: c_int, _info_used: *mut MPI_Info) -> c_int {
        no_handle()
    }
    fn T_event_handle_free(_event_registration: *mut c_void, _user_data: *mut c_void, _free_cb_function: usize) -> c_int {
        no_handle()
    }
    fn T_event_set_dropped_handler(_event_registration: *mut c_void, _dropped_cb_function: usize) -> c_int {
        no_handle()
    }
    fn T_event_read(_event_instance: *mut c_void, _element_index: c_int, _buffer: *mut c_void) -> c_int {
        no_handle()
    }
    fn T_event_copy(_event_instance: *mut c_void, _buffer: *mut c_void) -> c_int {
        no_handle()
    }
    fn T_event_get_timestamp(_event_instance: *mut c_void, _event_timestamp: *mut MPI_Count) -> c_int {
        no_handle()
    }
    fn T_event_get_source(_event_instance: *mut c_void, _source_index: *mut c_int) -> c_int {
        no_handle()
    }

    fn T_source_get_num(num_sources: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            if num_sources.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *num_sources = 0;
            Ok(())
        }))
    }
    fn T_source_get_info(_source_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int,
                         _ordering: *mut c_int, _ticks_per_second: *mut MPI_Count, _max_ticks: *mut MPI_Count, _info: *mut MPI_Info) -> c_int {
        done(initialized().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }
    fn T_source_get_timestamp(_source_index: c_int, _timestamp: *mut MPI_Count) -> c_int {
        done(initialized().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }

    fn T_category_get_num(num_cat: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            if num_cat.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            *num_cat = 2;
            Ok(())
        }))
    }
    fn T_category_get_info(cat_index: c_int, name: *mut c_char, name_len: *mut c_int, desc: *mut c_char, desc_len: *mut c_int,
                           num_cvars: *mut c_int, num_pvars: *mut c_int, num_categories: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            category(cat_index)?;
            let pv = cat_index == 1;
            put_str(if pv { PVAR_CATEGORY } else { CATEGORY }, name, name_len);
            put_str(if pv { PVAR_CATEGORY_DESC } else { CATEGORY_DESC }, desc, desc_len);
            set(num_cvars, if pv { 0 } else { TUNABLES.len() as c_int });
            set(num_pvars, if pv { pvars::count() as c_int } else { 0 });
            set(num_categories, 0);
            Ok(())
        }))
    }
    fn T_category_get_num_events(cat_index: c_int, num_events: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            category(cat_index)?;
            set(num_events, 0);
            Ok(())
        }))
    }
    fn T_category_get_index(name: *const c_char, cat_index: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            let n = name_arg(name)?;
            let i = if n == CATEGORY.as_bytes() {
                0
            } else if n == PVAR_CATEGORY.as_bytes() {
                1
            } else {
                return Err(abi::MPI_T_ERR_INVALID_NAME);
            };
            set(cat_index, i);
            Ok(())
        }))
    }
    fn T_category_get_cvars(cat_index: c_int, len: c_int, indices_out: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            category(cat_index)?;
            let all: Vec<c_int> = if cat_index == 0 { (0..TUNABLES.len() as c_int).collect() } else { Vec::new() };
            indices(len, indices_out, &all)
        }))
    }
    fn T_category_get_pvars(cat_index: c_int, len: c_int, indices_out: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            category(cat_index)?;
            let all: Vec<c_int> = if cat_index == 1 { (0..pvars::count() as c_int).collect() } else { Vec::new() };
            indices(len, indices_out, &all)
        }))
    }
    fn T_category_get_events(cat_index: c_int, len: c_int, indices_out: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            category(cat_index)?;
            indices(len, indices_out, &[])
        }))
    }
    fn T_category_get_categories(cat_index: c_int, len: c_int, indices_out: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            category(cat_index)?;
            indices(len, indices_out, &[])
        }))
    }
    fn T_category_changed(update_number: *mut c_int) -> c_int {
        done(initialized().and_then(|_| {
            if update_number.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            // The categories never change.
            *update_number = 0;
            Ok(())
        }))
    }
}

fn no_handle() -> c_int {
    done(initialized().and(Err(abi::MPI_T_ERR_INVALID_HANDLE)))
}

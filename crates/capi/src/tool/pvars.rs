//! MPI_T performance variables: the path counters, their sessions and handles.
//!
//! A variable is one counter ([`FIELDS`]) over one scope: every path, or one kind of path
//! ([`SCOPES`]). A handle holds what it counted while started; the live value comes from the
//! engine's counters, which only grow (the last value seen is kept, so a handle read after
//! MPI_Finalize still answers).

use std::collections::{BTreeSet, HashMap};
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

use steadfast_core::PathCounters;

use crate::abi;

/// Counters: name and meaning, in index order within a scope.
const FIELDS: &[(&str, &str)] = &[
    ("packets_sent", "packets (message fragments and control packets) sent"),
    ("packets_received", "packets received"),
    ("bytes_sent", "payload bytes sent"),
    ("bytes_received", "payload bytes received"),
    ("frames_dropped", "frames dropped because they were malformed or carried the wrong job key"),
    ("corrupt_detected", "frames whose end-to-end CRC32C check failed (never delivered)"),
    ("foreign_dropped", "frames carrying another job's key, or a bad handshake, dropped"),
    ("dup_dropped", "duplicate fragments dropped by the reliable channel"),
    ("stale_dropped", "frames of another incarnation of a peer dropped"),
    ("retransmits", "fragments sent again (timeout, NACK, gap hint or route failover)"),
    ("rebound", "fragments moved to another route when theirs failed"),
    ("route_failures", "routes declared failed"),
    ("route_restores", "routes restored after a successful probe"),
    ("injected_drop", "fault injector: frames dropped"),
    ("injected_dup", "fault injector: frames sent twice"),
    ("injected_reorder", "fault injector: frames held back and sent after later ones"),
    ("injected_corrupt", "fault injector: frames damaged on the wire"),
    ("injected_bus", "fault injector: frames damaged in memory at the receiver"),
    ("records_streamed", "shm: large ring records written with streaming stores"),
];

fn field(c: &PathCounters, f: usize) -> u64 {
    match f {
        0 => c.packets_sent,
        1 => c.packets_received,
        2 => c.bytes_sent,
        3 => c.bytes_received,
        4 => c.frames_dropped,
        5 => c.corrupt_detected,
        6 => c.foreign_dropped,
        7 => c.dup_dropped,
        8 => c.stale_dropped,
        9 => c.retransmits,
        10 => c.rebound,
        11 => c.route_failures,
        12 => c.route_restores,
        13 => c.injected_drop,
        14 => c.injected_dup,
        15 => c.injected_reorder,
        16 => c.injected_corrupt,
        17 => c.injected_bus,
        _ => c.records_streamed,
    }
}

/// Scopes: every path (`None`), then each kind of path by name.
const SCOPES: &[Option<&str>] = &[None, Some("shm"), Some("tcp"), Some("udp")];

/// Number of performance variables.
pub fn count() -> usize {
    FIELDS.len() * SCOPES.len()
}

/// The variable at index `i`, or MPI_T_ERR_INVALID_INDEX.
pub fn at(i: c_int) -> Result<usize, c_int> {
    usize::try_from(i).ok().filter(|&i| i < count()).ok_or(abi::MPI_T_ERR_INVALID_INDEX)
}

/// `steadfast_<counter>` or `steadfast_<path>_<counter>`.
pub fn name(v: usize) -> String {
    let (scope, f) = (SCOPES[v / FIELDS.len()], FIELDS[v % FIELDS.len()].0);
    match scope {
        None => format!("steadfast_{f}"),
        Some(p) => format!("steadfast_{p}_{f}"),
    }
}

pub fn desc(v: usize) -> String {
    let (scope, f) = (SCOPES[v / FIELDS.len()], FIELDS[v % FIELDS.len()].1);
    match scope {
        None => format!("{f}, on every path of this process"),
        Some(p) => format!("{f}, on the {p} path of this process (0 when it is not used)"),
    }
}

pub fn find(n: &[u8]) -> Option<usize> {
    (0..count()).find(|&v| name(v).as_bytes() == n)
}

struct PvarHandle {
    session: usize,
    var: usize,
    started: bool,
    /// Live value when last started or reset.
    base: u64,
    /// Counted during earlier started intervals.
    accum: u64,
}

impl PvarHandle {
    fn value(&self, now: u64) -> u64 {
        self.accum + if self.started { now.saturating_sub(self.base) } else { 0 }
    }
}

#[derive(Default)]
struct Registry {
    sessions: BTreeSet<usize>,
    handles: HashMap<usize, PvarHandle>,
    /// Next session or handle id; 0 is the NULL object and 1 MPI_T_PVAR_ALL_HANDLES.
    next: usize,
    /// Last live value seen per variable.
    last: Vec<u64>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut g = registry();
    let r = g.get_or_insert_with(|| Registry { next: 2, last: vec![0; count()], ..Default::default() });
    f(r)
}

/// Every variable's live value, read from the engine (taken before the registry lock, so
/// the two locks are never held in the other order).
fn live() -> Option<Vec<u64>> {
    let g = crate::global::lock();
    let (total, parts) = g.as_ref()?.eng.path_counters()?;
    let mut out = vec![0u64; count()];
    for (s, scope) in SCOPES.iter().enumerate() {
        let mut c = PathCounters::default();
        match scope {
            None => c = total,
            Some(p) => parts.iter().filter(|(n, _)| n == p).for_each(|(_, x)| c.add(x)),
        }
        for f in 0..FIELDS.len() {
            out[s * FIELDS.len() + f] = field(&c, f);
        }
    }
    Some(out)
}

/// Live values, never below what was seen before.
fn now(r: &mut Registry, fresh: Option<Vec<u64>>) -> Vec<u64> {
    if let Some(v) = fresh {
        for (l, x) in r.last.iter_mut().zip(v) {
            *l = (*l).max(x);
        }
    }
    r.last.clone()
}

pub fn session_create() -> Result<usize, c_int> {
    with(|r| {
        let id = r.next;
        r.next = r.next.checked_add(1).ok_or(abi::MPI_T_ERR_OUT_OF_SESSIONS)?;
        r.sessions.insert(id);
        Ok(id)
    })
}

pub fn session_free(s: usize) -> Result<(), c_int> {
    with(|r| {
        if !r.sessions.remove(&s) {
            return Err(abi::MPI_T_ERR_INVALID_SESSION);
        }
        r.handles.retain(|_, h| h.session != s);
        Ok(())
    })
}

pub fn handle_alloc(s: usize, var: usize) -> Result<usize, c_int> {
    let fresh = live();
    with(|r| {
        if !r.sessions.contains(&s) {
            return Err(abi::MPI_T_ERR_INVALID_SESSION);
        }
        let base = now(r, fresh)[var];
        let id = r.next;
        r.next = r.next.checked_add(1).ok_or(abi::MPI_T_ERR_OUT_OF_HANDLES)?;
        r.handles.insert(id, PvarHandle { session: s, var, started: false, base, accum: 0 });
        Ok(id)
    })
}

fn owned(r: &Registry, s: usize, h: usize) -> Result<(), c_int> {
    if !r.sessions.contains(&s) {
        return Err(abi::MPI_T_ERR_INVALID_SESSION);
    }
    match r.handles.get(&h) {
        Some(x) if x.session == s => Ok(()),
        _ => Err(abi::MPI_T_ERR_INVALID_HANDLE),
    }
}

pub fn check_handle(s: usize, h: usize) -> Result<(), c_int> {
    with(|r| owned(r, s, h))
}

pub fn handle_free(s: usize, h: usize) -> Result<(), c_int> {
    with(|r| {
        owned(r, s, h)?;
        r.handles.remove(&h);
        Ok(())
    })
}

#[derive(Clone, Copy)]
pub enum Action {
    Start,
    Stop,
    Reset,
}

/// Start, stop or reset handle `h` of session `s`, or every handle of the session when `h`
/// is MPI_T_PVAR_ALL_HANDLES.
pub fn apply(s: usize, h: usize, a: Action) -> Result<(), c_int> {
    let fresh = live();
    with(|r| {
        if h != abi::MPI_T_PVAR_ALL_HANDLES as usize {
            owned(r, s, h)?;
        } else if !r.sessions.contains(&s) {
            return Err(abi::MPI_T_ERR_INVALID_SESSION);
        }
        let vals = now(r, fresh);
        for (id, x) in r.handles.iter_mut() {
            if x.session != s || (h != abi::MPI_T_PVAR_ALL_HANDLES as usize && *id != h) {
                continue;
            }
            let v = vals[x.var];
            match a {
                Action::Start if !x.started => {
                    x.started = true;
                    x.base = v;
                }
                Action::Stop if x.started => {
                    x.accum = x.value(v);
                    x.started = false;
                }
                Action::Reset => {
                    x.accum = 0;
                    x.base = v;
                }
                _ => {}
            }
        }
        Ok(())
    })
}

/// The value of handle `h`; with `reset` it starts again from 0 (MPI_T_pvar_readreset).
pub fn read(s: usize, h: usize, reset: bool) -> Result<u64, c_int> {
    let fresh = live();
    with(|r| {
        owned(r, s, h)?;
        let vals = now(r, fresh);
        let x = r.handles.get_mut(&h).ok_or(abi::MPI_T_ERR_INVALID_HANDLE)?;
        let v = vals[x.var];
        let out = x.value(v);
        if reset {
            x.accum = 0;
            x.base = v;
        }
        Ok(out)
    })
}

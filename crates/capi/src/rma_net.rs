//! The network path of one-sided communication: windows whose members are on more than one
//! host.
//!
//! An origin cannot reach a member on another host by itself, so every operation towards
//! one becomes an *active message*: a request on the window's private communicator (its
//! collective context, tag [`TAG_REQUEST`]), applied by the target, and for operations that
//! return data (get, get_accumulate, fetch_and_op, compare_and_swap) and for the
//! synchronization requests (lock, unlock, flush) an answer on a tag the origin chose.
//!
//! The target side is [`NetService`], installed in the engine as its [`Service`]: in every
//! round of progress it takes the requests that arrived (one standing receive per window,
//! from any origin) and applies them in arrival order. Progress rounds run inside every call
//! that makes progress (every blocking call, the test and probe calls), so a target serves
//! passive-target requests only while it is inside such a call: a target that computes
//! without calling MPI holds its origins up until it calls MPI again.
//!
//! Ordering and atomicity: the engine keeps the messages of one origin to one target in
//! order, and the service takes the next request only after the previous one has completely
//! arrived (a rendezvous request included), so a target applies one origin's operations in
//! the order they were issued: flush, unlock and the fence's flush are answered after
//! everything before them was applied. Accumulate-class requests are applied under the
//! target's accumulate mutex in its host's control segment, the same mutex that origins on
//! the target's host take for their direct accesses, so accumulates are atomic per element
//! whichever path they took. Locks requested over the network take the same lock word as
//! local lockers; a lock that cannot be granted yet is queued and tried again in every round.
//!
//! Operations are cut into pieces of at most [`PIECE`] data bytes (at element boundaries for
//! accumulates), so a request always fits the target's receive buffer.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use steadfast_core::matching::ANY_SOURCE;
use steadfast_core::op::{apply_dense, Elem, Num, PredefOp};
use steadfast_core::{Engine, ErrorClass, Handle, MpiError, Service};

use crate::global::{self, lock, Global};

type R<T> = Result<T, MpiError>;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// Tag of requests on a window's private communicator (its collective context).
const TAG_REQUEST: i32 = 1;
/// Answers use tags from here up (one per outstanding answer of the origin).
const TAG_ANSWER_BASE: i32 = 16;
/// Data bytes of one request or answer at most.
pub(crate) const PIECE: usize = 32 * 1024;
/// Byte runs of one request at most (plus one element's worth, see [`pieces`]).
const MAX_RUNS: usize = 1024;
/// Fixed part of a request.
const HEADER: usize = 32;
/// Size of the target's receive buffer: the largest request.
const REQUEST_MAX: usize = HEADER + 16 * (MAX_RUNS + 4) + 2 * PIECE;

/// Request kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Put = 1,
    Get = 2,
    Acc = 3,
    GetAcc = 4,
    Cas = 5,
    Lock = 6,
    Unlock = 7,
    Flush = 8,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Put,
            2 => Kind::Get,
            3 => Kind::Acc,
            4 => Kind::GetAcc,
            5 => Kind::Cas,
            6 => Kind::Lock,
            7 => Kind::Unlock,
            8 => Kind::Flush,
            _ => return None,
        })
    }
}

/// Status byte that starts every answer.
const OK: u8 = 0;
const BAD_RANGE: u8 = 1;
const BAD_REQUEST: u8 = 2;

// ---- wire form ------------------------------------------------------------------------------

const NUMS: [Num; 15] = [
    Num::I8,
    Num::I16,
    Num::I32,
    Num::I64,
    Num::I128,
    Num::U8,
    Num::U16,
    Num::U32,
    Num::U64,
    Num::U128,
    Num::F16,
    Num::F32,
    Num::F64,
    Num::X87,
    Num::F128,
];

fn num_code(n: Num) -> u8 {
    NUMS.iter().position(|&x| x == n).unwrap_or(0) as u8
}

fn num_of(c: u8) -> Option<Num> {
    NUMS.get(c as usize).copied()
}

fn elem_code(e: Elem) -> [u8; 3] {
    match e {
        Elem::Num(n) => [1, num_code(n), 0],
        Elem::Complex(n) => [2, num_code(n), 0],
        Elem::Bool(b) => [3, b, 0],
        Elem::Byte => [4, 0, 0],
        Elem::Pair(v, i) => [5, num_code(v), num_code(i)],
        Elem::None => [0, 0, 0],
    }
}

fn elem_of(c: [u8; 3]) -> Option<Elem> {
    Some(match c[0] {
        0 => Elem::None,
        1 => Elem::Num(num_of(c[1])?),
        2 => Elem::Complex(num_of(c[1])?),
        3 if c[1] > 0 => Elem::Bool(c[1]),
        4 => Elem::Byte,
        5 => Elem::Pair(num_of(c[1])?, num_of(c[2])?),
        _ => return None,
    })
}

/// The parsed fixed part of a request.
#[derive(Debug, Clone, Copy)]
struct Header {
    kind: Kind,
    /// Lock requests: exclusive.
    exclusive: bool,
    elem: Elem,
    /// Tag of the answer (0: none expected).
    answer: i32,
    /// The application's predefined MPI_Op handle (accumulates).
    op: u64,
    /// Bytes of data.
    data: usize,
}

fn encode(h: &Header, runs: &[(usize, usize)], data: &[&[u8]]) -> Vec<u8> {
    let len: usize = data.iter().map(|d| d.len()).sum();
    let mut m = Vec::with_capacity(HEADER + 16 * runs.len() + len);
    m.push(h.kind as u8);
    m.push(h.exclusive as u8);
    m.extend_from_slice(&elem_code(h.elem));
    m.extend_from_slice(&[0; 3]);
    m.extend_from_slice(&h.answer.to_le_bytes());
    m.extend_from_slice(&h.op.to_le_bytes());
    m.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend_from_slice(&[0; 4]);
    debug_assert_eq!(m.len(), HEADER);
    for &(a, l) in runs {
        m.extend_from_slice(&(a as u64).to_le_bytes());
        m.extend_from_slice(&(l as u64).to_le_bytes());
    }
    for d in data {
        m.extend_from_slice(d);
    }
    m
}

fn word<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off + N)?.try_into().ok()
}

/// Checked parse of a request: the header, its runs and its data, or None when the message
/// is short, too long or inconsistent.
fn parse(m: &[u8]) -> Option<(Header, Vec<(usize, usize)>, &[u8])> {
    let kind = Kind::from_u8(*m.first()?)?;
    let exclusive = *m.get(1)? != 0;
    let elem = elem_of(word::<3>(m, 2)?)?;
    let answer = i32::from_le_bytes(word(m, 8)?);
    let op = u64::from_le_bytes(word(m, 12)?);
    let nruns = u32::from_le_bytes(word(m, 20)?) as usize;
    let len = u32::from_le_bytes(word(m, 24)?) as usize;
    if nruns > MAX_RUNS + 4 || m.len() != HEADER + 16 * nruns + len {
        return None;
    }
    let mut runs = Vec::with_capacity(nruns);
    let mut total = 0usize;
    for i in 0..nruns {
        let a = u64::from_le_bytes(word(m, HEADER + 16 * i)?) as usize;
        let l = u64::from_le_bytes(word(m, HEADER + 16 * i + 8)?) as usize;
        total = total.checked_add(l)?;
        runs.push((a, l));
    }
    if total > 2 * PIECE {
        return None;
    }
    let h = Header { kind, exclusive, elem, answer, op, data: len };
    Some((h, runs, m.get(HEADER + 16 * nruns..)?))
}

// ---- the target side ------------------------------------------------------------------------

/// What the target side knows of one window spanning hosts.
pub(crate) struct TargetWin {
    /// The window's private communicator of requests (engine handle).
    comm: Handle,
    /// Memory of a window with a fixed size: (base, size).
    fixed: Option<(usize, usize)>,
    /// Memory attached to a dynamic window.
    pub(crate) attached: Vec<(usize, usize)>,
    /// This member's line of its host's control segment: lock word, then accumulate mutex.
    ctl: usize,
    /// The standing receive of requests and its buffer (a heap block that never moves).
    recv: Option<Handle>,
    buf: Box<[u8]>,
    /// Lock requests not granted yet: (origin, exclusive, answer tag), in arrival order.
    waiting: VecDeque<(i32, bool, i32)>,
    /// Per origin, the first failure of a request without answer since its last flush.
    failed: HashMap<i32, u8>,
}

/// The target side of every window spanning hosts in this process, and the sends in flight
/// whose buffers must live until they complete (answers, and requests of this process as
/// an origin).
#[derive(Default)]
pub(crate) struct NetService {
    wins: HashMap<u64, TargetWin>,
    sends: Vec<(Handle, Vec<u8>)>,
    /// Mailboxes of windows within one host this process is a target of (`rma_mail`), by
    /// window handle.
    mail: Vec<(u64, std::sync::Arc<crate::rma_mail::Mail>)>,
}

impl Service for NetService {
    fn serve(&mut self, eng: &mut Engine) -> bool {
        let mut moved = false;
        for (_, m) in &self.mail {
            moved |= m.serve();
        }
        let sends = &mut self.sends;
        for w in self.wins.values_mut() {
            moved |= w.serve(eng, sends);
        }
        let before = self.sends.len();
        self.sends.retain(|(h, _)| {
            let done = eng.is_complete(*h).unwrap_or(true);
            if done {
                eng.release(*h);
            }
            !done
        });
        moved || self.sends.len() != before
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn awake(&self) -> bool {
        self.mail.iter().any(|(_, m)| m.recently_served())
    }
}

fn lock_word(ctl: usize) -> &'static AtomicU64 {
    // SAFETY: `ctl` is this member's line of a mapped control segment, which stays mapped
    // while the window is registered here.
    unsafe { &*(ctl as *const AtomicU64) }
}

fn acc_mutex(ctl: usize) -> &'static AtomicU32 {
    // SAFETY: as for lock_word; the mutex is the second word of the line.
    unsafe { &*((ctl + 8) as *const AtomicU32) }
}

/// Lock requests of other hosts queued at the member whose control line starts at `ctl`.
pub(crate) fn remote_waiters(ctl: usize) -> &'static AtomicU32 {
    // SAFETY: as for lock_word; the count is the third word of the line.
    unsafe { &*((ctl + 16) as *const AtomicU32) }
}

/// Lockers of the member's own host waiting for its lock word (after a first attempt failed).
pub(crate) fn local_waiters(ctl: usize) -> &'static AtomicU32 {
    // SAFETY: as for lock_word; the fifth word of the line.
    unsafe { &*((ctl + 24) as *const AtomicU32) }
}

/// Whose turn the lock word is while lockers of the member's host and requests of other
/// hosts both wait: [`LOCAL_TURN`] or [`REMOTE_TURN`]. The target's service hands the turn to
/// the host's lockers when it grants a queued request, and a locker of the host hands it
/// back when it takes the word, so the two sides alternate and neither can starve the other
/// (a stream of requests of other hosts kept a host's lockers out for good when they stood
/// back whenever any was queued).
pub(crate) fn lock_turn(ctl: usize) -> &'static AtomicU32 {
    // SAFETY: as for lock_word; the fourth word of the line.
    unsafe { &*((ctl + 20) as *const AtomicU32) }
}

pub(crate) const LOCAL_TURN: u32 = 0;
pub(crate) const REMOTE_TURN: u32 = 1;

/// One attempt at the lock word (the same protocol as local lockers).
pub(crate) fn try_lock(word: &AtomicU64, exclusive: bool) -> bool {
    if exclusive {
        return word.compare_exchange(0, super::rma::LOCK_EXCL, Ordering::Acquire, Ordering::Relaxed).is_ok();
    }
    let v = word.load(Ordering::Relaxed);
    v & super::rma::LOCK_EXCL == 0 && word.compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

pub(crate) fn unlock(word: &AtomicU64, exclusive: bool) {
    if exclusive {
        word.store(0, Ordering::Release);
    } else {
        word.fetch_sub(1, Ordering::Release);
    }
}

impl TargetWin {
    /// Whether every run lies in memory this member exposes.
    fn covers(&self, runs: &[(usize, usize)]) -> bool {
        runs.iter().all(|&(a, l)| {
            let Some(end) = a.checked_add(l) else { return false };
            match self.fixed {
                Some((b, s)) => a >= b && end <= b + s,
                None => self.attached.iter().any(|&(b, s)| a >= b && end <= b + s),
            }
        })
    }

    fn post(&mut self, eng: &mut Engine) -> bool {
        match eng.coll_irecv(self.comm, ANY_SOURCE, TAG_REQUEST, &mut self.buf) {
            Ok(h) => {
                self.recv = Some(h);
                true
            }
            Err(e) => {
                tracing::warn!("one-sided requests: cannot post the receive: {e}");
                false
            }
        }
    }

    fn serve(&mut self, eng: &mut Engine, sends: &mut Vec<(Handle, Vec<u8>)>) -> bool {
        let mut moved = false;
        // Bounded: a flood of requests does not keep the caller's call from returning.
        for _ in 0..64 {
            let Some(h) = self.recv else {
                if !self.post(eng) {
                    break;
                }
                continue;
            };
            if !eng.is_complete(h).unwrap_or(false) {
                break;
            }
            let st = eng.wait(h);
            eng.release(h);
            self.recv = None;
            moved = true;
            match st {
                Ok(s) if s.error.is_none() => {
                    let n = (s.bytes as usize).min(self.buf.len());
                    let msg = self.buf[..n].to_vec();
                    self.apply(eng, s.source, &msg, sends);
                }
                Ok(s) => tracing::warn!("one-sided requests: a request failed to arrive: {:?}", s.error),
                Err(e) => tracing::warn!("one-sided requests: {e}"),
            }
        }
        moved | self.grant(eng, sends)
    }

    /// Grant queued lock requests, in arrival order, while the word allows and it is not the
    /// turn of this host's waiting lockers.
    fn grant(&mut self, eng: &mut Engine, sends: &mut Vec<(Handle, Vec<u8>)>) -> bool {
        let mut moved = false;
        while let Some(&(origin, excl, tag)) = self.waiting.front() {
            if local_waiters(self.ctl).load(Ordering::Acquire) > 0 && lock_turn(self.ctl).load(Ordering::Acquire) == LOCAL_TURN {
                break;
            }
            if !try_lock(lock_word(self.ctl), excl) {
                break;
            }
            lock_turn(self.ctl).store(LOCAL_TURN, Ordering::Release);
            self.waiting.pop_front();
            remote_waiters(self.ctl).fetch_sub(1, Ordering::Release);
            answer(eng, self.comm, origin, tag, vec![OK], sends);
            moved = true;
        }
        moved
    }

    /// Apply one request of `origin`.
    fn apply(&mut self, eng: &mut Engine, origin: i32, msg: &[u8], sends: &mut Vec<(Handle, Vec<u8>)>) {
        let Some((h, runs, data)) = parse(msg) else {
            tracing::warn!("one-sided requests: a malformed request of {} bytes from rank {origin} was dropped", msg.len());
            return;
        };
        let total: usize = runs.iter().map(|r| r.1).sum();
        let moves_data = !matches!(h.kind, Kind::Lock | Kind::Unlock | Kind::Flush);
        if moves_data && !self.covers(&runs) {
            tracing::debug!("one-sided requests: rank {origin} reached outside this member's window");
            match h.kind {
                Kind::Put | Kind::Acc => {
                    self.failed.entry(origin).or_insert(BAD_RANGE);
                }
                _ => answer(eng, self.comm, origin, h.answer, vec![BAD_RANGE], sends),
            }
            return;
        }
        let consistent = match h.kind {
            Kind::Put | Kind::Acc => h.data == total,
            Kind::GetAcc => h.data == total || h.data == 0,
            Kind::Cas => h.data == 2 * total,
            Kind::Get | Kind::Lock | Kind::Unlock | Kind::Flush => h.data == 0,
        };
        let op = crate::op::predef_op(h.op as usize);
        let reduces = matches!(h.kind, Kind::Acc | Kind::GetAcc);
        let esize = h.elem.size().max(1);
        let op_ok = !reduces
            || match op {
                Some(PredefOp::Replace | PredefOp::NoOp) => true,
                Some(p) => p.supports(h.elem) && total % esize == 0,
                None => false,
            };
        if !consistent || !op_ok {
            tracing::warn!("one-sided requests: an inconsistent {:?} request from rank {origin} was dropped", h.kind);
            match h.kind {
                Kind::Put | Kind::Acc => {
                    self.failed.entry(origin).or_insert(BAD_REQUEST);
                }
                _ => answer(eng, self.comm, origin, h.answer, vec![BAD_REQUEST], sends),
            }
            return;
        }
        // SAFETY (for the accesses below): every run lies in memory this member exposes
        // (checked above), and the lengths of data and runs agree.
        match h.kind {
            Kind::Put => unsafe { scatter(&runs, data) },
            Kind::Get => {
                let mut out = Vec::with_capacity(1 + total);
                out.push(OK);
                unsafe { gather(&runs, &mut out) };
                answer(eng, self.comm, origin, h.answer, out, sends);
            }
            Kind::Acc | Kind::GetAcc => {
                let mut out = vec![OK];
                with_mutex(acc_mutex(self.ctl), || unsafe {
                    let mut cur = Vec::with_capacity(total);
                    gather(&runs, &mut cur);
                    if h.kind == Kind::GetAcc {
                        out.extend_from_slice(&cur);
                    }
                    match op {
                        Some(PredefOp::NoOp) | None => return,
                        _ if data.is_empty() => return,
                        Some(PredefOp::Replace) => cur.copy_from_slice(data),
                        Some(p) => apply_dense(p, h.elem, data.as_ptr(), cur.as_mut_ptr(), total / esize),
                    }
                    scatter(&runs, &cur);
                });
                if h.kind == Kind::GetAcc {
                    answer(eng, self.comm, origin, h.answer, out, sends);
                }
            }
            Kind::Cas => {
                let (new, cmp) = data.split_at(total);
                let mut out = vec![OK];
                with_mutex(acc_mutex(self.ctl), || unsafe {
                    let mut old = Vec::with_capacity(total);
                    gather(&runs, &mut old);
                    if old == cmp {
                        scatter(&runs, new);
                    }
                    out.extend_from_slice(&old);
                });
                answer(eng, self.comm, origin, h.answer, out, sends);
            }
            Kind::Lock => {
                // Behind others waiting, so a stream of shared locks cannot starve an
                // exclusive one that asked earlier; granted at once if the word and the
                // turn allow.
                self.waiting.push_back((origin, h.exclusive, h.answer));
                remote_waiters(self.ctl).fetch_add(1, Ordering::Release);
                self.grant(eng, sends);
            }
            Kind::Unlock => {
                unlock(lock_word(self.ctl), h.exclusive);
                let st = self.failed.remove(&origin).unwrap_or(OK);
                answer(eng, self.comm, origin, h.answer, vec![st], sends);
            }
            Kind::Flush => {
                let st = self.failed.remove(&origin).unwrap_or(OK);
                answer(eng, self.comm, origin, h.answer, vec![st], sends);
            }
        }
    }
}

/// Copy `data` into the byte runs, in order.
unsafe fn scatter(runs: &[(usize, usize)], data: &[u8]) {
    let mut p = data.as_ptr();
    for &(a, l) in runs {
        std::ptr::copy(p, a as *mut u8, l);
        p = p.add(l);
    }
}

/// Append the bytes of the runs to `out`, in order.
unsafe fn gather(runs: &[(usize, usize)], out: &mut Vec<u8>) {
    for &(a, l) in runs {
        out.extend_from_slice(std::slice::from_raw_parts(a as *const u8, l));
    }
}

fn with_mutex(m: &AtomicU32, f: impl FnOnce()) {
    let mut spins = 0u32;
    while m.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    f();
    m.store(0, Ordering::Release);
}

fn answer(eng: &mut Engine, comm: Handle, origin: i32, tag: i32, data: Vec<u8>, sends: &mut Vec<(Handle, Vec<u8>)>) {
    if tag < TAG_ANSWER_BASE {
        return;
    }
    match eng.coll_isend(comm, origin, tag, &data) {
        // The vector's heap block stays where it is while the send is in flight.
        Ok(h) => sends.push((h, data)),
        Err(e) => tracing::warn!("one-sided requests: cannot answer rank {origin}: {e}"),
    }
}

fn service(g: &mut Global) -> R<&mut NetService> {
    if g.eng.service_mut().is_none() {
        g.eng.set_service(Some(Box::<NetService>::default()));
    }
    g.eng
        .service_mut()
        .and_then(|s| s.as_any().downcast_mut::<NetService>())
        .ok_or_else(|| err(ErrorClass::Intern, "the engine runs another service"))
}

/// Make this member a target of the window whose requests travel on `comm` (an engine
/// handle): `fixed` is its memory (None for a dynamic window), `ctl` its control line.
pub(crate) fn expose(comm: Handle, fixed: Option<(usize, usize)>, ctl: usize) -> R<()> {
    let mut guard = lock();
    let g = guard.as_mut().ok_or_else(|| err(ErrorClass::Other, "MPI is not initialised"))?;
    let mut w = TargetWin {
        comm,
        fixed,
        attached: Vec::new(),
        ctl,
        recv: None,
        buf: vec![0u8; REQUEST_MAX].into_boxed_slice(),
        waiting: VecDeque::new(),
        failed: HashMap::new(),
    };
    if !w.post(&mut g.eng) {
        return Err(err(ErrorClass::Intern, "cannot post the receive of one-sided requests"));
    }
    service(g)?.wins.insert(comm.0, w);
    SERVED.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Windows this process serves as a target of other hosts.
static SERVED: AtomicUsize = AtomicUsize::new(0);

/// One round of progress if this process serves a window spanning hosts: one-sided calls
/// that complete locally (on members of this host) still serve the requests of other
/// hosts, so a program looping on them (a lock built of compare-and-swap) cannot starve
/// an origin that waits for it.
pub(crate) fn progress_if_serving() {
    if SERVED.load(Ordering::Relaxed) > 0 {
        poke();
    }
}

/// Apply what origins post to this member's mailboxes of window `win` in every round of
/// progress.
pub(crate) fn serve_mail(win: u64, m: std::sync::Arc<crate::rma_mail::Mail>) {
    let mut guard = lock();
    let Some(g) = guard.as_mut() else { return };
    match service(g) {
        Ok(s) => s.mail.push((win, m)),
        Err(e) => tracing::warn!("one-sided mailboxes: not served ({e}); origins will claim their records"),
    }
}

/// Stop serving the mailboxes of window `win` (after a barrier: every epoch towards it ended).
pub(crate) fn withdraw_mail(win: u64) {
    let mut guard = lock();
    let Some(g) = guard.as_mut() else { return };
    if let Ok(s) = service(g) {
        s.mail.retain(|(w, _)| *w != win);
    }
}

/// Stop serving the window of `comm` (after a barrier: no request is on its way).
pub(crate) fn withdraw(comm: Handle) {
    let mut guard = lock();
    let Some(g) = guard.as_mut() else { return };
    let Ok(s) = service(g) else { return };
    let Some(w) = s.wins.remove(&comm.0) else { return };
    SERVED.fetch_sub(1, Ordering::Relaxed);
    if let Some(h) = w.recv {
        let _ = g.eng.cancel(h);
        if g.eng.is_complete(h).unwrap_or(true) {
            g.eng.release(h);
        } else {
            // The buffer goes with `w`: the receive must not stay posted into it.
            let _ = g.eng.request_free(h);
        }
    }
}

/// Memory attached to (`add`) or detached from a dynamic window.
pub(crate) fn attach(comm: Handle, region: (usize, usize), add: bool) -> R<()> {
    let mut guard = lock();
    let g = guard.as_mut().ok_or_else(|| err(ErrorClass::Other, "MPI is not initialised"))?;
    let w = service(g)?.wins.get_mut(&comm.0).ok_or_else(|| err(ErrorClass::Intern, "the window is not served"))?;
    if add {
        w.attached.push(region);
    } else if let Some(i) = w.attached.iter().position(|&r| r.0 == region.0) {
        w.attached.remove(i);
    }
    Ok(())
}

// ---- the origin side ------------------------------------------------------------------------

static NEXT_ANSWER: AtomicI32 = AtomicI32::new(0);

fn answer_tag() -> i32 {
    TAG_ANSWER_BASE + NEXT_ANSWER.fetch_add(1, Ordering::Relaxed).rem_euclid(1 << 28)
}

/// Cut the byte runs into pieces of at most [`PIECE`] bytes, at multiples of `esize` bytes
/// of data: (runs, start, end) with start..end the piece's part of the packed data.
pub(crate) fn pieces(runs: &[(usize, usize)], esize: usize) -> Vec<(Vec<(usize, usize)>, usize, usize)> {
    let esize = esize.max(1);
    let cap = (PIECE / esize).max(1) * esize;
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let (mut start, mut off) = (0usize, 0usize);
    for &(a, l) in runs {
        let (mut a, mut l) = (a, l);
        while l > 0 {
            let take = l.min(cap - (off - start));
            cur.push((a, take));
            a += take;
            l -= take;
            off += take;
            let at_element = (off - start) % esize == 0;
            if off - start == cap || (cur.len() >= MAX_RUNS && at_element) {
                out.push((std::mem::take(&mut cur), start, off));
                start = off;
            }
        }
    }
    if !cur.is_empty() {
        out.push((cur, start, off));
    }
    out
}

/// One request towards `target` of the window communicator `comm`: (kind, runs, data,
/// answer buffer size when an answer is expected).
pub(crate) struct Ask<'a> {
    pub kind: Kind,
    pub exclusive: bool,
    pub elem: Elem,
    pub op: u64,
    pub runs: Vec<(usize, usize)>,
    pub data: Vec<&'a [u8]>,
    /// Bytes of data the answer carries (after its status byte); None: no answer.
    pub answer: Option<usize>,
}

/// Send the requests to `target` in order and wait for their answers; returns each answer's
/// data (empty for requests without answer). A status other than OK is an error.
pub(crate) fn exchange(comm: Handle, target: i32, asks: Vec<Ask<'_>>) -> R<Vec<Vec<u8>>> {
    let mut bufs: Vec<Option<Vec<u8>>> = asks.iter().map(|a| a.answer.map(|n| vec![0u8; 1 + n])).collect();
    let mut recvs = Vec::new();
    {
        let mut guard = lock();
        let g = guard.as_mut().ok_or_else(|| err(ErrorClass::Other, "MPI is not initialised"))?;
        for (a, b) in asks.iter().zip(bufs.iter_mut()) {
            let tag = match b {
                Some(buf) => {
                    let tag = answer_tag();
                    // Posted before the request leaves, so the answer finds it.
                    recvs.push(g.eng.coll_irecv(comm, target, tag, buf)?);
                    tag
                }
                None => 0,
            };
            let h = Header { kind: a.kind, exclusive: a.exclusive, elem: a.elem, answer: tag, op: a.op, data: 0 };
            let msg = encode(&h, &a.runs, &a.data);
            let s = g.eng.coll_isend(comm, target, TAG_REQUEST, &msg)?;
            service(g)?.sends.push((s, msg));
        }
    }
    if recvs.is_empty() {
        // Nothing to wait for (puts, accumulates): still a round of progress, as every
        // communication call on a window spanning hosts makes one.
        poke();
    }
    wait_all(&recvs)?;
    let mut out = Vec::with_capacity(bufs.len());
    for b in bufs {
        match b {
            None => out.push(Vec::new()),
            Some(v) => match v.first().copied() {
                Some(OK) => out.push(v[1..].to_vec()),
                Some(BAD_RANGE) => return Err(err(ErrorClass::RmaRange, format!("an access at target {target} lies outside its window (or attached memory)"))),
                _ => return Err(err(ErrorClass::Intern, format!("target {target} refused a one-sided request as malformed"))),
            },
        }
    }
    Ok(out)
}

/// Wait for receives `hs` (releasing the library lock between rounds under
/// MPI_THREAD_MULTIPLE) and release them.
fn wait_all(hs: &[Handle]) -> R<()> {
    if hs.is_empty() {
        return Ok(());
    }
    let mut guard = lock();
    if global::multiple() {
        let (back, r) = global::wait_released(guard, |g| Ok(hs.iter().all(|h| g.eng.is_complete(*h).unwrap_or(true))));
        guard = back;
        r?;
    }
    let g = guard.as_mut().ok_or_else(|| err(ErrorClass::Other, "MPI was finalized during a one-sided call"))?;
    let mut first = Ok(());
    for &h in hs {
        let r = g.eng.wait(h).and_then(|s| match s.error {
            Some(c) => Err(err(c, "a one-sided answer failed to arrive")),
            None => Ok(()),
        });
        g.eng.release(h);
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// One round of progress (a local locker waiting for a lock word that a remote origin's
/// request holds needs this process to serve the unlock).
pub(crate) fn poke() {
    let mut guard = lock();
    if let Some(g) = guard.as_mut() {
        if let Err(e) = g.eng.progress() {
            tracing::warn!("one-sided requests: progress failed: {e}");
        }
    }
}

/// One round of a wait for a lock word of this host while the window spans hosts: progress
/// (the unlock or the grant waited for may be this process's to serve), then, after `idle`
/// rounds that moved nothing, as the engine's own waits do: spin (`STEADFAST_SPIN` polls),
/// yield (`STEADFAST_YIELDS` rounds), then sleep on the path's doorbell for at most
/// [`LOCK_NAP`]. The holders it waits for (the target serving requests of other hosts, a
/// host-mate) need the CPU more than a spinning waiter when ranks outnumber cores.
pub(crate) fn lock_wait_round(idle: &mut u32) {
    let mut guard = lock();
    let Some(g) = guard.as_mut() else { return };
    match g.eng.progress() {
        Ok(true) => {
            *idle = 0;
            return;
        }
        Ok(false) => {}
        Err(e) => tracing::warn!("one-sided requests: progress failed: {e}"),
    }
    *idle = idle.saturating_add(1);
    // Each round follows 64 spins on the word.
    let (spin, yields) = (g.eng.cfg.spin / 64, g.eng.cfg.yields);
    if *idle <= spin {
        return;
    }
    if *idle <= spin.saturating_add(yields) {
        drop(guard);
        std::thread::yield_now();
        return;
    }
    // Requests of other hosts ring the doorbell; a host-mate's unlock does not, hence the
    // short nap.
    if let Err(e) = g.eng.sleep_on_path(LOCK_NAP) {
        tracing::warn!("one-sided requests: waiting on the path failed: {e}");
    }
}

/// Longest sleep of a wait for a lock word of this host (see [`lock_wait_round`]).
const LOCK_NAP: std::time::Duration = std::time::Duration::from_millis(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let runs = vec![(0x1000, 8), (0x2000, 4)];
        let data = [7u8; 12];
        let h = Header { kind: Kind::Acc, exclusive: false, elem: Elem::Num(Num::I32), answer: 99, op: 3, data: 12 };
        let m = encode(&h, &runs, &[&data]);
        let (p, r, d) = parse(&m).expect("parses");
        assert_eq!(p.kind, Kind::Acc);
        assert_eq!(p.elem, Elem::Num(Num::I32));
        assert_eq!((p.answer, p.op), (99, 3));
        assert_eq!(r, runs);
        assert_eq!(d, &data);
        // Short, long and inconsistent messages are refused.
        assert!(parse(&m[..m.len() - 1]).is_none());
        let mut long = m.clone();
        long.push(0);
        assert!(parse(&long).is_none());
        let mut bad = m.clone();
        bad[0] = 77;
        assert!(parse(&bad).is_none());
        assert!(parse(&[]).is_none());
    }

    #[test]
    fn pieces_cut_at_elements() {
        // One long run, elements of 6 bytes: pieces hold whole elements.
        let runs = vec![(0, 100_000)];
        let p = pieces(&runs, 6);
        assert!(p.iter().all(|(_, s, e)| (e - s) % 6 == 0 || *e == 100_000));
        assert_eq!(p.last().map(|x| x.2), Some(100_000));
        assert!(p.iter().all(|(r, s, e)| r.iter().map(|x| x.1).sum::<usize>() == e - s && e - s <= PIECE));
        // Many short runs: at most MAX_RUNS (plus part of an element) per piece.
        let runs: Vec<_> = (0..6000).map(|i| (i * 16, 2)).collect();
        let p = pieces(&runs, 6);
        assert!(p.iter().all(|(r, s, e)| r.len() <= MAX_RUNS + 2 && (e - s) % 6 == 0));
        assert_eq!(p.iter().map(|x| x.0.len()).sum::<usize>(), 6000);
    }
}

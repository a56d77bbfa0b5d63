//! Communicator and datatype attributes: keyvals, set / get / delete, copy on dup, delete on
//! free, and the predefined attributes.
//!
//! Copy and delete callbacks are application code that may call MPI, so they always run with
//! the library lock released: each entry point works in phases (look up under the lock,
//! call back without it, update under it again).
//!
//! Deletion order: when a communicator or datatype is freed (and for MPI_COMM_SELF, then MPI_COMM_WORLD,
//! at the start of MPI_Finalize) attributes are deleted last-set first. A failing delete
//! callback fails the call and leaves the attribute in place.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use steadfast_core::attr::{AttrKind, AttrList, Keyval};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Datatype};
use crate::global::{api, api_unlocked, comm_handle, locked, Failure, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

// The first argument is the object's handle (MPI_Comm or MPI_Datatype: both are pointers in
// the standard ABI, so one signature serves both kinds of callback).
type CopyFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void) -> c_int;

/// An object attributes are cached on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obj {
    /// A communicator, by engine handle.
    Comm(Handle),
    /// A datatype, by application handle (predefined types can carry attributes too).
    Type(usize),
    /// A window, by application handle.
    Win(usize),
}

fn attrs(g: &Global, o: Obj) -> Option<&AttrList> {
    match o {
        Obj::Comm(h) => g.tables.comm_attrs.get(&h),
        Obj::Type(t) => g.tables.type_attrs.get(&t),
        Obj::Win(w) => g.tables.win_attrs.get(&w),
    }
}

fn attrs_mut(g: &mut Global, o: Obj) -> &mut AttrList {
    match o {
        Obj::Comm(h) => g.tables.comm_attrs.entry(h).or_default(),
        Obj::Type(t) => g.tables.type_attrs.entry(t).or_default(),
        Obj::Win(w) => g.tables.win_attrs.entry(w).or_default(),
    }
}

fn forget_attrs(g: &mut Global, o: Obj) {
    match o {
        Obj::Comm(h) => g.tables.comm_attrs.remove(&h),
        Obj::Type(t) => g.tables.type_attrs.remove(&t),
        Obj::Win(w) => g.tables.win_attrs.remove(&w),
    };
}

// Values of the predefined attributes; applications get pointers to them.
static TAG_UB: AtomicI32 = AtomicI32::new(crate::pt2pt::TAG_UB);
static HOST: AtomicI32 = AtomicI32::new(abi::MPI_PROC_NULL);
// Every rank can do I/O.
static IO: AtomicI32 = AtomicI32::new(abi::MPI_ANY_SOURCE);
static WTIME_IS_GLOBAL: AtomicI32 = AtomicI32::new(0);
static UNIVERSE_SIZE: AtomicI32 = AtomicI32::new(1);
static APPNUM: AtomicI32 = AtomicI32::new(0);

/// Address of a predefined attribute's value, if `keyval` is a predefined key.
fn predefined(keyval: c_int, world_size: u32) -> Option<*mut c_void> {
    let v: &AtomicI32 = match keyval {
        abi::MPI_TAG_UB => &TAG_UB,
        abi::MPI_HOST => &HOST,
        abi::MPI_IO => &IO,
        abi::MPI_WTIME_IS_GLOBAL => &WTIME_IS_GLOBAL,
        abi::MPI_UNIVERSE_SIZE => {
            let universe = steadfast_config::lookup(steadfast_runtime::env::UNIVERSE_SIZE).and_then(|u| u.trim().parse::<u32>().ok());
            UNIVERSE_SIZE.store(universe.unwrap_or(world_size).max(world_size).min(i32::MAX as u32) as i32, Ordering::Relaxed);
            &UNIVERSE_SIZE
        }
        abi::MPI_APPNUM => {
            let appnum = steadfast_config::lookup(steadfast_runtime::env::APPNUM).and_then(|a| a.trim().parse::<i32>().ok());
            APPNUM.store(appnum.unwrap_or(0).max(0), Ordering::Relaxed);
            &APPNUM
        }
        abi::MPI_LASTUSEDCODE => &crate::errhandler::LAST_USED_CODE,
        _ => return None,
    };
    Some(v.as_ptr() as *mut c_void)
}

fn is_predefined_key(keyval: c_int) -> bool {
    (abi::MPI_TAG_UB..=abi::MPI_LASTUSEDCODE).contains(&keyval)
}

/// Run a delete callback (no lock held).
unsafe fn call_delete(kv: &Keyval, obj: usize, keyval: c_int, value: usize) -> Result<(), Failure> {
    if kv.delete_fn == abi::CALLBACK_NULL_FN {
        return Ok(());
    }
    let f: DeleteFn = std::mem::transmute::<usize, DeleteFn>(kv.delete_fn);
    match f(obj, keyval, value as *mut c_void, kv.extra as *mut c_void) {
        abi::MPI_SUCCESS => Ok(()),
        rc => Err(Failure::Code(rc)),
    }
}

/// Run a copy callback (no lock held): the new value, or None if not copied.
unsafe fn call_copy(kv: &Keyval, obj: usize, keyval: c_int, value: usize) -> Result<Option<usize>, Failure> {
    match kv.copy_fn {
        abi::CALLBACK_NULL_FN => Ok(None),
        abi::CALLBACK_DUP_FN => Ok(Some(value)),
        p => {
            let f: CopyFn = std::mem::transmute::<usize, CopyFn>(p);
            let mut out: usize = 0;
            let mut flag: c_int = 0;
            let rc = f(obj, keyval, kv.extra as *mut c_void, value as *mut c_void, &mut out as *mut usize as *mut c_void, &mut flag);
            if rc != abi::MPI_SUCCESS {
                return Err(Failure::Code(rc));
            }
            Ok((flag != 0).then_some(out))
        }
    }
}

/// Copy the attributes of communicator `old` (application handle `old_value`) onto `new`
/// through their copy callbacks (MPI_Comm_dup and friends). On failure the attributes copied
/// so far are deleted again; the caller frees `new`.
pub unsafe fn copy_attrs(old_value: MPI_Comm, old: Handle, new: Handle, new_value: MPI_Comm) -> Result<(), Failure> {
    copy_obj_attrs(old_value as usize, Obj::Comm(old), Obj::Comm(new), new_value as usize)
}

/// Copy the attributes of `old` (application handle `old_value`) onto `new` (handle
/// `new_value`); on failure the ones copied so far are deleted again.
pub unsafe fn copy_obj_attrs(old_value: usize, old: Obj, new: Obj, new_value: usize) -> Result<(), Failure> {
    let list: Vec<(c_int, usize, Option<Keyval>)> = locked(|g| {
        Ok(attrs(g, old).map(|l| l.iter().map(|(k, v)| (k, v, g.tables.keyvals.lookup(k))).collect()).unwrap_or_default())
    })?;
    for (k, v, kv) in list {
        let Some(kv) = kv else { continue };
        let copied = match call_copy(&kv, old_value, k, v) {
            Ok(c) => c,
            Err(e) => {
                let _ = delete_obj_attrs(new_value, new);
                return Err(e);
            }
        };
        if let Some(nv) = copied {
            locked(|g| {
                if attrs_mut(g, new).set(k, nv).is_none() {
                    g.tables.keyvals.attach(k);
                }
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Delete every attribute of communicator `h` (application handle `value`), last set first.
pub unsafe fn delete_all(value: MPI_Comm, h: Handle) -> Result<(), Failure> {
    delete_obj_attrs(value as usize, Obj::Comm(h))
}

/// Delete every attribute of `o` (application handle `value`), last set first. A failing
/// delete callback stops here and leaves that attribute (and older ones) in place.
pub unsafe fn delete_obj_attrs(value: usize, o: Obj) -> Result<(), Failure> {
    loop {
        let next = locked(|g| Ok(attrs(g, o).and_then(|l| l.last()).map(|(k, v)| (k, v, g.tables.keyvals.lookup(k)))))?;
        let Some((k, v, kv)) = next else { break };
        if let Some(kv) = kv {
            call_delete(&kv, value, k, v)?;
        }
        remove_attr(o, k, v)?;
    }
    locked(|g| {
        forget_attrs(g, o);
        Ok(())
    })
}

/// Drop attribute `k` of `o` after its delete callback ran, unless a callback already
/// replaced or removed it.
fn remove_attr(o: Obj, k: c_int, v: usize) -> Result<(), Failure> {
    locked(|g| {
        let gone = match o {
            Obj::Comm(h) => g.tables.comm_attrs.get_mut(&h),
            Obj::Type(t) => g.tables.type_attrs.get_mut(&t),
            Obj::Win(w) => g.tables.win_attrs.get_mut(&w),
        }
        .is_some_and(|l| l.get(k) == Some(v) && l.remove(k).is_some());
        if gone {
            g.tables.keyvals.release(k);
        }
        Ok(())
    })
}

/// Delete every attribute of window `w` (MPI_Win_free).
pub unsafe fn delete_win_attrs(w: usize) -> Result<(), Failure> {
    delete_obj_attrs(w, Obj::Win(w))
}

/// Delete the attributes on MPI_COMM_SELF, then on MPI_COMM_WORLD (start of MPI_Finalize).
pub fn finalize_attributes() {
    for c in [abi::MPI_COMM_SELF, abi::MPI_COMM_WORLD] {
        let Ok(h) = locked(|g| comm_handle(g, c)) else { continue };
        // SAFETY: the callbacks were registered by the application for these communicators.
        if let Err(e) = unsafe { delete_all(c as MPI_Comm, h) } {
            tracing::warn!("attribute delete callback failed during MPI_Finalize: {e:?}");
        }
    }
}

unsafe fn create_keyval(func: &str, kind: AttrKind, copy: usize, delete: usize, keyval: *mut c_int, extra: *mut c_void) -> c_int {
    api(func, None, |g| {
        if keyval.is_null() {
            return Err(err(ErrorClass::Arg, "keyval pointer is NULL"));
        }
        *keyval = g.tables.keyvals.create(kind, copy, delete, extra as usize)?;
        Ok(())
    })
}

unsafe fn free_keyval(func: &str, kind: AttrKind, keyval: *mut c_int) -> c_int {
    api(func, None, |g| {
        if keyval.is_null() {
            return Err(err(ErrorClass::Arg, "keyval pointer is NULL"));
        }
        if is_predefined_key(*keyval) {
            return Err(err(ErrorClass::Keyval, format!("keyval {} is predefined and cannot be freed", *keyval)));
        }
        g.tables.keyvals.free(*keyval, kind)?;
        *keyval = abi::MPI_KEYVAL_INVALID;
        Ok(())
    })
}

/// The object behind application handle `value` of the keyval's kind.
fn obj_of(g: &Global, kind: AttrKind, value: usize) -> Result<Obj, MpiError> {
    match kind {
        AttrKind::Type => crate::datatype::type_any(g, value as abi::MPI_Datatype).map(|_| Obj::Type(value)),
        AttrKind::Win if crate::rma::exists(value) => Ok(Obj::Win(value)),
        AttrKind::Win => Err(err(ErrorClass::Win, format!("invalid window handle {value:#x}"))),
        _ => comm_handle(g, value).map(Obj::Comm),
    }
}

/// Whether `o` still exists (a callback may have freed it).
fn check_alive(g: &Global, o: Obj, value: usize) -> Result<(), MpiError> {
    match o {
        Obj::Comm(h) => g.eng.comm(h).map(|_| ()),
        Obj::Type(_) => crate::datatype::type_any(g, value as abi::MPI_Datatype).map(|_| ()),
        Obj::Win(w) if crate::rma::exists(w) => Ok(()),
        Obj::Win(w) => Err(err(ErrorClass::Win, format!("window {w:#x} was freed"))),
    }
}

unsafe fn set_attr(func: &str, kind: AttrKind, obj: usize, keyval: c_int, value: *mut c_void) -> c_int {
    let comm = (kind == AttrKind::Comm).then_some(obj);
    api_unlocked(func, comm, || {
        let (o, kv, old) = locked(|g| {
            let o = obj_of(g, kind, obj)?;
            if is_predefined_key(keyval) || crate::rma::is_predefined_key(keyval) {
                return Err(err(ErrorClass::Keyval, format!("predefined attribute {keyval} cannot be set")));
            }
            let kv = g.tables.keyvals.get(keyval, kind)?;
            Ok((o, kv, attrs(g, o).and_then(|l| l.get(keyval))))
        })?;
        if let Some(old) = old {
            // The old value goes away first; if its delete callback fails, it stays.
            call_delete(&kv, obj, keyval, old)?;
        }
        locked(|g| {
            check_alive(g, o, obj)?;
            if attrs_mut(g, o).set(keyval, value as usize).is_none() {
                g.tables.keyvals.attach(keyval);
            }
            Ok(())
        })
    })
}

unsafe fn get_attr(func: &str, kind: AttrKind, obj: usize, keyval: c_int, value: *mut c_void, flag: *mut c_int) -> c_int {
    let comm = (kind == AttrKind::Comm).then_some(obj);
    api(func, comm, |g| {
        let o = obj_of(g, kind, obj)?;
        if value.is_null() || flag.is_null() {
            return Err(err(ErrorClass::Arg, "attribute_val or flag is NULL"));
        }
        if kind == AttrKind::Comm {
            if let Some(p) = predefined(keyval, g.eng.size) {
                *(value as *mut *mut c_void) = p;
                *flag = 1;
                return Ok(());
            }
        }
        if kind == AttrKind::Win {
            if let Some(p) = crate::rma::predefined_attr(obj, keyval) {
                *(value as *mut *mut c_void) = p;
                *flag = 1;
                return Ok(());
            }
        }
        g.tables.keyvals.get(keyval, kind)?;
        match attrs(g, o).and_then(|l| l.get(keyval)) {
            Some(v) => {
                *(value as *mut usize) = v;
                *flag = 1;
            }
            None => *flag = 0,
        }
        Ok(())
    })
}

unsafe fn delete_attr(func: &str, kind: AttrKind, obj: usize, keyval: c_int) -> c_int {
    let comm = (kind == AttrKind::Comm).then_some(obj);
    api_unlocked(func, comm, || {
        let (o, kv, cur) = locked(|g| {
            let o = obj_of(g, kind, obj)?;
            if is_predefined_key(keyval) || crate::rma::is_predefined_key(keyval) {
                return Err(err(ErrorClass::Keyval, format!("predefined attribute {keyval} cannot be deleted")));
            }
            let kv = g.tables.keyvals.get(keyval, kind)?;
            Ok((o, kv, attrs(g, o).and_then(|l| l.get(keyval))))
        })?;
        let Some(v) = cur else { return Ok(()) };
        call_delete(&kv, obj, keyval, v)?;
        remove_attr(o, keyval, v)
    })
}

mpi_api! {
    fn Comm_create_keyval(comm_copy_attr_fn: usize, comm_delete_attr_fn: usize, comm_keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        create_keyval("MPI_Comm_create_keyval", AttrKind::Comm, comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state)
    }

    fn Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Comm_free_keyval", AttrKind::Comm, comm_keyval)
    }

    fn Comm_set_attr(comm: MPI_Comm, comm_keyval: c_int, attribute_val: *mut c_void) -> c_int {
        set_attr("MPI_Comm_set_attr", AttrKind::Comm, comm as usize, comm_keyval, attribute_val)
    }

    fn Comm_get_attr(comm: MPI_Comm, comm_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Comm_get_attr", AttrKind::Comm, comm as usize, comm_keyval, attribute_val, flag)
    }

    fn Comm_delete_attr(comm: MPI_Comm, comm_keyval: c_int) -> c_int {
        delete_attr("MPI_Comm_delete_attr", AttrKind::Comm, comm as usize, comm_keyval)
    }

    fn Keyval_create(copy_fn: usize, delete_fn: usize, keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        create_keyval("MPI_Keyval_create", AttrKind::Comm, copy_fn, delete_fn, keyval, extra_state)
    }

    fn Keyval_free(keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Keyval_free", AttrKind::Comm, keyval)
    }

    fn Attr_put(comm: MPI_Comm, keyval: c_int, attribute_val: *mut c_void) -> c_int {
        set_attr("MPI_Attr_put", AttrKind::Comm, comm as usize, keyval, attribute_val)
    }

    fn Attr_get(comm: MPI_Comm, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Attr_get", AttrKind::Comm, comm as usize, keyval, attribute_val, flag)
    }

    fn Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
        delete_attr("MPI_Attr_delete", AttrKind::Comm, comm as usize, keyval)
    }

    fn Type_create_keyval(type_copy_attr_fn: usize, type_delete_attr_fn: usize, type_keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        create_keyval("MPI_Type_create_keyval", AttrKind::Type, type_copy_attr_fn, type_delete_attr_fn, type_keyval, extra_state)
    }

    fn Type_free_keyval(type_keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Type_free_keyval", AttrKind::Type, type_keyval)
    }

    fn Type_set_attr(datatype: MPI_Datatype, type_keyval: c_int, attribute_val: *mut c_void) -> c_int {
        set_attr("MPI_Type_set_attr", AttrKind::Type, datatype as usize, type_keyval, attribute_val)
    }

    fn Type_get_attr(datatype: MPI_Datatype, type_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Type_get_attr", AttrKind::Type, datatype as usize, type_keyval, attribute_val, flag)
    }

    fn Type_delete_attr(datatype: MPI_Datatype, type_keyval: c_int) -> c_int {
        delete_attr("MPI_Type_delete_attr", AttrKind::Type, datatype as usize, type_keyval)
    }

    fn Win_create_keyval(win_copy_attr_fn: usize, win_delete_attr_fn: usize, win_keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        create_keyval("MPI_Win_create_keyval", AttrKind::Win, win_copy_attr_fn, win_delete_attr_fn, win_keyval, extra_state)
    }
    fn Win_free_keyval(win_keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Win_free_keyval", AttrKind::Win, win_keyval)
    }
    fn Win_set_attr(win: abi::MPI_Win, win_keyval: c_int, attribute_val: *mut c_void) -> c_int {
        set_attr("MPI_Win_set_attr", AttrKind::Win, win as usize, win_keyval, attribute_val)
    }
    fn Win_get_attr(win: abi::MPI_Win, win_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Win_get_attr", AttrKind::Win, win as usize, win_keyval, attribute_val, flag)
    }
    fn Win_delete_attr(win: abi::MPI_Win, win_keyval: c_int) -> c_int {
        delete_attr("MPI_Win_delete_attr", AttrKind::Win, win as usize, win_keyval)
    }
}

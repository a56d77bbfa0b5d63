//! Communicator attributes: keyvals, set / get / delete, copy on dup, delete on free, and the
//! predefined attributes.
//!
//! Copy and delete callbacks are application code that may call MPI, so they always run with
//! the library lock released: each entry point works in phases (look up under the lock,
//! call back without it, update under it again).
//!
//! Deletion order: when a communicator is freed (and for MPI_COMM_SELF, then MPI_COMM_WORLD,
//! at the start of MPI_Finalize) attributes are deleted last-set first. A failing delete
//! callback fails the call and leaves the attribute in place.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use steadfast_core::attr::{AttrKind, Keyval};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm};
use crate::global::{api, api_unlocked, comm_handle, locked, Failure};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

type CopyFn = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int;

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
            UNIVERSE_SIZE.store(world_size as i32, Ordering::Relaxed);
            &UNIVERSE_SIZE
        }
        abi::MPI_APPNUM => &APPNUM,
        abi::MPI_LASTUSEDCODE => &crate::errhandler::LAST_USED_CODE,
        _ => return None,
    };
    Some(v.as_ptr() as *mut c_void)
}

fn is_predefined_key(keyval: c_int) -> bool {
    (abi::MPI_TAG_UB..=abi::MPI_LASTUSEDCODE).contains(&keyval)
}

/// Run a delete callback (no lock held).
unsafe fn call_delete(kv: &Keyval, comm: MPI_Comm, keyval: c_int, value: usize) -> Result<(), Failure> {
    if kv.delete_fn == abi::CALLBACK_NULL_FN {
        return Ok(());
    }
    let f: DeleteFn = std::mem::transmute::<usize, DeleteFn>(kv.delete_fn);
    match f(comm, keyval, value as *mut c_void, kv.extra as *mut c_void) {
        abi::MPI_SUCCESS => Ok(()),
        rc => Err(Failure::Code(rc)),
    }
}

/// Run a copy callback (no lock held): the new value, or None if not copied.
unsafe fn call_copy(kv: &Keyval, comm: MPI_Comm, keyval: c_int, value: usize) -> Result<Option<usize>, Failure> {
    match kv.copy_fn {
        abi::CALLBACK_NULL_FN => Ok(None),
        abi::CALLBACK_DUP_FN => Ok(Some(value)),
        p => {
            let f: CopyFn = std::mem::transmute::<usize, CopyFn>(p);
            let mut out: usize = 0;
            let mut flag: c_int = 0;
            let rc = f(comm, keyval, kv.extra as *mut c_void, value as *mut c_void, &mut out as *mut usize as *mut c_void, &mut flag);
            if rc != abi::MPI_SUCCESS {
                return Err(Failure::Code(rc));
            }
            Ok((flag != 0).then_some(out))
        }
    }
}

/// Copy the attributes of `old` (application handle `old_value`) onto `new` through their
/// copy callbacks (MPI_Comm_dup and friends). On failure the attributes copied so far are
/// deleted again; the caller frees `new`.
pub unsafe fn copy_attrs(old_value: MPI_Comm, old: Handle, new: Handle, new_value: MPI_Comm) -> Result<(), Failure> {
    let list: Vec<(c_int, usize, Option<Keyval>)> = locked(|g| {
        Ok(g.tables
            .comm_attrs
            .get(&old)
            .map(|l| l.iter().map(|(k, v)| (k, v, g.tables.keyvals.lookup(k))).collect())
            .unwrap_or_default())
    })?;
    for (k, v, kv) in list {
        let Some(kv) = kv else { continue };
        let copied = match call_copy(&kv, old_value, k, v) {
            Ok(c) => c,
            Err(e) => {
                let _ = delete_all(new_value, new);
                return Err(e);
            }
        };
        if let Some(nv) = copied {
            locked(|g| {
                if g.tables.comm_attrs.entry(new).or_default().set(k, nv).is_none() {
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
    loop {
        let next = locked(|g| {
            Ok(g.tables.comm_attrs.get(&h).and_then(|l| l.last()).map(|(k, v)| (k, v, g.tables.keyvals.lookup(k))))
        })?;
        let Some((k, v, kv)) = next else { break };
        if let Some(kv) = kv {
            call_delete(&kv, value, k, v)?;
        }
        remove_attr(h, k, v)?;
    }
    locked(|g| {
        g.tables.comm_attrs.remove(&h);
        Ok(())
    })
}

/// Drop attribute `k` of `h` after its delete callback ran, unless a callback already
/// replaced or removed it.
fn remove_attr(h: Handle, k: c_int, v: usize) -> Result<(), Failure> {
    locked(|g| {
        if let Some(l) = g.tables.comm_attrs.get_mut(&h) {
            if l.get(k) == Some(v) {
                l.remove(k);
                g.tables.keyvals.release(k);
            }
        }
        Ok(())
    })
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

unsafe fn create_keyval(func: &str, copy: usize, delete: usize, keyval: *mut c_int, extra: *mut c_void) -> c_int {
    api(func, None, |g| {
        if keyval.is_null() {
            return Err(err(ErrorClass::Arg, "keyval pointer is NULL"));
        }
        *keyval = g.tables.keyvals.create(AttrKind::Comm, copy, delete, extra as usize)?;
        Ok(())
    })
}

unsafe fn free_keyval(func: &str, keyval: *mut c_int) -> c_int {
    api(func, None, |g| {
        if keyval.is_null() {
            return Err(err(ErrorClass::Arg, "keyval pointer is NULL"));
        }
        if is_predefined_key(*keyval) {
            return Err(err(ErrorClass::Keyval, format!("keyval {} is predefined and cannot be freed", *keyval)));
        }
        g.tables.keyvals.free(*keyval, AttrKind::Comm)?;
        *keyval = abi::MPI_KEYVAL_INVALID;
        Ok(())
    })
}

unsafe fn set_attr(func: &str, comm: MPI_Comm, keyval: c_int, value: *mut c_void) -> c_int {
    api_unlocked(func, Some(comm as usize), || {
        let (h, kv, old) = locked(|g| {
            let h = comm_handle(g, comm as usize)?;
            if is_predefined_key(keyval) {
                return Err(err(ErrorClass::Keyval, format!("predefined attribute {keyval} cannot be set")));
            }
            let kv = g.tables.keyvals.get(keyval, AttrKind::Comm)?;
            Ok((h, kv, g.tables.comm_attrs.get(&h).and_then(|l| l.get(keyval))))
        })?;
        if let Some(old) = old {
            // The old value goes away first; if its delete callback fails, it stays.
            call_delete(&kv, comm, keyval, old)?;
        }
        locked(|g| {
            g.eng.comm(h)?;
            if g.tables.comm_attrs.entry(h).or_default().set(keyval, value as usize).is_none() {
                g.tables.keyvals.attach(keyval);
            }
            Ok(())
        })
    })
}

unsafe fn get_attr(func: &str, comm: MPI_Comm, keyval: c_int, value: *mut c_void, flag: *mut c_int) -> c_int {
    api(func, Some(comm as usize), |g| {
        let h = comm_handle(g, comm as usize)?;
        if value.is_null() || flag.is_null() {
            return Err(err(ErrorClass::Arg, "attribute_val or flag is NULL"));
        }
        if let Some(p) = predefined(keyval, g.eng.size) {
            *(value as *mut *mut c_void) = p;
            *flag = 1;
            return Ok(());
        }
        g.tables.keyvals.get(keyval, AttrKind::Comm)?;
        match g.tables.comm_attrs.get(&h).and_then(|l| l.get(keyval)) {
            Some(v) => {
                *(value as *mut usize) = v;
                *flag = 1;
            }
            None => *flag = 0,
        }
        Ok(())
    })
}

unsafe fn delete_attr(func: &str, comm: MPI_Comm, keyval: c_int) -> c_int {
    api_unlocked(func, Some(comm as usize), || {
        let (h, kv, cur) = locked(|g| {
            let h = comm_handle(g, comm as usize)?;
            if is_predefined_key(keyval) {
                return Err(err(ErrorClass::Keyval, format!("predefined attribute {keyval} cannot be deleted")));
            }
            let kv = g.tables.keyvals.get(keyval, AttrKind::Comm)?;
            Ok((h, kv, g.tables.comm_attrs.get(&h).and_then(|l| l.get(keyval))))
        })?;
        let Some(v) = cur else { return Ok(()) };
        call_delete(&kv, comm, keyval, v)?;
        remove_attr(h, keyval, v)
    })
}

mpi_api! {
    fn Comm_create_keyval(comm_copy_attr_fn: usize, comm_delete_attr_fn: usize, comm_keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        create_keyval("MPI_Comm_create_keyval", comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state)
    }

    fn Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Comm_free_keyval", comm_keyval)
    }

    fn Comm_set_attr(comm: MPI_Comm, comm_keyval: c_int, attribute_val: *mut c_void) -> c_int {
        set_attr("MPI_Comm_set_attr", comm, comm_keyval, attribute_val)
    }

    fn Comm_get_attr(comm: MPI_Comm, comm_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Comm_get_attr", comm, comm_keyval, attribute_val, flag)
    }

    fn Comm_delete_attr(comm: MPI_Comm, comm_keyval: c_int) -> c_int {
        delete_attr("MPI_Comm_delete_attr", comm, comm_keyval)
    }

    fn Keyval_create(copy_fn: usize, delete_fn: usize, keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        create_keyval("MPI_Keyval_create", copy_fn, delete_fn, keyval, extra_state)
    }

    fn Keyval_free(keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Keyval_free", keyval)
    }

    fn Attr_put(comm: MPI_Comm, keyval: c_int, attribute_val: *mut c_void) -> c_int {
        set_attr("MPI_Attr_put", comm, keyval, attribute_val)
    }

    fn Attr_get(comm: MPI_Comm, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Attr_get", comm, keyval, attribute_val, flag)
    }

    fn Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
        delete_attr("MPI_Attr_delete", comm, keyval)
    }
}

//! Handles as integers: `MPI_<Kind>_toint`/`_fromint` of the standard ABI and the classic
//! `MPI_<Kind>_c2f`/`_f2c` (same mapping), which the Fortran bindings use for every handle.
//!
//! C handles are pointers (predefined ones 1..4095, run-time ones packed slab values well
//! above 2^32), while a Fortran handle is a default INTEGER. Predefined handles keep their
//! ABI value, so `MPI_COMM_WORLD` is 257 on both sides. A run-time handle gets an integer
//! from a per-kind table the first time it is converted: 4096 + slot. Slots are recycled when
//! the Fortran bindings report the handle freed (`steadfast_fint_release`), so a Fortran
//! loop of `MPI_Isend`/`MPI_Wait` keeps the table small. An integer that names no entry
//! converts to a handle value the library rejects (`MPI_ERR_COMM`, `MPI_ERR_TYPE`, ...).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use crate::abi::{MPI_Fint, MPI_Status, PREDEFINED_HANDLE_MAX};

/// Kinds of handles, in the order of the `STEADFAST_FINT_*` codes used by the Fortran glue.
const KINDS: usize = 11;

/// First integer given to a run-time handle.
const FIRST: usize = PREDEFINED_HANDLE_MAX + 1;

/// Converted for an integer with no table entry: aligned like a slab handle but with index 0,
/// which no live object has, so every call rejects it with the kind's error class.
const INVALID: usize = 1 << 40;

#[derive(Default)]
struct Table {
    to_int: HashMap<usize, usize>,
    slots: Vec<usize>,
    free: Vec<usize>,
}

static TABLES: Mutex<Vec<Table>> = Mutex::new(Vec::new());

fn with_table<R>(kind: usize, f: impl FnOnce(&mut Table) -> R) -> R {
    let mut t = TABLES.lock().unwrap_or_else(|p| p.into_inner());
    if t.is_empty() {
        t.resize_with(KINDS, Table::default);
    }
    f(&mut t[kind])
}

fn to_int(kind: usize, h: *mut c_void) -> MPI_Fint {
    let v = h as usize;
    if v <= PREDEFINED_HANDLE_MAX {
        return v as MPI_Fint;
    }
    with_table(kind, |t| {
        if let Some(&slot) = t.to_int.get(&v) {
            return (FIRST + slot) as MPI_Fint;
        }
        let slot = match t.free.pop() {
            Some(s) => {
                t.slots[s] = v;
                s
            }
            None => {
                t.slots.push(v);
                t.slots.len() - 1
            }
        };
        t.to_int.insert(v, slot);
        (FIRST + slot) as MPI_Fint
    })
}

fn from_int(kind: usize, f: MPI_Fint) -> *mut c_void {
    if f < 0 {
        return INVALID as *mut c_void;
    }
    let f = f as usize;
    if f <= PREDEFINED_HANDLE_MAX {
        return f as *mut c_void;
    }
    with_table(kind, |t| match t.slots.get(f - FIRST) {
        Some(&v) if v != 0 => v as *mut c_void,
        _ => INVALID as *mut c_void,
    }) as *mut c_void
}

/// Forget the integer `f` of a handle of kind `kind` (an index in `STEADFAST_FINT_*` order:
/// comm, datatype, errhandler, file, group, info, message, op, request, session, win) after
/// the object was freed or completed, so its slot can be reused. Unknown values are ignored.
#[no_mangle]
pub extern "C" fn steadfast_fint_release(kind: c_int, f: MPI_Fint) {
    if !(0..KINDS as c_int).contains(&kind) || (f as i64) < FIRST as i64 {
        return;
    }
    let slot = f as usize - FIRST;
    with_table(kind as usize, |t| {
        if let Some(v) = t.slots.get(slot).copied().filter(|&v| v != 0) {
            t.to_int.remove(&v);
            t.slots[slot] = 0;
            t.free.push(slot);
        }
    });
}

macro_rules! int_conversions {
    ($($kind:literal $name:ident;)*) => { paste::paste! { $(
        #[doc = concat!("MPI_", stringify!($name), "_toint: the integer form of a handle.")]
        #[no_mangle]
        pub extern "C" fn [<PMPI_ $name _toint>](h: *mut c_void) -> c_int { to_int($kind, h) }
        #[doc = concat!("See PMPI_", stringify!($name), "_toint.")]
        #[no_mangle]
        pub extern "C" fn [<MPI_ $name _toint>](h: *mut c_void) -> c_int { to_int($kind, h) }
        #[doc = concat!("MPI_", stringify!($name), "_fromint: the handle of an integer from _toint.")]
        #[no_mangle]
        pub extern "C" fn [<PMPI_ $name _fromint>](f: c_int) -> *mut c_void { from_int($kind, f) }
        #[doc = concat!("See PMPI_", stringify!($name), "_fromint.")]
        #[no_mangle]
        pub extern "C" fn [<MPI_ $name _fromint>](f: c_int) -> *mut c_void { from_int($kind, f) }
        #[doc = concat!("MPI_", stringify!($name), "_c2f: same mapping as _toint.")]
        #[no_mangle]
        pub extern "C" fn [<PMPI_ $name _c2f>](h: *mut c_void) -> MPI_Fint { to_int($kind, h) }
        #[doc = concat!("See PMPI_", stringify!($name), "_c2f.")]
        #[no_mangle]
        pub extern "C" fn [<MPI_ $name _c2f>](h: *mut c_void) -> MPI_Fint { to_int($kind, h) }
        #[doc = concat!("MPI_", stringify!($name), "_f2c: same mapping as _fromint.")]
        #[no_mangle]
        pub extern "C" fn [<PMPI_ $name _f2c>](f: MPI_Fint) -> *mut c_void { from_int($kind, f) }
        #[doc = concat!("See PMPI_", stringify!($name), "_f2c.")]
        #[no_mangle]
        pub extern "C" fn [<MPI_ $name _f2c>](f: MPI_Fint) -> *mut c_void { from_int($kind, f) }
    )* } };
}

int_conversions! {
    0 Comm;
    1 Type;
    2 Errhandler;
    3 File;
    4 Group;
    5 Info;
    6 Message;
    7 Op;
    8 Request;
    9 Session;
    10 Win;
}

/// Copies a C status into a Fortran INTEGER array of `MPI_F_STATUS_SIZE` (8) entries.
fn status_copy(src: *const MPI_Status, dst: *mut MPI_Fint) -> c_int {
    if src.is_null() || dst.is_null() {
        return crate::abi::MPI_ERR_ARG;
    }
    // SAFETY: both point to 8 ints (MPI_Status is eight ints, MPI_F_STATUS_SIZE is 8).
    unsafe { std::ptr::copy(src as *const MPI_Fint, dst, 8) };
    crate::abi::MPI_SUCCESS
}

crate::mpi_api! {
    /// Status to the C form of Fortran's TYPE(MPI_Status) (same layout: eight ints).
    fn Status_c2f08(c_status: *const MPI_Status, f08_status: *mut MPI_Status) -> c_int {
        status_copy(c_status, f08_status as *mut MPI_Fint)
    }
    /// C form of TYPE(MPI_Status) to a status.
    fn Status_f082c(f08_status: *const MPI_Status, c_status: *mut MPI_Status) -> c_int {
        status_copy(f08_status, c_status as *mut MPI_Fint)
    }
    /// Fortran INTEGER status array to the C form of TYPE(MPI_Status).
    fn Status_f2f08(f_status: *const MPI_Fint, f08_status: *mut MPI_Status) -> c_int {
        status_copy(f_status as *const MPI_Status, f08_status as *mut MPI_Fint)
    }
    /// C form of TYPE(MPI_Status) to a Fortran INTEGER status array.
    fn Status_f082f(f08_status: *const MPI_Status, f_status: *mut MPI_Fint) -> c_int {
        status_copy(f08_status, f_status)
    }
    /// Status as a Fortran INTEGER array (same layout: eight ints).
    fn Status_c2f(c_status: *const MPI_Status, f_status: *mut MPI_Fint) -> c_int {
        status_copy(c_status, f_status)
    }
    /// Fortran INTEGER status array to a C status.
    fn Status_f2c(f_status: *const MPI_Fint, c_status: *mut MPI_Status) -> c_int {
        status_copy(f_status as *const MPI_Status, c_status as *mut MPI_Fint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_handles_keep_their_value() {
        assert_eq!(to_int(0, 0x101 as *mut c_void), 0x101);
        assert_eq!(from_int(0, 0x101) as usize, 0x101);
    }

    #[test]
    fn runtime_handles_round_trip_and_slots_are_reused() {
        let h = (3usize << 40 | 5 << 12) as *mut c_void;
        let f = to_int(8, h);
        assert!(f as usize >= FIRST);
        assert_eq!(to_int(8, h), f, "same handle, same integer");
        assert_eq!(from_int(8, f), h);
        steadfast_fint_release(8, f);
        assert_eq!(from_int(8, f) as usize, INVALID, "released integer names nothing");
        let g = to_int(8, (4usize << 40 | 5 << 12) as *mut c_void);
        assert_eq!(g, f, "slot reused");
        assert_eq!(from_int(8, -3) as usize, INVALID);
        assert_eq!(from_int(8, 1 << 30) as usize, INVALID);
    }
}

//! Reduction operations: handle translation, MPI_Op_create / _c, Op_free, Op_commutative,
//! Reduce_local / _c.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, OnceLock};

use steadfast_core::datatype::TypeRef;
use steadfast_core::op::{Elem, Num, Op, PredefOp, Reduction, UserFn, UserOp};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, FloatFormat, MPI_Count, MPI_Datatype, MPI_Op, TypeKind};
use crate::global::{api, dtype, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// The predefined op behind an ABI handle value.
pub fn predef_op(h: usize) -> Option<PredefOp> {
    Some(match h {
        abi::MPI_SUM => PredefOp::Sum,
        abi::MPI_PROD => PredefOp::Prod,
        abi::MPI_MAX => PredefOp::Max,
        abi::MPI_MIN => PredefOp::Min,
        abi::MPI_LAND => PredefOp::Land,
        abi::MPI_LOR => PredefOp::Lor,
        abi::MPI_LXOR => PredefOp::Lxor,
        abi::MPI_BAND => PredefOp::Band,
        abi::MPI_BOR => PredefOp::Bor,
        abi::MPI_BXOR => PredefOp::Bxor,
        abi::MPI_MINLOC => PredefOp::Minloc,
        abi::MPI_MAXLOC => PredefOp::Maxloc,
        abi::MPI_REPLACE => PredefOp::Replace,
        abi::MPI_NO_OP => PredefOp::NoOp,
        _ => return None,
    })
}

/// The operation behind handle `op`.
pub fn op_of(g: &Global, op: MPI_Op) -> Result<Op, MpiError> {
    let h = op as usize;
    if h == abi::MPI_OP_NULL {
        return Err(err(ErrorClass::Op, "MPI_OP_NULL is not a valid operation"));
    }
    if let Some(p) = predef_op(h) {
        return Ok(Op::Predef(p));
    }
    match g.eng.coll.ops.get(Handle(h as u64)) {
        Some(u) => Ok(Op::User(u.clone())),
        None => Err(err(ErrorClass::Op, format!("invalid operation handle {h:#x}"))),
    }
}

fn num_of(k: &TypeKind) -> Option<Num> {
    Some(match *k {
        TypeKind::SignedInt { bytes } => Num::int(bytes, true)?,
        TypeKind::UnsignedInt { bytes } => Num::int(bytes, false)?,
        // MPICH accepts character types in integer reductions; `char` is signed on x86_64.
        TypeKind::Char { bytes } => Num::int(bytes, true)?,
        TypeKind::Float(f) => float_num(f),
        _ => return None,
    })
}

fn float_num(f: FloatFormat) -> Num {
    match f {
        FloatFormat::Binary16 => Num::F16,
        FloatFormat::Binary32 => Num::F32,
        FloatFormat::Binary64 => Num::F64,
        FloatFormat::X87Extended => Num::X87,
        FloatFormat::Binary128 => Num::F128,
    }
}

/// Element kind of a predefined type, from the ABI table (exact, unlike the engine's view).
fn elem_of_kind(k: &TypeKind) -> Elem {
    match *k {
        TypeKind::Complex(f) => Elem::Complex(float_num(f)),
        TypeKind::Bool { bytes, .. } => Elem::Bool(bytes as u8),
        TypeKind::Byte => Elem::Byte,
        TypeKind::Packed => Elem::None,
        TypeKind::Pair { value, index, .. } => match (num_of(value), num_of(index)) {
            (Some(v), Some(i)) => Elem::Pair(v, i),
            _ => Elem::None,
        },
        _ => num_of(k).map_or(Elem::None, Elem::Num),
    }
}

fn predef_elems() -> &'static [Elem] {
    static TABLE: OnceLock<Vec<Elem>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![Elem::None; abi::PREDEFINED_HANDLE_MAX_ASSIGNED + 1];
        for p in abi::PREDEFINED_TYPES {
            if p.handle < t.len() {
                t[p.handle] = elem_of_kind(&p.kind);
            }
        }
        t
    })
}

/// The element kind of predefined datatype `handle` (a table lookup, no library lock);
/// None when `handle` is not a predefined datatype.
pub(crate) fn predef_elem(handle: usize) -> Option<Elem> {
    if abi::is_predefined_handle(handle) {
        predef_elems().get(handle).copied()
    } else {
        None
    }
}

/// What the elements of datatype `handle` are for reductions.
pub fn elem_of(handle: usize, t: &TypeRef) -> Elem {
    if abi::is_predefined_handle(handle) {
        return predef_elems().get(handle).copied().unwrap_or(Elem::None);
    }
    // Derived: the one basic type it is built from, if any.
    if let Some((k, _)) = &t.basic {
        return Elem::from_basic(k);
    }
    // A pair type (MPI_DOUBLE_INT ...) is two basic elements, so a type built from one has no
    // single basic kind: it reduces as that pair when the pair is all it is built from.
    match sole_predefined(t, 0) {
        Some(Some(h)) => match predef_elems().get(h).copied() {
            Some(e @ Elem::Pair(..)) => e,
            _ => Elem::None,
        },
        _ => Elem::None,
    }
}

/// The one predefined type `t` is built from: Some(None) when it is built from none (an
/// empty type), None when from several or when the constructor tree is deeper than any
/// application builds.
fn sole_predefined(t: &TypeRef, depth: usize) -> Option<Option<usize>> {
    if let Some(h) = t.predefined_handle {
        return Some(Some(h));
    }
    if depth > 64 {
        return None;
    }
    let mut found: Option<usize> = None;
    for old in &t.envelope.types {
        match sole_predefined(old, depth + 1)? {
            None => {}
            Some(h) if found.is_none_or(|f| f == h) => found = Some(h),
            Some(_) => return None,
        }
    }
    Some(found)
}

/// Build a reduction of `datatype` by `op`, checking that the op is defined for the type.
pub fn reduction(g: &Global, op: MPI_Op, datatype: MPI_Datatype) -> Result<Reduction, MpiError> {
    let t = dtype(g, datatype as usize)?;
    let o = op_of(g, op)?;
    let e = elem_of(datatype as usize, &t);
    Reduction::new(o, t, e, datatype as usize)
}

unsafe fn op_create(func: &str, f: UserFn, commute: c_int, op: *mut MPI_Op) -> c_int {
    api(func, None, |g| {
        if op.is_null() {
            return Err(err(ErrorClass::Arg, "op pointer is NULL"));
        }
        let h = g.eng.coll.ops.insert(Arc::new(UserOp { func: f, commute: commute != 0 }));
        *op = h.0 as MPI_Op;
        Ok(())
    })
}

unsafe fn reduce_local(func: &str, inbuf: *const c_void, inoutbuf: *mut c_void, count: i64, datatype: MPI_Datatype, op: MPI_Op) -> c_int {
    // A user function may call MPI (mpi4py's do), so it runs after the lock is released.
    crate::global::api_unlocked(func, None, || {
        let red = crate::global::locked(|g| {
            if count < 0 {
                return Err(err(ErrorClass::Count, format!("count {count} is negative")));
            }
            let red = reduction(g, op, datatype)?;
            if count == 0 {
                return Ok(None);
            }
            if inbuf as usize == abi::MPI_IN_PLACE || inoutbuf as usize == abi::MPI_IN_PLACE {
                return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE is not allowed in MPI_Reduce_local"));
            }
            if red.dtype.size > 0 && (inbuf.is_null() || inoutbuf.is_null()) && red.dtype.predefined {
                return Err(err(ErrorClass::Buffer, "buffer is NULL"));
            }
            if inbuf as *const u8 == inoutbuf as *const u8 {
                return Err(err(ErrorClass::Buffer, "inbuf and inoutbuf must not be the same buffer"));
            }
            Ok(Some(red))
        })?;
        if let Some(red) = red {
            red.apply(inbuf as *const u8, inoutbuf as *mut u8, count as usize);
        }
        Ok(())
    })
}

/// `MPI_User_function` as the ABI declares it.
pub type CUserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut MPI_Datatype);
/// `MPI_User_function_c` as the ABI declares it.
pub type CUserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut MPI_Count, *mut MPI_Datatype);

mpi_api! {
    fn Op_create(user_fn: Option<CUserFn>, commute: c_int, op: *mut MPI_Op) -> c_int {
        let Some(f) = user_fn else {
            return api("MPI_Op_create", None, |_| Err(err(ErrorClass::Arg, "user function is NULL")));
        };
        // SAFETY: MPI_Datatype is pointer-sized, as usize is; the engine passes a pointer to
        // the handle value.
        let f: steadfast_core::op::UserFnInt = std::mem::transmute::<CUserFn, steadfast_core::op::UserFnInt>(f);
        op_create("MPI_Op_create", UserFn::Int(f), commute, op)
    }
    fn Op_create_c(user_fn: Option<CUserFnC>, commute: c_int, op: *mut MPI_Op) -> c_int {
        let Some(f) = user_fn else {
            return api("MPI_Op_create_c", None, |_| Err(err(ErrorClass::Arg, "user function is NULL")));
        };
        // SAFETY: as above.
        let f: steadfast_core::op::UserFnBig = std::mem::transmute::<CUserFnC, steadfast_core::op::UserFnBig>(f);
        op_create("MPI_Op_create_c", UserFn::Big(f), commute, op)
    }
    fn Op_free(op: *mut MPI_Op) -> c_int {
        api("MPI_Op_free", None, |g| {
            if op.is_null() {
                return Err(err(ErrorClass::Arg, "op pointer is NULL"));
            }
            let h = *op as usize;
            if h == abi::MPI_OP_NULL || predef_op(h).is_some() {
                return Err(err(ErrorClass::Op, "predefined operations cannot be freed"));
            }
            // Collectives in progress keep their own reference to the function.
            if g.eng.coll.ops.remove(Handle(h as u64)).is_none() {
                return Err(err(ErrorClass::Op, format!("invalid operation handle {h:#x}")));
            }
            *op = abi::MPI_OP_NULL as MPI_Op;
            Ok(())
        })
    }
    fn Op_commutative(op: MPI_Op, commute: *mut c_int) -> c_int {
        api("MPI_Op_commutative", None, |g| {
            let o = op_of(g, op)?;
            if commute.is_null() {
                return Err(err(ErrorClass::Arg, "commute pointer is NULL"));
            }
            *commute = o.commutative() as c_int;
            Ok(())
        })
    }
    fn Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op) -> c_int {
        reduce_local("MPI_Reduce_local", inbuf, inoutbuf, count as i64, datatype, op)
    }
    fn Reduce_local_c(inbuf: *const c_void, inoutbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op) -> c_int {
        reduce_local("MPI_Reduce_local_c", inbuf, inoutbuf, count, datatype, op)
    }
}

//! Reduction operations: the predefined MPI ops on every type they are defined for, and
//! user-defined ops (MPI_Op_create / MPI_Op_create_c).
//!
//! A reduction combines `src` into `dst` element by element, `dst = src op dst`, which is the
//! argument order of an MPI user function (`invec`, `inoutvec`). For a non-commutative op the
//! caller puts the lower ranks' contribution in `src`.
//!
//! Data is walked through the datatype's blocks: a derived type built from one basic type
//! (contiguous, vector, indexed … of MPI_INT, say) is reduced block by block with that basic
//! type's kernel. Value-index pairs (MINLOC / MAXLOC) whose layout has gaps are packed first.
//! binary16, x87 extended (`long double`) and binary128 arithmetic is done by C kernels
//! (`csrc/reduce_float.c`), so results match what C computes in those formats.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::datatype::{BasicKind, TypeRef};
use crate::error::{ErrorClass, MpiError, MpiResult};

/// Arithmetic type of one scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Num {
    I8,
    I16,
    I32,
    I64,
    I128,
    U8,
    U16,
    U32,
    U64,
    U128,
    /// IEEE binary16.
    F16,
    F32,
    F64,
    /// x87 80-bit extended in 16 bytes of storage (`long double` on x86_64).
    X87,
    /// IEEE binary128.
    F128,
}

impl Num {
    /// Bytes of storage of one value.
    pub const fn size(self) -> usize {
        match self {
            Num::I8 | Num::U8 => 1,
            Num::I16 | Num::U16 | Num::F16 => 2,
            Num::I32 | Num::U32 | Num::F32 => 4,
            Num::I64 | Num::U64 | Num::F64 => 8,
            Num::I128 | Num::U128 | Num::X87 | Num::F128 => 16,
        }
    }
    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, Num::F16 | Num::F32 | Num::F64 | Num::X87 | Num::F128)
    }
    /// Integer of `bytes` bytes.
    pub fn int(bytes: usize, signed: bool) -> Option<Num> {
        Some(match (bytes, signed) {
            (1, true) => Num::I8,
            (2, true) => Num::I16,
            (4, true) => Num::I32,
            (8, true) => Num::I64,
            (16, true) => Num::I128,
            (1, false) => Num::U8,
            (2, false) => Num::U16,
            (4, false) => Num::U32,
            (8, false) => Num::U64,
            (16, false) => Num::U128,
            _ => return None,
        })
    }
}

/// What the elements of a reduction buffer are, i.e. which ops apply and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    /// Integer or floating-point number.
    Num(Num),
    /// Complex number of two floats (real, imaginary).
    Complex(Num),
    /// Boolean (C `_Bool`, Fortran LOGICAL) of this many bytes: non-zero is true.
    Bool(u8),
    /// Uninterpreted byte: bitwise ops only.
    Byte,
    /// Value followed directly by an index (packed MINLOC / MAXLOC layout).
    Pair(Num, Num),
    /// No arithmetic at all (MPI_PACKED, mixed structs).
    None,
}

impl Elem {
    /// Bytes of one element in packed form.
    pub const fn size(self) -> usize {
        match self {
            Elem::Num(n) => n.size(),
            Elem::Complex(n) => 2 * n.size(),
            Elem::Bool(b) => b as usize,
            Elem::Byte => 1,
            Elem::Pair(v, i) => v.size() + i.size(),
            Elem::None => 1,
        }
    }

    /// The element kind of a datatype whose basic elements are all `kind`. A 16-byte float
    /// is taken to be `long double` (x87), the C meaning; callers that know better (the C
    /// layer, from the ABI type table) pass the exact kind instead.
    pub fn from_basic(kind: &BasicKind) -> Elem {
        match *kind {
            BasicKind::Int { bytes, signed } => Num::int(bytes as usize, signed).map_or(Elem::None, Elem::Num),
            BasicKind::Float { bytes } => float_of(bytes as usize).map_or(Elem::None, Elem::Num),
            BasicKind::Complex { bytes } => float_of(bytes as usize / 2).map_or(Elem::None, Elem::Complex),
            BasicKind::Bool { bytes } => Elem::Bool(bytes),
            BasicKind::Opaque => Elem::Byte,
            BasicKind::Pair { value, .. } => match Elem::from_basic(value) {
                Elem::Num(v) => Elem::Pair(v, Num::I32),
                _ => Elem::None,
            },
        }
    }
}

fn float_of(bytes: usize) -> Option<Num> {
    Some(match bytes {
        2 => Num::F16,
        4 => Num::F32,
        8 => Num::F64,
        16 => Num::X87,
        _ => return None,
    })
}

/// The predefined operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PredefOp {
    Sum,
    Prod,
    Max,
    Min,
    Land,
    Lor,
    Lxor,
    Band,
    Bor,
    Bxor,
    Minloc,
    Maxloc,
    Replace,
    NoOp,
}

impl PredefOp {
    /// Every predefined op, for tests and tables.
    pub const ALL: [PredefOp; 14] = [
        PredefOp::Sum,
        PredefOp::Prod,
        PredefOp::Max,
        PredefOp::Min,
        PredefOp::Land,
        PredefOp::Lor,
        PredefOp::Lxor,
        PredefOp::Band,
        PredefOp::Bor,
        PredefOp::Bxor,
        PredefOp::Minloc,
        PredefOp::Maxloc,
        PredefOp::Replace,
        PredefOp::NoOp,
    ];

    /// The op's MPI name.
    pub fn name(self) -> &'static str {
        match self {
            PredefOp::Sum => "MPI_SUM",
            PredefOp::Prod => "MPI_PROD",
            PredefOp::Max => "MPI_MAX",
            PredefOp::Min => "MPI_MIN",
            PredefOp::Land => "MPI_LAND",
            PredefOp::Lor => "MPI_LOR",
            PredefOp::Lxor => "MPI_LXOR",
            PredefOp::Band => "MPI_BAND",
            PredefOp::Bor => "MPI_BOR",
            PredefOp::Bxor => "MPI_BXOR",
            PredefOp::Minloc => "MPI_MINLOC",
            PredefOp::Maxloc => "MPI_MAXLOC",
            PredefOp::Replace => "MPI_REPLACE",
            PredefOp::NoOp => "MPI_NO_OP",
        }
    }

    /// Whether the op is defined for elements of kind `e`.
    ///
    /// Beyond the standard's table (MPI 4.1 §6.9.2) this accepts what MPICH accepts as an
    /// extension: logical ops on floating-point types, and every op of an integer on
    /// character types (the C layer maps MPI_CHAR to a 1-byte signed integer).
    pub fn supports(self, e: Elem) -> bool {
        use PredefOp::*;
        match self {
            Replace | NoOp => true,
            Sum | Prod => matches!(e, Elem::Num(_) | Elem::Complex(_)),
            Max | Min => matches!(e, Elem::Num(_)),
            Land | Lor | Lxor => matches!(e, Elem::Num(_) | Elem::Bool(_)),
            Band | Bor | Bxor => matches!(e, Elem::Num(n) if !n.is_float()) || e == Elem::Byte,
            Minloc | Maxloc => matches!(e, Elem::Pair(..)),
        }
    }
}

/// A user function taking an `int` length (MPI_User_function).
pub type UserFnInt = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut usize);
/// A user function taking an `MPI_Count` length (MPI_User_function_c).
pub type UserFnBig = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut i64, *mut usize);

/// A user-defined operation.
#[derive(Debug, Clone, Copy)]
pub enum UserFn {
    Int(UserFnInt),
    Big(UserFnBig),
}

/// A user-defined operation with its commutativity.
#[derive(Debug)]
pub struct UserOp {
    pub func: UserFn,
    pub commute: bool,
}

/// An operation as collectives see it.
#[derive(Debug, Clone)]
pub enum Op {
    Predef(PredefOp),
    User(Arc<UserOp>),
}

impl Op {
    /// Whether `a op b == b op a` may be assumed.
    pub fn commutative(&self) -> bool {
        match self {
            Op::Predef(_) => true,
            Op::User(u) => u.commute,
        }
    }
}

/// Everything a reduction step needs: op, datatype, element kind, and the datatype handle a
/// user function receives.
#[derive(Debug, Clone)]
pub struct Reduction {
    pub op: Op,
    pub dtype: TypeRef,
    pub elem: Elem,
    /// Value of the application's MPI_Datatype handle (passed to user functions).
    pub type_handle: usize,
}

impl Reduction {
    /// Check that `op` is defined for the datatype and build the reduction.
    pub fn new(op: Op, dtype: TypeRef, elem: Elem, type_handle: usize) -> MpiResult<Reduction> {
        if let Op::Predef(p) = &op {
            if !p.supports(elem) {
                return Err(MpiError::new(
                    ErrorClass::Op,
                    format!("{} is not defined for datatype {}", p.name(), dtype.name),
                ));
            }
        }
        Ok(Reduction { op, dtype, elem, type_handle })
    }

    /// Whether the op is commutative.
    pub fn commutative(&self) -> bool {
        self.op.commutative()
    }

    /// `dst = src op dst` for `count` elements of the datatype, both buffers laid out by it.
    ///
    /// # Safety
    /// `src` and `dst` must be valid for `count` elements of the datatype; they may be equal
    /// only for ops where that is harmless to the caller.
    pub unsafe fn apply(&self, src: *const u8, dst: *mut u8, count: usize) {
        if count == 0 {
            return;
        }
        let p = match &self.op {
            Op::User(u) => return call_user(u, src, dst, count, self.type_handle, self.dtype.extent),
            Op::Predef(PredefOp::NoOp) => return,
            Op::Predef(p) => *p,
        };
        let t = &*self.dtype;
        if p == PredefOp::Replace {
            return copy_typed(t, src, dst, count);
        }
        let esize = self.elem.size();
        if t.is_contiguous() && t.size % esize == 0 {
            return apply_dense(p, self.elem, src, dst, count * t.size / esize);
        }
        let runs = if matches!(self.elem, Elem::Pair(..)) {
            None
        } else {
            t.blocks(MAX_RUNS).filter(|bs| bs.iter().all(|b| b.len % esize == 0))
        };
        if let Some(runs) = runs {
            for i in 0..count {
                let base = i as isize * t.extent;
                for b in &runs {
                    let off = base + b.off;
                    apply_dense(p, self.elem, src.offset(off), dst.offset(off), b.len / esize);
                }
            }
            return;
        }
        // Gaps inside elements (e.g. MPI_SHORT_INT): reduce the packed forms.
        let n = t.packed_size(count);
        let mut a = vec![0u8; n];
        let mut b = vec![0u8; n];
        t.pack(src, count, &mut a);
        t.pack(dst, count, &mut b);
        apply_dense(p, self.elem, a.as_ptr(), b.as_mut_ptr(), n / esize);
        t.unpack(&b, dst, count);
    }
}

unsafe fn call_user(u: &UserOp, src: *const u8, dst: *mut u8, count: usize, handle: usize, extent: isize) {
    let mut h = handle;
    match u.func {
        UserFn::Big(f) => {
            let mut len = count as i64;
            f(src as *mut c_void, dst as *mut c_void, &mut len, &mut h);
        }
        UserFn::Int(f) => {
            // An int length cannot say more than i32::MAX: call in slices.
            let mut done = 0usize;
            while done < count {
                let n = (count - done).min(i32::MAX as usize);
                let mut len = n as c_int;
                let off = done as isize * extent;
                f(src.offset(off) as *mut c_void, dst.offset(off) as *mut c_void, &mut len, &mut h);
                done += n;
            }
        }
    }
}

/// Copy `count` elements laid out by `t` from `src` to `dst` (MPI_REPLACE).
unsafe fn copy_typed(t: &crate::datatype::Datatype, src: *const u8, dst: *mut u8, count: usize) {
    if t.is_contiguous() {
        std::ptr::copy(src, dst, count * t.size);
        return;
    }
    match t.blocks(MAX_RUNS) {
        Some(runs) => {
            for i in 0..count {
                let base = i as isize * t.extent;
                for b in &runs {
                    std::ptr::copy(src.offset(base + b.off), dst.offset(base + b.off), b.len);
                }
            }
        }
        None => {
            let mut tmp = vec![0u8; t.packed_size(count)];
            t.pack(src, count, &mut tmp);
            t.unpack(&tmp, dst, count);
        }
    }
}

/// Most byte runs per element walked directly; types with more go through pack/unpack.
const MAX_RUNS: usize = 4096;

// ---- kernels on dense arrays -----------------------------------------------------------------

#[cfg(target_arch = "x86_64")]
extern "C" {
    fn steadfast_reduce_f16(op: c_int, a: *const u8, b: *mut u8, n: usize, stride: usize);
    fn steadfast_reduce_x87(op: c_int, a: *const u8, b: *mut u8, n: usize, stride: usize);
    fn steadfast_reduce_f128(op: c_int, a: *const u8, b: *mut u8, n: usize, stride: usize);
    fn steadfast_reduce_c16(op: c_int, a: *const u8, b: *mut u8, n: usize);
    fn steadfast_reduce_cx87(op: c_int, a: *const u8, b: *mut u8, n: usize);
    fn steadfast_reduce_c128(op: c_int, a: *const u8, b: *mut u8, n: usize);
    fn steadfast_cmp_f16(a: *const u8, b: *const u8) -> c_int;
    fn steadfast_cmp_x87(a: *const u8, b: *const u8) -> c_int;
    fn steadfast_cmp_f128(a: *const u8, b: *const u8) -> c_int;
}

/// Operation codes of the C kernels.
fn c_code(p: PredefOp) -> c_int {
    match p {
        PredefOp::Sum => 0,
        PredefOp::Prod => 1,
        PredefOp::Max => 2,
        PredefOp::Min => 3,
        PredefOp::Land => 4,
        PredefOp::Lor => 5,
        PredefOp::Lxor => 6,
        _ => 7,
    }
}

#[inline(always)]
unsafe fn zip<T: Copy>(src: *const u8, dst: *mut u8, n: usize, f: impl Fn(T, T) -> T) {
    let s = src as *const T;
    let d = dst as *mut T;
    for i in 0..n {
        let a = s.add(i).read_unaligned();
        let b = d.add(i).read_unaligned();
        d.add(i).write_unaligned(f(a, b));
    }
}

macro_rules! int_kernel {
    ($t:ty, $p:expr, $s:expr, $d:expr, $n:expr) => {{
        let (s, d, n) = ($s, $d, $n);
        match $p {
            PredefOp::Sum => zip::<$t>(s, d, n, |a, b| b.wrapping_add(a)),
            PredefOp::Prod => zip::<$t>(s, d, n, |a, b| b.wrapping_mul(a)),
            PredefOp::Max => zip::<$t>(s, d, n, |a, b| if a > b { a } else { b }),
            PredefOp::Min => zip::<$t>(s, d, n, |a, b| if a < b { a } else { b }),
            PredefOp::Land => zip::<$t>(s, d, n, |a, b| (a != 0 && b != 0) as $t),
            PredefOp::Lor => zip::<$t>(s, d, n, |a, b| (a != 0 || b != 0) as $t),
            PredefOp::Lxor => zip::<$t>(s, d, n, |a, b| ((a != 0) != (b != 0)) as $t),
            PredefOp::Band => zip::<$t>(s, d, n, |a, b| a & b),
            PredefOp::Bor => zip::<$t>(s, d, n, |a, b| a | b),
            PredefOp::Bxor => zip::<$t>(s, d, n, |a, b| a ^ b),
            _ => {}
        }
    }};
}

macro_rules! float_kernel {
    ($t:ty, $p:expr, $s:expr, $d:expr, $n:expr) => {{
        let (s, d, n) = ($s, $d, $n);
        let one = 1.0 as $t;
        let zero = 0.0 as $t;
        match $p {
            PredefOp::Sum => zip::<$t>(s, d, n, |a, b| a + b),
            PredefOp::Prod => zip::<$t>(s, d, n, |a, b| a * b),
            PredefOp::Max => zip::<$t>(s, d, n, |a, b| if a > b { a } else { b }),
            PredefOp::Min => zip::<$t>(s, d, n, |a, b| if a < b { a } else { b }),
            PredefOp::Land => zip::<$t>(s, d, n, |a, b| if a != zero && b != zero { one } else { zero }),
            PredefOp::Lor => zip::<$t>(s, d, n, |a, b| if a != zero || b != zero { one } else { zero }),
            PredefOp::Lxor => zip::<$t>(s, d, n, |a, b| if (a != zero) != (b != zero) { one } else { zero }),
            _ => {}
        }
    }};
}

macro_rules! complex_kernel {
    ($t:ty, $p:expr, $s:expr, $d:expr, $n:expr) => {{
        let (s, d, n) = ($s as *const $t, $d as *mut $t, $n);
        for i in 0..n {
            let (ar, ai) = (s.add(2 * i).read_unaligned(), s.add(2 * i + 1).read_unaligned());
            let (br, bi) = (d.add(2 * i).read_unaligned(), d.add(2 * i + 1).read_unaligned());
            let (r, im) = match $p {
                PredefOp::Sum => (ar + br, ai + bi),
                _ => (ar * br - ai * bi, ar * bi + ai * br),
            };
            d.add(2 * i).write_unaligned(r);
            d.add(2 * i + 1).write_unaligned(im);
        }
    }};
}

/// `dst[i] = src[i] op dst[i]` for `n` packed elements of kind `e`.
///
/// # Safety
/// Both pointers must be valid for `n * e.size()` bytes; `p` must support `e`.
pub unsafe fn apply_dense(p: PredefOp, e: Elem, src: *const u8, dst: *mut u8, n: usize) {
    match e {
        Elem::Num(num) => num_kernel(p, num, src, dst, n, num.size()),
        Elem::Complex(num) => match num {
            Num::F32 => complex_kernel!(f32, p, src, dst, n),
            Num::F64 => complex_kernel!(f64, p, src, dst, n),
            #[cfg(target_arch = "x86_64")]
            Num::F16 => steadfast_reduce_c16(c_code(p), src, dst, n),
            #[cfg(target_arch = "x86_64")]
            Num::X87 => steadfast_reduce_cx87(c_code(p), src, dst, n),
            #[cfg(target_arch = "x86_64")]
            Num::F128 => steadfast_reduce_c128(c_code(p), src, dst, n),
            _ => {}
        },
        Elem::Bool(bytes) => {
            let b = bytes as usize;
            for i in 0..n {
                let x = any_nonzero(src.add(i * b), b);
                let y = any_nonzero(dst.add(i * b), b);
                let r = match p {
                    PredefOp::Land => x && y,
                    PredefOp::Lor => x || y,
                    PredefOp::Lxor => x != y,
                    _ => y,
                };
                std::ptr::write_bytes(dst.add(i * b), 0, b);
                *dst.add(i * b) = r as u8;
            }
        }
        Elem::Byte => int_kernel!(u8, p, src, dst, n),
        Elem::Pair(v, ix) => pair_kernel(p == PredefOp::Minloc, v, ix, src, dst, n),
        Elem::None => {}
    }
}

unsafe fn any_nonzero(p: *const u8, n: usize) -> bool {
    (0..n).any(|i| *p.add(i) != 0)
}

unsafe fn num_kernel(p: PredefOp, num: Num, src: *const u8, dst: *mut u8, n: usize, stride: usize) {
    // The build targets baseline x86-64 (16-byte vectors); where the CPU has AVX2 the same
    // loops compiled for 32-byte vectors run long vectors up to 1.5 times as fast (64 KiB of
    // f64 sums: 1.32 -> 0.88 us here). Short ones are not worth the check.
    #[cfg(target_arch = "x86_64")]
    if n >= AVX2_MIN && std::arch::is_x86_feature_detected!("avx2") {
        return num_kernel_avx2(p, num, src, dst, n, stride);
    }
    num_kernel_base(p, num, src, dst, n, stride)
}

/// Elements from which [`num_kernel`] takes the AVX2 loops.
#[cfg(target_arch = "x86_64")]
const AVX2_MIN: usize = 256;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn num_kernel_avx2(p: PredefOp, num: Num, src: *const u8, dst: *mut u8, n: usize, stride: usize) {
    num_kernel_base(p, num, src, dst, n, stride)
}

#[inline(always)]
unsafe fn num_kernel_base(p: PredefOp, num: Num, src: *const u8, dst: *mut u8, n: usize, _stride: usize) {
    match num {
        Num::I8 => int_kernel!(i8, p, src, dst, n),
        Num::I16 => int_kernel!(i16, p, src, dst, n),
        Num::I32 => int_kernel!(i32, p, src, dst, n),
        Num::I64 => int_kernel!(i64, p, src, dst, n),
        Num::I128 => int_kernel!(i128, p, src, dst, n),
        Num::U8 => int_kernel!(u8, p, src, dst, n),
        Num::U16 => int_kernel!(u16, p, src, dst, n),
        Num::U32 => int_kernel!(u32, p, src, dst, n),
        Num::U64 => int_kernel!(u64, p, src, dst, n),
        Num::U128 => int_kernel!(u128, p, src, dst, n),
        Num::F32 => float_kernel!(f32, p, src, dst, n),
        Num::F64 => float_kernel!(f64, p, src, dst, n),
        #[cfg(target_arch = "x86_64")]
        Num::F16 => steadfast_reduce_f16(c_code(p), src, dst, n, 2),
        #[cfg(target_arch = "x86_64")]
        Num::X87 => steadfast_reduce_x87(c_code(p), src, dst, n, 16),
        #[cfg(target_arch = "x86_64")]
        Num::F128 => steadfast_reduce_f128(c_code(p), src, dst, n, 16),
        #[cfg(not(target_arch = "x86_64"))]
        _ => {}
    }
}

/// Ordering of two values of kind `num` at `a` and `b`: -1, 0, 1, or 2 when unordered.
unsafe fn num_cmp(num: Num, a: *const u8, b: *const u8) -> i32 {
    fn ord<T: PartialOrd>(x: T, y: T) -> i32 {
        match x.partial_cmp(&y) {
            Some(std::cmp::Ordering::Less) => -1,
            Some(std::cmp::Ordering::Equal) => 0,
            Some(std::cmp::Ordering::Greater) => 1,
            None => 2,
        }
    }
    macro_rules! rd {
        ($t:ty) => {
            ord((a as *const $t).read_unaligned(), (b as *const $t).read_unaligned())
        };
    }
    match num {
        Num::I8 => rd!(i8),
        Num::I16 => rd!(i16),
        Num::I32 => rd!(i32),
        Num::I64 => rd!(i64),
        Num::I128 => rd!(i128),
        Num::U8 => rd!(u8),
        Num::U16 => rd!(u16),
        Num::U32 => rd!(u32),
        Num::U64 => rd!(u64),
        Num::U128 => rd!(u128),
        Num::F32 => rd!(f32),
        Num::F64 => rd!(f64),
        #[cfg(target_arch = "x86_64")]
        Num::F16 => steadfast_cmp_f16(a, b),
        #[cfg(target_arch = "x86_64")]
        Num::X87 => steadfast_cmp_x87(a, b),
        #[cfg(target_arch = "x86_64")]
        Num::F128 => steadfast_cmp_f128(a, b),
        #[cfg(not(target_arch = "x86_64"))]
        _ => 2,
    }
}

/// MINLOC / MAXLOC: the better value wins; on a tie the smaller index wins.
unsafe fn pair_kernel(min: bool, v: Num, ix: Num, src: *const u8, dst: *mut u8, n: usize) {
    let (vs, is) = (v.size(), ix.size());
    let stride = vs + is;
    for i in 0..n {
        let a = src.add(i * stride);
        let b = dst.add(i * stride);
        let c = num_cmp(v, a, b);
        let better = if min { c == -1 } else { c == 1 };
        if better {
            std::ptr::copy(a, b, stride);
        } else if c == 0 && num_cmp(ix, a.add(vs), b.add(vs)) == -1 {
            std::ptr::copy(a.add(vs), b.add(vs), is);
        }
    }
}


#[cfg(test)]
mod tests {
    //! Every predefined op on every element kind it supports, against a reference computed
    //! independently (integers in i128/u128, floats in f64 on small integer values that every
    //! format holds exactly, encoded bit by bit for binary16, x87 and binary128).
    use super::*;
    use crate::datatype::{Block, Datatype};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const INTS: [Num; 10] = [Num::I8, Num::I16, Num::I32, Num::I64, Num::I128, Num::U8, Num::U16, Num::U32, Num::U64, Num::U128];
    const FLOATS: [Num; 5] = [Num::F16, Num::F32, Num::F64, Num::X87, Num::F128];

    /// The AVX2 loops of long vectors give, bit for bit, what the baseline loops give (both
    /// apply the op element by element, in order), for every op on every integer and
    /// float kind they serve, NaNs and signed zeros included among the floats.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn long_vectors_give_the_baseline_loops_results() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let n = AVX2_MIN * 4 + 3;
        let kinds = [Num::I8, Num::I16, Num::I32, Num::I64, Num::U8, Num::U16, Num::U32, Num::U64, Num::F32, Num::F64];
        for num in kinds {
            let w = num.size();
            let mut src: Vec<u8> = (0..n * w).map(|_| rng.gen()).collect();
            if matches!(num, Num::F32 | Num::F64) {
                // Some zeros of both signs and NaNs, besides random bit patterns.
                for i in (0..n).step_by(7) {
                    src[i * w..(i + 1) * w].fill(0);
                }
                for i in (3..n).step_by(11) {
                    src[i * w..(i + 1) * w].fill(0xff);
                }
            }
            let dst0: Vec<u8> = (0..n * w).map(|_| rng.gen()).collect();
            for p in PredefOp::ALL {
                if matches!(p, PredefOp::Minloc | PredefOp::Maxloc | PredefOp::Replace | PredefOp::NoOp) {
                    continue;
                }
                let (mut fast, mut base) = (dst0.clone(), dst0.clone());
                // SAFETY: both buffers hold n elements of w bytes.
                unsafe {
                    num_kernel(p, num, src.as_ptr(), fast.as_mut_ptr(), n, w);
                    num_kernel_base(p, num, src.as_ptr(), base.as_mut_ptr(), n, w);
                }
                assert!(fast == base, "{p:?} on {num:?}: the AVX2 loops differ");
            }
        }
    }

    fn signed(n: Num) -> bool {
        matches!(n, Num::I8 | Num::I16 | Num::I32 | Num::I64 | Num::I128)
    }

    fn int_get(n: Num, b: &[u8]) -> i128 {
        let w = n.size();
        let mut v = [0u8; 16];
        v[..w].copy_from_slice(&b[..w]);
        if signed(n) && b[w - 1] & 0x80 != 0 {
            for x in v.iter_mut().skip(w) {
                *x = 0xff;
            }
        }
        i128::from_le_bytes(v)
    }
    fn int_put(n: Num, v: i128) -> Vec<u8> {
        v.to_le_bytes()[..n.size()].to_vec()
    }
    fn int_cmp(n: Num, a: i128, b: i128) -> std::cmp::Ordering {
        if n == Num::U128 {
            (a as u128).cmp(&(b as u128))
        } else {
            a.cmp(&b)
        }
    }

    /// Encode a small integer-valued f64 in format `n` (normal numbers and zero only).
    fn fenc(n: Num, x: f64) -> Vec<u8> {
        match n {
            Num::F32 => (x as f32).to_le_bytes().to_vec(),
            Num::F64 => x.to_le_bytes().to_vec(),
            _ => {
                let (ebits, mbits, explicit, bytes) = match n {
                    Num::F16 => (5, 10, false, 2),
                    Num::X87 => (15, 63, true, 16),
                    _ => (15, 112, false, 16),
                };
                let mut out = vec![0u8; bytes];
                if x == 0.0 {
                    return out;
                }
                let sign = (x < 0.0) as u128;
                let a = x.abs();
                let e = a.log2().floor() as i32;
                let frac = a / 2f64.powi(e) - 1.0; // in [0, 1), exact for small integers
                let m = (frac * 2f64.powi(52)) as u128; // 52 fraction bits
                let m = if mbits >= 52 { m << (mbits - 52) } else { m >> (52 - mbits) };
                let bias = (1i32 << (ebits - 1)) - 1;
                let exp = (e + bias) as u128;
                let mut bits = (sign << (ebits + mbits + explicit as u32)) | (exp << (mbits + explicit as u32)) | m;
                if explicit {
                    bits |= 1u128 << mbits;
                }
                out.copy_from_slice(&bits.to_le_bytes()[..bytes]);
                if n == Num::X87 {
                    out[10..].fill(0);
                }
                out
            }
        }
    }
    fn fdec(n: Num, b: &[u8]) -> f64 {
        match n {
            Num::F32 => f32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
            Num::F64 => f64::from_le_bytes(b[..8].try_into().unwrap()),
            _ => {
                let (ebits, mbits, explicit, bytes) = match n {
                    Num::F16 => (5u32, 10u32, 0u32, 2),
                    Num::X87 => (15, 63, 1, 10),
                    _ => (15, 112, 0, 16),
                };
                let mut v = [0u8; 16];
                v[..bytes].copy_from_slice(&b[..bytes]);
                let bits = u128::from_le_bytes(v);
                let m = bits & ((1u128 << mbits) - 1);
                let exp = ((bits >> (mbits + explicit)) & ((1 << ebits) - 1)) as i32;
                let sign = (bits >> (mbits + explicit + ebits)) & 1;
                if exp == 0 && m == 0 {
                    return if sign == 1 { -0.0 } else { 0.0 };
                }
                let bias = (1i32 << (ebits - 1)) - 1;
                let frac = (m >> mbits.saturating_sub(52)) as f64 / 2f64.powi(mbits.min(52) as i32);
                let v = (1.0 + frac) * 2f64.powi(exp - bias);
                if sign == 1 {
                    -v
                } else {
                    v
                }
            }
        }
    }

    fn run(p: PredefOp, e: Elem, a: &[u8], b: &mut [u8], n: usize) {
        unsafe { apply_dense(p, e, a.as_ptr(), b.as_mut_ptr(), n) };
    }

    #[test]
    fn float_encoding_round_trips() {
        for n in FLOATS {
            for x in [-8.0, -1.0, 0.0, 0.5, 1.0, 3.0, 7.0, 64.0] {
                assert_eq!(fdec(n, &fenc(n, x)), x, "{n:?} {x}");
            }
        }
    }

    #[test]
    fn integer_ops_match_reference() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let ops = [PredefOp::Sum, PredefOp::Prod, PredefOp::Max, PredefOp::Min, PredefOp::Land, PredefOp::Lor, PredefOp::Lxor, PredefOp::Band, PredefOp::Bor, PredefOp::Bxor];
        for num in INTS {
            for p in ops {
                let count = 37;
                let w = num.size();
                let gen = |rng: &mut ChaCha8Rng| -> Vec<u8> {
                    (0..count)
                        .flat_map(|i| {
                            let v: i128 = match i % 4 {
                                0 => 0,
                                1 => rng.gen_range(-3..4),
                                _ => rng.gen::<i128>(),
                            };
                            int_put(num, v)
                        })
                        .collect()
                };
                let a = gen(&mut rng);
                let mut b = gen(&mut rng);
                let orig = b.clone();
                assert!(p.supports(Elem::Num(num)));
                run(p, Elem::Num(num), &a, &mut b, count);
                for i in 0..count {
                    let x = int_get(num, &a[i * w..]);
                    let y = int_get(num, &orig[i * w..]);
                    let want = match p {
                        PredefOp::Sum => x.wrapping_add(y),
                        PredefOp::Prod => x.wrapping_mul(y),
                        PredefOp::Max => if int_cmp(num, x, y).is_gt() { x } else { y },
                        PredefOp::Min => if int_cmp(num, x, y).is_lt() { x } else { y },
                        PredefOp::Land => (x != 0 && y != 0) as i128,
                        PredefOp::Lor => (x != 0 || y != 0) as i128,
                        PredefOp::Lxor => ((x != 0) != (y != 0)) as i128,
                        PredefOp::Band => x & y,
                        PredefOp::Bor => x | y,
                        PredefOp::Bxor => x ^ y,
                        _ => unreachable!(),
                    };
                    assert_eq!(&b[i * w..(i + 1) * w], &int_put(num, want)[..], "{p:?} {num:?} element {i}: {x} op {y}");
                }
            }
        }
    }

    #[test]
    fn float_ops_match_reference_in_every_format() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let ops = [PredefOp::Sum, PredefOp::Prod, PredefOp::Max, PredefOp::Min, PredefOp::Land, PredefOp::Lor, PredefOp::Lxor];
        for num in FLOATS {
            let w = num.size();
            let sig = if num == Num::X87 { 10 } else { w };
            for p in ops {
                let count = 25;
                let xs: Vec<f64> = (0..count).map(|_| rng.gen_range(-8..=8) as f64).collect();
                let ys: Vec<f64> = (0..count).map(|_| rng.gen_range(-8..=8) as f64).collect();
                let a: Vec<u8> = xs.iter().flat_map(|&x| fenc(num, x)).collect();
                let mut b: Vec<u8> = ys.iter().flat_map(|&y| fenc(num, y)).collect();
                run(p, Elem::Num(num), &a, &mut b, count);
                for i in 0..count {
                    let (x, y) = (xs[i], ys[i]);
                    let want = match p {
                        PredefOp::Sum => x + y,
                        PredefOp::Prod => x * y,
                        PredefOp::Max => x.max(y),
                        PredefOp::Min => x.min(y),
                        PredefOp::Land => (x != 0.0 && y != 0.0) as u8 as f64,
                        PredefOp::Lor => (x != 0.0 || y != 0.0) as u8 as f64,
                        PredefOp::Lxor => ((x != 0.0) != (y != 0.0)) as u8 as f64,
                        _ => unreachable!(),
                    };
                    let got = fdec(num, &b[i * w..i * w + sig]);
                    assert!(got == want, "{p:?} {num:?}: {x} op {y} = {got}, want {want}");
                }
            }
            // Precision beyond f64: 1 + 2^-60 exists in x87 and binary128 (not in f64).
            if matches!(num, Num::X87 | Num::F128) {
                let one = fenc(num, 1.0);
                let mut tiny = fenc(num, 1.0);
                // 2^-60: same format, exponent lowered by 60.
                let (mbits, explicit) = if num == Num::X87 { (63u32, 1u32) } else { (112, 0) };
                let mut v = [0u8; 16];
                v[..16].copy_from_slice(&tiny[..16]);
                let bits = u128::from_le_bytes(v) - (60u128 << (mbits + explicit));
                tiny.copy_from_slice(&bits.to_le_bytes());
                let mut acc = one.clone();
                run(PredefOp::Sum, Elem::Num(num), &tiny, &mut acc, 1);
                assert_ne!(&acc[..sig], &one[..sig], "{num:?}: 1 + 2^-60 must differ from 1 (no detour through f64)");
                run(PredefOp::Sum, Elem::Num(num), &tiny, &mut acc, 1);
                let mut neg = one.clone();
                neg[sig - 1] |= 0x80;
                run(PredefOp::Sum, Elem::Num(num), &neg, &mut acc, 1);
                // (1 + 2^-60 + 2^-60) - 1 == 2^-59 exactly.
                assert_eq!(fdec(num, &acc[..sig]), 2f64.powi(-59), "{num:?}");
            }
        }
    }

    #[test]
    fn complex_sum_and_product_in_every_format() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for num in FLOATS {
            let w = num.size();
            let sig = if num == Num::X87 { 10 } else { w };
            for p in [PredefOp::Sum, PredefOp::Prod] {
                let count = 9;
                let v: Vec<[f64; 4]> = (0..count).map(|_| [0; 4].map(|_: i32| rng.gen_range(-5..=5) as f64)).collect();
                let a: Vec<u8> = v.iter().flat_map(|z| [fenc(num, z[0]), fenc(num, z[1])].concat()).collect();
                let mut b: Vec<u8> = v.iter().flat_map(|z| [fenc(num, z[2]), fenc(num, z[3])].concat()).collect();
                assert!(p.supports(Elem::Complex(num)));
                run(p, Elem::Complex(num), &a, &mut b, count);
                for (i, z) in v.iter().enumerate() {
                    let (ar, ai, br, bi) = (z[0], z[1], z[2], z[3]);
                    let (wr, wi) = if p == PredefOp::Sum { (ar + br, ai + bi) } else { (ar * br - ai * bi, ar * bi + ai * br) };
                    let re = fdec(num, &b[2 * i * w..2 * i * w + sig]);
                    let im = fdec(num, &b[(2 * i + 1) * w..(2 * i + 1) * w + sig]);
                    assert_eq!((re, im), (wr, wi), "{p:?} complex {num:?} element {i}");
                }
            }
            assert!(!PredefOp::Max.supports(Elem::Complex(num)));
        }
    }

    #[test]
    fn logical_ops_on_booleans_and_bitwise_on_bytes() {
        for bytes in [1u8, 2, 4, 8, 16] {
            let w = bytes as usize;
            let vals = [0u8, 1, 2, 0x80];
            for p in [PredefOp::Land, PredefOp::Lor, PredefOp::Lxor] {
                for &x in &vals {
                    for &y in &vals {
                        let mut a = vec![0u8; w];
                        let mut b = vec![0u8; w];
                        a[w - 1] = x; // a truth value in the top byte counts too
                        b[0] = y;
                        let (tx, ty) = (x != 0, y != 0);
                        run(p, Elem::Bool(bytes), &a, &mut b, 1);
                        let want = match p {
                            PredefOp::Land => tx && ty,
                            PredefOp::Lor => tx || ty,
                            _ => tx != ty,
                        };
                        let mut exp = vec![0u8; w];
                        exp[0] = want as u8;
                        assert_eq!(b, exp, "{p:?} bool{bytes} {x} {y}");
                    }
                }
            }
            assert!(!PredefOp::Sum.supports(Elem::Bool(bytes)));
            assert!(!PredefOp::Band.supports(Elem::Bool(bytes)));
        }
        let a = [0b1100u8, 0xff];
        let mut b = [0b1010u8, 0x0f];
        run(PredefOp::Band, Elem::Byte, &a, &mut b, 2);
        assert_eq!(b, [0b1000, 0x0f]);
        run(PredefOp::Bor, Elem::Byte, &a, &mut b, 2);
        assert_eq!(b, [0b1100, 0xff]);
        run(PredefOp::Bxor, Elem::Byte, &a, &mut b, 2);
        assert_eq!(b, [0, 0]);
        assert!(!PredefOp::Sum.supports(Elem::Byte));
        assert!(!PredefOp::Max.supports(Elem::Byte));
    }

    #[test]
    fn minloc_maxloc_on_every_pair_kind() {
        let pairs = [
            (Num::F32, Num::I32),
            (Num::F64, Num::I32),
            (Num::I64, Num::I32),
            (Num::I32, Num::I32),
            (Num::I16, Num::I32),
            (Num::X87, Num::I32),
            (Num::F32, Num::F32),
            (Num::F64, Num::F64),
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for (v, ix) in pairs {
            let e = Elem::Pair(v, ix);
            let enc = |n: Num, x: i32| if n.is_float() { fenc(n, x as f64) } else { int_put(n, x as i128) };
            let dec = |n: Num, b: &[u8]| if n.is_float() { fdec(n, b) as i64 } else { int_get(n, b) as i64 };
            for p in [PredefOp::Minloc, PredefOp::Maxloc] {
                assert!(p.supports(e));
                let count = 40;
                // Few distinct values so ties (decided by the smaller index) are common.
                let a: Vec<(i32, i32)> = (0..count).map(|_| (rng.gen_range(-2..=2), rng.gen_range(0..9))).collect();
                let b0: Vec<(i32, i32)> = (0..count).map(|_| (rng.gen_range(-2..=2), rng.gen_range(0..9))).collect();
                let pack = |xs: &[(i32, i32)]| -> Vec<u8> { xs.iter().flat_map(|&(x, i)| [enc(v, x), enc(ix, i)].concat()).collect() };
                let pa = pack(&a);
                let mut pb = pack(&b0);
                run(p, e, &pa, &mut pb, count);
                let stride = e.size();
                for k in 0..count {
                    let (x, xi) = a[k];
                    let (y, yi) = b0[k];
                    let want = if x == y {
                        (x, xi.min(yi))
                    } else if (p == PredefOp::Minloc) == (x < y) {
                        (x, xi)
                    } else {
                        (y, yi)
                    };
                    let got_v = dec(v, &pb[k * stride..]);
                    let got_i = dec(ix, &pb[k * stride + v.size()..]);
                    assert_eq!((got_v, got_i), (want.0 as i64, want.1 as i64), "{p:?} {v:?}/{ix:?} element {k}");
                }
            }
            assert!(!PredefOp::Sum.supports(e));
        }
        assert!(!PredefOp::Minloc.supports(Elem::Num(Num::I32)));
    }

    #[test]
    fn op_not_defined_for_type_is_err_op() {
        let t: TypeRef = TypeRef::new(Datatype::predefined("MPI_FLOAT", 4, 4, BasicKind::Float { bytes: 4 }, vec![Block { off: 0, len: 4 }]));
        let e = Reduction::new(Op::Predef(PredefOp::Band), t.clone(), Elem::Num(Num::F32), 0).unwrap_err();
        assert_eq!(e.class, ErrorClass::Op);
        assert!(e.msg.contains("MPI_BAND") && e.msg.contains("MPI_FLOAT"), "{}", e.msg);
        assert!(Reduction::new(Op::Predef(PredefOp::Replace), t.clone(), Elem::None, 0).is_ok());
        assert_eq!(Reduction::new(Op::Predef(PredefOp::Sum), t, Elem::None, 0).unwrap_err().class, ErrorClass::Op);
    }

    #[test]
    fn replace_and_no_op() {
        let t: TypeRef = TypeRef::new(Datatype::predefined("MPI_INT", 4, 4, BasicKind::Int { bytes: 4, signed: true }, vec![Block { off: 0, len: 4 }]));
        let a = [1i32, 2, 3];
        let mut b = [7i32, 8, 9];
        let r = Reduction::new(Op::Predef(PredefOp::NoOp), t.clone(), Elem::Num(Num::I32), 0).unwrap();
        unsafe { r.apply(a.as_ptr() as *const u8, b.as_mut_ptr() as *mut u8, 3) };
        assert_eq!(b, [7, 8, 9]);
        let r = Reduction::new(Op::Predef(PredefOp::Replace), t, Elem::Num(Num::I32), 0).unwrap();
        unsafe { r.apply(a.as_ptr() as *const u8, b.as_mut_ptr() as *mut u8, 3) };
        assert_eq!(b, a);
    }

    #[test]
    fn pair_with_a_gap_goes_through_packing() {
        // MPI_SHORT_INT: short at 0, int at 4, extent 8 (two blocks).
        let mut d = Datatype::predefined(
            "MPI_SHORT_INT",
            6,
            8,
            BasicKind::Opaque,
            vec![Block { off: 0, len: 2 }, Block { off: 4, len: 4 }],
        );
        d.basic = None;
        d.basic_count = 2;
        let t: TypeRef = TypeRef::new(d);
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        struct SI {
            v: i16,
            pad: i16,
            i: i32,
        }
        let a = [SI { v: 5, pad: 0, i: 3 }, SI { v: 1, pad: 0, i: 9 }, SI { v: 4, pad: 0, i: 2 }];
        let mut b = [SI { v: 5, pad: -1, i: 1 }, SI { v: 2, pad: -1, i: 0 }, SI { v: 4, pad: -1, i: 7 }];
        let r = Reduction::new(Op::Predef(PredefOp::Maxloc), t, Elem::Pair(Num::I16, Num::I32), 0).unwrap();
        unsafe { r.apply(a.as_ptr() as *const u8, b.as_mut_ptr() as *mut u8, 3) };
        assert_eq!(b, [SI { v: 5, pad: -1, i: 1 }, SI { v: 2, pad: -1, i: 0 }, SI { v: 4, pad: -1, i: 2 }]);
    }

    #[test]
    fn user_functions_get_the_count_and_handle() {
        unsafe extern "C" fn f(a: *mut c_void, b: *mut c_void, len: *mut c_int, t: *mut usize) {
            let (a, b) = (a as *const i32, b as *mut i32);
            for i in 0..*len as usize {
                *b.add(i) = *a.add(i) * 10 + *b.add(i) + *t as i32;
            }
        }
        let t: TypeRef = TypeRef::new(Datatype::predefined("MPI_INT", 4, 4, BasicKind::Int { bytes: 4, signed: true }, vec![Block { off: 0, len: 4 }]));
        let op = Op::User(Arc::new(UserOp { func: UserFn::Int(f), commute: false }));
        assert!(!op.commutative());
        let r = Reduction::new(op, t, Elem::None, 1000).unwrap();
        let a = [1i32, 2];
        let mut b = [3i32, 4];
        unsafe { r.apply(a.as_ptr() as *const u8, b.as_mut_ptr() as *mut u8, 2) };
        assert_eq!(b, [1013, 1024]);
    }
}

//! Datatype entry points: constructors (with their `_c` large-count forms), commit and free,
//! size and extent queries, envelopes and contents, names, pack and unpack (native and
//! external32), element counts in statuses, address arithmetic, Fortran-kind types.
//!
//! Type semantics live in `steadfast_core::datatype`; this file checks arguments, maps
//! handles and lays envelopes out the way get_contents returns them.

use std::ffi::{c_char, c_int, c_void, CStr};

use steadfast_core::datatype::{Args, BasicKind, Combiner, DarrayDim, Datatype, Distrib, Ext32, Order, Part, TypeRef};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, FloatFormat, MPI_Aint, MPI_Comm, MPI_Count, MPI_Datatype, MPI_Status, TypeKind};
use crate::env::write_cstr;
use crate::attr::{self, Obj};
use crate::global::{api, api_unlocked, comm_handle, locked, set_status_count, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

// ---- the predefined table ------------------------------------------------------------------

/// Every predefined datatype, indexed by handle value. Made once per process and kept
/// ([`TypeRef::forever`]): an engine started again (sessions) gets the same types.
pub fn predefined_table() -> Vec<Option<TypeRef>> {
    static TABLE: std::sync::OnceLock<Vec<Option<TypeRef>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(make_predefined_table).clone()
}

fn make_predefined_table() -> Vec<Option<TypeRef>> {
    let mut table = vec![None; abi::PREDEFINED_HANDLE_MAX + 1];
    for p in abi::PREDEFINED_TYPES {
        // C `long` (alone or as the value of MPI_LONG_INT) is 4 bytes in external32.
        let c_long = matches!(p.handle, abi::MPI_LONG | abi::MPI_UNSIGNED_LONG | abi::MPI_LONG_INT);
        let parts = match p.kind {
            TypeKind::Pair { value, index, index_offset } => vec![part(value, 0, c_long), part(index, index_offset, false)],
            ref k => vec![part(k, 0, c_long)],
        };
        let mut t = Datatype::basic(display_name(p.handle, p.name), p.extent, parts, align_of(&p.kind));
        debug_assert_eq!(t.size, p.size, "{}", p.name);
        t.predefined_handle = Some(p.handle);
        if p.handle < table.len() {
            table[p.handle] = Some(TypeRef::forever(t));
        }
    }
    table
}

/// The name Type_get_name reports: the C name, with the spelling MPICH's tests accept for
/// the two handles that have a synonym.
fn display_name(handle: usize, name: &'static str) -> &'static str {
    match handle {
        abi::MPI_LONG_LONG => "MPI_LONG_LONG_INT",
        abi::MPI_C_FLOAT_COMPLEX => "MPI_C_COMPLEX",
        _ => name,
    }
}

fn part(kind: &TypeKind, off: usize, c_long: bool) -> Part {
    let int_ext = |bytes: usize, signed: bool| {
        if c_long {
            Ext32::Int { signed, ext: 4 }
        } else if bytes == 1 {
            Ext32::Raw
        } else {
            Ext32::Swap { unit: bytes as u8 }
        }
    };
    let float_ext = |f: FloatFormat, n: u8| match f {
        FloatFormat::X87Extended => Ext32::X87 { n },
        f => Ext32::Swap { unit: f.storage_bytes() as u8 },
    };
    match *kind {
        TypeKind::SignedInt { bytes } => {
            Part { off, size: bytes, kind: BasicKind::Int { bytes: bytes as u8, signed: true }, ext32: int_ext(bytes, true) }
        }
        TypeKind::UnsignedInt { bytes } => {
            Part { off, size: bytes, kind: BasicKind::Int { bytes: bytes as u8, signed: false }, ext32: int_ext(bytes, false) }
        }
        TypeKind::Float(f) => {
            Part { off, size: f.storage_bytes(), kind: BasicKind::Float { bytes: f.storage_bytes() as u8 }, ext32: float_ext(f, 1) }
        }
        TypeKind::Complex(f) => Part {
            off,
            size: 2 * f.storage_bytes(),
            kind: BasicKind::Complex { bytes: 2 * f.storage_bytes() as u8 },
            ext32: float_ext(f, 2),
        },
        TypeKind::Bool { bytes, .. } => Part {
            off,
            size: bytes,
            kind: BasicKind::Bool { bytes: bytes as u8 },
            ext32: if bytes == 1 { Ext32::Raw } else { Ext32::Swap { unit: bytes as u8 } },
        },
        // wchar_t is UTF-32 here and 2 bytes in external32.
        TypeKind::Char { bytes } => Part {
            off,
            size: bytes,
            kind: BasicKind::Opaque,
            ext32: if bytes == 1 { Ext32::Raw } else { Ext32::Int { signed: false, ext: 2 } },
        },
        TypeKind::Byte | TypeKind::Packed | TypeKind::Pair { .. } => {
            Part { off, size: 1, kind: BasicKind::Opaque, ext32: Ext32::Raw }
        }
    }
}

/// Alignment of a predefined type on x86_64 (what a C struct member gets).
fn align_of(kind: &TypeKind) -> usize {
    match *kind {
        TypeKind::SignedInt { bytes } | TypeKind::UnsignedInt { bytes } => bytes,
        TypeKind::Float(f) | TypeKind::Complex(f) => f.storage_bytes(),
        TypeKind::Bool { bytes, .. } | TypeKind::Char { bytes } => bytes,
        TypeKind::Byte | TypeKind::Packed => 1,
        TypeKind::Pair { value, index, .. } => align_of(value).max(align_of(index)),
    }
}

// ---- handles -------------------------------------------------------------------------------

/// The datatype behind handle `t`, committed or not.
pub fn type_any(g: &Global, t: MPI_Datatype) -> Result<TypeRef, MpiError> {
    let t = t as usize;
    if t == abi::MPI_DATATYPE_NULL {
        return Err(err(ErrorClass::Type, "MPI_DATATYPE_NULL is not a valid datatype here"));
    }
    let found = if abi::is_predefined_handle(t) {
        g.predef_types.get(t).and_then(|x| x.clone())
    } else {
        g.types.get(Handle(t as u64)).cloned()
    };
    found.ok_or_else(|| err(ErrorClass::Type, format!("invalid datatype handle {t:#x}")))
}

/// The committed datatype behind `t` (what communication needs).
fn type_committed(g: &Global, t: MPI_Datatype) -> Result<TypeRef, MpiError> {
    let ty = type_any(g, t)?;
    if !ty.committed {
        return Err(err(ErrorClass::Type, format!("datatype {} is not committed", describe(&ty))));
    }
    Ok(ty)
}

fn describe(t: &Datatype) -> String {
    if t.name.is_empty() {
        format!("(unnamed {:?})", t.combiner())
    } else {
        t.name.clone()
    }
}

/// Mutable access to the table entry of `t` (copy-on-write: in-flight users keep theirs).
fn type_mut(g: &mut Global, t: MPI_Datatype) -> Result<&mut Datatype, MpiError> {
    let h = t as usize;
    let slot = if h == abi::MPI_DATATYPE_NULL {
        None
    } else if abi::is_predefined_handle(h) {
        g.predef_types.get_mut(h).and_then(|x| x.as_mut())
    } else {
        g.types.get_mut(Handle(h as u64))
    };
    let slot = slot.ok_or_else(|| err(ErrorClass::Type, format!("invalid datatype handle {h:#x}")))?;
    Ok(TypeRef::make_mut(slot))
}

/// Register a new derived type and return its handle.
fn register(g: &mut Global, t: Datatype) -> MPI_Datatype {
    g.types.insert(TypeRef::new(t)).0 as MPI_Datatype
}

/// Register a type the application may not free (Fortran-kind and value-index types).
fn register_permanent(g: &mut Global, mut t: Datatype) -> MPI_Datatype {
    t.predefined = true;
    t.committed = true;
    let h = g.types.insert(TypeRef::new(t));
    if let Some(x) = g.types.get_mut(h) {
        TypeRef::make_mut(x).predefined_handle = Some(h.0 as usize);
    }
    h.0 as MPI_Datatype
}

/// The handle get_contents returns for an old type: predefined ones as they are, derived
/// ones as a new handle to the same type (the application frees it).
fn child_handle(g: &mut Global, t: &TypeRef) -> MPI_Datatype {
    match t.predefined_handle {
        Some(h) => h as MPI_Datatype,
        None => g.types.insert(t.clone()).0 as MPI_Datatype,
    }
}

// ---- argument helpers ----------------------------------------------------------------------

/// Integer argument types of the C bindings (int, MPI_Aint, MPI_Count).
trait CInt: Copy {
    fn get(self) -> i64;
}
impl CInt for c_int {
    fn get(self) -> i64 {
        self as i64
    }
}
impl CInt for i64 {
    fn get(self) -> i64 {
        self
    }
}
impl CInt for isize {
    fn get(self) -> i64 {
        self as i64
    }
}

fn count_arg(v: i64, what: &str) -> Result<usize, MpiError> {
    usize::try_from(v).map_err(|_| err(ErrorClass::Count, format!("{what} {v} is negative")))
}

fn nonneg_arg(v: i64, what: &str) -> Result<usize, MpiError> {
    usize::try_from(v).map_err(|_| err(ErrorClass::Arg, format!("{what} {v} is negative")))
}

fn disp_arg(v: i64) -> Result<isize, MpiError> {
    isize::try_from(v).map_err(|_| err(ErrorClass::Arg, format!("displacement {v} does not fit an address")))
}

/// `n` values at `p` as i64 (`p` may be NULL only when `n` is 0).
unsafe fn read<T: CInt>(p: *const T, n: usize, what: &str) -> Result<Vec<i64>, MpiError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} is NULL")));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| err(ErrorClass::NoMem, format!("{what}: no memory for {n} entries")))?;
    v.extend(std::slice::from_raw_parts(p, n).iter().map(|x| x.get()));
    Ok(v)
}

fn check_out<T>(p: *mut T, what: &str) -> Result<(), MpiError> {
    if p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} is NULL")));
    }
    Ok(())
}

fn order_arg(order: c_int) -> Result<Order, MpiError> {
    match order {
        abi::MPI_ORDER_C => Ok(Order::C),
        abi::MPI_ORDER_FORTRAN => Ok(Order::Fortran),
        o => Err(err(ErrorClass::Arg, format!("order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"))),
    }
}

fn order_code(o: Order) -> i64 {
    match o {
        Order::C => abi::MPI_ORDER_C as i64,
        Order::Fortran => abi::MPI_ORDER_FORTRAN as i64,
    }
}

// ---- constructors --------------------------------------------------------------------------

unsafe fn contiguous_impl(func: &str, count: i64, old: MPI_Datatype, newtype: *mut MPI_Datatype, large: bool) -> c_int {
    api(func, None, |g| {
        let n = count_arg(count, "count")?;
        let o = type_any(g, old)?;
        check_out(newtype, "newtype")?;
        *newtype = register(g, Datatype::contiguous(n, &o, large)?);
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn vector_impl(
    func: &str,
    count: i64,
    blocklen: i64,
    stride: i64,
    old: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    bytes: bool,
) -> c_int {
    api(func, None, |g| {
        let n = count_arg(count, "count")?;
        let bl = nonneg_arg(blocklen, "blocklength")?;
        let s = disp_arg(stride)?;
        let o = type_any(g, old)?;
        check_out(newtype, "newtype")?;
        let t = if bytes { Datatype::hvector(n, bl, s, &o, large)? } else { Datatype::vector(n, bl, s, &o, large)? };
        *newtype = register(g, t);
        Ok(())
    })
}

/// Indexed, hindexed (`bytes`), and their `_block` forms (`blocklens` has one entry).
#[allow(clippy::too_many_arguments)]
unsafe fn indexed_impl<B: CInt, D: CInt>(
    func: &str,
    count: i64,
    blocklens: *const B,
    one_blocklen: Option<i64>,
    disps: *const D,
    old: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
    bytes: bool,
) -> c_int {
    api(func, None, |g| {
        let n = count_arg(count, "count")?;
        let o = type_any(g, old)?;
        check_out(newtype, "newtype")?;
        let ds = read(disps, n, "array_of_displacements")?.into_iter().map(disp_arg).collect::<Result<Vec<_>, _>>()?;
        let t = match one_blocklen {
            Some(bl) => {
                let bl = nonneg_arg(bl, "blocklength")?;
                if bytes {
                    Datatype::hindexed_block(bl, &ds, &o, large)?
                } else {
                    Datatype::indexed_block(bl, &ds, &o, large)?
                }
            }
            None => {
                let bls = read(blocklens, n, "array_of_blocklengths")?
                    .into_iter()
                    .map(|b| nonneg_arg(b, "blocklength"))
                    .collect::<Result<Vec<_>, _>>()?;
                if bytes {
                    Datatype::hindexed(&bls, &ds, &o, large)?
                } else {
                    Datatype::indexed(&bls, &ds, &o, large)?
                }
            }
        };
        *newtype = register(g, t);
        Ok(())
    })
}

unsafe fn struct_impl<B: CInt, D: CInt>(
    func: &str,
    count: i64,
    blocklens: *const B,
    disps: *const D,
    types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
) -> c_int {
    api(func, None, |g| {
        let n = count_arg(count, "count")?;
        check_out(newtype, "newtype")?;
        let bls =
            read(blocklens, n, "array_of_blocklengths")?.into_iter().map(|b| nonneg_arg(b, "blocklength")).collect::<Result<Vec<_>, _>>()?;
        let ds = read(disps, n, "array_of_displacements")?.into_iter().map(disp_arg).collect::<Result<Vec<_>, _>>()?;
        if n > 0 && types.is_null() {
            return Err(err(ErrorClass::Arg, "array_of_types is NULL"));
        }
        let mut ts = Vec::with_capacity(n);
        for i in 0..n {
            let h = *types.add(i);
            ts.push(type_any(g, h).map_err(|e| err(ErrorClass::Type, format!("array_of_types[{i}]: {}", e.msg)))?);
        }
        *newtype = register(g, Datatype::create_struct(&bls, &ds, &ts, large)?);
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn subarray_impl<S: CInt>(
    func: &str,
    ndims: c_int,
    sizes: *const S,
    subsizes: *const S,
    starts: *const S,
    order: c_int,
    old: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
) -> c_int {
    api(func, None, |g| {
        if ndims <= 0 {
            return Err(err(ErrorClass::Dims, format!("ndims {ndims} must be positive")));
        }
        let n = ndims as usize;
        let o = type_any(g, old)?;
        check_out(newtype, "newtype")?;
        let conv = |v: Vec<i64>, what: &str| v.into_iter().map(|x| nonneg_arg(x, what)).collect::<Result<Vec<_>, _>>();
        let sz = conv(read(sizes, n, "array_of_sizes")?, "array_of_sizes entry")?;
        let sub = conv(read(subsizes, n, "array_of_subsizes")?, "array_of_subsizes entry")?;
        let st = conv(read(starts, n, "array_of_starts")?, "array_of_starts entry")?;
        let t = Datatype::subarray(&sz, &sub, &st, order_arg(order)?, &o, large)?;
        *newtype = register(g, t);
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn darray_impl<G: CInt>(
    func: &str,
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const G,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    old: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
) -> c_int {
    api(func, None, |g| {
        if ndims <= 0 {
            return Err(err(ErrorClass::Dims, format!("ndims {ndims} must be positive")));
        }
        if size <= 0 || rank < 0 || rank >= size {
            return Err(err(ErrorClass::Arg, format!("rank {rank} is not in a group of size {size}")));
        }
        let n = ndims as usize;
        let o = type_any(g, old)?;
        check_out(newtype, "newtype")?;
        let gs = read(gsizes, n, "array_of_gsizes")?;
        let ds = read(distribs, n, "array_of_distribs")?;
        let da = read(dargs, n, "array_of_dargs")?;
        let ps = read(psizes, n, "array_of_psizes")?;
        let mut dims = Vec::with_capacity(n);
        for i in 0..n {
            let gsize = usize::try_from(gs[i]).ok().filter(|v| *v > 0);
            let psize = usize::try_from(ps[i]).ok().filter(|v| *v > 0);
            let (Some(gsize), Some(psize)) = (gsize, psize) else {
                return Err(err(ErrorClass::Arg, format!("dimension {i}: gsize {} and psize {} must be positive", gs[i], ps[i])));
            };
            let distrib = match ds[i] as c_int {
                abi::MPI_DISTRIBUTE_BLOCK => Distrib::Block,
                abi::MPI_DISTRIBUTE_CYCLIC => Distrib::Cyclic,
                abi::MPI_DISTRIBUTE_NONE => Distrib::None,
                d => return Err(err(ErrorClass::Arg, format!("dimension {i}: unknown distribution {d}"))),
            };
            let darg = if da[i] as c_int == abi::MPI_DISTRIBUTE_DFLT_DARG {
                None
            } else if da[i] > 0 {
                Some(da[i] as usize)
            } else {
                return Err(err(ErrorClass::Arg, format!("dimension {i}: distribution argument {} must be positive", da[i])));
            };
            dims.push(DarrayDim { gsize, distrib, darg, psize });
        }
        let t = Datatype::darray(size as usize, rank as usize, &dims, order_arg(order)?, &o, large)?;
        *newtype = register(g, t);
        Ok(())
    })
}

unsafe fn resized_impl(func: &str, old: MPI_Datatype, lb: i64, extent: i64, newtype: *mut MPI_Datatype, large: bool) -> c_int {
    api(func, None, |g| {
        let o = type_any(g, old)?;
        check_out(newtype, "newtype")?;
        *newtype = register(g, Datatype::resized(&o, disp_arg(lb)?, disp_arg(extent)?, large)?);
        Ok(())
    })
}

// ---- envelopes -----------------------------------------------------------------------------

/// A type's constructor arguments laid out as get_contents returns them.
struct Contents {
    ints: Vec<i64>,
    addrs: Vec<i64>,
    counts: Vec<i64>,
}

fn contents(t: &Datatype) -> Contents {
    let large = t.envelope.large;
    let mut c = Contents { ints: Vec::new(), addrs: Vec::new(), counts: Vec::new() };
    // Count-like arguments are MPI_Count in the large-count constructors, int otherwise;
    // byte displacements are MPI_Count there and MPI_Aint otherwise.
    fn cnt(c: &mut Contents, large: bool, v: i64) {
        if large {
            c.counts.push(v)
        } else {
            c.ints.push(v)
        }
    }
    fn addr(c: &mut Contents, large: bool, v: i64) {
        if large {
            c.counts.push(v)
        } else {
            c.addrs.push(v)
        }
    }
    match &t.envelope.args {
        Args::Named | Args::Dup | Args::ValueIndex => {}
        Args::Contiguous { count } => cnt(&mut c, large, *count as i64),
        Args::Vector { count, blocklen, stride } => {
            cnt(&mut c, large, *count as i64);
            cnt(&mut c, large, *blocklen as i64);
            cnt(&mut c, large, *stride as i64);
        }
        Args::Hvector { count, blocklen, stride } => {
            cnt(&mut c, large, *count as i64);
            cnt(&mut c, large, *blocklen as i64);
            addr(&mut c, large, *stride as i64);
        }
        Args::Indexed { blocklens, disps } => {
            cnt(&mut c, large, blocklens.len() as i64);
            blocklens.iter().for_each(|b| cnt(&mut c, large, *b as i64));
            disps.iter().for_each(|d| cnt(&mut c, large, *d as i64));
        }
        Args::Hindexed { blocklens, disps } | Args::Struct { blocklens, disps } => {
            cnt(&mut c, large, blocklens.len() as i64);
            blocklens.iter().for_each(|b| cnt(&mut c, large, *b as i64));
            disps.iter().for_each(|d| addr(&mut c, large, *d as i64));
        }
        Args::IndexedBlock { blocklen, disps } => {
            cnt(&mut c, large, disps.len() as i64);
            cnt(&mut c, large, *blocklen as i64);
            disps.iter().for_each(|d| cnt(&mut c, large, *d as i64));
        }
        Args::HindexedBlock { blocklen, disps } => {
            cnt(&mut c, large, disps.len() as i64);
            cnt(&mut c, large, *blocklen as i64);
            disps.iter().for_each(|d| addr(&mut c, large, *d as i64));
        }
        Args::Subarray { sizes, subsizes, starts, order } => {
            c.ints.push(sizes.len() as i64);
            for v in sizes.iter().chain(subsizes).chain(starts) {
                cnt(&mut c, large, *v as i64);
            }
            c.ints.push(order_code(*order));
        }
        Args::Darray { size, rank, dims, order } => {
            c.ints.extend([*size as i64, *rank as i64, dims.len() as i64]);
            dims.iter().for_each(|d| cnt(&mut c, large, d.gsize as i64));
            c.ints.extend(dims.iter().map(|d| match d.distrib {
                Distrib::Block => abi::MPI_DISTRIBUTE_BLOCK as i64,
                Distrib::Cyclic => abi::MPI_DISTRIBUTE_CYCLIC as i64,
                Distrib::None => abi::MPI_DISTRIBUTE_NONE as i64,
            }));
            c.ints.extend(dims.iter().map(|d| d.darg.map_or(abi::MPI_DISTRIBUTE_DFLT_DARG as i64, |a| a as i64)));
            c.ints.extend(dims.iter().map(|d| d.psize as i64));
            c.ints.push(order_code(*order));
        }
        Args::Resized { lb, extent } => {
            addr(&mut c, large, *lb as i64);
            addr(&mut c, large, *extent as i64);
        }
        Args::F90Real { p, r } | Args::F90Complex { p, r } => c.ints.extend([*p as i64, *r as i64]),
        Args::F90Integer { r } => c.ints.push(*r as i64),
    }
    c
}

fn combiner_code(c: Combiner) -> c_int {
    match c {
        Combiner::Named => abi::MPI_COMBINER_NAMED,
        Combiner::Dup => abi::MPI_COMBINER_DUP,
        Combiner::Contiguous => abi::MPI_COMBINER_CONTIGUOUS,
        Combiner::Vector => abi::MPI_COMBINER_VECTOR,
        Combiner::Hvector => abi::MPI_COMBINER_HVECTOR,
        Combiner::Indexed => abi::MPI_COMBINER_INDEXED,
        Combiner::Hindexed => abi::MPI_COMBINER_HINDEXED,
        Combiner::IndexedBlock => abi::MPI_COMBINER_INDEXED_BLOCK,
        Combiner::HindexedBlock => abi::MPI_COMBINER_HINDEXED_BLOCK,
        Combiner::Struct => abi::MPI_COMBINER_STRUCT,
        Combiner::Subarray => abi::MPI_COMBINER_SUBARRAY,
        Combiner::Darray => abi::MPI_COMBINER_DARRAY,
        Combiner::F90Real => abi::MPI_COMBINER_F90_REAL,
        Combiner::F90Complex => abi::MPI_COMBINER_F90_COMPLEX,
        Combiner::F90Integer => abi::MPI_COMBINER_F90_INTEGER,
        Combiner::Resized => abi::MPI_COMBINER_RESIZED,
        Combiner::ValueIndex => abi::MPI_COMBINER_VALUE_INDEX,
    }
}

/// (integers, addresses, large counts, datatypes, combiner) of `t`; `large_ok` is false for
/// the calls without large counts, which cannot describe a large-count constructor.
fn envelope_of(func: &str, t: &Datatype, large_ok: bool) -> Result<(Contents, usize, c_int), MpiError> {
    let c = contents(t);
    if !large_ok && !c.counts.is_empty() {
        return Err(err(
            ErrorClass::Type,
            format!("the datatype was made by a large-count constructor; use {func}_c to query it"),
        ));
    }
    Ok((c, t.envelope.types.len(), combiner_code(t.combiner())))
}

#[allow(clippy::too_many_arguments)]
unsafe fn contents_impl(
    func: &str,
    datatype: MPI_Datatype,
    max: [i64; 4],
    ints: *mut c_int,
    addrs: *mut MPI_Aint,
    counts: *mut MPI_Count,
    types: *mut MPI_Datatype,
    large_ok: bool,
) -> c_int {
    api(func, None, |g| {
        let t = type_any(g, datatype)?;
        if t.combiner() == Combiner::Named {
            return Err(err(ErrorClass::Type, format!("{} is a predefined datatype: it has no contents", describe(&t))));
        }
        let base = func.trim_end_matches("_c").replace("get_contents", "get_envelope");
        let (c, nt, _) = envelope_of(&base, &t, large_ok)?;
        let need = [c.ints.len(), c.addrs.len(), c.counts.len(), nt];
        let names = ["max_integers", "max_addresses", "max_large_counts", "max_datatypes"];
        for k in 0..4 {
            if (max[k].max(0) as usize) < need[k] {
                return Err(err(ErrorClass::Arg, format!("{} is {} but the datatype has {}", names[k], max[k], need[k])));
            }
        }
        let outs: [(bool, &str); 4] =
            [(ints.is_null(), "array_of_integers"), (addrs.is_null(), "array_of_addresses"), (counts.is_null(), "array_of_large_counts"), (types.is_null(), "array_of_datatypes")];
        for k in 0..4 {
            if need[k] > 0 && outs[k].0 {
                return Err(err(ErrorClass::Arg, format!("{} is NULL", outs[k].1)));
            }
        }
        for (i, v) in c.ints.iter().enumerate() {
            *ints.add(i) = *v as c_int;
        }
        for (i, v) in c.addrs.iter().enumerate() {
            *addrs.add(i) = *v as MPI_Aint;
        }
        for (i, v) in c.counts.iter().enumerate() {
            *counts.add(i) = *v;
        }
        for (i, child) in t.envelope.types.iter().enumerate() {
            *types.add(i) = child_handle(g, child);
        }
        Ok(())
    })
}

// ---- pack / unpack -------------------------------------------------------------------------

/// Validate a pack position against a buffer of `size` bytes needing `need` more.
unsafe fn position(pos: *const i64, size: i64, need: usize, what: &str) -> Result<usize, MpiError> {
    let p = *pos;
    if p < 0 || size < 0 || p > size {
        return Err(err(ErrorClass::Arg, format!("position {p} is outside the {what} buffer of {size} bytes")));
    }
    if ((size - p) as u64) < need as u64 {
        return Err(err(
            ErrorClass::Truncate,
            format!("{what} buffer too small: {need} bytes needed at position {p}, {} left of {size}", size - p),
        ));
    }
    Ok(p as usize)
}

#[allow(clippy::too_many_arguments)]
unsafe fn pack_impl(
    func: &str,
    inbuf: *const c_void,
    incount: i64,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    pos: &mut i64,
    comm: MPI_Comm,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        comm_handle(g, comm as usize)?;
        let n = count_arg(incount, "incount")?;
        let t = type_committed(g, datatype)?;
        let need = t.size.checked_mul(n).ok_or_else(|| err(ErrorClass::Count, "incount * size overflows"))?;
        let p = position(pos, outsize, need, "output")?;
        if need > 0 {
            if outbuf.is_null() {
                return Err(err(ErrorClass::Arg, "outbuf is NULL"));
            }
            let dst = std::slice::from_raw_parts_mut((outbuf as *mut u8).add(p), need);
            t.pack(inbuf as *const u8, n, dst);
        }
        *pos = (p + need) as i64;
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn unpack_impl(
    func: &str,
    inbuf: *const c_void,
    insize: i64,
    pos: &mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        comm_handle(g, comm as usize)?;
        let n = count_arg(outcount, "outcount")?;
        let t = type_committed(g, datatype)?;
        let need = t.size.checked_mul(n).ok_or_else(|| err(ErrorClass::Count, "outcount * size overflows"))?;
        let p = position(pos, insize, need, "input")?;
        if need > 0 {
            if inbuf.is_null() {
                return Err(err(ErrorClass::Arg, "inbuf is NULL"));
            }
            let src = std::slice::from_raw_parts((inbuf as *const u8).add(p), need);
            t.unpack(src, outbuf as *mut u8, n);
        }
        *pos = (p + need) as i64;
        Ok(())
    })
}

unsafe fn pack_size_impl(func: &str, incount: i64, datatype: MPI_Datatype, comm: MPI_Comm, out: &mut i64) -> c_int {
    api(func, Some(comm as usize), |g| {
        comm_handle(g, comm as usize)?;
        let n = count_arg(incount, "incount")?;
        let t = type_any(g, datatype)?;
        let s = t.size.checked_mul(n).filter(|s| *s <= i64::MAX as usize);
        *out = s.ok_or_else(|| err(ErrorClass::Count, "incount * size overflows"))? as i64;
        Ok(())
    })
}

unsafe fn datarep(d: *const c_char) -> Result<(), MpiError> {
    if d.is_null() {
        return Err(err(ErrorClass::Arg, "datarep is NULL"));
    }
    let s = CStr::from_ptr(d).to_string_lossy();
    if s != "external32" {
        return Err(err(ErrorClass::Arg, format!("data representation {s:?} is not supported (only \"external32\")")));
    }
    Ok(())
}

unsafe fn pack_external_impl(
    func: &str,
    rep: *const c_char,
    inbuf: *const c_void,
    incount: i64,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    pos: &mut i64,
) -> c_int {
    api(func, None, |g| {
        datarep(rep)?;
        let n = count_arg(incount, "incount")?;
        let t = type_committed(g, datatype)?;
        let need = t.ext32_packed_size(n).ok_or_else(|| err(ErrorClass::Count, "incount * size overflows"))?;
        let p = position(pos, outsize, need, "output")?;
        if need > 0 {
            if outbuf.is_null() {
                return Err(err(ErrorClass::Arg, "outbuf is NULL"));
            }
            let dst = std::slice::from_raw_parts_mut((outbuf as *mut u8).add(p), need);
            t.pack_external(inbuf as *const u8, n, dst).ok_or_else(|| err(ErrorClass::Intern, "external32 size mismatch"))?;
        }
        *pos = (p + need) as i64;
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn unpack_external_impl(
    func: &str,
    rep: *const c_char,
    inbuf: *const c_void,
    insize: i64,
    pos: &mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: MPI_Datatype,
) -> c_int {
    api(func, None, |g| {
        datarep(rep)?;
        let n = count_arg(outcount, "outcount")?;
        let t = type_committed(g, datatype)?;
        let need = t.ext32_packed_size(n).ok_or_else(|| err(ErrorClass::Count, "outcount * size overflows"))?;
        let p = position(pos, insize, need, "input")?;
        if need > 0 {
            if inbuf.is_null() {
                return Err(err(ErrorClass::Arg, "inbuf is NULL"));
            }
            let src = std::slice::from_raw_parts((inbuf as *const u8).add(p), need);
            t.unpack_external(src, outbuf as *mut u8, n).ok_or_else(|| err(ErrorClass::Intern, "external32 size mismatch"))?;
        }
        *pos = (p + need) as i64;
        Ok(())
    })
}

unsafe fn pack_external_size_impl(func: &str, rep: *const c_char, incount: i64, datatype: MPI_Datatype, out: &mut i64) -> c_int {
    api(func, None, |g| {
        datarep(rep)?;
        let n = count_arg(incount, "incount")?;
        let t = type_any(g, datatype)?;
        let s = t.ext32_packed_size(n).filter(|s| *s <= i64::MAX as usize);
        *out = s.ok_or_else(|| err(ErrorClass::Count, "incount * size overflows"))? as i64;
        Ok(())
    })
}

// ---- other helpers ---------------------------------------------------------------------------

/// The predefined datatypes, readable without the library lock: a user reduction function
/// runs while a collective holds the lock, and may ask for its datatype's size or extent
/// (mpi4py's do).
fn predefined_unlocked(t: MPI_Datatype) -> Option<TypeRef> {
    static TABLE: std::sync::OnceLock<Vec<Option<TypeRef>>> = std::sync::OnceLock::new();
    let t = t as usize;
    if !abi::is_predefined_handle(t) {
        return None;
    }
    TABLE.get_or_init(predefined_table).get(t).and_then(|x| x.clone())
}

unsafe fn size_impl(func: &str, t: MPI_Datatype, out: &mut i64) -> c_int {
    if let Some(d) = predefined_unlocked(t) {
        if crate::global::PHASE.load(std::sync::atomic::Ordering::Acquire) == crate::global::PHASE_LIVE {
            *out = d.size as i64;
            return abi::MPI_SUCCESS;
        }
    }
    api(func, None, |g| {
        *out = type_any(g, t)?.size as i64;
        Ok(())
    })
}

/// MPI_ERR_ARG for a NULL output argument of a call without a communicator (raised on the
/// handler of such errors, MPI_COMM_WORLD's), before anything is looked up.
fn null_arg(func: &str, what: &str) -> c_int {
    api(func, None, |_| Err(err(ErrorClass::Arg, format!("{what} is NULL"))))
}

unsafe fn extent_impl(func: &str, t: MPI_Datatype, truth: bool, lb: &mut i64, extent: &mut i64) -> c_int {
    if let Some(d) = predefined_unlocked(t) {
        if crate::global::PHASE.load(std::sync::atomic::Ordering::Acquire) == crate::global::PHASE_LIVE {
            (*lb, *extent) = if truth { (d.true_lb as i64, d.true_extent as i64) } else { (d.lb as i64, d.extent as i64) };
            return abi::MPI_SUCCESS;
        }
    }
    api(func, None, |g| {
        let d = type_any(g, t)?;
        if truth {
            *lb = d.true_lb as i64;
            *extent = d.true_extent as i64;
        } else {
            *lb = d.lb as i64;
            *extent = d.extent as i64;
        }
        Ok(())
    })
}

unsafe fn set_elements_impl(func: &str, status: *mut MPI_Status, datatype: MPI_Datatype, count: i64) -> c_int {
    api(func, None, |g| {
        if status.is_null() {
            return Err(err(ErrorClass::Arg, "status is NULL (MPI_STATUS_IGNORE cannot be set)"));
        }
        let n = count_arg(count, "count")?;
        let t = type_any(g, datatype)?;
        let bytes = t.bytes_for_elements(n).filter(|b| *b <= i64::MAX as usize).ok_or_else(|| {
            err(ErrorClass::Count, format!("{n} basic elements of {} cannot be represented", describe(&t)))
        })?;
        set_status_count(&mut *status, bytes as i64);
        Ok(())
    })
}

/// (kind: 0 integer, 1 real, 2 complex; precision; range) as given to create_f90_*.
pub type F90Key = (u8, i32, i32);

/// Smallest predefined type of `kind` (0 integer, 1 real, 2 complex) with decimal precision
/// at least `p` and exponent range at least `r` (MPI_UNDEFINED: no requirement).
fn f90_pick(kind: u8, p: i32, r: i32) -> Option<usize> {
    let need = |v: i32| if v == abi::MPI_UNDEFINED { 0 } else { v };
    let (p, r) = (need(p), need(r));
    // (precision, range, integer/real/complex handle)
    let table: &[(i32, i32, usize)] = match kind {
        0 => &[
            (0, 2, abi::MPI_INTEGER1),
            (0, 4, abi::MPI_INTEGER2),
            (0, 9, abi::MPI_INTEGER4),
            (0, 18, abi::MPI_INTEGER8),
            (0, 38, abi::MPI_INTEGER16),
        ],
        1 => &[(6, 37, abi::MPI_REAL4), (15, 307, abi::MPI_REAL8), (33, 4931, abi::MPI_REAL16)],
        _ => &[(6, 37, abi::MPI_COMPLEX8), (15, 307, abi::MPI_COMPLEX16), (33, 4931, abi::MPI_COMPLEX32)],
    };
    table.iter().find(|(tp, tr, _)| *tp >= p && *tr >= r).map(|e| e.2)
}

unsafe fn f90_impl(func: &str, kind: u8, p: c_int, r: c_int, newtype: *mut MPI_Datatype) -> c_int {
    api(func, None, |g| {
        check_out(newtype, "newtype")?;
        if (p < 0 && p != abi::MPI_UNDEFINED) || (r < 0 && r != abi::MPI_UNDEFINED) || (kind > 0 && p == abi::MPI_UNDEFINED && r == abi::MPI_UNDEFINED) {
            return Err(err(ErrorClass::Arg, format!("invalid precision {p} / range {r}")));
        }
        if let Some((_, h)) = g.tables.f90_types.iter().find(|(k, _)| *k == (kind, p, r)) {
            *newtype = *h as MPI_Datatype;
            return Ok(());
        }
        let base = f90_pick(kind, p, r).ok_or_else(|| {
            err(ErrorClass::Arg, format!("no Fortran kind has precision {p} and range {r} (MPI_UNDEFINED = no requirement)"))
        })?;
        let mut t = Datatype::clone(&*type_any(g, base as MPI_Datatype)?);
        t.envelope.args = match kind {
            0 => Args::F90Integer { r },
            1 => Args::F90Real { p, r },
            _ => Args::F90Complex { p, r },
        };
        let h = register_permanent(g, t);
        g.tables.f90_types.push(((kind, p, r), h as usize));
        *newtype = h;
        Ok(())
    })
}

// ---- entry points --------------------------------------------------------------------------

mpi_api! {
    fn Type_contiguous(count: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        contiguous_impl("MPI_Type_contiguous", count as i64, oldtype, newtype, false)
    }
    fn Type_contiguous_c(count: MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        contiguous_impl("MPI_Type_contiguous_c", count, oldtype, newtype, true)
    }
    fn Type_vector(count: c_int, blocklength: c_int, stride: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        vector_impl("MPI_Type_vector", count as i64, blocklength as i64, stride as i64, oldtype, newtype, false, false)
    }
    fn Type_vector_c(count: MPI_Count, blocklength: MPI_Count, stride: MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        vector_impl("MPI_Type_vector_c", count, blocklength, stride, oldtype, newtype, true, false)
    }
    fn Type_create_hvector(count: c_int, blocklength: c_int, stride: MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        vector_impl("MPI_Type_create_hvector", count as i64, blocklength as i64, stride as i64, oldtype, newtype, false, true)
    }
    fn Type_create_hvector_c(count: MPI_Count, blocklength: MPI_Count, stride: MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        vector_impl("MPI_Type_create_hvector_c", count, blocklength, stride, oldtype, newtype, true, true)
    }
    fn Type_indexed(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl("MPI_Type_indexed", count as i64, array_of_blocklengths, None, array_of_displacements, oldtype, newtype, false, false)
    }
    fn Type_indexed_c(count: MPI_Count, array_of_blocklengths: *const MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl("MPI_Type_indexed_c", count, array_of_blocklengths, None, array_of_displacements, oldtype, newtype, true, false)
    }
    fn Type_create_hindexed(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl("MPI_Type_create_hindexed", count as i64, array_of_blocklengths, None, array_of_displacements, oldtype, newtype, false, true)
    }
    fn Type_create_hindexed_c(count: MPI_Count, array_of_blocklengths: *const MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl("MPI_Type_create_hindexed_c", count, array_of_blocklengths, None, array_of_displacements, oldtype, newtype, true, true)
    }
    fn Type_create_indexed_block(count: c_int, blocklength: c_int, array_of_displacements: *const c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl::<c_int, c_int>("MPI_Type_create_indexed_block", count as i64, std::ptr::null(), Some(blocklength as i64), array_of_displacements, oldtype, newtype, false, false)
    }
    fn Type_create_indexed_block_c(count: MPI_Count, blocklength: MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl::<MPI_Count, MPI_Count>("MPI_Type_create_indexed_block_c", count, std::ptr::null(), Some(blocklength), array_of_displacements, oldtype, newtype, true, false)
    }
    fn Type_create_hindexed_block(count: c_int, blocklength: c_int, array_of_displacements: *const MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl::<c_int, MPI_Aint>("MPI_Type_create_hindexed_block", count as i64, std::ptr::null(), Some(blocklength as i64), array_of_displacements, oldtype, newtype, false, true)
    }
    fn Type_create_hindexed_block_c(count: MPI_Count, blocklength: MPI_Count, array_of_displacements: *const MPI_Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl::<MPI_Count, MPI_Count>("MPI_Type_create_hindexed_block_c", count, std::ptr::null(), Some(blocklength), array_of_displacements, oldtype, newtype, true, true)
    }
    fn Type_create_struct(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const MPI_Aint, array_of_types: *const MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        struct_impl("MPI_Type_create_struct", count as i64, array_of_blocklengths, array_of_displacements, array_of_types, newtype, false)
    }
    fn Type_create_struct_c(count: MPI_Count, array_of_blocklengths: *const MPI_Count, array_of_displacements: *const MPI_Count, array_of_types: *const MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        struct_impl("MPI_Type_create_struct_c", count, array_of_blocklengths, array_of_displacements, array_of_types, newtype, true)
    }
    fn Type_create_subarray(ndims: c_int, array_of_sizes: *const c_int, array_of_subsizes: *const c_int, array_of_starts: *const c_int, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        subarray_impl("MPI_Type_create_subarray", ndims, array_of_sizes, array_of_subsizes, array_of_starts, order, oldtype, newtype, false)
    }
    fn Type_create_subarray_c(ndims: c_int, array_of_sizes: *const MPI_Count, array_of_subsizes: *const MPI_Count, array_of_starts: *const MPI_Count, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        subarray_impl("MPI_Type_create_subarray_c", ndims, array_of_sizes, array_of_subsizes, array_of_starts, order, oldtype, newtype, true)
    }
    fn Type_create_darray(size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const c_int, array_of_distribs: *const c_int, array_of_dargs: *const c_int, array_of_psizes: *const c_int, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        darray_impl("MPI_Type_create_darray", size, rank, ndims, array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes, order, oldtype, newtype, false)
    }
    fn Type_create_darray_c(size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const MPI_Count, array_of_distribs: *const c_int, array_of_dargs: *const c_int, array_of_psizes: *const c_int, order: c_int, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        darray_impl("MPI_Type_create_darray_c", size, rank, ndims, array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes, order, oldtype, newtype, true)
    }
    fn Type_create_resized(oldtype: MPI_Datatype, lb: MPI_Aint, extent: MPI_Aint, newtype: *mut MPI_Datatype) -> c_int {
        resized_impl("MPI_Type_create_resized", oldtype, lb as i64, extent as i64, newtype, false)
    }
    fn Type_create_resized_c(oldtype: MPI_Datatype, lb: MPI_Count, extent: MPI_Count, newtype: *mut MPI_Datatype) -> c_int {
        resized_impl("MPI_Type_create_resized_c", oldtype, lb, extent, newtype, true)
    }
    fn Type_dup(oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        api_unlocked("MPI_Type_dup", None, || {
            let n = locked(|g| {
                let o = type_any(g, oldtype)?;
                check_out(newtype, "newtype")?;
                Ok(register(g, Datatype::dup(&o)))
            })?;
            // Copy callbacks are application code: they run without the lock.
            if let Err(e) = attr::copy_obj_attrs(oldtype as usize, Obj::Type(oldtype as usize), Obj::Type(n as usize), n as usize) {
                locked(|g| {
                    g.types.remove(Handle(n as u64));
                    Ok(())
                })?;
                return Err(e);
            }
            *newtype = n;
            Ok(())
        })
    }

    fn Type_commit(datatype: *mut MPI_Datatype) -> c_int {
        api("MPI_Type_commit", None, |g| {
            if datatype.is_null() {
                return Err(err(ErrorClass::Arg, "datatype pointer is NULL"));
            }
            // Committing twice is allowed; copy-on-write only when something changes.
            if !type_any(g, *datatype)?.committed {
                type_mut(g, *datatype)?.committed = true;
            }
            Ok(())
        })
    }
    fn Type_free(datatype: *mut MPI_Datatype) -> c_int {
        api_unlocked("MPI_Type_free", None, || {
            let t = locked(|g| {
                if datatype.is_null() {
                    return Err(err(ErrorClass::Arg, "datatype pointer is NULL"));
                }
                let t = type_any(g, *datatype)?;
                if t.predefined {
                    return Err(err(ErrorClass::Type, format!("{} is a predefined datatype and cannot be freed", describe(&t))));
                }
                Ok(*datatype as usize)
            })?;
            // Delete callbacks run without the lock; the handle may be reused once removed.
            attr::delete_obj_attrs(t, Obj::Type(t))?;
            locked(|g| {
                // Requests and derived types that use it hold their own reference.
                g.types.remove(Handle(t as u64));
                Ok(())
            })?;
            *datatype = abi::MPI_DATATYPE_NULL as MPI_Datatype;
            Ok(())
        })
    }

    fn Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
        if size.is_null() {
            return null_arg("MPI_Type_size", "size");
        }
        let mut s = 0;
        let rc = size_impl("MPI_Type_size", datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = if s > i32::MAX as i64 { abi::MPI_UNDEFINED } else { s as c_int };
        }
        rc
    }
    fn Type_size_c(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
        if size.is_null() {
            return null_arg("MPI_Type_size_c", "size");
        }
        let mut s = 0;
        let rc = size_impl("MPI_Type_size_c", datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = s;
        }
        rc
    }
    fn Type_size_x(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
        if size.is_null() {
            return null_arg("MPI_Type_size_x", "size");
        }
        let mut s = 0;
        let rc = size_impl("MPI_Type_size_x", datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = s;
        }
        rc
    }
    fn Type_get_extent(datatype: MPI_Datatype, lb: *mut MPI_Aint, extent: *mut MPI_Aint) -> c_int {
        if lb.is_null() || extent.is_null() {
            return null_arg("MPI_Type_get_extent", "lb or extent");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_extent", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l as MPI_Aint;
            *extent = e as MPI_Aint;
        }
        rc
    }
    fn Type_get_extent_c(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        if lb.is_null() || extent.is_null() {
            return null_arg("MPI_Type_get_extent_c", "lb or extent");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_extent_c", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }
    fn Type_get_extent_x(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        if lb.is_null() || extent.is_null() {
            return null_arg("MPI_Type_get_extent_x", "lb or extent");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_extent_x", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }
    fn Type_get_true_extent(datatype: MPI_Datatype, lb: *mut MPI_Aint, extent: *mut MPI_Aint) -> c_int {
        if lb.is_null() || extent.is_null() {
            return null_arg("MPI_Type_get_true_extent", "lb or extent");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_true_extent", datatype, true, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l as MPI_Aint;
            *extent = e as MPI_Aint;
        }
        rc
    }
    fn Type_get_true_extent_c(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        if lb.is_null() || extent.is_null() {
            return null_arg("MPI_Type_get_true_extent_c", "lb or extent");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_true_extent_c", datatype, true, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }
    fn Type_get_true_extent_x(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        if lb.is_null() || extent.is_null() {
            return null_arg("MPI_Type_get_true_extent_x", "lb or extent");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_true_extent_x", datatype, true, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }

    fn Type_get_envelope(datatype: MPI_Datatype, num_integers: *mut c_int, num_addresses: *mut c_int, num_datatypes: *mut c_int, combiner: *mut c_int) -> c_int {
        api("MPI_Type_get_envelope", None, |g| {
            let t = type_any(g, datatype)?;
            if num_integers.is_null() || num_addresses.is_null() || num_datatypes.is_null() || combiner.is_null() {
                return Err(err(ErrorClass::Arg, "an output argument is NULL"));
            }
            let (c, nt, comb) = envelope_of("MPI_Type_get_envelope", &t, false)?;
            *num_integers = c.ints.len() as c_int;
            *num_addresses = c.addrs.len() as c_int;
            *num_datatypes = nt as c_int;
            *combiner = comb;
            Ok(())
        })
    }
    fn Type_get_envelope_c(datatype: MPI_Datatype, num_integers: *mut MPI_Count, num_addresses: *mut MPI_Count, num_large_counts: *mut MPI_Count, num_datatypes: *mut MPI_Count, combiner: *mut c_int) -> c_int {
        api("MPI_Type_get_envelope_c", None, |g| {
            let t = type_any(g, datatype)?;
            if num_integers.is_null() || num_addresses.is_null() || num_large_counts.is_null() || num_datatypes.is_null() || combiner.is_null() {
                return Err(err(ErrorClass::Arg, "an output argument is NULL"));
            }
            let (c, nt, comb) = envelope_of("MPI_Type_get_envelope", &t, true)?;
            *num_integers = c.ints.len() as MPI_Count;
            *num_addresses = c.addrs.len() as MPI_Count;
            *num_large_counts = c.counts.len() as MPI_Count;
            *num_datatypes = nt as MPI_Count;
            *combiner = comb;
            Ok(())
        })
    }
    fn Type_get_contents(datatype: MPI_Datatype, max_integers: c_int, max_addresses: c_int, max_datatypes: c_int, array_of_integers: *mut c_int, array_of_addresses: *mut MPI_Aint, array_of_datatypes: *mut MPI_Datatype) -> c_int {
        contents_impl("MPI_Type_get_contents", datatype, [max_integers as i64, max_addresses as i64, 0, max_datatypes as i64],
            array_of_integers, array_of_addresses, std::ptr::null_mut(), array_of_datatypes, false)
    }
    fn Type_get_contents_c(datatype: MPI_Datatype, max_integers: MPI_Count, max_addresses: MPI_Count, max_large_counts: MPI_Count, max_datatypes: MPI_Count, array_of_integers: *mut c_int, array_of_addresses: *mut MPI_Aint, array_of_large_counts: *mut MPI_Count, array_of_datatypes: *mut MPI_Datatype) -> c_int {
        contents_impl("MPI_Type_get_contents_c", datatype, [max_integers, max_addresses, max_large_counts, max_datatypes],
            array_of_integers, array_of_addresses, array_of_large_counts, array_of_datatypes, true)
    }

    fn Type_set_name(datatype: MPI_Datatype, type_name: *const c_char) -> c_int {
        api("MPI_Type_set_name", None, |g| {
            if type_name.is_null() {
                return Err(err(ErrorClass::Arg, "type_name is NULL"));
            }
            let mut name = CStr::from_ptr(type_name).to_string_lossy().into_owned();
            let cap = abi::MPI_MAX_OBJECT_NAME as usize - 1;
            if name.len() > cap {
                let mut cut = cap;
                while !name.is_char_boundary(cut) {
                    cut -= 1;
                }
                name.truncate(cut);
            }
            type_mut(g, datatype)?.name = name;
            Ok(())
        })
    }
    fn Type_get_name(datatype: MPI_Datatype, type_name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api("MPI_Type_get_name", None, |g| {
            if type_name.is_null() || resultlen.is_null() {
                return Err(err(ErrorClass::Arg, "name or resultlen is NULL"));
            }
            // MPI 4.1: the null handle's name is its constant's name.
            if datatype as usize == abi::MPI_DATATYPE_NULL {
                *resultlen = write_cstr(type_name, "MPI_DATATYPE_NULL", abi::MPI_MAX_OBJECT_NAME as usize);
                return Ok(());
            }
            let d = type_any(g, datatype)?;
            *resultlen = write_cstr(type_name, &d.name, abi::MPI_MAX_OBJECT_NAME as usize);
            Ok(())
        })
    }

    fn Pack(inbuf: *const c_void, incount: c_int, datatype: MPI_Datatype, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, comm: MPI_Comm) -> c_int {
        if position.is_null() {
            return api("MPI_Pack", Some(comm as usize), |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        let mut p = *position as i64;
        let rc = pack_impl("MPI_Pack", inbuf, incount as i64, datatype, outbuf, outsize as i64, &mut p, comm);
        if rc == abi::MPI_SUCCESS {
            *position = p as c_int;
        }
        rc
    }
    fn Pack_c(inbuf: *const c_void, incount: MPI_Count, datatype: MPI_Datatype, outbuf: *mut c_void, outsize: MPI_Count, position: *mut MPI_Count, comm: MPI_Comm) -> c_int {
        if position.is_null() {
            return api("MPI_Pack_c", Some(comm as usize), |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        pack_impl("MPI_Pack_c", inbuf, incount, datatype, outbuf, outsize, &mut *position, comm)
    }
    fn Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, outcount: c_int, datatype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        if position.is_null() {
            return api("MPI_Unpack", Some(comm as usize), |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        let mut p = *position as i64;
        let rc = unpack_impl("MPI_Unpack", inbuf, insize as i64, &mut p, outbuf, outcount as i64, datatype, comm);
        if rc == abi::MPI_SUCCESS {
            *position = p as c_int;
        }
        rc
    }
    fn Unpack_c(inbuf: *const c_void, insize: MPI_Count, position: *mut MPI_Count, outbuf: *mut c_void, outcount: MPI_Count, datatype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        if position.is_null() {
            return api("MPI_Unpack_c", Some(comm as usize), |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        unpack_impl("MPI_Unpack_c", inbuf, insize, &mut *position, outbuf, outcount, datatype, comm)
    }
    fn Pack_size(incount: c_int, datatype: MPI_Datatype, comm: MPI_Comm, size: *mut c_int) -> c_int {
        let mut s = 0;
        let rc = pack_size_impl("MPI_Pack_size", incount as i64, datatype, comm, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = if s > i32::MAX as i64 { abi::MPI_UNDEFINED } else { s as c_int };
        }
        rc
    }
    fn Pack_size_c(incount: MPI_Count, datatype: MPI_Datatype, comm: MPI_Comm, size: *mut MPI_Count) -> c_int {
        let mut s = 0;
        let rc = pack_size_impl("MPI_Pack_size_c", incount, datatype, comm, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = s;
        }
        rc
    }
    fn Pack_external(datarep: *const c_char, inbuf: *const c_void, incount: c_int, datatype: MPI_Datatype, outbuf: *mut c_void, outsize: MPI_Aint, position: *mut MPI_Aint) -> c_int {
        if position.is_null() {
            return api("MPI_Pack_external", None, |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        let mut p = *position as i64;
        let rc = pack_external_impl("MPI_Pack_external", datarep, inbuf, incount as i64, datatype, outbuf, outsize as i64, &mut p);
        if rc == abi::MPI_SUCCESS {
            *position = p as MPI_Aint;
        }
        rc
    }
    fn Pack_external_c(datarep: *const c_char, inbuf: *const c_void, incount: MPI_Count, datatype: MPI_Datatype, outbuf: *mut c_void, outsize: MPI_Count, position: *mut MPI_Count) -> c_int {
        if position.is_null() {
            return api("MPI_Pack_external_c", None, |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        pack_external_impl("MPI_Pack_external_c", datarep, inbuf, incount, datatype, outbuf, outsize, &mut *position)
    }
    fn Unpack_external(datarep: *const c_char, inbuf: *const c_void, insize: MPI_Aint, position: *mut MPI_Aint, outbuf: *mut c_void, outcount: c_int, datatype: MPI_Datatype) -> c_int {
        if position.is_null() {
            return api("MPI_Unpack_external", None, |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        let mut p = *position as i64;
        let rc = unpack_external_impl("MPI_Unpack_external", datarep, inbuf, insize as i64, &mut p, outbuf, outcount as i64, datatype);
        if rc == abi::MPI_SUCCESS {
            *position = p as MPI_Aint;
        }
        rc
    }
    fn Unpack_external_c(datarep: *const c_char, inbuf: *const c_void, insize: MPI_Count, position: *mut MPI_Count, outbuf: *mut c_void, outcount: MPI_Count, datatype: MPI_Datatype) -> c_int {
        if position.is_null() {
            return api("MPI_Unpack_external_c", None, |_| Err(err(ErrorClass::Arg, "position is NULL")));
        }
        unpack_external_impl("MPI_Unpack_external_c", datarep, inbuf, insize, &mut *position, outbuf, outcount, datatype)
    }
    fn Pack_external_size(datarep: *const c_char, incount: c_int, datatype: MPI_Datatype, size: *mut MPI_Aint) -> c_int {
        let mut s = 0;
        let rc = pack_external_size_impl("MPI_Pack_external_size", datarep, incount as i64, datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = s as MPI_Aint;
        }
        rc
    }
    fn Pack_external_size_c(datarep: *const c_char, incount: MPI_Count, datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
        let mut s = 0;
        let rc = pack_external_size_impl("MPI_Pack_external_size_c", datarep, incount, datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = s;
        }
        rc
    }

    fn Status_set_elements(status: *mut MPI_Status, datatype: MPI_Datatype, count: c_int) -> c_int {
        set_elements_impl("MPI_Status_set_elements", status, datatype, count as i64)
    }
    fn Status_set_elements_c(status: *mut MPI_Status, datatype: MPI_Datatype, count: MPI_Count) -> c_int {
        set_elements_impl("MPI_Status_set_elements_c", status, datatype, count)
    }
    fn Status_set_elements_x(status: *mut MPI_Status, datatype: MPI_Datatype, count: MPI_Count) -> c_int {
        set_elements_impl("MPI_Status_set_elements_x", status, datatype, count)
    }

    fn Get_address(location: *const c_void, address: *mut MPI_Aint) -> c_int {
        if address.is_null() {
            return api("MPI_Get_address", None, |_| Err(err(ErrorClass::Arg, "address is NULL")));
        }
        *address = location as MPI_Aint;
        abi::MPI_SUCCESS
    }

    fn Type_match_size(typeclass: c_int, size: c_int, datatype: *mut MPI_Datatype) -> c_int {
        api("MPI_Type_match_size", None, |_| {
            check_out(datatype, "datatype")?;
            let found = match (typeclass, size) {
                (abi::MPI_TYPECLASS_INTEGER, 1) => abi::MPI_INTEGER1,
                (abi::MPI_TYPECLASS_INTEGER, 2) => abi::MPI_INTEGER2,
                (abi::MPI_TYPECLASS_INTEGER, 4) => abi::MPI_INTEGER4,
                (abi::MPI_TYPECLASS_INTEGER, 8) => abi::MPI_INTEGER8,
                (abi::MPI_TYPECLASS_INTEGER, 16) => abi::MPI_INTEGER16,
                (abi::MPI_TYPECLASS_REAL, 2) => abi::MPI_REAL2,
                (abi::MPI_TYPECLASS_REAL, 4) => abi::MPI_REAL4,
                (abi::MPI_TYPECLASS_REAL, 8) => abi::MPI_REAL8,
                (abi::MPI_TYPECLASS_REAL, 16) => abi::MPI_REAL16,
                (abi::MPI_TYPECLASS_COMPLEX, 4) => abi::MPI_COMPLEX4,
                (abi::MPI_TYPECLASS_COMPLEX, 8) => abi::MPI_COMPLEX8,
                (abi::MPI_TYPECLASS_COMPLEX, 16) => abi::MPI_COMPLEX16,
                (abi::MPI_TYPECLASS_COMPLEX, 32) => abi::MPI_COMPLEX32,
                (c, s) => return Err(err(ErrorClass::Arg, format!("no predefined type of class {c} has size {s}"))),
            };
            *datatype = found as MPI_Datatype;
            Ok(())
        })
    }
    fn Type_create_f90_integer(r: c_int, newtype: *mut MPI_Datatype) -> c_int {
        f90_impl("MPI_Type_create_f90_integer", 0, abi::MPI_UNDEFINED, r, newtype)
    }
    fn Type_create_f90_real(p: c_int, r: c_int, newtype: *mut MPI_Datatype) -> c_int {
        f90_impl("MPI_Type_create_f90_real", 1, p, r, newtype)
    }
    fn Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut MPI_Datatype) -> c_int {
        f90_impl("MPI_Type_create_f90_complex", 2, p, r, newtype)
    }

    fn Type_get_value_index(value_type: MPI_Datatype, index_type: MPI_Datatype, pair_type: *mut MPI_Datatype) -> c_int {
        api("MPI_Type_get_value_index", None, |g| {
            check_out(pair_type, "pair_type")?;
            let v = type_any(g, value_type)?;
            let i = type_any(g, index_type)?;
            let (Some(vh), Some(ih)) = (v.predefined_handle, i.predefined_handle) else {
                return Err(err(ErrorClass::Type, "value_type and index_type must be predefined datatypes"));
            };
            let named = match (vh, ih) {
                (abi::MPI_FLOAT, abi::MPI_INT) => Some(abi::MPI_FLOAT_INT),
                (abi::MPI_DOUBLE, abi::MPI_INT) => Some(abi::MPI_DOUBLE_INT),
                (abi::MPI_LONG, abi::MPI_INT) => Some(abi::MPI_LONG_INT),
                (abi::MPI_INT, abi::MPI_INT) => Some(abi::MPI_2INT),
                (abi::MPI_SHORT, abi::MPI_INT) => Some(abi::MPI_SHORT_INT),
                (abi::MPI_LONG_DOUBLE, abi::MPI_INT) => Some(abi::MPI_LONG_DOUBLE_INT),
                (abi::MPI_REAL, abi::MPI_REAL) => Some(abi::MPI_2REAL),
                (abi::MPI_DOUBLE_PRECISION, abi::MPI_DOUBLE_PRECISION) => Some(abi::MPI_2DOUBLE_PRECISION),
                (abi::MPI_INTEGER, abi::MPI_INTEGER) => Some(abi::MPI_2INTEGER),
                _ => None,
            };
            // MPI 4.1: only the predefined pair types; any other combination has none.
            *pair_type = named.unwrap_or(abi::MPI_DATATYPE_NULL) as MPI_Datatype;
            Ok(())
        })
    }
}

/// MPI_Aint_add: `base + disp` as an address.
#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: MPI_Aint, disp: MPI_Aint) -> MPI_Aint {
    base.wrapping_add(disp)
}
/// MPI_Aint_add: see PMPI_Aint_add.
#[no_mangle]
pub extern "C" fn MPI_Aint_add(base: MPI_Aint, disp: MPI_Aint) -> MPI_Aint {
    PMPI_Aint_add(base, disp)
}
/// MPI_Aint_diff: `addr1 - addr2` as a displacement.
#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(addr1: MPI_Aint, addr2: MPI_Aint) -> MPI_Aint {
    addr1.wrapping_sub(addr2)
}
/// MPI_Aint_diff: see PMPI_Aint_diff.
#[no_mangle]
pub extern "C" fn MPI_Aint_diff(addr1: MPI_Aint, addr2: MPI_Aint) -> MPI_Aint {
    PMPI_Aint_diff(addr1, addr2)
}

// ---- MPI-1 names removed in MPI-3 -----------------------------------------------------------
//
// Not in the MPI 5.0 header, but MPICH's test harness (dtpools) and older applications still
// call them; each is the MPI-2 replacement under its old name.

mpi_api! {
    fn Type_hvector(count: c_int, blocklength: c_int, stride: MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        vector_impl("MPI_Type_hvector", count as i64, blocklength as i64, stride as i64, oldtype, newtype, false, true)
    }
    fn Type_hindexed(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        indexed_impl("MPI_Type_hindexed", count as i64, array_of_blocklengths, None, array_of_displacements, oldtype, newtype, false, true)
    }
    fn Type_struct(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const MPI_Aint, array_of_types: *const MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
        struct_impl("MPI_Type_struct", count as i64, array_of_blocklengths, array_of_displacements, array_of_types, newtype, false)
    }
    fn Address(location: *const c_void, address: *mut MPI_Aint) -> c_int {
        PMPI_Get_address(location, address)
    }
    fn Type_extent(datatype: MPI_Datatype, extent: *mut MPI_Aint) -> c_int {
        if extent.is_null() {
            return null_arg("MPI_Type_extent", "extent");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_extent", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !extent.is_null() {
            *extent = e as MPI_Aint;
        }
        rc
    }
    fn Type_lb(datatype: MPI_Datatype, displacement: *mut MPI_Aint) -> c_int {
        if displacement.is_null() {
            return null_arg("MPI_Type_lb", "displacement");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_lb", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !displacement.is_null() {
            *displacement = l as MPI_Aint;
        }
        rc
    }
    fn Type_ub(datatype: MPI_Datatype, displacement: *mut MPI_Aint) -> c_int {
        if displacement.is_null() {
            return null_arg("MPI_Type_ub", "displacement");
        }
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_ub", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !displacement.is_null() {
            *displacement = (l + e) as MPI_Aint;
        }
        rc
    }
}

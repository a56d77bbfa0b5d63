//! Type constructors: contiguous, (h)vector, (h)indexed, (h)indexed_block, struct, subarray,
//! darray, resized, dup, value_index.
//!
//! Bounds follow MPI's type-map rules: the lower / upper bound is the lowest / highest
//! bound of the copies of the old types, except that bounds set explicitly by resized are
//! "sticky" and win over data; a struct without explicit bounds has its extent padded to the
//! largest alignment of its basic elements (like a C struct). Sizes and bounds are computed in
//! 128 bits and rejected when they do not fit the address space.

use std::sync::Arc;

use super::{Args, BasicKind, Datatype, Envelope, Layout, Shape, TypeRef};
use crate::error::{ErrorClass, MpiError, MpiResult};

/// Array storage order of subarray and darray.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Row-major: the last dimension varies fastest.
    C,
    /// Column-major: the first dimension varies fastest.
    Fortran,
}

/// Distribution of one darray dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distrib {
    Block,
    Cyclic,
    /// Not distributed: every process has the whole dimension.
    None,
}

/// One dimension of a darray.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DarrayDim {
    pub gsize: usize,
    pub distrib: Distrib,
    /// Distribution argument; None is MPI_DISTRIBUTE_DFLT_DARG.
    pub darg: Option<usize>,
    pub psize: usize,
}

fn too_big() -> MpiError {
    MpiError::new(ErrorClass::Arg, "datatype too large: its size or extent does not fit in the address space")
}

fn arg(msg: impl Into<String>) -> MpiError {
    MpiError::new(ErrorClass::Arg, msg)
}

fn fit(v: i128) -> MpiResult<isize> {
    isize::try_from(v).map_err(|_| too_big())
}

/// Running bounds and counts of a type under construction.
#[derive(Default)]
struct Acc {
    any: bool,
    any_true: bool,
    lb: i128,
    ub: i128,
    true_lb: i128,
    true_ub: i128,
    sticky_lb: Option<i128>,
    sticky_ub: Option<i128>,
    size: u128,
    basic_count: u128,
    ext32: u128,
    align: usize,
    /// None: no data seen; Some(None): mixed kinds.
    basic: Option<Option<(BasicKind, usize)>>,
}

impl Acc {
    /// `copies` copies of `child` whose origins lie between byte offsets `lo` and `hi`.
    fn add(&mut self, lo: i128, hi: i128, copies: u128, child: &Datatype) {
        // A child without data or explicit bounds has an empty type map: it adds nothing.
        let data = child.size > 0;
        if copies == 0 || !(data || child.sticky_lb || child.sticky_ub) {
            return;
        }
        let lb = lo + child.lb as i128;
        let ub = hi + child.ub() as i128;
        if self.any {
            self.lb = self.lb.min(lb);
            self.ub = self.ub.max(ub);
        } else {
            (self.lb, self.ub) = (lb, ub);
            self.any = true;
        }
        if data {
            let tlb = lo + child.true_lb as i128;
            let tub = hi + child.true_lb as i128 + child.true_extent as i128;
            if self.any_true {
                self.true_lb = self.true_lb.min(tlb);
                self.true_ub = self.true_ub.max(tub);
            } else {
                (self.true_lb, self.true_ub) = (tlb, tub);
                self.any_true = true;
            }
        }
        if child.sticky_lb {
            self.sticky_lb = Some(self.sticky_lb.map_or(lb, |s| s.min(lb)));
        }
        if child.sticky_ub {
            self.sticky_ub = Some(self.sticky_ub.map_or(ub, |s| s.max(ub)));
        }
        self.size = self.size.saturating_add(copies.saturating_mul(child.size as u128));
        self.basic_count = self.basic_count.saturating_add(copies.saturating_mul(child.basic_count as u128));
        self.ext32 = self.ext32.saturating_add(copies.saturating_mul(child.ext32_size as u128));
        self.align = self.align.max(child.align);
        if child.size > 0 {
            self.basic = match self.basic {
                None => Some(child.basic),
                Some(prev) if prev == child.basic => Some(prev),
                Some(_) => Some(None),
            };
        }
    }

    /// `count` blocks of `blocklen` copies of `child`, block i at `disp + i * stride`.
    fn add_vector(&mut self, disp: i128, count: u128, blocklen: u128, stride: i128, child: &Datatype) {
        if count == 0 || blocklen == 0 {
            return;
        }
        let e = child.extent as i128;
        let (c1, b1) = ((count - 1) as i128, (blocklen - 1) as i128);
        let lo = disp + (c1 * stride).min(0) + (b1 * e).min(0);
        let hi = disp + (c1 * stride).max(0) + (b1 * e).max(0);
        self.add(lo, hi, count * blocklen, child);
    }

    /// Fails when the data or the bounds no longer fit the address space (checked before
    /// layouts are built, so their arithmetic cannot overflow).
    fn check(&self) -> MpiResult<()> {
        if self.size > isize::MAX as u128 {
            return Err(too_big());
        }
        fit(self.lb)?;
        fit(self.ub)?;
        fit(self.ub - self.lb)?;
        fit(self.true_ub - self.true_lb)?;
        Ok(())
    }

    /// The finished type; `pad` rounds a struct's extent up to its alignment.
    fn finish(self, pad: bool, layout: Layout, shape: Shape, envelope: Envelope) -> MpiResult<Datatype> {
        let (mut lb, mut ub) = if self.any { (self.lb, self.ub) } else { (0, 0) };
        let (tlb, tub) = if self.any_true { (self.true_lb, self.true_ub) } else { (0, 0) };
        if let Some(s) = self.sticky_lb {
            lb = s;
        }
        if let Some(s) = self.sticky_ub {
            ub = s;
        }
        let align = self.align.max(1);
        if pad && self.sticky_lb.is_none() && self.sticky_ub.is_none() && align > 1 {
            let eps = (ub - lb).rem_euclid(align as i128);
            if eps != 0 {
                ub += align as i128 - eps;
            }
        }
        let size = usize::try_from(self.size).ok().filter(|s| *s <= isize::MAX as usize).ok_or_else(too_big)?;
        Ok(Datatype {
            name: String::new(),
            size,
            lb: fit(lb)?,
            extent: fit(ub - lb)?,
            true_lb: fit(tlb)?,
            true_extent: fit(tub - tlb)?,
            basic_count: usize::try_from(self.basic_count).map_err(|_| too_big())?,
            basic: self.basic.flatten(),
            predefined: false,
            committed: false,
            sticky_lb: self.sticky_lb.is_some(),
            sticky_ub: self.sticky_ub.is_some(),
            align,
            ext32_size: usize::try_from(self.ext32).map_err(|_| too_big())?,
            layout,
            shape,
            envelope,
            predefined_handle: None,
        })
    }
}

fn env(args: Args, types: Vec<TypeRef>, large: bool) -> Envelope {
    Envelope { args, types, large }
}

/// `n` elements of extent `e` as bytes, checked.
fn scaled(n: isize, e: isize) -> MpiResult<isize> {
    fit(n as i128 * e as i128)
}

impl Datatype {
    fn hvector_with(count: usize, blocklen: usize, stride: isize, old: &TypeRef, envelope: Envelope) -> MpiResult<Datatype> {
        let mut acc = Acc::default();
        acc.add_vector(0, count as u128, blocklen as u128, stride as i128, old);
        acc.check()?;
        let block = Layout::repeat(&old.layout, blocklen, old.extent);
        let layout = Layout::repeat(&block, count, stride);
        let shape = Shape::Hvector { child: old.clone(), count, blocklen, stride };
        let t = acc.finish(false, layout, shape, envelope)?;
        Ok(t)
    }

    fn hindexed_with(blocks: Vec<(isize, usize)>, old: &TypeRef, envelope: Envelope) -> MpiResult<Datatype> {
        let mut acc = Acc::default();
        let mut parts = Vec::with_capacity(blocks.len());
        for &(d, n) in &blocks {
            acc.add_vector(d as i128, 1, n as u128, 0, old);
            acc.check()?;
            if n > 0 {
                parts.push((d, Layout::repeat(&old.layout, n, old.extent)));
            }
        }
        let shape = Shape::Hindexed { child: old.clone(), blocks: Arc::from(blocks) };
        acc.finish(false, Layout::concat(parts), shape, envelope)
    }

    fn struct_with(fields: Vec<(isize, usize, TypeRef)>, pad: bool, envelope: Envelope) -> MpiResult<Datatype> {
        let mut acc = Acc::default();
        let mut parts = Vec::with_capacity(fields.len());
        for (d, n, t) in &fields {
            acc.add_vector(*d as i128, 1, *n as u128, 0, t);
            acc.check()?;
            if *n > 0 {
                parts.push((*d, Layout::repeat(&t.layout, *n, t.extent)));
            }
        }
        let shape = Shape::Struct { fields: Arc::from(fields) };
        acc.finish(pad, Layout::concat(parts), shape, envelope)
    }

    /// MPI_Type_contiguous.
    pub fn contiguous(count: usize, old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        Datatype::hvector_with(1, count, 0, old, env(Args::Contiguous { count }, vec![old.clone()], large))
    }

    /// MPI_Type_vector: `stride` in elements of `old`.
    pub fn vector(count: usize, blocklen: usize, stride: isize, old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        let bytes = scaled(stride, old.extent)?;
        let e = env(Args::Vector { count, blocklen, stride }, vec![old.clone()], large);
        Datatype::hvector_with(count, blocklen, bytes, old, e)
    }

    /// MPI_Type_create_hvector: `stride` in bytes.
    pub fn hvector(count: usize, blocklen: usize, stride: isize, old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        let e = env(Args::Hvector { count, blocklen, stride }, vec![old.clone()], large);
        Datatype::hvector_with(count, blocklen, stride, old, e)
    }

    /// MPI_Type_indexed: displacements in elements of `old`.
    pub fn indexed(blocklens: &[usize], disps: &[isize], old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        check_len(blocklens.len(), disps.len())?;
        let blocks = disps.iter().zip(blocklens).map(|(d, n)| Ok((scaled(*d, old.extent)?, *n))).collect::<MpiResult<Vec<_>>>()?;
        let e = env(Args::Indexed { blocklens: blocklens.to_vec(), disps: disps.to_vec() }, vec![old.clone()], large);
        Datatype::hindexed_with(blocks, old, e)
    }

    /// MPI_Type_create_hindexed: displacements in bytes.
    pub fn hindexed(blocklens: &[usize], disps: &[isize], old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        check_len(blocklens.len(), disps.len())?;
        let blocks = disps.iter().copied().zip(blocklens.iter().copied()).collect();
        let e = env(Args::Hindexed { blocklens: blocklens.to_vec(), disps: disps.to_vec() }, vec![old.clone()], large);
        Datatype::hindexed_with(blocks, old, e)
    }

    /// MPI_Type_create_indexed_block: displacements in elements of `old`.
    pub fn indexed_block(blocklen: usize, disps: &[isize], old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        let blocks = disps.iter().map(|d| Ok((scaled(*d, old.extent)?, blocklen))).collect::<MpiResult<Vec<_>>>()?;
        let e = env(Args::IndexedBlock { blocklen, disps: disps.to_vec() }, vec![old.clone()], large);
        Datatype::hindexed_with(blocks, old, e)
    }

    /// MPI_Type_create_hindexed_block: displacements in bytes.
    pub fn hindexed_block(blocklen: usize, disps: &[isize], old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        let blocks = disps.iter().map(|d| (*d, blocklen)).collect();
        let e = env(Args::HindexedBlock { blocklen, disps: disps.to_vec() }, vec![old.clone()], large);
        Datatype::hindexed_with(blocks, old, e)
    }

    /// MPI_Type_create_struct.
    pub fn create_struct(blocklens: &[usize], disps: &[isize], types: &[TypeRef], large: bool) -> MpiResult<Datatype> {
        check_len(blocklens.len(), disps.len())?;
        check_len(blocklens.len(), types.len())?;
        let fields = (0..types.len()).map(|i| (disps[i], blocklens[i], types[i].clone())).collect();
        let e = env(Args::Struct { blocklens: blocklens.to_vec(), disps: disps.to_vec() }, types.to_vec(), large);
        Datatype::struct_with(fields, true, e)
    }

    /// MPI_Type_create_resized: the type map of `old` with bounds `lb` and `lb + extent`.
    pub fn resized(old: &TypeRef, lb: isize, extent: isize, large: bool) -> MpiResult<Datatype> {
        fit(lb as i128 + extent as i128)?;
        let mut t = Datatype::clone(old);
        t.name = String::new();
        t.lb = lb;
        t.extent = extent;
        t.sticky_lb = true;
        t.sticky_ub = true;
        t.predefined = false;
        t.committed = false;
        t.predefined_handle = None;
        t.shape = Shape::Alias(old.clone());
        t.envelope = env(Args::Resized { lb, extent }, vec![old.clone()], large);
        Ok(t)
    }

    /// MPI_Type_dup: same type map and committed state, new object.
    pub fn dup(old: &TypeRef) -> Datatype {
        let mut t = Datatype::clone(old);
        t.name = String::new();
        t.predefined = false;
        t.predefined_handle = None;
        t.shape = Shape::Alias(old.clone());
        t.envelope = env(Args::Dup, vec![old.clone()], false);
        t
    }

    /// A (value, index) pair laid out like the C struct `{ value; index; }` (the derived
    /// result of MPI_Type_get_value_index when no predefined pair type matches).
    pub fn value_index(value: &TypeRef, index: &TypeRef) -> MpiResult<Datatype> {
        let a = index.align.max(1) as isize;
        let off = (value.extent + a - 1) / a * a;
        let fields = vec![(0, 1, value.clone()), (off, 1, index.clone())];
        let mut t = Datatype::struct_with(fields, true, env(Args::ValueIndex, vec![value.clone(), index.clone()], false))?;
        t.committed = true;
        Ok(t)
    }

    /// MPI_Type_create_subarray.
    pub fn subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        order: Order,
        old: &TypeRef,
        large: bool,
    ) -> MpiResult<Datatype> {
        let n = sizes.len();
        if n == 0 {
            return Err(arg("ndims must be positive"));
        }
        check_len(n, subsizes.len())?;
        check_len(n, starts.len())?;
        for i in 0..n {
            if sizes[i] == 0 {
                return Err(arg(format!("array_of_sizes[{i}] = 0 must be positive")));
            }
            if subsizes[i] == 0 || subsizes[i] > sizes[i] {
                return Err(arg(format!("array_of_subsizes[{i}] = {} must be in 1..={}", subsizes[i], sizes[i])));
            }
            if starts[i] > sizes[i] - subsizes[i] {
                return Err(arg(format!(
                    "array_of_starts[{i}] = {} puts the subarray past the end of dimension {i} ({} + {} > {})",
                    starts[i], starts[i], subsizes[i], sizes[i]
                )));
            }
        }
        let mut t = old.clone();
        for i in fastest_first(n, order) {
            let e = t.extent;
            let inner = Datatype::hindexed_with(vec![(scaled(starts[i] as isize, e)?, subsizes[i])], &t, Envelope::named())?;
            t = TypeRef::new(Datatype::resized(&TypeRef::new(inner), 0, scaled(sizes[i] as isize, e)?, false)?);
        }
        let mut out = Datatype::clone(&t);
        out.envelope = env(
            Args::Subarray { sizes: sizes.to_vec(), subsizes: subsizes.to_vec(), starts: starts.to_vec(), order },
            vec![old.clone()],
            large,
        );
        Ok(out)
    }

    /// MPI_Type_create_darray: the part of a block / cyclic distributed global array that
    /// process `rank` of `size` owns (process grid in row-major order).
    pub fn darray(size: usize, rank: usize, dims: &[DarrayDim], order: Order, old: &TypeRef, large: bool) -> MpiResult<Datatype> {
        let n = dims.len();
        if n == 0 {
            return Err(arg("ndims must be positive"));
        }
        if size == 0 || rank >= size {
            return Err(arg(format!("rank {rank} is not in a group of size {size}")));
        }
        let procs = dims.iter().try_fold(1usize, |a, d| a.checked_mul(d.psize)).unwrap_or(0);
        if procs != size {
            return Err(arg(format!("the process grid has {procs} processes, the group {size}")));
        }
        // Row-major process grid coordinates.
        let mut coords = vec![0usize; n];
        let mut r = rank;
        for i in (0..n).rev() {
            coords[i] = r % dims[i].psize;
            r /= dims[i].psize;
        }
        let mut t = old.clone();
        for i in fastest_first(n, order) {
            t = TypeRef::new(darray_dim(&t, &dims[i], coords[i], i)?);
        }
        let mut out = Datatype::clone(&t);
        out.envelope = env(Args::Darray { size, rank, dims: dims.to_vec(), order }, vec![old.clone()], large);
        Ok(out)
    }
}

fn check_len(a: usize, b: usize) -> MpiResult<()> {
    if a != b {
        return Err(MpiError::new(ErrorClass::Intern, format!("argument arrays differ in length ({a} and {b})")));
    }
    Ok(())
}

/// Dimension indices from the fastest varying to the slowest.
fn fastest_first(n: usize, order: Order) -> Vec<usize> {
    match order {
        Order::C => (0..n).rev().collect(),
        Order::Fortran => (0..n).collect(),
    }
}

/// One darray dimension over `child` (whose extent is the faster dimensions' whole size):
/// the blocks process coordinate `coord` owns, in increasing index order, in a type of
/// extent `gsize * extent(child)`.
fn darray_dim(child: &TypeRef, d: &DarrayDim, coord: usize, i: usize) -> MpiResult<Datatype> {
    if d.gsize == 0 || d.psize == 0 {
        return Err(arg(format!("dimension {i}: gsize and psize must be positive")));
    }
    let (blk, psize, coord) = match d.distrib {
        Distrib::Block => {
            let blk = d.darg.unwrap_or(d.gsize.div_ceil(d.psize));
            if blk == 0 || blk.saturating_mul(d.psize) < d.gsize {
                return Err(arg(format!(
                    "dimension {i}: block size {blk} times {} processes does not cover {} elements",
                    d.psize, d.gsize
                )));
            }
            (blk, d.psize, coord)
        }
        Distrib::Cyclic => {
            let blk = d.darg.unwrap_or(1);
            if blk == 0 {
                return Err(arg(format!("dimension {i}: cyclic block size must be positive")));
            }
            (blk, d.psize, coord)
        }
        Distrib::None => {
            if d.psize != 1 {
                return Err(arg(format!("dimension {i}: MPI_DISTRIBUTE_NONE needs 1 process in that dimension, not {}", d.psize)));
            }
            (d.gsize, 1, 0)
        }
    };
    let e = child.extent as i128;
    let nblocks = d.gsize.div_ceil(blk);
    let count = nblocks / psize + usize::from(coord < nblocks % psize);
    let mut fields: Vec<(isize, usize, TypeRef)> = Vec::new();
    if count > 0 {
        let last = (count - 1) * psize + coord;
        let last_len = blk.min(d.gsize - last * blk);
        let full = if last_len < blk { count - 1 } else { count };
        if full > 0 {
            let stride = fit(blk as i128 * psize as i128 * e)?;
            let v = Datatype::hvector_with(full, blk, stride, child, Envelope::named())?;
            fields.push((fit(coord as i128 * blk as i128 * e)?, 1, TypeRef::new(v)));
        }
        if last_len < blk {
            fields.push((fit(last as i128 * blk as i128 * e)?, last_len, child.clone()));
        }
    }
    let placed = TypeRef::new(Datatype::struct_with(fields, false, Envelope::named())?);
    Datatype::resized(&placed, 0, fit(d.gsize as i128 * e)?, false)
}

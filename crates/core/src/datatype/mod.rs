//! Datatypes: type maps, their constructors, and pack / unpack.
//!
//! A [`Datatype`] carries
//! - the numbers MPI asks for: size, lower bound and extent, true bounds, basic-element
//!   count, explicit bound markers (set by resized, "sticky" through later constructors);
//! - a [`Layout`]: the byte runs of one element in type-map order, kept compact (a vector of
//!   10^9 blocks is one repeat node) — pack, unpack and the engine walk this;
//! - a [`Shape`]: the constructor tree with predefined types at its leaves — external32
//!   conversion and element counts walk this;
//! - the [`Envelope`]: the constructor and arguments the application used (get_contents).
//!
//! Types are shared as [`TypeRef`] (counted, or kept forever): a derived type holds its children, a request holds
//! its type, so freeing a handle never invalidates a type still in use.

mod build;
mod external32;
mod layout;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use build::{DarrayDim, Distrib, Order};
pub use layout::{merge_blocks, Block, Layout};

use layout::{walk_repeat_range, Gather, Scatter};

/// Arithmetic class of a predefined type, used by reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasicKind {
    Int { bytes: u8, signed: bool },
    Float { bytes: u8 },
    Complex { bytes: u8 },
    Bool { bytes: u8 },
    /// Bytes with no arithmetic (char, byte, packed).
    Opaque,
    /// A value followed by an int index (MINLOC / MAXLOC types).
    Pair { value: &'static BasicKind, index_offset: u8 },
}

/// How a basic element is written in the external32 representation (big-endian, standard
/// sizes; MPI 4.1 section 15.5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ext32 {
    /// Copied byte for byte (characters, bytes, one-byte integers and booleans).
    Raw,
    /// Same size, byte order reversed in units of `unit` bytes (integers, IEEE floats, each
    /// half of a complex).
    Swap { unit: u8 },
    /// Integer stored in `ext` big-endian bytes (C `long` is 8 bytes here, 4 in external32;
    /// `wchar_t` 4 and 2): truncated on the way out, sign- or zero-extended on the way back.
    Int { signed: bool, ext: u8 },
    /// x87 80-bit extended (16 bytes of storage) written as IEEE binary128, `n` values
    /// (1, or 2 for a complex).
    X87 { n: u8 },
}

/// One basic element of a predefined type: a pair type (MPI_DOUBLE_INT, ...) has two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Byte offset inside the predefined type.
    pub off: usize,
    /// Bytes in memory.
    pub size: usize,
    pub kind: BasicKind,
    pub ext32: Ext32,
}

impl Part {
    /// Bytes this element takes in external32.
    pub fn ext32_size(&self) -> usize {
        match self.ext32 {
            Ext32::Int { ext, .. } => ext as usize,
            _ => self.size,
        }
    }
}

/// Constructor tree with predefined types at the leaves, in type-map order.
#[derive(Debug, Clone)]
pub enum Shape {
    /// A predefined type.
    Basic(Arc<[Part]>),
    /// `count` blocks of `blocklen` consecutive children, block i at `i * stride` bytes.
    Hvector { child: TypeRef, count: usize, blocklen: usize, stride: isize },
    /// Blocks of consecutive children: (byte displacement, number of children).
    Hindexed { child: TypeRef, blocks: Arc<[(isize, usize)]> },
    /// Fields: (byte displacement, number of children, child type).
    Struct { fields: Arc<[(isize, usize, TypeRef)]> },
    /// The same type map as the child (dup, resized).
    Alias(TypeRef),
}

/// The constructor that made a type (MPI_COMBINER_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combiner {
    Named,
    Dup,
    Contiguous,
    Vector,
    Hvector,
    Indexed,
    Hindexed,
    IndexedBlock,
    HindexedBlock,
    Struct,
    Subarray,
    Darray,
    F90Real,
    F90Complex,
    F90Integer,
    Resized,
    ValueIndex,
}

/// The arguments a type was constructed with, as the application gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Args {
    Named,
    Dup,
    Contiguous { count: usize },
    /// Stride in elements of the old type.
    Vector { count: usize, blocklen: usize, stride: isize },
    /// Stride in bytes.
    Hvector { count: usize, blocklen: usize, stride: isize },
    /// Displacements in elements of the old type.
    Indexed { blocklens: Vec<usize>, disps: Vec<isize> },
    /// Displacements in bytes.
    Hindexed { blocklens: Vec<usize>, disps: Vec<isize> },
    IndexedBlock { blocklen: usize, disps: Vec<isize> },
    HindexedBlock { blocklen: usize, disps: Vec<isize> },
    Struct { blocklens: Vec<usize>, disps: Vec<isize> },
    Subarray { sizes: Vec<usize>, subsizes: Vec<usize>, starts: Vec<usize>, order: Order },
    Darray { size: usize, rank: usize, dims: Vec<DarrayDim>, order: Order },
    Resized { lb: isize, extent: isize },
    /// Arguments as given (may be MPI_UNDEFINED).
    F90Real { p: i32, r: i32 },
    F90Complex { p: i32, r: i32 },
    F90Integer { r: i32 },
    ValueIndex,
}

/// How a type was made: what MPI_Type_get_envelope / get_contents report.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub args: Args,
    /// The old types, in argument order.
    pub types: Vec<TypeRef>,
    /// Made by a large-count (`_c`) constructor: counts are reported as MPI_Count.
    pub large: bool,
}

impl Envelope {
    /// The envelope of a predefined type.
    pub fn named() -> Envelope {
        Envelope { args: Args::Named, types: Vec::new(), large: false }
    }

    /// The combiner these arguments belong to.
    pub fn combiner(&self) -> Combiner {
        match self.args {
            Args::Named => Combiner::Named,
            Args::Dup => Combiner::Dup,
            Args::Contiguous { .. } => Combiner::Contiguous,
            Args::Vector { .. } => Combiner::Vector,
            Args::Hvector { .. } => Combiner::Hvector,
            Args::Indexed { .. } => Combiner::Indexed,
            Args::Hindexed { .. } => Combiner::Hindexed,
            Args::IndexedBlock { .. } => Combiner::IndexedBlock,
            Args::HindexedBlock { .. } => Combiner::HindexedBlock,
            Args::Struct { .. } => Combiner::Struct,
            Args::Subarray { .. } => Combiner::Subarray,
            Args::Darray { .. } => Combiner::Darray,
            Args::Resized { .. } => Combiner::Resized,
            Args::F90Real { .. } => Combiner::F90Real,
            Args::F90Complex { .. } => Combiner::F90Complex,
            Args::F90Integer { .. } => Combiner::F90Integer,
            Args::ValueIndex => Combiner::ValueIndex,
        }
    }
}

/// A datatype as the engine sees it.
#[derive(Debug, Clone)]
pub struct Datatype {
    pub name: String,
    /// Bytes of data in one element.
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_extent: isize,
    /// Number of basic (predefined) elements in one element, for Get_elements.
    pub basic_count: usize,
    /// Kind and size of the basic element when all basic elements share one kind.
    pub basic: Option<(BasicKind, usize)>,
    pub predefined: bool,
    pub committed: bool,
    /// The lower / upper bound was set explicitly (resized) and sticks through constructors.
    pub sticky_lb: bool,
    pub sticky_ub: bool,
    /// Largest alignment among the basic elements (struct extents are padded to it).
    pub align: usize,
    /// Bytes of one element in external32.
    pub ext32_size: usize,
    /// Byte runs of one element.
    pub layout: Layout,
    /// Typed constructor tree.
    pub shape: Shape,
    pub envelope: Envelope,
    /// The C layer's handle for this type when it is predefined (returned as is by
    /// get_contents instead of a new handle).
    pub predefined_handle: Option<usize>,
}

/// Shared reference to a datatype; requests keep one so a freed type stays valid until done.
///
/// A type made with [`TypeRef::forever`] (the predefined types, the library's own byte
/// type) lives as long as the process, and its references are plain pointers: copying one
/// into every request touches no reference count. An atomic increment and decrement per
/// request were a tenth of a small `MPI_Irecv`'s time. Derived types are counted (`Arc`).
#[derive(Clone)]
pub struct TypeRef(Repr);

#[derive(Clone)]
enum Repr {
    Forever(&'static Datatype),
    Counted(Arc<Datatype>),
}

impl TypeRef {
    /// A counted reference to a new type.
    pub fn new(t: Datatype) -> TypeRef {
        TypeRef(Repr::Counted(Arc::new(t)))
    }

    /// A type kept for the rest of the process (never freed), for the few made once.
    pub fn forever(t: Datatype) -> TypeRef {
        TypeRef(Repr::Forever(Box::leak(Box::new(t))))
    }

    /// Whether both name the same type object.
    pub fn ptr_eq(a: &TypeRef, b: &TypeRef) -> bool {
        std::ptr::eq::<Datatype>(&**a, &**b)
    }

    /// Mutable access, copying the type first if it is shared (as `Arc::make_mut`): holders
    /// of other references keep the type they had.
    pub fn make_mut(this: &mut TypeRef) -> &mut Datatype {
        if let Repr::Forever(t) = this.0 {
            this.0 = Repr::Counted(Arc::new(t.clone()));
        }
        match &mut this.0 {
            Repr::Counted(a) => Arc::make_mut(a),
            Repr::Forever(_) => unreachable!("made counted above"),
        }
    }
}

impl std::ops::Deref for TypeRef {
    type Target = Datatype;
    #[inline]
    fn deref(&self) -> &Datatype {
        match &self.0 {
            Repr::Forever(t) => t,
            Repr::Counted(a) => a,
        }
    }
}

impl std::fmt::Debug for TypeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Datatype {
    /// A predefined type made of the basic elements `parts`, with extent `extent`.
    pub fn basic(name: &str, extent: usize, parts: Vec<Part>, align: usize) -> Datatype {
        let size: usize = parts.iter().map(|p| p.size).sum();
        let true_lb = parts.iter().map(|p| p.off).min().unwrap_or(0) as isize;
        let true_ub = parts.iter().map(|p| p.off + p.size).max().unwrap_or(0) as isize;
        let layout = Layout::from_blocks(parts.iter().map(|p| Block { off: p.off as isize, len: p.size }));
        let basic = match parts.as_slice() {
            [p] => Some((p.kind, p.size)),
            _ => None,
        };
        Datatype {
            name: name.to_string(),
            size,
            lb: 0,
            extent: extent as isize,
            true_lb,
            true_extent: true_ub - true_lb,
            basic_count: parts.len(),
            basic,
            predefined: true,
            committed: true,
            sticky_lb: false,
            sticky_ub: false,
            align: align.max(1),
            ext32_size: parts.iter().map(Part::ext32_size).sum(),
            layout,
            shape: Shape::Basic(Arc::from(parts)),
            envelope: Envelope::named(),
            predefined_handle: None,
        }
    }

    /// A predefined type of `size` bytes with extent `extent` whose data is `blocks`, each
    /// block one basic element of `kind` (written byte for byte in external32).
    pub fn predefined(name: &str, size: usize, extent: usize, kind: BasicKind, blocks: Vec<Block>) -> Datatype {
        let parts: Vec<Part> = blocks
            .into_iter()
            .filter(|b| b.len > 0)
            .map(|b| Part { off: b.off.max(0) as usize, size: b.len, kind, ext32: Ext32::Raw })
            .collect();
        let t = Datatype::basic(name, extent, parts, 1);
        debug_assert_eq!(t.size, size, "blocks of {name} do not add up to its size");
        t
    }

    /// Upper bound (lb + extent).
    pub fn ub(&self) -> isize {
        self.lb + self.extent
    }

    /// The constructor that made this type.
    pub fn combiner(&self) -> Combiner {
        self.envelope.combiner()
    }

    /// Offset of the single run `count` elements form, for any count, if they form one.
    #[inline]
    pub fn contiguous_offset(&self) -> Option<isize> {
        let b = self.layout.single_run()?;
        (b.len as isize == self.extent).then_some(b.off)
    }

    /// Whether `count` elements occupy one contiguous run starting at the buffer address.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.size == 0 || self.contiguous_offset() == Some(0)
    }

    /// Bytes of data in `count` elements.
    #[inline]
    pub fn packed_size(&self, count: usize) -> usize {
        self.size.saturating_mul(count)
    }

    /// The byte runs of one element, if there are at most `max`.
    pub fn blocks(&self, max: usize) -> Option<Vec<Block>> {
        self.layout.runs_upto(max)
    }

    /// Copy the data of `count` elements at `src` into `dst`, in type-map order. Writes
    /// `min(dst.len(), packed_size(count))` bytes and returns that number.
    ///
    /// # Safety
    /// `src` must be valid for the type map of `count` elements (`src` may be null, i.e.
    /// MPI_BOTTOM, when the type's displacements are absolute addresses).
    pub unsafe fn pack(&self, src: *const u8, count: usize, dst: &mut [u8]) -> usize {
        self.pack_range(src, count, 0, dst)
    }

    /// Like [`Datatype::pack`], starting at byte `skip` of the packed stream.
    ///
    /// # Safety
    /// As for [`Datatype::pack`].
    pub unsafe fn pack_range(&self, src: *const u8, count: usize, skip: usize, dst: &mut [u8]) -> usize {
        let total = self.packed_size(count);
        if skip >= total || dst.is_empty() {
            return 0;
        }
        let limit = dst.len().min(total - skip);
        if let Some(off) = self.contiguous_offset() {
            let from = (src as usize).wrapping_add_signed(off).wrapping_add(skip) as *const u8;
            // Not `copy_nonoverlapping`: see `steadfast_paths::copy` (glibc's `rep movsb`).
            steadfast_paths::copy::copy(from, dst.as_mut_ptr(), limit);
            return limit;
        }
        let mut g = Gather { src: src as usize, dst: dst.as_mut_ptr() };
        walk_repeat_range(&self.layout, 0, count, self.extent, skip, limit, &mut g)
    }

    /// Call `f(offset, len)` for the byte runs of `count` elements, in type-map order,
    /// restricted to bytes `[skip, skip + limit)` of the packed stream; returns the bytes
    /// visited. Offsets are relative to the buffer address (absolute with MPI_BOTTOM). For
    /// building iovecs (e.g. a single-copy read straight into a non-contiguous buffer).
    pub fn for_each_run(&self, count: usize, skip: usize, limit: usize, mut f: impl FnMut(isize, usize)) -> usize {
        struct Runs<F>(F);
        impl<F: FnMut(isize, usize)> layout::Visitor for Runs<F> {
            fn run(&mut self, off: isize, len: usize) {
                (self.0)(off, len)
            }
        }
        let total = self.packed_size(count);
        if skip >= total {
            return 0;
        }
        let limit = limit.min(total - skip);
        // One run, not one per element: a 1 MiB accumulate of bytes spent most of its time
        // here walking a million one-byte elements.
        if let Some(off) = self.contiguous_offset() {
            if limit > 0 {
                f(off + skip as isize, limit);
            }
            return limit;
        }
        walk_repeat_range(&self.layout, 0, count, self.extent, skip, limit, &mut Runs(f))
    }

    /// Scatter packed bytes `src` into up to `count` elements at `dst`; a short `src` fills a
    /// prefix (as a short message does). Returns bytes consumed.
    ///
    /// # Safety
    /// `dst` must be valid for the type map of `count` elements.
    pub unsafe fn unpack(&self, src: &[u8], dst: *mut u8, count: usize) -> usize {
        self.unpack_range(src, dst, count, 0)
    }

    /// Like [`Datatype::unpack`], with `src` holding the packed stream from byte `skip` on.
    ///
    /// # Safety
    /// As for [`Datatype::unpack`].
    pub unsafe fn unpack_range(&self, src: &[u8], dst: *mut u8, count: usize, skip: usize) -> usize {
        let total = self.packed_size(count);
        if skip >= total || src.is_empty() {
            return 0;
        }
        let limit = src.len().min(total - skip);
        if let Some(off) = self.contiguous_offset() {
            let to = (dst as usize).wrapping_add_signed(off).wrapping_add(skip) as *mut u8;
            // Not `copy_nonoverlapping`: see `steadfast_paths::copy` (glibc's `rep movsb`).
            steadfast_paths::copy::copy(src.as_ptr(), to, limit);
            return limit;
        }
        let mut s = Scatter { src: src.as_ptr(), dst: dst as usize };
        walk_repeat_range(&self.layout, 0, count, self.extent, skip, limit, &mut s)
    }

    /// Number of basic elements in `bytes` of packed data (Get_elements), or None
    /// (MPI_UNDEFINED) when that is not defined: the bytes end inside a basic element (a
    /// basic type and a byte count that is not a multiple of its size, or a derived type,
    /// pair types included, whose last basic element is cut: no matching send makes such a
    /// message, so the type is not the one the data was sent as), or a type without data and
    /// a non-zero byte count. A trailing partial *derived* element is counted by its whole
    /// basic elements.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return (bytes == 0).then_some(0);
        }
        let n = self.elements_prefix(bytes);
        (self.bytes_for_elements(n) == Some(bytes)).then_some(n)
    }

    /// Whole basic elements in the first `bytes` bytes of consecutive packed elements.
    fn elements_prefix(&self, bytes: usize) -> usize {
        if self.size == 0 {
            return 0;
        }
        (bytes / self.size) * self.basic_count + self.elements_one(bytes % self.size)
    }

    /// Whole basic elements in the first `rem` (< size) bytes of one packed element.
    fn elements_one(&self, rem: usize) -> usize {
        if rem == 0 {
            return 0;
        }
        match &self.shape {
            Shape::Basic(parts) => {
                let mut left = rem;
                let mut n = 0;
                for p in parts.iter() {
                    if left < p.size {
                        break;
                    }
                    left -= p.size;
                    n += 1;
                }
                n
            }
            Shape::Hvector { child, .. } | Shape::Hindexed { child, .. } | Shape::Alias(child) => {
                child.elements_prefix(rem)
            }
            Shape::Struct { fields } => {
                let mut left = rem;
                let mut n = 0;
                for (_, len, c) in fields.iter() {
                    let sz = len * c.size;
                    if left >= sz {
                        left -= sz;
                        n += len * c.basic_count;
                    } else {
                        n += c.elements_prefix(left);
                        break;
                    }
                }
                n
            }
        }
    }

    /// Bytes of packed data holding the first `n` basic elements of consecutive elements
    /// (inverse of [`Datatype::elements_in`], for Status_set_elements); None on overflow or
    /// when the type has no basic elements and `n > 0`.
    pub fn bytes_for_elements(&self, n: usize) -> Option<usize> {
        if self.basic_count == 0 {
            return (n == 0).then_some(0);
        }
        let whole = (n / self.basic_count).checked_mul(self.size)?;
        whole.checked_add(self.bytes_one(n % self.basic_count)?)
    }

    /// Bytes of the first `n` (< basic_count) basic elements of one element.
    fn bytes_one(&self, n: usize) -> Option<usize> {
        if n == 0 {
            return Some(0);
        }
        match &self.shape {
            Shape::Basic(parts) => Some(parts.iter().take(n).map(|p| p.size).sum()),
            Shape::Hvector { child, .. } | Shape::Hindexed { child, .. } | Shape::Alias(child) => {
                child.bytes_for_elements(n)
            }
            Shape::Struct { fields } => {
                let mut left = n;
                let mut bytes = 0usize;
                for (_, len, c) in fields.iter() {
                    let k = len * c.basic_count;
                    if left >= k {
                        left -= k;
                        bytes += len * c.size;
                    } else {
                        return Some(bytes + c.bytes_for_elements(left)?);
                    }
                }
                Some(bytes)
            }
        }
    }

    /// Call `f(part, offset)` for every basic element of one element placed at `base`, in
    /// type-map order.
    pub fn for_each_part(&self, base: isize, f: &mut impl FnMut(&Part, isize)) {
        match &self.shape {
            Shape::Basic(parts) => {
                for p in parts.iter() {
                    f(p, base + p.off as isize);
                }
            }
            Shape::Hvector { child, count, blocklen, stride } => {
                for i in 0..*count {
                    let b = base + i as isize * stride;
                    for j in 0..*blocklen {
                        child.for_each_part(b + j as isize * child.extent, f);
                    }
                }
            }
            Shape::Hindexed { child, blocks } => {
                for (d, len) in blocks.iter() {
                    for j in 0..*len {
                        child.for_each_part(base + d + j as isize * child.extent, f);
                    }
                }
            }
            Shape::Struct { fields } => {
                for (d, len, c) in fields.iter() {
                    for j in 0..*len {
                        c.for_each_part(base + d + j as isize * c.extent, f);
                    }
                }
            }
            Shape::Alias(child) => child.for_each_part(base, f),
        }
    }
}

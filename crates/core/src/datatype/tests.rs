//! Datatype tests: every constructor against a naive reference that writes the type map out
//! entry by entry from MPI's definitions (independent of layouts and shapes), on fixed cases
//! and on random nested constructors (proptest).


use proptest::prelude::*;

use super::*;
use crate::MpiResult;

// ---- basic types ---------------------------------------------------------------------------

fn int() -> TypeRef {
    TypeRef::new(Datatype::basic(
        "int",
        4,
        vec![Part { off: 0, size: 4, kind: BasicKind::Int { bytes: 4, signed: true }, ext32: Ext32::Swap { unit: 4 } }],
        4,
    ))
}
fn double() -> TypeRef {
    TypeRef::new(Datatype::basic(
        "double",
        8,
        vec![Part { off: 0, size: 8, kind: BasicKind::Float { bytes: 8 }, ext32: Ext32::Swap { unit: 8 } }],
        8,
    ))
}
fn char_t() -> TypeRef {
    TypeRef::new(Datatype::basic("char", 1, vec![Part { off: 0, size: 1, kind: BasicKind::Opaque, ext32: Ext32::Raw }], 1))
}
fn short() -> TypeRef {
    TypeRef::new(Datatype::basic(
        "short",
        2,
        vec![Part { off: 0, size: 2, kind: BasicKind::Int { bytes: 2, signed: true }, ext32: Ext32::Swap { unit: 2 } }],
        2,
    ))
}
fn long() -> TypeRef {
    TypeRef::new(Datatype::basic(
        "long",
        8,
        vec![Part { off: 0, size: 8, kind: BasicKind::Int { bytes: 8, signed: true }, ext32: Ext32::Int { signed: true, ext: 4 } }],
        8,
    ))
}
fn double_int() -> TypeRef {
    TypeRef::new(Datatype::basic(
        "double_int",
        16,
        vec![
            Part { off: 0, size: 8, kind: BasicKind::Float { bytes: 8 }, ext32: Ext32::Swap { unit: 8 } },
            Part { off: 8, size: 4, kind: BasicKind::Int { bytes: 4, signed: true }, ext32: Ext32::Swap { unit: 4 } },
        ],
        8,
    ))
}
fn long_double() -> TypeRef {
    TypeRef::new(Datatype::basic(
        "long double",
        16,
        vec![Part { off: 0, size: 16, kind: BasicKind::Float { bytes: 16 }, ext32: Ext32::X87 { n: 1 } }],
        16,
    ))
}

fn bases() -> Vec<TypeRef> {
    vec![int(), double(), char_t(), short(), double_int()]
}

// ---- the reference ---------------------------------------------------------------------------

/// A type map written out: basic entries (displacement, size) in order, and the bounds.
#[derive(Debug, Clone)]
struct Ref {
    map: Vec<(i64, usize)>,
    lb: i64,
    ub: i64,
    sticky_lb: bool,
    sticky_ub: bool,
    align: usize,
}

impl Ref {
    fn basic(t: &Datatype) -> Ref {
        let Shape::Basic(parts) = &t.shape else { panic!("not basic") };
        Ref {
            map: parts.iter().map(|p| (p.off as i64, p.size)).collect(),
            lb: 0,
            ub: t.extent as i64,
            sticky_lb: false,
            sticky_ub: false,
            align: t.align,
        }
    }
    fn extent(&self) -> i64 {
        self.ub - self.lb
    }
    fn size(&self) -> usize {
        self.map.iter().map(|e| e.1).sum()
    }
    /// Copies of types at origins, in order; `pad` applies the struct alignment rule.
    fn combine(copies: &[(i64, &Ref)], pad: bool) -> Ref {
        let mut map = Vec::new();
        let (mut lb, mut ub): (Option<i64>, Option<i64>) = (None, None);
        let (mut slb, mut sub): (Option<i64>, Option<i64>) = (None, None);
        let mut align = 1;
        for (o, t) in copies {
            map.extend(t.map.iter().map(|(d, s)| (o + d, *s)));
            if t.map.is_empty() && !t.sticky_lb && !t.sticky_ub {
                continue;
            }
            align = align.max(t.align);
            lb = Some(lb.map_or(o + t.lb, |v| v.min(o + t.lb)));
            ub = Some(ub.map_or(o + t.ub, |v| v.max(o + t.ub)));
            if t.sticky_lb {
                slb = Some(slb.map_or(o + t.lb, |v| v.min(o + t.lb)));
            }
            if t.sticky_ub {
                sub = Some(sub.map_or(o + t.ub, |v| v.max(o + t.ub)));
            }
        }
        let lb = slb.or(lb).unwrap_or(0);
        let mut ub = sub.or(ub).unwrap_or(0);
        if pad && slb.is_none() && sub.is_none() {
            let a = align as i64;
            let r = (ub - lb).rem_euclid(a);
            if r != 0 {
                ub += a - r;
            }
        }
        Ref { map, lb, ub, sticky_lb: slb.is_some(), sticky_ub: sub.is_some(), align }
    }
    fn true_bounds(&self) -> (i64, i64) {
        if self.map.is_empty() {
            return (0, 0);
        }
        let lo = self.map.iter().map(|e| e.0).min().unwrap_or(0);
        let hi = self.map.iter().map(|e| e.0 + e.1 as i64).max().unwrap_or(0);
        (lo, hi - lo)
    }
}

/// A recipe for a type, built both ways.
#[derive(Debug, Clone)]
enum Recipe {
    Base(usize),
    Contig(usize, Box<Recipe>),
    Vector(usize, usize, isize, Box<Recipe>),
    Hvector(usize, usize, isize, Box<Recipe>),
    Indexed(Vec<(usize, isize)>, Box<Recipe>),
    Hindexed(Vec<(usize, isize)>, Box<Recipe>),
    IndexedBlock(usize, Vec<isize>, Box<Recipe>),
    Struct(Vec<(usize, isize, Recipe)>),
    Resized(isize, isize, Box<Recipe>),
    Dup(Box<Recipe>),
    Subarray(Vec<(usize, usize, usize)>, bool, Box<Recipe>),
    Darray(usize, usize, Vec<(usize, u8, Option<usize>, usize)>, bool, Box<Recipe>),
}

fn build(r: &Recipe) -> MpiResult<(TypeRef, Ref)> {
    Ok(match r {
        Recipe::Base(i) => {
            let t = bases()[*i % 5].clone();
            let rf = Ref::basic(&t);
            (t, rf)
        }
        Recipe::Contig(n, c) => {
            let (t, rf) = build(c)?;
            let copies: Vec<_> = (0..*n as i64).map(|i| (i * rf.extent(), &rf)).collect();
            (TypeRef::new(Datatype::contiguous(*n, &t, false)?), Ref::combine(&copies, false))
        }
        Recipe::Vector(n, bl, s, c) | Recipe::Hvector(n, bl, s, c) => {
            let (t, rf) = build(c)?;
            let hv = matches!(r, Recipe::Hvector(..));
            let stride = if hv { *s as i64 } else { *s as i64 * rf.extent() };
            let mut copies = Vec::new();
            for i in 0..*n as i64 {
                for j in 0..*bl as i64 {
                    copies.push((i * stride + j * rf.extent(), &rf));
                }
            }
            let t2 = if hv { Datatype::hvector(*n, *bl, *s, &t, false)? } else { Datatype::vector(*n, *bl, *s, &t, false)? };
            (TypeRef::new(t2), Ref::combine(&copies, false))
        }
        Recipe::Indexed(blocks, c) | Recipe::Hindexed(blocks, c) => {
            let (t, rf) = build(c)?;
            let h = matches!(r, Recipe::Hindexed(..));
            let mut copies = Vec::new();
            for (bl, d) in blocks {
                let o = if h { *d as i64 } else { *d as i64 * rf.extent() };
                for j in 0..*bl as i64 {
                    copies.push((o + j * rf.extent(), &rf));
                }
            }
            let bls: Vec<usize> = blocks.iter().map(|b| b.0).collect();
            let ds: Vec<isize> = blocks.iter().map(|b| b.1).collect();
            let t2 = if h { Datatype::hindexed(&bls, &ds, &t, false)? } else { Datatype::indexed(&bls, &ds, &t, false)? };
            (TypeRef::new(t2), Ref::combine(&copies, false))
        }
        Recipe::IndexedBlock(bl, ds, c) => {
            let (t, rf) = build(c)?;
            let mut copies = Vec::new();
            for d in ds {
                for j in 0..*bl as i64 {
                    copies.push((*d as i64 * rf.extent() + j * rf.extent(), &rf));
                }
            }
            (TypeRef::new(Datatype::indexed_block(*bl, ds, &t, false)?), Ref::combine(&copies, false))
        }
        Recipe::Struct(fields) => {
            let built: Vec<(TypeRef, Ref)> = fields.iter().map(|f| build(&f.2)).collect::<MpiResult<_>>()?;
            let mut copies = Vec::new();
            for (f, (_, rf)) in fields.iter().zip(&built) {
                for j in 0..f.0 as i64 {
                    copies.push((f.1 as i64 + j * rf.extent(), rf));
                }
            }
            let bls: Vec<usize> = fields.iter().map(|f| f.0).collect();
            let ds: Vec<isize> = fields.iter().map(|f| f.1).collect();
            let ts: Vec<TypeRef> = built.iter().map(|b| b.0.clone()).collect();
            (TypeRef::new(Datatype::create_struct(&bls, &ds, &ts, false)?), Ref::combine(&copies, true))
        }
        Recipe::Resized(lb, ext, c) => {
            let (t, mut rf) = build(c)?;
            rf.lb = *lb as i64;
            rf.ub = (*lb + *ext) as i64;
            rf.sticky_lb = true;
            rf.sticky_ub = true;
            (TypeRef::new(Datatype::resized(&t, *lb, *ext, false)?), rf)
        }
        Recipe::Dup(c) => {
            let (t, rf) = build(c)?;
            (TypeRef::new(Datatype::dup(&t)), rf)
        }
        Recipe::Subarray(dims, c_order, c) => {
            let (t, rf) = build(c)?;
            let sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let subs: Vec<usize> = dims.iter().map(|d| d.1).collect();
            let starts: Vec<usize> = dims.iter().map(|d| d.2).collect();
            let order = if *c_order { Order::C } else { Order::Fortran };
            let owned = |dim: usize, idx: usize| idx >= starts[dim] && idx < starts[dim] + subs[dim];
            let rf2 = array_ref(&sizes, order, &rf, owned);
            (TypeRef::new(Datatype::subarray(&sizes, &subs, &starts, order, &t, false)?), rf2)
        }
        Recipe::Darray(size, rank, dims, c_order, c) => {
            let (t, rf) = build(c)?;
            let order = if *c_order { Order::C } else { Order::Fortran };
            let dd: Vec<DarrayDim> = dims
                .iter()
                .map(|d| DarrayDim {
                    gsize: d.0,
                    distrib: [Distrib::Block, Distrib::Cyclic, Distrib::None][d.1 as usize % 3],
                    darg: d.2,
                    psize: d.3,
                })
                .collect();
            let t2 = Datatype::darray(*size, *rank, &dd, order, &t, false)?;
            // Row-major grid coordinates, then ownership by index.
            let mut coords = vec![0; dd.len()];
            let mut rr = *rank;
            for i in (0..dd.len()).rev() {
                coords[i] = rr % dd[i].psize;
                rr /= dd[i].psize;
            }
            let owned = |dim: usize, idx: usize| {
                let d = dd[dim];
                match d.distrib {
                    Distrib::Block => idx / d.darg.unwrap_or(d.gsize.div_ceil(d.psize)) == coords[dim],
                    Distrib::Cyclic => (idx / d.darg.unwrap_or(1)) % d.psize == coords[dim],
                    Distrib::None => true,
                }
            };
            let sizes: Vec<usize> = dd.iter().map(|d| d.gsize).collect();
            (TypeRef::new(t2), array_ref(&sizes, order, &rf, owned))
        }
    })
}

/// Reference for subarray / darray: the owned elements of the global array in memory order,
/// lb 0 and extent the whole array.
fn array_ref(sizes: &[usize], order: Order, old: &Ref, owned: impl Fn(usize, usize) -> bool) -> Ref {
    let n = sizes.len();
    let total: usize = sizes.iter().product();
    let mut copies = Vec::new();
    for lin in 0..total {
        // Memory position `lin` to an index per dimension.
        let mut idx = vec![0; n];
        let mut r = lin;
        let dims: Vec<usize> = match order {
            Order::C => (0..n).rev().collect(),
            Order::Fortran => (0..n).collect(),
        };
        for &d in &dims {
            idx[d] = r % sizes[d];
            r /= sizes[d];
        }
        if (0..n).all(|d| owned(d, idx[d])) {
            copies.push((lin as i64 * old.extent(), old));
        }
    }
    let mut rf = Ref::combine(&copies, false);
    rf.lb = 0;
    rf.ub = total as i64 * old.extent();
    rf.sticky_lb = true;
    rf.sticky_ub = true;
    rf
}

// ---- checks --------------------------------------------------------------------------------

/// A buffer covering the type map of `count` elements, filled with a pattern, and the
/// offset of the type's origin inside it.
struct Buf {
    bytes: Vec<u8>,
    origin: usize,
}

fn span(rf: &Ref, count: usize) -> (i64, i64) {
    let mut lo = 0i64;
    let mut hi = 1i64;
    for i in 0..count as i64 {
        for (d, s) in &rf.map {
            lo = lo.min(i * rf.extent() + d);
            hi = hi.max(i * rf.extent() + d + *s as i64);
        }
    }
    (lo, hi)
}

fn buffer(rf: &Ref, count: usize, fill: impl Fn(usize) -> u8) -> Buf {
    let (lo, hi) = span(rf, count);
    Buf { bytes: (0..(hi - lo) as usize).map(fill).collect(), origin: (-lo) as usize }
}

fn ref_pack(rf: &Ref, count: usize, b: &Buf) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count as i64 {
        for (d, s) in &rf.map {
            let at = (b.origin as i64 + i * rf.extent() + d) as usize;
            out.extend_from_slice(&b.bytes[at..at + s]);
        }
    }
    out
}

fn ref_unpack(rf: &Ref, count: usize, packed: &[u8], b: &mut Buf) {
    let mut k = 0;
    for i in 0..count as i64 {
        for (d, s) in &rf.map {
            let at = (b.origin as i64 + i * rf.extent() + d) as usize;
            for j in 0..*s {
                if k == packed.len() {
                    return;
                }
                b.bytes[at + j] = packed[k];
                k += 1;
            }
        }
    }
}

fn check(t: &Datatype, rf: &Ref) -> Result<(), TestCaseError> {
    prop_assert_eq!(t.size, rf.size(), "size");
    prop_assert_eq!(t.lb as i64, rf.lb, "lb");
    prop_assert_eq!(t.extent as i64, rf.extent(), "extent");
    prop_assert_eq!(t.basic_count, rf.map.len(), "basic elements");
    let (tlb, text) = rf.true_bounds();
    prop_assert_eq!((t.true_lb as i64, t.true_extent as i64), (tlb, text), "true bounds");
    prop_assert_eq!(t.sticky_lb, rf.sticky_lb, "sticky lb");
    prop_assert_eq!(t.sticky_ub, rf.sticky_ub, "sticky ub");
    for count in [0usize, 1, 3] {
        let src = buffer(rf, count, |i| (i * 7 + 3) as u8);
        let want = ref_pack(rf, count, &src);
        let mut got = vec![0u8; t.packed_size(count)];
        let n = unsafe { t.pack(src.bytes.as_ptr().add(src.origin), count, &mut got) };
        prop_assert_eq!(n, want.len());
        prop_assert_eq!(&got, &want, "pack of {} elements", count);
        // Every window of the packed stream.
        let total = want.len();
        for (skip, len) in [(0, 1), (1, 5), (total / 3, total / 2 + 1), (total.saturating_sub(2), 7)] {
            if skip >= total {
                continue;
            }
            let mut part = vec![0u8; len.min(total - skip)];
            let m = unsafe { t.pack_range(src.bytes.as_ptr().add(src.origin), count, skip, &mut part) };
            prop_assert_eq!(m, part.len());
            prop_assert_eq!(&part[..], &want[skip..skip + m], "pack_range skip {} len {}", skip, len);
        }
        // The runs cover the packed stream in order.
        let mut at = 0usize;
        let mut runs_ok = true;
        let seen = t.for_each_run(count, 0, usize::MAX, |off, len| {
            for j in 0..len {
                let a = (src.origin as isize + off) as usize + j;
                runs_ok &= src.bytes[a] == want[at];
                at += 1;
            }
        });
        prop_assert!(runs_ok && seen == total && at == total, "for_each_run");
        // Unpack all and a prefix; overlapping maps resolve the same way (last write wins).
        for cut in [total, total / 2] {
            let mut a = buffer(rf, count, |_| 0xee);
            let mut b = buffer(rf, count, |_| 0xee);
            ref_unpack(rf, count, &want[..cut], &mut a);
            let k = unsafe { t.unpack(&want[..cut], b.bytes.as_mut_ptr().add(b.origin), count) };
            prop_assert_eq!(k, cut);
            prop_assert_eq!(&a.bytes, &b.bytes, "unpack of {} bytes", cut);
        }
        // Element counts of every prefix length: defined where the bytes end between two
        // basic elements.
        for bytes in 0..=total.min(64) {
            let mut acc = 0;
            let mut n = 0;
            let mut boundary = bytes == 0;
            for i in 0..count {
                for (_, s) in &rf.map {
                    let _ = i;
                    acc += s;
                    if acc <= bytes {
                        n += 1;
                    }
                    boundary |= acc == bytes;
                }
            }
            if !t.predefined && t.size > 0 {
                prop_assert_eq!(t.elements_in(bytes), boundary.then_some(n), "elements in {} bytes", bytes);
            }
        }
    }
    Ok(())
}

fn recipe() -> impl Strategy<Value = Recipe> {
    let leaf = (0usize..5).prop_map(Recipe::Base);
    leaf.prop_recursive(3, 24, 4, |inner| {
        let b = inner.clone().prop_map(Box::new);
        prop_oneof![
            (0usize..4, b.clone()).prop_map(|(n, c)| Recipe::Contig(n, c)),
            (0usize..4, 0usize..3, -3isize..5, b.clone()).prop_map(|(n, bl, s, c)| Recipe::Vector(n, bl, s, c)),
            (0usize..4, 0usize..3, -40isize..60, b.clone()).prop_map(|(n, bl, s, c)| Recipe::Hvector(n, bl, s, c)),
            (prop::collection::vec((0usize..3, -4isize..6), 0..4), b.clone()).prop_map(|(v, c)| Recipe::Indexed(v, c)),
            (prop::collection::vec((0usize..3, -50isize..80), 0..4), b.clone()).prop_map(|(v, c)| Recipe::Hindexed(v, c)),
            (0usize..3, prop::collection::vec(-4isize..6, 0..4), b.clone()).prop_map(|(bl, v, c)| Recipe::IndexedBlock(bl, v, c)),
            prop::collection::vec((0usize..3, -50isize..80, inner.clone()), 0..4).prop_map(Recipe::Struct),
            (-20isize..20, -8isize..60, b.clone()).prop_map(|(lb, e, c)| Recipe::Resized(lb, e, c)),
            b.clone().prop_map(Recipe::Dup),
            (prop::collection::vec((1usize..4, 1usize..4, 0usize..3), 1..3), any::<bool>(), b.clone()).prop_map(
                |(dims, o, c)| {
                    let dims = dims.into_iter().map(|(s, sub, st)| (s + sub, sub, st.min(s))).collect();
                    Recipe::Subarray(dims, o, c)
                }
            ),
            (prop::collection::vec((1usize..6, 0u8..3, prop::option::of(1usize..3), 1usize..3), 1..3), any::<bool>(), b)
                .prop_map(|(dims, o, c)| {
                    // Keep the grid valid: NONE needs one process, BLOCK a covering block size.
                    let dims: Vec<_> = dims
                        .into_iter()
                        .map(|(g, d, a, p)| match d % 3 {
                            0 => (g, 0, a.map(|x| x.max(g.div_ceil(p))), p),
                            1 => (g, 1, a, p),
                            _ => (g, 2, None, 1),
                        })
                        .collect();
                    let size = dims.iter().map(|d| d.3).product::<usize>();
                    Recipe::Darray(size, size - 1, dims, o, c)
                }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
    #[test]
    fn random_types_match_reference(r in recipe()) {
        let (t, rf) = build(&r).map_err(|e| TestCaseError::fail(format!("build failed: {e}")))?;
        check(&t, &rf)?;
    }

    #[test]
    fn external32_round_trip(r in recipe()) {
        let (t, rf) = build(&r).map_err(|e| TestCaseError::fail(format!("build failed: {e}")))?;
        let count = 2;
        let src = buffer(&rf, count, |i| (i * 13 + 1) as u8);
        let mut ext = vec![0u8; t.ext32_packed_size(count).unwrap_or(0)];
        let n = unsafe { t.pack_external(src.bytes.as_ptr().add(src.origin), count, &mut ext) };
        prop_assert_eq!(n, Some(ext.len()));
        let mut back = buffer(&rf, count, |_| 0);
        let m = unsafe { t.unpack_external(&ext, back.bytes.as_mut_ptr().add(back.origin), count) };
        prop_assert_eq!(m, Some(ext.len()));
        // Native pack of what came back equals native pack of the source.
        prop_assert_eq!(ref_pack(&rf, count, &back), ref_pack(&rf, count, &src));
    }
}

// ---- fixed cases -----------------------------------------------------------------------------

#[test]
fn struct_is_padded_like_c() {
    // struct { int i; char c; }: extent 8.
    let s = Datatype::create_struct(&[1, 1], &[0, 4], &[int(), char_t()], false).unwrap();
    assert_eq!((s.size, s.lb, s.extent), (5, 0, 8));
    assert_eq!((s.true_lb, s.true_extent), (0, 5));
    // Explicit bounds turn padding off.
    let r = TypeRef::new(Datatype::resized(&int(), 0, 6, false).unwrap());
    let s = Datatype::create_struct(&[1, 1], &[0, 6], &[r, char_t()], false).unwrap();
    assert_eq!(s.extent, 6);
}

#[test]
fn sticky_bounds_win_over_data() {
    let r = TypeRef::new(Datatype::resized(&int(), -4, 16, false).unwrap());
    let s = Datatype::create_struct(&[1, 1], &[0, 100], &[r.clone(), double()], false).unwrap();
    assert_eq!((s.lb, s.extent), (-4, 16));
    assert_eq!((s.true_lb, s.true_extent), (0, 108));
    let c = Datatype::contiguous(3, &r, false).unwrap();
    assert_eq!((c.lb, c.extent, c.size), (-4, 48, 12));
}

#[test]
fn vector_of_a_billion_blocks_is_compact_and_packs_windows() {
    let v = Datatype::vector(1_000_000_000, 1, 2, &int(), false).unwrap();
    assert_eq!(v.size, 4_000_000_000);
    assert_eq!(v.extent, (999_999_999 * 2 + 1) * 4);
    assert!(v.blocks(1000).is_none());
    // A window deep inside, read from a small buffer placed accordingly.
    let buf: Vec<u8> = (0..64u8).collect();
    let skip = 3_000_000_000usize;
    // Element k of the vector is at byte 8k; bytes [skip, skip+8) are ints 750M and 750M+1.
    let base = buf.as_ptr().wrapping_sub(8 * 750_000_000);
    let mut out = [0u8; 8];
    let n = unsafe { v.pack_range(base, 1, skip, &mut out) };
    assert_eq!(n, 8);
    assert_eq!(out, [0, 1, 2, 3, 8, 9, 10, 11]);
}

#[test]
fn mpi_bottom_absolute_addresses() {
    let a = [1i32, 2, 3];
    let b = [9.5f64];
    let da = a.as_ptr() as isize;
    let db = b.as_ptr() as isize;
    let s = Datatype::create_struct(&[3, 1], &[da, db], &[int(), double()], false).unwrap();
    let mut out = vec![0u8; s.size];
    let n = unsafe { s.pack(std::ptr::null(), 1, &mut out) };
    assert_eq!(n, 20);
    assert_eq!(&out[..4], &1i32.to_ne_bytes());
    assert_eq!(&out[12..], &9.5f64.to_ne_bytes());
    let mut a2 = [0i32; 3];
    let mut b2 = [0f64];
    let s2 = Datatype::create_struct(&[3, 1], &[a2.as_mut_ptr() as isize, b2.as_mut_ptr() as isize], &[int(), double()], false)
        .unwrap();
    unsafe { s2.unpack(&out, std::ptr::null_mut(), 1) };
    assert_eq!((a2, b2), (a, b));
}

#[test]
fn elements_of_pairs_and_partials() {
    let di = double_int();
    assert_eq!(di.elements_in(12), Some(2));
    assert_eq!(di.elements_in(8), Some(1), "a pair counts as a struct of its members");
    assert_eq!(di.elements_in(20), Some(3));
    // {double, int, double} received as double_int: 3 elements.
    let c = Datatype::contiguous(2, &di, false).unwrap();
    assert_eq!(c.elements_in(20), Some(3));
    assert_eq!(c.bytes_for_elements(3), Some(20));
    let i = int();
    assert_eq!(i.elements_in(7), None);
    let v = Datatype::contiguous(2, &i, false).unwrap();
    assert_eq!(v.elements_in(12), Some(3));
    assert_eq!(v.elements_in(7), None, "the bytes end inside the second int");
    assert_eq!(v.elements_in(4), Some(1));
    // 33 bytes as {double, int} x 4: the sixth basic element is cut (MPICH's getcnterr).
    let ia = Datatype::contiguous(4, &di, false).unwrap();
    assert_eq!(ia.elements_in(32), Some(5));
    assert_eq!(ia.elements_in(33), None);
    let empty = Datatype::contiguous(0, &i, false).unwrap();
    assert_eq!(empty.elements_in(0), Some(0));
    assert_eq!(empty.elements_in(4), None);
}

#[test]
fn external32_is_big_endian_with_standard_sizes() {
    let s = Datatype::create_struct(&[1, 1, 1, 1], &[0, 8, 16, 18], &[long(), double(), short(), char_t()], false).unwrap();
    assert_eq!(s.ext32_size, 4 + 8 + 2 + 1);
    #[repr(C)]
    struct S {
        l: i64,
        d: f64,
        h: i16,
        c: u8,
    }
    let v = S { l: -2, d: 1.0, h: 0x0102, c: b'x' };
    let mut ext = vec![0u8; 15];
    let n = unsafe { s.pack_external(&v as *const S as *const u8, 1, &mut ext) };
    assert_eq!(n, Some(15));
    assert_eq!(&ext[..4], &[0xff, 0xff, 0xff, 0xfe]);
    assert_eq!(&ext[4..12], &1.0f64.to_be_bytes());
    assert_eq!(&ext[12..14], &[1, 2]);
    assert_eq!(ext[14], b'x');
    let mut w = S { l: 0, d: 0.0, h: 0, c: 0 };
    let m = unsafe { s.unpack_external(&ext, &mut w as *mut S as *mut u8, 1) };
    assert_eq!(m, Some(15));
    assert_eq!((w.l, w.d, w.h, w.c), (-2, 1.0, 0x0102, b'x'));
    // Too small a buffer writes nothing.
    assert_eq!(unsafe { s.pack_external(&v as *const S as *const u8, 1, &mut ext[..14]) }, None);
}

#[test]
fn external32_long_double_is_binary128() {
    let t = long_double();
    // 1.0L: x87 significand 0x8000.., exponent 0x3fff.
    let mut x = [0u8; 16];
    x[7] = 0x80;
    x[8] = 0xff;
    x[9] = 0x3f;
    let mut ext = [0u8; 16];
    unsafe { t.pack_external(x.as_ptr(), 1, &mut ext) };
    assert_eq!(ext[0], 0x3f);
    assert_eq!(ext[1], 0xff);
    assert!(ext[2..].iter().all(|b| *b == 0));
    let mut back = [0xaau8; 16];
    unsafe { t.unpack_external(&ext, back.as_mut_ptr(), 1) };
    assert_eq!(back[..10], x[..10]);
}

#[test]
fn subarray_and_darray_bounds() {
    let s = Datatype::subarray(&[4, 6], &[2, 3], &[1, 2], Order::C, &int(), false).unwrap();
    assert_eq!((s.lb, s.extent, s.size), (0, 96, 24));
    assert_eq!((s.true_lb, s.true_extent), ((6 + 2) * 4, ((2 * 6 + 5) - (6 + 2)) * 4));
    // 2x3 process grid, cyclic(2) x block over 10x9 doubles: rank 4 is at (1, 1).
    let dims = [
        DarrayDim { gsize: 10, distrib: Distrib::Cyclic, darg: Some(2), psize: 2 },
        DarrayDim { gsize: 9, distrib: Distrib::Block, darg: None, psize: 3 },
    ];
    let d = Datatype::darray(6, 4, &dims, Order::C, &double(), false).unwrap();
    assert_eq!((d.lb, d.extent), (0, 90 * 8));
    // rows 2,3,6,7 of 10; columns 3..6 of 9.
    assert_eq!(d.size, 4 * 3 * 8);
    assert!(Datatype::darray(6, 6, &dims, Order::C, &double(), false).is_err());
}

#[test]
fn errors_for_bad_arguments_and_overflow() {
    assert!(Datatype::subarray(&[4], &[5], &[0], Order::C, &int(), false).is_err());
    assert!(Datatype::subarray(&[4], &[2], &[3], Order::C, &int(), false).is_err());
    let big = TypeRef::new(Datatype::contiguous(1 << 40, &int(), false).unwrap());
    assert!(Datatype::contiguous(1 << 40, &big, false).is_err(), "2^82 bytes cannot be a type");
}

#[test]
fn dup_and_resized_keep_data_and_envelopes() {
    let v = TypeRef::new(Datatype::vector(3, 2, 4, &int(), false).unwrap());
    assert_eq!(v.combiner(), Combiner::Vector);
    let d = Datatype::dup(&v);
    assert_eq!(d.combiner(), Combiner::Dup);
    assert_eq!((d.size, d.extent), (v.size, v.extent));
    let r = Datatype::resized(&v, 0, 100, true).unwrap();
    assert!(r.envelope.large);
    assert_eq!(r.envelope.args, Args::Resized { lb: 0, extent: 100 });
    assert!(TypeRef::ptr_eq(&r.envelope.types[0], &v));
}

// ---- micro-benchmark -----------------------------------------------------------------------

/// Pack / unpack throughput of vectors against memcpy of the same bytes, out of cache
/// (64 MiB packed) and in cache (256 KiB packed, repeated). Run with
/// `cargo test --release -p steadfast-core pack_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn pack_throughput() {
    use std::time::Instant;
    fn best(reps: usize, mut f: impl FnMut()) -> f64 {
        (0..7)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..reps {
                    f();
                }
                t.elapsed().as_secs_f64() / reps as f64
            })
            .fold(f64::MAX, f64::min)
    }
    for (packed_bytes, reps) in [(64usize << 20, 1usize), (256usize << 10, 64)] {
        let src: Vec<u8> = (0..2 * packed_bytes + 4096).map(|i| i as u8).collect();
        let mut dst = vec![0u8; packed_bytes];
        let mut back = vec![0u8; 2 * packed_bytes + 4096];
        let t_memcpy = best(reps, || {
            dst.copy_from_slice(&src[..packed_bytes]);
            std::hint::black_box(&dst);
        });
        println!("{} KiB packed: memcpy {:6.2} GB/s", packed_bytes >> 10, packed_bytes as f64 / t_memcpy / 1e9);
        for (name, base, bl) in [("1 double", double(), 1), ("1 int", int(), 1), ("4 doubles", double(), 4), ("16 doubles", double(), 16), ("128 doubles", double(), 128)] {
            let elem = base.size * bl;
            let count = packed_bytes / elem;
            let v = Datatype::vector(count, bl, 2 * bl as isize, &base, false).unwrap();
            let tp = best(reps, || {
                let n = unsafe { v.pack(src.as_ptr(), 1, &mut dst) };
                assert_eq!(n, packed_bytes);
            });
            let tu = best(reps, || {
                let n = unsafe { v.unpack(&dst, back.as_mut_ptr(), 1) };
                assert_eq!(n, packed_bytes);
            });
            assert_eq!(&dst[elem..2 * elem], &src[2 * elem..3 * elem]);
            println!(
                "  vector({count}, {name}, stride 2 blocks): pack {:6.2} GB/s ({:3.0}% of memcpy), unpack {:6.2} GB/s",
                packed_bytes as f64 / tp / 1e9,
                100.0 * t_memcpy / tp,
                packed_bytes as f64 / tu / 1e9
            );
        }
    }
}

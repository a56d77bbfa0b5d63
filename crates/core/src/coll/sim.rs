//! Schedule tests: every rank's schedule is built with [`super::build`] and run in memory,
//! with sends buffered (packed at the start of their round) and receives matched in FIFO
//! order per (source, tag), as the engine does. Results are compared with a direct
//! computation of what the collective must produce, for many sizes, counts, roots, datatypes
//! and algorithms (forced through `CollConfig`), including a non-commutative op whose result
//! depends on rank order.

#![allow(clippy::needless_range_loop)]

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::sched::{typed_copy, Schedule, Step};
use super::*;
use crate::datatype::{BasicKind, Block, Datatype};
use crate::op::{Elem, Num, Op, PredefOp, Reduction, UserFn, UserOp};

struct Msg {
    src: i32,
    local: bool,
    sub: u16,
    data: Vec<u8>,
}

/// Run one schedule per rank of one intracommunicator.
fn run(scheds: &mut [Schedule]) -> Result<(), String> {
    let n = scheds.len();
    run_groups(scheds, &[n])
}

/// Run one schedule per rank to completion; errors name the rank and what went wrong.
/// `groups` are the sizes of the groups (one: an intracommunicator; two: the two sides of
/// an intercommunicator, whose non-local traffic goes to the other group).
fn run_groups(scheds: &mut [Schedule], groups: &[usize]) -> Result<(), String> {
    let n = scheds.len();
    let offset = |g: usize| groups[..g].iter().sum::<usize>();
    let group_of = |r: usize| {
        let mut g = 0;
        while r >= offset(g + 1) {
            g += 1;
        }
        g
    };
    // Global index of `peer` as addressed by global rank `r`.
    let target = |r: usize, local: bool, peer: i32| -> Option<usize> {
        let g = group_of(r);
        let tg = if local || groups.len() == 1 { g } else { 1 - g };
        (0..groups[tg] as i32).contains(&peer).then(|| offset(tg) + peer as usize)
    };
    let rank_in_group = |r: usize| (r - offset(group_of(r))) as i32;
    let mut inbox: Vec<VecDeque<Msg>> = (0..n).map(|_| VecDeque::new()).collect();
    let mut pc = vec![0usize; n];
    let mut waiting: Vec<Option<Vec<usize>>> = vec![None; n];
    let mut steps_taken = 0usize;
    loop {
        let mut progressed = false;
        for r in 0..n {
            let s = &scheds[r];
            if waiting[r].is_none() {
                if pc[r] >= s.steps.len() {
                    continue;
                }
                // Start a round: sends leave now, receives wait.
                let mut recvs = Vec::new();
                let mut i = pc[r];
                while i < s.steps.len() && !matches!(s.steps[i], Step::Round) {
                    match &s.steps[i] {
                        Step::Send { peer, local, sub, buf, count, dtype } => {
                            let Some(to) = target(r, *local, *peer) else {
                                return Err(format!("rank {r}: send to invalid rank {peer} (local {local})"));
                            };
                            let mut data = vec![0u8; dtype.packed_size(*count)];
                            // SAFETY: the schedule's buffers are valid for their counts.
                            unsafe { dtype.pack(*buf, *count, &mut data) };
                            inbox[to].push_back(Msg { src: rank_in_group(r), local: *local, sub: *sub, data });
                        }
                        Step::Recv { .. } => recvs.push(i),
                        _ => {}
                    }
                    i += 1;
                }
                waiting[r] = Some(recvs);
                progressed = true;
            }
            // Match receives in posting order.
            let recvs = waiting[r].as_mut().unwrap();
            let mut k = 0;
            while k < recvs.len() {
                let Step::Recv { peer, local, sub, buf, count, dtype } = &scheds[r].steps[recvs[k]] else { unreachable!() };
                let pos = inbox[r].iter().position(|m| m.src == *peer && m.local == *local && m.sub == *sub);
                if let Some(p) = pos {
                    let m = inbox[r].remove(p).unwrap();
                    let cap = dtype.packed_size(*count);
                    if m.data.len() > cap {
                        return Err(format!("rank {r}: {} bytes from {peer} truncated to {cap}", m.data.len()));
                    }
                    // SAFETY: as above.
                    unsafe { dtype.unpack(&m.data, *buf, *count) };
                    recvs.remove(k);
                    progressed = true;
                } else {
                    k += 1;
                }
            }
            if recvs.is_empty() {
                // Local steps, then on to the next round.
                let s = &scheds[r];
                let mut i = pc[r];
                while i < s.steps.len() && !matches!(s.steps[i], Step::Round) {
                    match &s.steps[i] {
                        Step::Reduce { src, dst, count } => unsafe { s.red.as_ref().unwrap().apply(*src, *dst, *count) },
                        Step::Copy { src, scount, stype, dst, dcount, dtype } => unsafe {
                            typed_copy(*src, *scount, stype, *dst, *dcount, dtype)
                        },
                        _ => {}
                    }
                    i += 1;
                }
                pc[r] = i + 1;
                waiting[r] = None;
                progressed = true;
            }
        }
        steps_taken += 1;
        let done = (0..n).all(|r| waiting[r].is_none() && pc[r] >= scheds[r].steps.len());
        if done {
            if let Some(r) = (0..n).find(|&r| !inbox[r].is_empty()) {
                return Err(format!("rank {r}: {} messages never received", inbox[r].len()));
            }
            return Ok(());
        }
        if !progressed || steps_taken > 100_000 {
            let stuck: Vec<usize> = (0..n).filter(|&r| waiting[r].as_ref().is_some_and(|w| !w.is_empty())).collect();
            return Err(format!("deadlock: ranks {stuck:?} wait for messages that were never sent"));
        }
    }
}

fn int_type() -> TypeRef {
    TypeRef::new(Datatype::predefined("MPI_INT", 4, 4, BasicKind::Int { bytes: 4, signed: true }, vec![Block { off: 0, len: 4 }]))
}

/// Two ints every three ints (a vector(2, 1, 3) resized to 8 ints): non-contiguous.
fn strided_type() -> TypeRef {
    // Two ints at offsets 0 and 12, extent 32: size 8, true extent 16.
    let pair = Datatype::hindexed(&[1, 1], &[0, 12], &int_type(), false).expect("valid type");
    TypeRef::new(Datatype::resized(&TypeRef::new(pair), 0, 32, false).expect("valid type"))
}

/// A 2x2 matrix of wrapping i64: 32 bytes.
fn mat_type() -> TypeRef {
    TypeRef::new(Datatype::predefined("mat", 32, 32, BasicKind::Opaque, vec![Block { off: 0, len: 32 }]))
}

type Mat = [i64; 4];

fn matmul(a: Mat, b: Mat) -> Mat {
    [
        a[0].wrapping_mul(b[0]).wrapping_add(a[1].wrapping_mul(b[2])),
        a[0].wrapping_mul(b[1]).wrapping_add(a[1].wrapping_mul(b[3])),
        a[2].wrapping_mul(b[0]).wrapping_add(a[3].wrapping_mul(b[2])),
        a[2].wrapping_mul(b[1]).wrapping_add(a[3].wrapping_mul(b[3])),
    ]
}

/// inout = in · inout (matrix product, not commutative).
unsafe extern "C" fn matmul_op(inv: *mut c_void, inout: *mut c_void, len: *mut c_int, _t: *mut usize) {
    let a = inv as *const Mat;
    let b = inout as *mut Mat;
    for i in 0..*len as usize {
        b.add(i).write_unaligned(matmul(a.add(i).read_unaligned(), b.add(i).read_unaligned()));
    }
}

fn matrix_of(rank: usize, i: usize) -> Mat {
    [rank as i64 + 2, 1 + i as i64, 1, (rank * 3 + i) as i64 % 5]
}

fn mat_reduction() -> Reduction {
    let op = Op::User(Arc::new(UserOp { func: UserFn::Int(matmul_op), commute: false }));
    Reduction::new(op, mat_type(), Elem::None, 0).unwrap()
}

fn sum_reduction(t: &TypeRef) -> Reduction {
    Reduction::new(Op::Predef(PredefOp::Sum), t.clone(), Elem::Num(Num::I32), 0).unwrap()
}

fn topo(rank: usize, size: usize) -> Topo {
    Topo { rank: rank as i32, size: size as i32, remote: None, crowded: false, single_copy: false }
}

/// Build every rank's schedule for the call `make(rank)` returns and run them.
fn run_all(size: usize, cfg: &CollConfig, make: impl Fn(usize) -> Coll) -> Result<(), String> {
    let mut scheds: Vec<Schedule> = (0..size)
        .map(|r| {
            let mut s = Schedule::default();
            s.reset(Handle(0), 0);
            build(&mut s, topo(r, size), &make(r), cfg).map(|_| s).map_err(|e| format!("rank {r}: build: {e}"))
        })
        .collect::<Result<_, _>>()?;
    run(&mut scheds)
}

fn forced(pairs: &[(&str, &str)]) -> CollConfig {
    CollConfig { force: pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(), ..Default::default() }
}

/// Configurations to try: the default rule plus every algorithm forced.
fn configs(coll: &str, algos: &[&str]) -> Vec<(String, CollConfig)> {
    let mut v = vec![("default".to_string(), CollConfig::default())];
    for a in algos {
        v.push((a.to_string(), forced(&[(coll, a)])));
    }
    v
}

/// The scan configurations, with the chain also cut into segments of one element and
/// larger (1 byte asks for one element; 64 segments at most, so 100 elements go by twos).
fn scan_configs() -> Vec<(String, CollConfig)> {
    let mut v = configs("scan", &["linear", "recursive_doubling", "chain"]);
    for segment in [1, 12] {
        v.push((format!("chain/{segment}"), CollConfig { scan_segment: segment, ..forced(&[("scan", "chain")]) }));
    }
    v
}

const SIZES: &[usize] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16];
const COUNTS: &[usize] = &[0, 1, 3, 17, 100];

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn as_ints(b: &[u8]) -> Vec<i32> {
    b.chunks(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}
fn val(rank: usize, i: usize) -> i32 {
    (rank * 1000 + i * 7 + 1) as i32
}

fn fail(what: &str, size: usize, count: usize, algo: &str, e: impl std::fmt::Display) -> ! {
    panic!("{what} size={size} count={count} algo={algo}: {e}")
}

#[test]
fn barrier_every_size() {
    for (algo, cfg) in configs("barrier", &["dissemination", "tree", "linear"]) {
        for &n in SIZES {
            run_all(n, &cfg, |_| Coll::Barrier).unwrap_or_else(|e| fail("barrier", n, 0, &algo, e));
        }
    }
}

#[test]
fn bcast_every_size_root_count_and_algorithm() {
    let t = int_type();
    for (algo, cfg) in configs("bcast", &["binomial", "linear", "scatter_allgather"]) {
        for &n in SIZES {
            for &count in &[0usize, 1, 5, 1000] {
                for root in 0..n {
                    let mut bufs: Vec<Vec<u8>> = (0..n)
                        .map(|r| ints(&(0..count).map(|i| if r == root { val(r, i) } else { -1 }).collect::<Vec<_>>()))
                        .collect();
                    let ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    run_all(n, &cfg, |r| Coll::Bcast { buf: Buf { ptr: ptrs[r], count, dtype: t.clone() }, root: root as i32 })
                        .unwrap_or_else(|e| fail("bcast", n, count, &algo, e));
                    for (r, b) in bufs.iter().enumerate() {
                        let want: Vec<i32> = (0..count).map(|i| val(root, i)).collect();
                        assert_eq!(as_ints(b), want, "bcast n={n} count={count} root={root} rank={r} algo={algo}");
                    }
                }
            }
        }
    }
}

#[test]
fn bcast_noncontiguous_type() {
    let t = strided_type();
    for (algo, cfg) in configs("bcast", &["binomial", "scatter_allgather"]) {
        for &n in &[3usize, 4, 7] {
            let count = 9;
            let data = |i: usize| i % 8 == 0 || i % 8 == 3;
            let mut bufs: Vec<Vec<i32>> =
                (0..n).map(|r| (0..count * 8).map(|i| if r == 1 && data(i) { i as i32 } else { -1 }).collect()).collect();
            let ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
            run_all(n, &cfg, |r| Coll::Bcast { buf: Buf { ptr: ptrs[r], count, dtype: t.clone() }, root: 1 })
                .unwrap_or_else(|e| fail("bcast strided", n, count, &algo, e));
            for b in &bufs {
                for (i, x) in b.iter().enumerate() {
                    assert_eq!(*x, if data(i) { i as i32 } else { -1 }, "element {i} algo={algo}");
                }
            }
        }
    }
}

/// Per-rank send/recv buffers of ints; `val(rank, i)` as input.
fn reduce_inputs(n: usize, count: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let send = (0..n).map(|r| ints(&(0..count).map(|i| val(r, i)).collect::<Vec<_>>())).collect();
    let recv = (0..n).map(|_| ints(&vec![-7; count.max(1) * n])).collect();
    (send, recv)
}

fn sum_of(n: usize, i: usize) -> i32 {
    (0..n).map(|r| val(r, i)).fold(0i32, |a, b| a.wrapping_add(b))
}

#[test]
fn reduce_allreduce_sum_every_algorithm_and_in_place() {
    let t = int_type();
    let red = sum_reduction(&t);
    for (algo, cfg) in configs("allreduce", &["recursive_doubling", "rabenseifner"]) {
        for &n in SIZES {
            for &count in COUNTS {
                for in_place in [false, true] {
                    let (mut send, mut recv) = reduce_inputs(n, count);
                    if in_place {
                        recv = send.clone();
                    }
                    let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    run_all(n, &cfg, |r| Coll::Allreduce {
                        buf: RBuf { send: (!in_place).then_some(sp[r] as *const u8), recv: rp[r], count },
                        red: red.clone(),
                    })
                    .unwrap_or_else(|e| fail("allreduce", n, count, &algo, e));
                    for (r, b) in recv.iter().enumerate() {
                        let got = as_ints(&b[..count * 4]);
                        let want: Vec<i32> = (0..count).map(|i| sum_of(n, i)).collect();
                        assert_eq!(got, want, "allreduce n={n} count={count} rank={r} algo={algo} in_place={in_place}");
                    }
                }
            }
        }
    }
    for (algo, cfg) in configs("reduce", &["binomial", "reduce_scatter_gather", "linear"]) {
        for &n in SIZES {
            for &count in COUNTS {
                for root in 0..n {
                    for in_place in [false, true] {
                        let (mut send, mut recv) = reduce_inputs(n, count);
                        if in_place {
                            recv[root] = send[root].clone();
                        }
                        let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                        let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                        run_all(n, &cfg, |r| Coll::Reduce {
                            buf: RBuf { send: (!(in_place && r == root)).then_some(sp[r] as *const u8), recv: rp[r], count },
                            red: red.clone(),
                            root: root as i32,
                        })
                        .unwrap_or_else(|e| fail("reduce", n, count, &algo, e));
                        let got = as_ints(&recv[root][..count * 4]);
                        let want: Vec<i32> = (0..count).map(|i| sum_of(n, i)).collect();
                        assert_eq!(got, want, "reduce n={n} count={count} root={root} algo={algo} in_place={in_place}");
                    }
                }
            }
        }
    }
}

/// Product of the ranks' matrices in rank order, element `i`.
fn ordered_product(ranks: std::ops::Range<usize>, i: usize) -> Mat {
    ranks.map(|r| matrix_of(r, i)).reduce(matmul).unwrap()
}

fn mats(rank: usize, count: usize) -> Vec<Mat> {
    (0..count).map(|i| matrix_of(rank, i)).collect()
}

#[test]
fn non_commutative_ops_keep_rank_order() {
    let red = mat_reduction();
    let count = 3;
    for &n in SIZES {
        let cfg = CollConfig::default();
        // Allreduce (and the forced split algorithm must not be used for it).
        let forced_cfg = forced(&[("allreduce", "rabenseifner"), ("reduce", "reduce_scatter_gather")]);
        let binomial_cfg = forced(&[("reduce", "binomial")]);
        let linear_cfg = forced(&[("reduce", "linear")]);
        for cfg in [&cfg, &forced_cfg, &binomial_cfg, &linear_cfg] {
            let mut send: Vec<Vec<Mat>> = (0..n).map(|r| mats(r, count)).collect();
            let mut recv: Vec<Vec<Mat>> = (0..n).map(|_| vec![[0; 4]; count]).collect();
            let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
            let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
            run_all(n, cfg, |r| Coll::Allreduce { buf: RBuf { send: Some(sp[r]), recv: rp[r], count }, red: red.clone() })
                .unwrap_or_else(|e| fail("allreduce matmul", n, count, "-", e));
            for (r, b) in recv.iter().enumerate() {
                for i in 0..count {
                    assert_eq!(b[i], ordered_product(0..n, i), "allreduce matmul n={n} rank={r}");
                }
            }
            for root in 0..n {
                let mut recv: Vec<Vec<Mat>> = (0..n).map(|_| vec![[0; 4]; count]).collect();
                let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
                run_all(n, cfg, |r| Coll::Reduce {
                    buf: RBuf { send: Some(sp[r]), recv: rp[r], count },
                    red: red.clone(),
                    root: root as i32,
                })
                .unwrap_or_else(|e| fail("reduce matmul", n, count, "-", e));
                for i in 0..count {
                    assert_eq!(recv[root][i], ordered_product(0..n, i), "reduce matmul n={n} root={root}");
                }
            }
        }
        // Scan and exscan, by every algorithm.
        for ((_, scan_cfg), exclusive) in scan_configs().into_iter().flat_map(|c| [(c.clone(), false), (c, true)]) {
            let mut send: Vec<Vec<Mat>> = (0..n).map(|r| mats(r, count)).collect();
            let mut recv: Vec<Vec<Mat>> = (0..n).map(|_| vec![[9; 4]; count]).collect();
            let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
            let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
            run_all(n, &scan_cfg, |r| {
                let buf = RBuf { send: Some(sp[r]), recv: rp[r], count };
                if exclusive {
                    Coll::Exscan { buf, red: red.clone() }
                } else {
                    Coll::Scan { buf, red: red.clone() }
                }
            })
            .unwrap_or_else(|e| fail("scan matmul", n, count, "-", e));
            for (r, b) in recv.iter().enumerate() {
                for i in 0..count {
                    if exclusive && r == 0 {
                        assert_eq!(b[i], [9; 4], "exscan leaves rank 0's buffer alone");
                    } else {
                        let hi = if exclusive { r } else { r + 1 };
                        assert_eq!(b[i], ordered_product(0..hi, i), "scan matmul n={n} rank={r} exclusive={exclusive}");
                    }
                }
            }
        }
        // Reduce_scatter_block: rank r gets block r of the ordered product.
        let per = 2;
        let mut send: Vec<Vec<Mat>> = (0..n).map(|r| mats(r, per * n)).collect();
        let mut recv: Vec<Vec<Mat>> = (0..n).map(|_| vec![[0; 4]; per]).collect();
        let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
        let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
        run_all(n, &cfg, |r| Coll::ReduceScatterBlock { buf: RBuf { send: Some(sp[r]), recv: rp[r], count: per }, red: red.clone() })
            .unwrap_or_else(|e| fail("reduce_scatter_block matmul", n, per, "-", e));
        for (r, b) in recv.iter().enumerate() {
            for i in 0..per {
                assert_eq!(b[i], ordered_product(0..n, r * per + i), "reduce_scatter_block matmul n={n} rank={r}");
            }
        }
    }
}

#[test]
fn large_reduces_take_the_one_child_at_a_time_path() {
    // 2500 matrices are 80 KB: above the all-children-at-once limit even for one child.
    let red = mat_reduction();
    let count = 2500;
    for &n in &[2usize, 3, 5, 8] {
        let mut send: Vec<Vec<Mat>> = (0..n).map(|r| mats(r, count)).collect();
        let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
        for root in [0, n - 1] {
            for in_place in [false, true] {
                let mut recv: Vec<Vec<Mat>> = (0..n).map(|r| if in_place && r == root { mats(r, count) } else { vec![[0; 4]; count] }).collect();
                let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
                run_all(n, &CollConfig::default(), |r| Coll::Reduce {
                    buf: RBuf { send: (!(in_place && r == root)).then_some(sp[r] as *const u8), recv: rp[r], count },
                    red: red.clone(),
                    root: root as i32,
                })
                .unwrap_or_else(|e| fail("large reduce matmul", n, count, "-", e));
                for i in (0..count).step_by(97) {
                    assert_eq!(recv[root][i], ordered_product(0..n, i), "large reduce n={n} root={root} in_place={in_place}");
                }
            }
        }
    }
    let t = int_type();
    let red = sum_reduction(&t);
    let count = 20000;
    for &n in &[3usize, 7] {
        let (mut send, mut recv) = reduce_inputs(n, count);
        let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let cfg = forced(&[("reduce", "binomial")]);
        run_all(n, &cfg, |r| Coll::Reduce { buf: RBuf { send: Some(sp[r]), recv: rp[r], count }, red: red.clone(), root: 1 })
            .unwrap_or_else(|e| fail("large reduce", n, count, "binomial", e));
        let got = as_ints(&recv[1][..count * 4]);
        for i in (0..count).step_by(101) {
            assert_eq!(got[i], sum_of(n, i));
        }
    }
}

#[test]
fn scan_and_exscan_sum() {
    let t = int_type();
    let red = sum_reduction(&t);
    for (algo, cfg) in scan_configs() {
        for &n in SIZES {
            for &count in COUNTS {
                for (exclusive, in_place) in [(false, true), (true, true), (false, false), (true, false)] {
                    let (mut send, _) = reduce_inputs(n, count);
                    // Out of place, the receive buffers start as garbage (Exscan's rank 0 keeps it).
                    let mut recv = if in_place { send.clone() } else { vec![vec![0x5a; count * 4]; n] };
                    let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    run_all(n, &cfg, |r| {
                        let buf = RBuf { send: (!in_place).then_some(sp[r].cast_const()), recv: rp[r], count };
                        if exclusive {
                            Coll::Exscan { buf, red: red.clone() }
                        } else {
                            Coll::Scan { buf, red: red.clone() }
                        }
                    })
                    .unwrap_or_else(|e| fail("scan", n, count, &algo, e));
                    for (r, b) in recv.iter().enumerate() {
                        if exclusive && r == 0 {
                            continue;
                        }
                        let hi = if exclusive { r } else { r + 1 };
                        let want: Vec<i32> = (0..count).map(|i| (0..hi).map(|q| val(q, i)).fold(0i32, |a, b| a.wrapping_add(b))).collect();
                        assert_eq!(as_ints(&b[..count * 4]), want, "scan {algo} n={n} count={count} rank={r} exclusive={exclusive} in_place={in_place}");
                    }
                    for (r, b) in send.iter().enumerate() {
                        if !in_place {
                            let mine: Vec<i32> = (0..count).map(|i| val(r, i)).collect();
                            assert_eq!(as_ints(&b[..count * 4]), mine, "scan {algo} n={n} rank={r}: the send buffer is untouched");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn reduce_scatter_every_algorithm() {
    let t = int_type();
    let red = sum_reduction(&t);
    for (algo, cfg) in configs("reduce_scatter", &["reduce_then_scatter", "pairwise"]) {
        for &n in SIZES {
            for in_place in [false, true] {
                // Uneven counts: rank r gets r % 3 elements.
                let counts: Vec<usize> = (0..n).map(|r| r % 3).collect();
                let total: usize = counts.iter().sum();
                let (mut send, mut recv) = reduce_inputs(n, total);
                if in_place {
                    recv = send.clone();
                }
                let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                run_all(n, &cfg, |r| Coll::ReduceScatter {
                    buf: RBuf { send: (!in_place).then_some(sp[r] as *const u8), recv: rp[r], count: 0 },
                    counts: counts.clone(),
                    red: red.clone(),
                })
                .unwrap_or_else(|e| fail("reduce_scatter", n, total, &algo, e));
                let mut off = 0;
                for r in 0..n {
                    let want: Vec<i32> = (off..off + counts[r]).map(|i| sum_of(n, i)).collect();
                    assert_eq!(as_ints(&recv[r][..counts[r] * 4]), want, "reduce_scatter n={n} rank={r} algo={algo} in_place={in_place}");
                    off += counts[r];
                }
            }
        }
    }
}

#[test]
fn gather_scatter_and_v_forms() {
    let t = int_type();
    for &n in SIZES {
        for root in 0..n {
            for in_place in [false, true] {
                let count = 3;
                // Gatherv with rank r sending r % 4 elements at displacement 5r.
                let counts: Vec<usize> = (0..n).map(|r| r % 4).collect();
                let displs: Vec<isize> = (0..n).map(|r| 5 * r as isize).collect();
                let mut send: Vec<Vec<u8>> = (0..n).map(|r| ints(&(0..count).map(|i| val(r, i)).collect::<Vec<_>>())).collect();
                let mut recv: Vec<Vec<u8>> = (0..n).map(|_| ints(&vec![-1; 5 * n + 4])).collect();
                if in_place {
                    for i in 0..counts[root] {
                        recv[root][(5 * root + i) * 4..(5 * root + i + 1) * 4].copy_from_slice(&val(root, i).to_le_bytes());
                    }
                }
                let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                run_all(n, &CollConfig::default(), |r| Coll::Gatherv {
                    send: (!(in_place && r == root)).then(|| Buf { ptr: sp[r], count: counts[r], dtype: t.clone() }),
                    recv: VBuf { ptr: rp[r], counts: counts.clone(), displs: displs.clone(), dtype: t.clone() },
                    root: root as i32,
                })
                .unwrap_or_else(|e| fail("gatherv", n, count, "-", e));
                let got = as_ints(&recv[root]);
                for r in 0..n {
                    for i in 0..5 {
                        let want = if i < counts[r] { val(r, i) } else { -1 };
                        assert_eq!(got[5 * r + i], want, "gatherv n={n} root={root} from {r}");
                    }
                }
                // Scatter (uniform) back out.
                let mut out: Vec<Vec<u8>> = (0..n).map(|_| ints(&vec![-1; count])).collect();
                let mut src = ints(&(0..n * count).map(|i| i as i32).collect::<Vec<_>>());
                let op: Vec<*mut u8> = out.iter_mut().map(|b| b.as_mut_ptr()).collect();
                let srcp = src.as_mut_ptr();
                run_all(n, &CollConfig::default(), |r| Coll::Scatter {
                    send: Buf { ptr: srcp, count, dtype: t.clone() },
                    recv: (!(in_place && r == root)).then(|| Buf { ptr: op[r], count, dtype: t.clone() }),
                    root: root as i32,
                })
                .unwrap_or_else(|e| fail("scatter", n, count, "-", e));
                for r in 0..n {
                    if in_place && r == root {
                        continue;
                    }
                    let want: Vec<i32> = (0..count).map(|i| (r * count + i) as i32).collect();
                    assert_eq!(as_ints(&out[r]), want, "scatter n={n} root={root} rank={r}");
                }
            }
        }
    }
}

#[test]
fn allgather_every_algorithm_and_allgatherv() {
    let t = int_type();
    for (algo, cfg) in configs("allgather", &["ring", "bruck", "recursive_doubling"]) {
        for &n in SIZES {
            for &count in &[0usize, 1, 4] {
                for in_place in [false, true] {
                    let mut send: Vec<Vec<u8>> = (0..n).map(|r| ints(&(0..count).map(|i| val(r, i)).collect::<Vec<_>>())).collect();
                    let mut recv: Vec<Vec<u8>> = (0..n).map(|_| ints(&vec![-1; n * count])).collect();
                    if in_place {
                        for r in 0..n {
                            let bytes = send[r].clone();
                            recv[r][r * count * 4..(r + 1) * count * 4].copy_from_slice(&bytes);
                        }
                    }
                    let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    run_all(n, &cfg, |r| Coll::Allgather {
                        send: (!in_place).then(|| Buf { ptr: sp[r], count, dtype: t.clone() }),
                        recv: Buf { ptr: rp[r], count, dtype: t.clone() },
                    })
                    .unwrap_or_else(|e| fail("allgather", n, count, &algo, e));
                    let want: Vec<i32> = (0..n).flat_map(|q| (0..count).map(move |i| val(q, i))).collect();
                    for (r, b) in recv.iter().enumerate() {
                        assert_eq!(as_ints(b), want, "allgather n={n} count={count} rank={r} algo={algo} in_place={in_place}");
                    }
                }
            }
        }
    }
    for &n in SIZES {
        let counts: Vec<usize> = (0..n).map(|r| (r * 2) % 5).collect();
        let displs: Vec<isize> = (0..n).map(|r| 4 * r as isize).collect();
        let mut send: Vec<Vec<u8>> = (0..n).map(|r| ints(&(0..counts[r]).map(|i| val(r, i)).collect::<Vec<_>>())).collect();
        let mut recv: Vec<Vec<u8>> = (0..n).map(|_| ints(&vec![-1; 4 * n])).collect();
        let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
        run_all(n, &CollConfig::default(), |r| Coll::Allgatherv {
            send: Some(Buf { ptr: sp[r], count: counts[r], dtype: t.clone() }),
            recv: VBuf { ptr: rp[r], counts: counts.clone(), displs: displs.clone(), dtype: t.clone() },
        })
        .unwrap_or_else(|e| fail("allgatherv", n, 0, "-", e));
        for b in &recv {
            let got = as_ints(b);
            for q in 0..n {
                for i in 0..4 {
                    assert_eq!(got[4 * q + i], if i < counts[q] { val(q, i) } else { -1 });
                }
            }
        }
    }
}

#[test]
fn alltoall_every_algorithm_v_w_and_in_place() {
    let t = int_type();
    for (algo, cfg) in configs("alltoall", &["linear", "pairwise", "bruck"]) {
        for &n in SIZES {
            for &count in &[0usize, 1, 3] {
                for in_place in [false, true] {
                    // Block j of rank r holds val(r, j * count + i).
                    let mut send: Vec<Vec<u8>> = (0..n).map(|r| ints(&(0..n * count).map(|i| val(r, i)).collect::<Vec<_>>())).collect();
                    let mut recv: Vec<Vec<u8>> = if in_place { send.clone() } else { (0..n).map(|_| ints(&vec![-1; n * count])).collect() };
                    let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                    run_all(n, &cfg, |r| Coll::Alltoall {
                        send: (!in_place).then(|| Buf { ptr: sp[r], count, dtype: t.clone() }),
                        recv: Buf { ptr: rp[r], count, dtype: t.clone() },
                    })
                    .unwrap_or_else(|e| fail("alltoall", n, count, &algo, e));
                    for (r, b) in recv.iter().enumerate() {
                        let want: Vec<i32> = (0..n).flat_map(|q| (0..count).map(move |i| val(q, r * count + i))).collect();
                        assert_eq!(as_ints(b), want, "alltoall n={n} count={count} rank={r} algo={algo} in_place={in_place}");
                    }
                }
            }
        }
    }
    // Alltoallv with uneven counts: rank r sends (r + j) % 3 elements to j.
    for (algo, cfg) in configs("alltoall", &["linear", "pairwise"]) {
        for &n in SIZES {
            for in_place in [false, true] {
                let cnt = |from: usize, to: usize| (from + to) % 3;
                let mut send: Vec<Vec<u8>> = (0..n).map(|r| ints(&(0..n * 3).map(|i| val(r, i)).collect::<Vec<_>>())).collect();
                let mut recv: Vec<Vec<u8>> = (0..n).map(|_| ints(&vec![-1; n * 3])).collect();
                if in_place {
                    // In place the data sent to j sits in receive block j (counts symmetric).
                    recv = send.clone();
                }
                let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr()).collect();
                let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr()).collect();
                let displs: Vec<isize> = (0..n).map(|j| 3 * j as isize).collect();
                run_all(n, &cfg, |r| Coll::Alltoallv {
                    send: (!in_place).then(|| VBuf { ptr: sp[r], counts: (0..n).map(|j| cnt(r, j)).collect(), displs: displs.clone(), dtype: t.clone() }),
                    recv: VBuf { ptr: rp[r], counts: (0..n).map(|j| cnt(j, r)).collect(), displs: displs.clone(), dtype: t.clone() },
                })
                .unwrap_or_else(|e| fail("alltoallv", n, 0, &algo, e));
                for (r, b) in recv.iter().enumerate() {
                    let got = as_ints(b);
                    for q in 0..n {
                        for i in 0..cnt(q, r) {
                            assert_eq!(got[3 * q + i], val(q, 3 * r + i), "alltoallv n={n} rank={r} from {q} algo={algo} in_place={in_place}");
                        }
                    }
                }
            }
        }
    }
    // Alltoallw: byte displacements, the strided type on the receive side.
    let st = strided_type();
    for &n in &[1usize, 3, 4] {
        let mut send: Vec<Vec<i32>> = (0..n).map(|r| (0..2 * n).map(|i| val(r, i)).collect()).collect();
        let mut recv: Vec<Vec<i32>> = (0..n).map(|_| vec![-1; 8 * n]).collect();
        let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
        let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
        run_all(n, &CollConfig::default(), |r| Coll::Alltoallw {
            send: Some(WBuf { ptr: sp[r], counts: vec![2; n], displs: (0..n).map(|j| 8 * j as isize).collect(), dtypes: vec![t.clone(); n] }),
            recv: WBuf { ptr: rp[r], counts: vec![1; n], displs: (0..n).map(|j| 32 * j as isize).collect(), dtypes: vec![st.clone(); n] },
        })
        .unwrap_or_else(|e| fail("alltoallw", n, 0, "-", e));
        for (r, b) in recv.iter().enumerate() {
            for q in 0..n {
                assert_eq!(b[8 * q], val(q, 2 * r));
                assert_eq!(b[8 * q + 3], val(q, 2 * r + 1));
                assert_eq!(b[8 * q + 1], -1);
            }
        }
    }
}

#[test]
fn reductions_on_a_strided_type_walk_its_blocks() {
    let t = strided_type();
    let red = Reduction::new(Op::Predef(PredefOp::Sum), t.clone(), Elem::Num(Num::I32), 0).unwrap();
    for &n in &[2usize, 3, 5] {
        let count = 4;
        let mut send: Vec<Vec<i32>> = (0..n).map(|r| (0..count * 8).map(|i| val(r, i)).collect()).collect();
        let mut recv: Vec<Vec<i32>> = (0..n).map(|_| vec![-1; count * 8]).collect();
        let sp: Vec<*mut u8> = send.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
        let rp: Vec<*mut u8> = recv.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect();
        run_all(n, &CollConfig::default(), |r| Coll::Allreduce { buf: RBuf { send: Some(sp[r]), recv: rp[r], count }, red: red.clone() })
            .unwrap_or_else(|e| fail("allreduce strided", n, count, "-", e));
        for b in &recv {
            for (i, x) in b.iter().enumerate() {
                let data = i % 8 == 0 || i % 8 == 3;
                assert_eq!(*x, if data { sum_of(n, i) } else { -1 }, "strided allreduce n={n} element {i}");
            }
        }
    }
}

#[test]
fn schedules_have_the_promised_number_of_rounds() {
    let t = int_type();
    let red = sum_reduction(&t);
    let cfg = CollConfig::default();
    let rounds = |size: usize, c: Coll| {
        let mut s = Schedule::default();
        s.reset(Handle(0), 0);
        build(&mut s, topo(0, size), &c, &cfg).unwrap();
        s.rounds()
    };
    let mut b = vec![0u8; 8];
    let p = b.as_mut_ptr();
    // log2 n exchange rounds for recursive doubling on a power of two, +1 for the copy.
    assert_eq!(rounds(8, Coll::Allreduce { buf: RBuf { send: Some(p), recv: p.wrapping_add(4), count: 1 }, red: red.clone() }), 4);
    // Dissemination barrier (more than 8 ranks): ⌈log2 n⌉ rounds.
    assert_eq!(rounds(12, Coll::Barrier), 4);
    // Barrier of 3 to 8 ranks (flat fan-in, tree fan-out), at rank 0: hear from every rank,
    // then release its children.
    assert_eq!(rounds(5, Coll::Barrier), 2);
    // Root of a binomial broadcast: one round of sends.
    assert_eq!(rounds(8, Coll::Bcast { buf: Buf { ptr: p, count: 1, dtype: t.clone() }, root: 0 }), 1);
}

/// Build and run an intercommunicator collective: `make(group, rank)` describes each call.
fn run_inter(na: usize, nb: usize, make: impl Fn(usize, usize) -> Coll) -> Result<(), String> {
    let cfg = CollConfig::default();
    let mut scheds = Vec::new();
    for (g, (n, other)) in [(na, nb), (nb, na)].into_iter().enumerate() {
        for r in 0..n {
            let mut s = Schedule::default();
            s.reset(Handle(0), 0);
            let t = Topo { rank: r as i32, size: n as i32, remote: Some(other as i32), crowded: false, single_copy: false };
            build(&mut s, t, &make(g, r), &cfg).map_err(|e| format!("group {g} rank {r}: build: {e}"))?;
            scheds.push(s);
        }
    }
    run_groups(&mut scheds, &[na, nb])
}

const INTER: &[(usize, usize)] = &[(1, 1), (1, 3), (2, 2), (3, 1), (3, 4), (4, 5)];

#[test]
fn intercommunicator_barrier_bcast_gather_scatter() {
    let t = int_type();
    for &(na, nb) in INTER {
        run_inter(na, nb, |_, _| Coll::Barrier).unwrap_or_else(|e| panic!("inter barrier {na}x{nb}: {e}"));
        let sizes = [na, nb];
        for rg in 0..2 {
            for root in 0..sizes[rg] {
                // Root group rg, root `root`: broadcast 5 ints to the other group.
                let count = 5;
                let mut bufs: Vec<Vec<Vec<u8>>> = (0..2)
                    .map(|g| (0..sizes[g]).map(|r| ints(&(0..count).map(|i| if g == rg && r == root { val(r, i) } else { -1 }).collect::<Vec<_>>())).collect())
                    .collect();
                let ptrs: Vec<Vec<*mut u8>> = bufs.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
                let rootarg = |g: usize, r: usize| if g != rg { root as i32 } else if r == root { ROOT } else { crate::PROC_NULL };
                run_inter(na, nb, |g, r| Coll::Bcast { buf: Buf { ptr: ptrs[g][r], count, dtype: t.clone() }, root: rootarg(g, r) })
                    .unwrap_or_else(|e| panic!("inter bcast {na}x{nb}: {e}"));
                for r in 0..sizes[1 - rg] {
                    assert_eq!(as_ints(&bufs[1 - rg][r]), (0..count).map(|i| val(root, i)).collect::<Vec<_>>(), "inter bcast {na}x{nb} rg {rg}");
                }
                for r in 0..sizes[rg] {
                    if r != root {
                        assert_eq!(as_ints(&bufs[rg][r]), vec![-1; count], "PROC_NULL ranks are untouched");
                    }
                }
                // Gather from the other group to the root, then scatter back.
                let other = sizes[1 - rg];
                let mut send: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|r| ints(&[val(g * 100 + r, 0), val(g * 100 + r, 1)])).collect()).collect();
                let mut recv: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|_| ints(&vec![-1; 2 * other.max(sizes[g])])).collect()).collect();
                let sp: Vec<Vec<*mut u8>> = send.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
                let rp: Vec<Vec<*mut u8>> = recv.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
                run_inter(na, nb, |g, r| Coll::Gather {
                    send: Some(Buf { ptr: sp[g][r], count: 2, dtype: t.clone() }),
                    recv: Buf { ptr: rp[g][r], count: 2, dtype: t.clone() },
                    root: rootarg(g, r),
                })
                .unwrap_or_else(|e| panic!("inter gather {na}x{nb}: {e}"));
                let want: Vec<i32> = (0..other).flat_map(|q| [val((1 - rg) * 100 + q, 0), val((1 - rg) * 100 + q, 1)]).collect();
                assert_eq!(as_ints(&recv[rg][root])[..2 * other], want[..], "inter gather {na}x{nb} rg {rg} root {root}");
                let mut out: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|_| ints(&[-1, -1])).collect()).collect();
                let op: Vec<Vec<*mut u8>> = out.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
                run_inter(na, nb, |g, r| Coll::Scatter {
                    send: Buf { ptr: rp[g][r], count: 2, dtype: t.clone() },
                    recv: Some(Buf { ptr: op[g][r], count: 2, dtype: t.clone() }),
                    root: rootarg(g, r),
                })
                .unwrap_or_else(|e| panic!("inter scatter {na}x{nb}: {e}"));
                for q in 0..other {
                    assert_eq!(as_ints(&out[1 - rg][q]), vec![val((1 - rg) * 100 + q, 0), val((1 - rg) * 100 + q, 1)]);
                }
            }
        }
    }
}

#[test]
fn intercommunicator_reductions_and_all_forms() {
    let t = int_type();
    let red = sum_reduction(&t);
    let mred = mat_reduction();
    for &(na, nb) in INTER {
        let sizes = [na, nb];
        let count = 3;
        let gsum = |g: usize, i: usize| (0..sizes[g]).map(|r| val(g * 100 + r, i)).sum::<i32>();
        // Allreduce: each group gets the other group's sum.
        let mut send: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|r| ints(&(0..count).map(|i| val(g * 100 + r, i)).collect::<Vec<_>>())).collect()).collect();
        let mut recv: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|_| ints(&vec![-1; 8 * count])).collect()).collect();
        let sp: Vec<Vec<*mut u8>> = send.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
        let rp: Vec<Vec<*mut u8>> = recv.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
        run_inter(na, nb, |g, r| Coll::Allreduce { buf: RBuf { send: Some(sp[g][r]), recv: rp[g][r], count }, red: red.clone() })
            .unwrap_or_else(|e| panic!("inter allreduce {na}x{nb}: {e}"));
        for g in 0..2 {
            for r in 0..sizes[g] {
                assert_eq!(as_ints(&recv[g][r][..count * 4]), (0..count).map(|i| gsum(1 - g, i)).collect::<Vec<_>>(), "inter allreduce {na}x{nb}");
            }
        }
        // Reduce to each root of group 0.
        for root in 0..na {
            let mut recv: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|_| ints(&vec![-1; count])).collect()).collect();
            let rp: Vec<Vec<*mut u8>> = recv.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
            run_inter(na, nb, |g, r| Coll::Reduce {
                buf: RBuf { send: Some(sp[g][r]), recv: rp[g][r], count },
                red: red.clone(),
                root: if g == 1 { root as i32 } else if r == root { ROOT } else { crate::PROC_NULL },
            })
            .unwrap_or_else(|e| panic!("inter reduce {na}x{nb}: {e}"));
            assert_eq!(as_ints(&recv[0][root]), (0..count).map(|i| gsum(1, i)).collect::<Vec<_>>());
        }
        // Non-commutative reduce keeps the sending group's rank order.
        let mut ms: Vec<Vec<Vec<Mat>>> = (0..2).map(|g| (0..sizes[g]).map(|r| mats(r, 2)).collect()).collect();
        let mut mr: Vec<Vec<Vec<Mat>>> = (0..2).map(|g| (0..sizes[g]).map(|_| vec![[0; 4]; 2]).collect()).collect();
        let msp: Vec<Vec<*mut u8>> = ms.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect()).collect();
        let mrp: Vec<Vec<*mut u8>> = mr.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr() as *mut u8).collect()).collect();
        run_inter(na, nb, |g, r| Coll::Allreduce { buf: RBuf { send: Some(msp[g][r]), recv: mrp[g][r], count: 2 }, red: mred.clone() })
            .unwrap_or_else(|e| panic!("inter matmul allreduce {na}x{nb}: {e}"));
        for g in 0..2 {
            for r in 0..sizes[g] {
                for i in 0..2 {
                    assert_eq!(mr[g][r][i], ordered_product(0..sizes[1 - g], i), "inter matmul {na}x{nb}");
                }
            }
        }
        // Allgather and alltoall between the groups.
        let mut ag: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|_| ints(&vec![-1; 8 * count])).collect()).collect();
        let agp: Vec<Vec<*mut u8>> = ag.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
        run_inter(na, nb, |g, r| Coll::Allgather {
            send: Some(Buf { ptr: sp[g][r], count, dtype: t.clone() }),
            recv: Buf { ptr: agp[g][r], count, dtype: t.clone() },
        })
        .unwrap_or_else(|e| panic!("inter allgather {na}x{nb}: {e}"));
        for g in 0..2 {
            let want: Vec<i32> = (0..sizes[1 - g]).flat_map(|q| (0..count).map(move |i| val((1 - g) * 100 + q, i))).collect();
            for r in 0..sizes[g] {
                assert_eq!(as_ints(&ag[g][r])[..want.len()], want[..], "inter allgather {na}x{nb}");
            }
        }
        let mut a2: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|r| ints(&(0..8).map(|i| val(g * 100 + r, i)).collect::<Vec<_>>())).collect()).collect();
        let mut b2: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|_| ints(&[-1; 8])).collect()).collect();
        let ap: Vec<Vec<*mut u8>> = a2.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
        let bp: Vec<Vec<*mut u8>> = b2.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
        run_inter(na, nb, |g, r| Coll::Alltoall {
            send: Some(Buf { ptr: ap[g][r], count: 1, dtype: t.clone() }),
            recv: Buf { ptr: bp[g][r], count: 1, dtype: t.clone() },
        })
        .unwrap_or_else(|e| panic!("inter alltoall {na}x{nb}: {e}"));
        for g in 0..2 {
            for r in 0..sizes[g] {
                let got = as_ints(&b2[g][r]);
                for q in 0..sizes[1 - g] {
                    assert_eq!(got[q], val((1 - g) * 100 + q, r), "inter alltoall {na}x{nb}");
                }
            }
        }
        // Reduce_scatter_block when both groups have the same total (count × size).
        if na == nb {
            let per = 2;
            let mut s3: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|r| ints(&(0..per * na).map(|i| val(g * 100 + r, i)).collect::<Vec<_>>())).collect()).collect();
            let mut r3: Vec<Vec<Vec<u8>>> = (0..2).map(|g| (0..sizes[g]).map(|_| ints(&vec![-1; per])).collect()).collect();
            let s3p: Vec<Vec<*mut u8>> = s3.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
            let r3p: Vec<Vec<*mut u8>> = r3.iter_mut().map(|g| g.iter_mut().map(|b| b.as_mut_ptr()).collect()).collect();
            run_inter(na, nb, |g, r| Coll::ReduceScatterBlock { buf: RBuf { send: Some(s3p[g][r]), recv: r3p[g][r], count: per }, red: red.clone() })
                .unwrap_or_else(|e| panic!("inter reduce_scatter_block {na}x{nb}: {e}"));
            for g in 0..2 {
                for r in 0..sizes[g] {
                    let want: Vec<i32> = (0..per).map(|i| gsum(1 - g, r * per + i)).collect();
                    assert_eq!(as_ints(&r3[g][r]), want, "inter reduce_scatter_block {na}x{nb}");
                }
            }
        }
    }
}

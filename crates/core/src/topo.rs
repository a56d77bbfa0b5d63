//! Process topologies (Cartesian, graph, distributed graph) and neighborhood collectives.
//!
//! Rank placement is the identity (`reorder` is accepted and ignored): rank `r` of the new
//! communicator is rank `r` of the old one, which is what MPI_Cart_map / MPI_Graph_map
//! report too.
//!
//! Neighborhood collectives are one-round collective schedules (`coll::Coll::Neighbor`), so
//! the blocking, nonblocking and persistent forms share the collective machinery: every
//! block to an out-neighbor is sent and every block from an in-neighbor received at once.
//! Graph neighbors listed twice are matched in list order (MPI's non-overtaking rule). A
//! Cartesian dimension of size 1 or 2 with wrap-around makes one process both the `-1` and
//! the `+1` neighbor; the tag sub-code then says which way the block travels, so the block
//! sent towards `+1` always lands in the receiver's `-1` slot.

use std::sync::Arc;

use crate::coll::{Buf, Coll, Schedule};
use crate::comm::Comm;
use crate::engine::{Engine, PROC_NULL};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::group::UNDEFINED;
use crate::mpi_err;
use crate::slab::Handle;

/// A process topology attached to a communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// Cartesian grid, row-major (the last dimension varies fastest).
    Cart { dims: Vec<i32>, periods: Vec<bool> },
    /// General graph: `index[i]` is the cumulative degree of nodes 0..=i.
    Graph { index: Vec<i32>, edges: Vec<i32> },
    /// Distributed graph: this process's in- and out-neighbors.
    DistGraph { sources: Vec<i32>, sweights: Vec<i32>, dests: Vec<i32>, dweights: Vec<i32>, weighted: bool },
}

// ---- pure topology arithmetic ----------------------------------------------------------

/// Divisors of `m` in increasing order.
fn divisors(m: u64) -> Vec<u64> {
    let mut lo = Vec::new();
    let mut hi = Vec::new();
    let mut d = 1;
    while d * d <= m {
        if m.is_multiple_of(d) {
            lo.push(d);
            if d * d != m {
                hi.push(m / d);
            }
        }
        d += 1;
    }
    lo.extend(hi.into_iter().rev());
    lo
}

/// Largest x with x^k <= m.
fn iroot(m: u64, k: u32) -> u64 {
    if k <= 1 {
        return m;
    }
    let mut x = (m as f64).powf(1.0 / k as f64).round() as u64;
    while x > 0 && x.checked_pow(k).is_none_or(|p| p > m) {
        x -= 1;
    }
    while (x + 1).checked_pow(k).is_some_and(|p| p <= m) {
        x += 1;
    }
    x
}

struct Search<'a> {
    divs: &'a [u64],
    /// (spread, factors) of the best factorization so far.
    best: Option<(u64, Vec<u64>)>,
}

/// Whether non-increasing `a` beats `b` at equal spread: larger smallest factor, then larger
/// second smallest, and so on (the choice MPICH's reference results make).
fn better_balanced(a: &[u64], b: &[u64]) -> bool {
    a.iter().rev().cmp(b.iter().rev()) == std::cmp::Ordering::Greater
}

impl Search<'_> {
    /// Extend `cur` (non-increasing) with `slots` factors whose product is `rem`, each at
    /// most `cap`. Best: the smallest spread, then [`better_balanced`].
    fn run(&mut self, rem: u64, slots: u32, cap: u64, cur: &mut Vec<u64>) {
        if slots == 1 {
            if rem <= cap {
                let first = cur.first().copied().unwrap_or(rem);
                let diff = first - rem;
                cur.push(rem);
                if self.best.as_ref().is_none_or(|b| diff < b.0 || (diff == b.0 && better_balanced(cur, &b.1))) {
                    self.best = Some((diff, cur.clone()));
                }
                cur.pop();
            }
            return;
        }
        // The next factor is the largest of those left, so at least their geometric mean.
        let lo = iroot(rem, slots);
        for &d in self.divs {
            if d > cap {
                break;
            }
            if d < lo || !rem.is_multiple_of(d) {
                continue;
            }
            let first = cur.first().copied().unwrap_or(d);
            // The smallest factor is at most the (slots-1)'th root of what is left.
            let min_bound = iroot(rem / d, slots - 1).min(d);
            if self.best.as_ref().is_some_and(|b| first - min_bound > b.0) {
                if cur.is_empty() {
                    // A larger first factor only widens the spread.
                    break;
                }
                continue;
            }
            cur.push(d);
            self.run(rem / d, slots - 1, d, cur);
            cur.pop();
        }
    }
}

/// MPI_Dims_create: fill the zero entries of `dims` so the product is `nnodes`, as balanced
/// as possible (smallest spread between largest and smallest factor; among equal spreads,
/// the largest smallest factor, then the largest second smallest, ...) and non-increasing.
pub fn dims_create(nnodes: i32, dims: &mut [i32]) -> MpiResult<()> {
    if nnodes < 0 {
        return mpi_err!(Arg, "nnodes {nnodes} is negative");
    }
    let mut fixed: u64 = 1;
    let mut free = 0u32;
    for &d in dims.iter() {
        match d {
            d if d < 0 => return mpi_err!(Dims, "dims entry {d} is negative"),
            0 => free += 1,
            d => fixed = fixed.saturating_mul(d as u64),
        }
    }
    let n = nnodes as u64;
    if n == 0 {
        // Only all-zero (or empty) dims can describe zero processes meaningfully.
        if free as usize != dims.len() {
            return mpi_err!(Dims, "cannot spread 0 processes over fixed dimensions");
        }
        dims.iter_mut().for_each(|d| *d = 0);
        return Ok(());
    }
    if fixed == 0 || !n.is_multiple_of(fixed) {
        return mpi_err!(Dims, "{nnodes} processes cannot be divided by the product {fixed} of the given dimensions");
    }
    let m = n / fixed;
    if free == 0 {
        if m != 1 {
            return mpi_err!(Dims, "the given dimensions multiply to {fixed}, not {nnodes}");
        }
        return Ok(());
    }
    let divs = divisors(m);
    let mut s = Search { divs: &divs, best: None };
    s.run(m, free, m, &mut Vec::new());
    let (_, factors) = s.best.ok_or_else(|| MpiError::new(ErrorClass::Intern, "no factorization found"))?;
    let mut it = factors.into_iter();
    for d in dims.iter_mut().filter(|d| **d == 0) {
        *d = it.next().unwrap_or(1) as i32;
    }
    Ok(())
}

/// Number of processes of a Cartesian grid (None on overflow).
pub fn cart_size(dims: &[i32]) -> Option<i32> {
    dims.iter().try_fold(1i32, |acc, &d| acc.checked_mul(d))
}

/// Coordinates of `rank` in the grid `dims`.
pub fn cart_coords(dims: &[i32], rank: i32) -> Vec<i32> {
    let mut c = vec![0; dims.len()];
    let mut r = rank;
    for i in (0..dims.len()).rev() {
        c[i] = r % dims[i];
        r /= dims[i];
    }
    c
}

/// Rank at `coords`; periodic dimensions wrap, others must be in range.
pub fn cart_rank(dims: &[i32], periods: &[bool], coords: &[i32]) -> MpiResult<i32> {
    let mut r = 0i32;
    for i in 0..dims.len() {
        let mut c = coords[i];
        if periods[i] {
            c = c.rem_euclid(dims[i]);
        } else if !(0..dims[i]).contains(&c) {
            return mpi_err!(Arg, "coordinate {c} is outside dimension {i} of size {} (not periodic)", dims[i]);
        }
        r = r * dims[i] + c;
    }
    Ok(r)
}

/// MPI_Cart_shift: (source, destination) of a shift by `disp` along `dir`.
pub fn cart_shift(dims: &[i32], periods: &[bool], rank: i32, dir: usize, disp: i32) -> (i32, i32) {
    let coords = cart_coords(dims, rank);
    let at = |delta: i64| -> i32 {
        let mut c = coords.clone();
        let v = c[dir] as i64 + delta;
        if !periods[dir] && !(0..dims[dir] as i64).contains(&v) {
            return PROC_NULL;
        }
        c[dir] = v.rem_euclid(dims[dir] as i64) as i32;
        cart_rank(dims, periods, &c).unwrap_or(PROC_NULL)
    };
    (at(-(disp as i64)), at(disp as i64))
}

/// Check a graph description: index non-decreasing, ending at the edge count, edges in range.
pub fn check_graph(index: &[i32], edges: &[i32]) -> MpiResult<()> {
    let mut prev = 0;
    for (i, &x) in index.iter().enumerate() {
        if x < prev {
            return mpi_err!(Arg, "graph index[{i}] = {x} is smaller than the previous entry {prev}");
        }
        prev = x;
    }
    if prev as usize != edges.len() {
        return mpi_err!(Arg, "graph index ends at {prev} but {} edges were given", edges.len());
    }
    let n = index.len() as i32;
    if let Some(&e) = edges.iter().find(|&&e| !(0..n).contains(&e)) {
        return mpi_err!(Rank, "graph edge to node {e} outside 0..{n}");
    }
    Ok(())
}

/// Neighbors of `rank` in a general graph.
pub fn graph_neighbors<'a>(index: &[i32], edges: &'a [i32], rank: i32) -> &'a [i32] {
    let r = rank as usize;
    let start = if r == 0 { 0 } else { index[r - 1] as usize };
    &edges[start..index[r] as usize]
}

/// (rank, tag sub-code) of each neighbor, in MPI order.
pub type NeighborList = Vec<(i32, u16)>;

impl Topology {
    /// (rank, tag sub-code) of every in-neighbor and every out-neighbor of `rank`, in MPI
    /// order. Sub-codes stay below 4096 (the schedule's sub-tag space).
    pub fn neighbor_lists(&self, rank: i32) -> (NeighborList, NeighborList) {
        match self {
            Topology::Cart { dims, periods } => {
                let (mut ins, mut outs) = (Vec::new(), Vec::new());
                for d in 0..dims.len() {
                    let (lo, hi) = cart_shift(dims, periods, rank, d, 1);
                    // Sub-code t: travelling towards -1; t + 1: towards +1.
                    let t = ((2 * d) & 0xffe) as u16;
                    // Slot 2d: the -1 neighbor, whose block travels towards +1.
                    ins.push((lo, t + 1));
                    ins.push((hi, t));
                    outs.push((lo, t));
                    outs.push((hi, t + 1));
                }
                (ins, outs)
            }
            Topology::Graph { index, edges } => {
                let n: NeighborList = graph_neighbors(index, edges, rank).iter().map(|&r| (r, 0)).collect();
                (n.clone(), n)
            }
            Topology::DistGraph { sources, dests, .. } => {
                (sources.iter().map(|&r| (r, 0)).collect(), dests.iter().map(|&r| (r, 0)).collect())
            }
        }
    }
}

/// Write a neighborhood exchange into `s`: one round, every receive and send at once
/// (MPI_PROC_NULL neighbors are skipped, their blocks left alone).
pub fn neighbor_schedule(s: &mut Schedule, ins: &[(i32, u16)], outs: &[(i32, u16)], send: &[Buf], recv: &[Buf]) -> MpiResult<()> {
    if ins.len() != recv.len() || outs.len() != send.len() {
        return mpi_err!(Intern, "neighbor block count does not match the topology");
    }
    for (&(src, sub), b) in ins.iter().zip(recv) {
        if src != PROC_NULL {
            s.recv(src, sub as u32, b.ptr, b.count, &b.dtype);
        }
    }
    for (&(dst, sub), b) in outs.iter().zip(send) {
        if dst != PROC_NULL {
            s.send(dst, sub as u32, b.ptr, b.count, &b.dtype);
        }
    }
    s.round();
    Ok(())
}

// ---- collective operations --------------------------------------------------------------

impl Engine {
    fn topo_parent(&self, c: Handle) -> MpiResult<Comm> {
        let comm = self.comm(c)?.clone();
        if comm.remote.is_some() {
            return mpi_err!(Comm, "topologies need an intracommunicator");
        }
        Ok(comm)
    }

    /// New communicator over the first `n` ranks of `c` with topology `topo` (collective
    /// over `c`; ranks `n..` get None).
    fn topo_comm(&mut self, c: Handle, n: usize, topo: Topology) -> MpiResult<Option<Handle>> {
        let comm = self.topo_parent(c)?;
        if n > comm.group.len() {
            return mpi_err!(Topology, "the topology needs {n} processes but the communicator has {}", comm.group.len());
        }
        let ctx = self.new_context(c)?;
        if comm.rank as usize >= n {
            return Ok(None);
        }
        Ok(Some(self.add_comm(Comm {
            ctx,
            rank: comm.rank,
            group: Arc::new(comm.group[..n].to_vec()),
            errhandler: comm.errhandler,
            topo: Some(Arc::new(topo)),
            ..Default::default()
        })))
    }

    /// MPI_Cart_create (no reordering).
    pub fn cart_create(&mut self, c: Handle, dims: &[i32], periods: &[bool]) -> MpiResult<Option<Handle>> {
        if let Some(&d) = dims.iter().find(|&&d| d <= 0) {
            return mpi_err!(Dims, "Cartesian dimension of size {d}");
        }
        let n = cart_size(dims).ok_or_else(|| MpiError::new(ErrorClass::Dims, "the grid has too many processes"))?;
        self.topo_comm(c, n as usize, Topology::Cart { dims: dims.to_vec(), periods: periods.to_vec() })
    }

    /// MPI_Graph_create (no reordering).
    pub fn graph_create(&mut self, c: Handle, index: &[i32], edges: &[i32]) -> MpiResult<Option<Handle>> {
        check_graph(index, edges)?;
        self.topo_comm(c, index.len(), Topology::Graph { index: index.to_vec(), edges: edges.to_vec() })
    }

    /// MPI_Dist_graph_create_adjacent (no reordering). Weights are ignored when unweighted.
    pub fn dist_graph_create_adjacent(
        &mut self,
        c: Handle,
        sources: &[i32],
        sweights: &[i32],
        dests: &[i32],
        dweights: &[i32],
        weighted: bool,
    ) -> MpiResult<Handle> {
        let size = self.topo_parent(c)?.size();
        if let Some(&r) = sources.iter().chain(dests).find(|&&r| !(0..size).contains(&r)) {
            return mpi_err!(Rank, "neighbor {r} is not a rank of the communicator (size {size})");
        }
        let topo = Topology::DistGraph {
            sources: sources.to_vec(),
            sweights: if weighted { sweights.to_vec() } else { Vec::new() },
            dests: dests.to_vec(),
            dweights: if weighted { dweights.to_vec() } else { Vec::new() },
            weighted,
        };
        self.topo_comm(c, size as usize, topo)?.ok_or_else(|| MpiError::new(ErrorClass::Intern, "lost the new communicator"))
    }

    /// MPI_Dist_graph_create: `edges` are this process's (source, destination, weight)
    /// contributions; every process learns its own in- and out-edges, ordered by the
    /// contributing rank and then by position in its list.
    pub fn dist_graph_create(&mut self, c: Handle, edges: &[(i32, i32, i32)], weighted: bool) -> MpiResult<Handle> {
        let comm = self.topo_parent(c)?;
        let size = comm.size();
        if let Some(&(s, d, _)) = edges.iter().find(|(s, d, _)| !(0..size).contains(s) || !(0..size).contains(d)) {
            return mpi_err!(Rank, "edge {s} -> {d} names a rank outside the communicator (size {size})");
        }
        let mut mine = Vec::with_capacity(12 * edges.len());
        for &(s, d, w) in edges {
            for v in [s, d, w] {
                mine.extend_from_slice(&v.to_le_bytes());
            }
        }
        let all = self.allgather_bytes(c, &mine)?;
        let me = comm.rank;
        let (mut sources, mut sweights, mut dests, mut dweights) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for part in &all {
            for e in part.chunks_exact(12) {
                let v = |i: usize| i32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
                let (s, d, w) = (v(0), v(4), v(8));
                if s == me {
                    dests.push(d);
                    dweights.push(w);
                }
                if d == me {
                    sources.push(s);
                    sweights.push(w);
                }
            }
        }
        self.dist_graph_create_adjacent(c, &sources, &sweights, &dests, &dweights, weighted)
    }

    /// The topology of `c`, if any.
    pub fn topology(&self, c: Handle) -> MpiResult<Option<Arc<Topology>>> {
        Ok(self.comm(c)?.topo.clone())
    }

    /// MPI_Cart_sub: keep the dimensions where `remain` is true. None where this process is
    /// left out (only when no dimension remains).
    pub fn cart_sub(&mut self, c: Handle, remain: &[bool]) -> MpiResult<Option<Handle>> {
        let comm = self.comm(c)?.clone();
        let Some(Topology::Cart { dims, periods }) = comm.topo.as_deref() else {
            return mpi_err!(Topology, "MPI_Cart_sub needs a Cartesian communicator");
        };
        if remain.len() != dims.len() {
            return mpi_err!(Intern, "remain_dims has the wrong length");
        }
        let coords = cart_coords(dims, comm.rank);
        let (mut color, mut key) = (0i32, 0i32);
        let (mut sub_dims, mut sub_periods) = (Vec::new(), Vec::new());
        for i in 0..dims.len() {
            if remain[i] {
                key = key * dims[i] + coords[i];
                sub_dims.push(dims[i]);
                sub_periods.push(periods[i]);
            } else {
                color = color * dims[i] + coords[i];
            }
        }
        if sub_dims.is_empty() {
            // No dimension left: a zero-dimensional grid of one process, rank 0 of the old
            // grid (as for MPI_Cart_create with ndims = 0); the others get nothing.
            color = if comm.rank == 0 { 0 } else { UNDEFINED };
        }
        let Some(n) = self.comm_split(c, color, key)? else { return Ok(None) };
        self.comm_mut(n)?.topo = Some(Arc::new(Topology::Cart { dims: sub_dims, periods: sub_periods }));
        Ok(Some(n))
    }

    /// (in-neighbors, out-neighbors) of this process in `c`'s topology.
    pub fn neighbors(&self, c: Handle) -> MpiResult<(Vec<i32>, Vec<i32>)> {
        let comm = self.comm(c)?;
        let Some(t) = comm.topo.as_deref() else {
            return mpi_err!(Topology, "the communicator has no topology");
        };
        let (i, o) = t.neighbor_lists(comm.rank);
        Ok((i.into_iter().map(|x| x.0).collect(), o.into_iter().map(|x| x.0).collect()))
    }

    /// The neighborhood collective on `c` sending block `j` of `send` to out-neighbor `j`
    /// and receiving block `j` of `recv` from in-neighbor `j`; run it with `coll`, `icoll` or
    /// `coll_init`.
    pub fn neighbor_coll(&self, c: Handle, send: Vec<Buf>, recv: Vec<Buf>) -> MpiResult<Coll> {
        let comm = self.comm(c)?;
        let Some(t) = comm.topo.as_deref() else {
            return mpi_err!(Topology, "the communicator has no topology");
        };
        let (ins, outs) = t.neighbor_lists(comm.rank);
        if ins.len() != recv.len() || outs.len() != send.len() {
            return mpi_err!(Intern, "neighbor block count does not match the topology");
        }
        Ok(Coll::Neighbor { ins, outs, send, recv })
    }
}

/// Cart_map / Graph_map: with identity placement, ranks below `n` keep their rank.
pub fn map_rank(rank: i32, n: i32) -> i32 {
    if rank < n {
        rank
    } else {
        UNDEFINED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(n: i32, nd: usize) -> Vec<i32> {
        let mut d = vec![0; nd];
        dims_create(n, &mut d).unwrap();
        d
    }

    #[test]
    fn dims_create_known_results() {
        assert_eq!(dims(6, 2), vec![3, 2]);
        assert_eq!(dims(7, 2), vec![7, 1]);
        assert_eq!(dims(12, 3), vec![3, 2, 2]);
        assert_eq!(dims(16, 4), vec![2, 2, 2, 2]);
        assert_eq!(dims(72, 2), vec![9, 8]);
        assert_eq!(dims(24, 3), vec![4, 3, 2]);
        assert_eq!(dims(64, 3), vec![4, 4, 4]);
        assert_eq!(dims(100, 3), vec![5, 5, 4]);
        assert_eq!(dims(1_000_000_000, 3), vec![1000, 1000, 1000]);
        assert_eq!(dims(1, 3), vec![1, 1, 1]);
        assert_eq!(dims(1, 0), Vec::<i32>::new());
        assert_eq!(dims(2_147_483_647, 2), vec![2_147_483_647, 1]);
        // Equal spreads: the larger smallest factor wins (21-15 = 20-14), then the larger
        // second smallest.
        assert_eq!(dims(5040, 3), vec![21, 16, 15]);
        assert_eq!(dims(98784, 5), vec![14, 14, 9, 8, 7]);
    }

    #[test]
    fn dims_create_respects_fixed_entries() {
        let mut d = [0, 4, 0, 2];
        dims_create(32, &mut d).unwrap();
        assert_eq!(d, [2, 4, 2, 2]);
        let mut d = [3, 0];
        assert_eq!(dims_create(8, &mut d).unwrap_err().class, ErrorClass::Dims);
        let mut d = [2, 4];
        dims_create(8, &mut d).unwrap();
        assert_eq!(dims_create(9, &mut d).unwrap_err().class, ErrorClass::Dims);
        let mut d = [-1, 0];
        assert_eq!(dims_create(8, &mut d).unwrap_err().class, ErrorClass::Dims);
    }

    /// The chosen factors are non-increasing, multiply to n, have the smallest spread and,
    /// among those, the largest smallest factor.
    #[test]
    fn dims_create_is_optimal_for_small_n() {
        for n in 1..=300 {
            for nd in 1..=4usize {
                let d = dims(n, nd);
                assert_eq!(d.iter().product::<i32>(), n, "n={n} nd={nd}");
                assert!(d.windows(2).all(|w| w[0] >= w[1]), "n={n} nd={nd} {d:?}");
                // Brute force over every non-increasing factorization.
                fn all(m: i32, k: usize, cap: i32, cur: &mut Vec<i32>, out: &mut Vec<Vec<i32>>) {
                    if k == 1 {
                        if m <= cap {
                            cur.push(m);
                            out.push(cur.clone());
                            cur.pop();
                        }
                        return;
                    }
                    for f in 1..=cap.min(m) {
                        if m % f == 0 {
                            cur.push(f);
                            all(m / f, k - 1, f, cur, out);
                            cur.pop();
                        }
                    }
                }
                let mut fs = Vec::new();
                all(n, nd, n, &mut Vec::new(), &mut fs);
                let best = fs
                    .into_iter()
                    .min_by(|x, y| {
                        (x[0] - x[nd - 1]).cmp(&(y[0] - y[nd - 1])).then_with(|| y.iter().rev().cmp(x.iter().rev()))
                    })
                    .unwrap();
                assert_eq!(d, best, "n={n} nd={nd}");
            }
        }
    }

    #[test]
    fn cart_arithmetic() {
        let dims = [2, 3, 4];
        let periods = [false, true, false];
        for r in 0..24 {
            let c = cart_coords(&dims, r);
            assert_eq!(cart_rank(&dims, &periods, &c).unwrap(), r);
        }
        assert_eq!(cart_coords(&dims, 23), vec![1, 2, 3]);
        assert_eq!(cart_rank(&dims, &periods, &[0, -1, 0]).unwrap(), 8);
        assert!(cart_rank(&dims, &periods, &[2, 0, 0]).is_err());
        // rank 0 = (0,0,0): dim 0 not periodic, dim 1 periodic.
        assert_eq!(cart_shift(&dims, &periods, 0, 0, 1), (PROC_NULL, 12));
        assert_eq!(cart_shift(&dims, &periods, 0, 1, 1), (8, 4));
        assert_eq!(cart_shift(&dims, &periods, 0, 1, -1), (4, 8));
        assert_eq!(cart_shift(&dims, &periods, 0, 2, 5), (PROC_NULL, PROC_NULL));
    }

    #[test]
    fn graph_checks_and_neighbors() {
        let index = [2, 3, 4, 6];
        let edges = [1, 3, 0, 3, 0, 2];
        check_graph(&index, &edges).unwrap();
        assert_eq!(graph_neighbors(&index, &edges, 0), &[1, 3]);
        assert_eq!(graph_neighbors(&index, &edges, 3), &[0, 2]);
        assert!(check_graph(&[2, 1], &[0]).is_err());
        assert!(check_graph(&[1, 2], &[0, 2]).is_err());
        assert!(check_graph(&[1, 2], &[0]).is_err());
    }

    #[test]
    fn cart_neighbor_tags_pair_up() {
        // Periodic dimension of size 2: both neighbors are the same process; what one side
        // sends towards +1 must be what the other receives in its -1 slot.
        let t = Topology::Cart { dims: vec![2], periods: vec![true] };
        let (ins1, _) = t.neighbor_lists(1);
        let (_, outs0) = t.neighbor_lists(0);
        // rank 0 sends block 1 (towards +1) with the sub-code rank 1 expects in slot 0.
        assert_eq!(outs0[1], (1, ins1[0].1));
        assert_eq!(outs0[0], (1, ins1[1].1));
        assert_eq!(map_rank(3, 4), 3);
        assert_eq!(map_rank(4, 4), UNDEFINED);
    }
}

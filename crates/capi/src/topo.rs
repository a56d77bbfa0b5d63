//! Process topology entry points (Cartesian, graph, distributed graph) and the
//! neighborhood collectives in their blocking, nonblocking and persistent forms.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use steadfast_core::datatype::TypeRef;
use steadfast_core::coll::Buf;
use steadfast_core::topo::{self, Topology};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Aint, MPI_Comm, MPI_Count, MPI_Datatype, MPI_Info, MPI_Request};
use crate::global::{api, comm_handle, dtype, Global};
use crate::info::info_arg;
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

unsafe fn ints<'a>(p: *const c_int, n: usize, what: &str) -> Result<&'a [c_int], MpiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, n))
}

unsafe fn out_ints(p: *mut c_int, vals: &[c_int], max: c_int, what: &str) -> Result<(), MpiError> {
    let n = vals.len().min(max.max(0) as usize);
    if n > 0 && p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} is NULL")));
    }
    for (i, &v) in vals.iter().take(n).enumerate() {
        *p.add(i) = v;
    }
    Ok(())
}

fn topo_of(g: &Global, comm: MPI_Comm) -> Result<(Handle, Option<Arc<Topology>>), MpiError> {
    let h = comm_handle(g, comm as usize)?;
    Ok((h, g.eng.topology(h)?))
}

fn cart_of(g: &Global, comm: MPI_Comm) -> Result<(Handle, Vec<c_int>, Vec<bool>), MpiError> {
    match topo_of(g, comm)? {
        (h, Some(t)) => match &*t {
            Topology::Cart { dims, periods } => Ok((h, dims.clone(), periods.clone())),
            _ => Err(err(ErrorClass::Topology, "the communicator does not have a Cartesian topology")),
        },
        _ => Err(err(ErrorClass::Topology, "the communicator does not have a Cartesian topology")),
    }
}

fn graph_of(g: &Global, comm: MPI_Comm) -> Result<(Handle, Vec<c_int>, Vec<c_int>), MpiError> {
    match topo_of(g, comm)? {
        (h, Some(t)) => match &*t {
            Topology::Graph { index, edges } => Ok((h, index.clone(), edges.clone())),
            _ => Err(err(ErrorClass::Topology, "the communicator does not have a graph topology")),
        },
        _ => Err(err(ErrorClass::Topology, "the communicator does not have a graph topology")),
    }
}

unsafe fn out_comm(g: &mut Global, n: Option<Handle>, out: *mut MPI_Comm) -> Result<(), MpiError> {
    match n {
        Some(n) => {
            let e = g.eng.comm(n)?.errhandler;
            crate::errhandler::retain(g, e);
            *out = n.0 as MPI_Comm;
        }
        None => *out = abi::MPI_COMM_NULL as MPI_Comm,
    }
    Ok(())
}

fn check_rank(g: &Global, h: Handle, rank: c_int) -> Result<(), MpiError> {
    let size = g.eng.comm(h)?.size();
    if !(0..size).contains(&rank) {
        return Err(err(ErrorClass::Rank, format!("rank {rank} is not in the communicator (size {size})")));
    }
    Ok(())
}

/// Weights argument: None for MPI_UNWEIGHTED, else the weights (empty for MPI_WEIGHTS_EMPTY).
unsafe fn weights<'a>(p: *const c_int, n: usize) -> Result<Option<&'a [c_int]>, MpiError> {
    match p as usize {
        abi::MPI_UNWEIGHTED => Ok(None),
        abi::MPI_WEIGHTS_EMPTY => {
            if n > 0 {
                return Err(err(ErrorClass::Arg, "MPI_WEIGHTS_EMPTY given for a non-zero degree"));
            }
            Ok(Some(&[]))
        }
        _ => ints(p, n, "weights").map(Some),
    }
}

// ---- neighborhood collectives ---------------------------------------------------------

/// Neighbor counts (in, out) of the communicator's topology.
fn degrees(g: &Global, h: Handle) -> Result<(usize, usize), MpiError> {
    let (i, o) = g.eng.neighbors(h)?;
    Ok((i.len(), o.len()))
}

fn count_arg(c: i64, what: &str) -> Result<usize, MpiError> {
    usize::try_from(c).map_err(|_| err(ErrorClass::Count, format!("{what} {c} is negative")))
}

fn block(base: *const c_void, disp_bytes: isize, count: usize, t: &TypeRef) -> Buf {
    Buf { ptr: (base as *mut u8).wrapping_offset(disp_bytes), count, dtype: t.clone() }
}

fn no_in_place(p: *const c_void) -> Result<(), MpiError> {
    if p as usize == abi::MPI_IN_PLACE {
        return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE is not allowed in neighborhood collectives"));
    }
    Ok(())
}

/// Count and displacement element types of the C interfaces (int, MPI_Count, MPI_Aint).
trait AsI64: Copy {
    fn as_i64(self) -> i64;
}
impl AsI64 for i32 {
    fn as_i64(self) -> i64 {
        self as i64
    }
}
impl AsI64 for i64 {
    fn as_i64(self) -> i64 {
        self
    }
}
impl AsI64 for isize {
    fn as_i64(self) -> i64 {
        self as i64
    }
}

unsafe fn widen<T: AsI64>(p: *const T, n: usize, what: &str) -> Result<Vec<i64>, MpiError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, n).iter().map(|&x| x.as_i64()).collect())
}

/// Shape of one side of a neighborhood collective.
enum Side<'a> {
    /// The same block for every neighbor.
    Same(*const c_void, i64, MPI_Datatype),
    /// Block j at j * count * extent.
    Strided(*const c_void, i64, MPI_Datatype),
    /// Block j: counts[j] elements at displs[j] * extent.
    Varying(*const c_void, &'a [i64], &'a [i64], MPI_Datatype),
    /// Block j: counts[j] elements of types[j] at displs[j] bytes.
    Typed(*const c_void, &'a [i64], &'a [i64], &'a [MPI_Datatype]),
}

fn blocks(g: &Global, side: &Side, n: usize) -> Result<Vec<Buf>, MpiError> {
    let mut out = Vec::with_capacity(n);
    match *side {
        Side::Same(buf, count, t) => {
            no_in_place(buf)?;
            let t = dtype(g, t as usize)?;
            let c = count_arg(count, "count")?;
            out.extend((0..n).map(|_| block(buf, 0, c, &t)));
        }
        Side::Strided(buf, count, t) => {
            no_in_place(buf)?;
            let t = dtype(g, t as usize)?;
            let c = count_arg(count, "count")?;
            out.extend((0..n).map(|j| block(buf, j as isize * c as isize * t.extent, c, &t)));
        }
        Side::Varying(buf, counts, displs, t) => {
            no_in_place(buf)?;
            let t = dtype(g, t as usize)?;
            for j in 0..n {
                let c = count_arg(counts[j], "count")?;
                out.push(block(buf, displs[j] as isize * t.extent, c, &t));
            }
        }
        Side::Typed(buf, counts, displs, types) => {
            no_in_place(buf)?;
            for j in 0..n {
                let t = dtype(g, types[j] as usize)?;
                let c = count_arg(counts[j], "count")?;
                out.push(block(buf, displs[j] as isize, c, &t));
            }
        }
    }
    Ok(out)
}

unsafe fn types<'a>(p: *const MPI_Datatype, n: usize, what: &str) -> Result<&'a [MPI_Datatype], MpiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, n))
}

/// Blocking, nonblocking (MPI_Ineighbor_*) or persistent (MPI_Neighbor_*_init).
#[derive(Clone, Copy)]
enum Mode {
    Blocking,
    Start(*mut MPI_Request),
    Init(*mut MPI_Request),
}

/// Run a neighborhood collective whose blocks `shape` builds from the degrees (in, out).
unsafe fn neighbor(
    func: &str,
    comm: MPI_Comm,
    mode: Mode,
    shape: impl FnOnce(&Global, usize, usize) -> Result<(Vec<Buf>, Vec<Buf>), MpiError>,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let h = comm_handle(g, comm as usize)?;
        let (indeg, outdeg) = degrees(g, h)?;
        let (send, recv) = shape(g, indeg, outdeg)?;
        let c = g.eng.neighbor_coll(h, send, recv)?;
        match mode {
            Mode::Blocking => g.eng.coll(h, &c),
            Mode::Start(req) | Mode::Init(req) => {
                if req.is_null() {
                    return Err(err(ErrorClass::Arg, "request pointer is NULL"));
                }
                let r = if matches!(mode, Mode::Start(_)) { g.eng.icoll(h, c)? } else { g.eng.coll_init(h, c)? };
                *req = r.0 as MPI_Request;
                Ok(())
            }
        }
    })
}

unsafe fn allgather(func: &str, sb: *const c_void, sc: i64, st: MPI_Datatype, rb: *mut c_void, rc: i64, rt: MPI_Datatype, comm: MPI_Comm, mode: Mode) -> c_int {
    neighbor(func, comm, mode, |g, i, o| Ok((blocks(g, &Side::Same(sb, sc, st), o)?, blocks(g, &Side::Strided(rb, rc, rt), i)?)))
}

unsafe fn allgatherv<C: AsI64, D: AsI64>(func: &str, sb: *const c_void, sc: i64, st: MPI_Datatype, rb: *mut c_void, rcounts: *const C, displs: *const D, rt: MPI_Datatype, comm: MPI_Comm, mode: Mode) -> c_int {
    neighbor(func, comm, mode, |g, i, o| {
        let (rc, rd) = (widen(rcounts, i, "recvcounts")?, widen(displs, i, "displs")?);
        Ok((blocks(g, &Side::Same(sb, sc, st), o)?, blocks(g, &Side::Varying(rb, &rc, &rd, rt), i)?))
    })
}

unsafe fn alltoall(func: &str, sb: *const c_void, sc: i64, st: MPI_Datatype, rb: *mut c_void, rc: i64, rt: MPI_Datatype, comm: MPI_Comm, mode: Mode) -> c_int {
    neighbor(func, comm, mode, |g, i, o| Ok((blocks(g, &Side::Strided(sb, sc, st), o)?, blocks(g, &Side::Strided(rb, rc, rt), i)?)))
}

unsafe fn alltoallv<C: AsI64, D: AsI64>(func: &str, sb: *const c_void, scounts: *const C, sdispls: *const D, st: MPI_Datatype, rb: *mut c_void, rcounts: *const C, rdispls: *const D, rt: MPI_Datatype, comm: MPI_Comm, mode: Mode) -> c_int {
    neighbor(func, comm, mode, |g, i, o| {
        let (sc, sd) = (widen(scounts, o, "sendcounts")?, widen(sdispls, o, "sdispls")?);
        let (rc, rd) = (widen(rcounts, i, "recvcounts")?, widen(rdispls, i, "rdispls")?);
        Ok((blocks(g, &Side::Varying(sb, &sc, &sd, st), o)?, blocks(g, &Side::Varying(rb, &rc, &rd, rt), i)?))
    })
}

unsafe fn alltoallw<C: AsI64>(func: &str, sb: *const c_void, scounts: *const C, sdispls: *const MPI_Aint, stypes: *const MPI_Datatype, rb: *mut c_void, rcounts: *const C, rdispls: *const MPI_Aint, rtypes: *const MPI_Datatype, comm: MPI_Comm, mode: Mode) -> c_int {
    neighbor(func, comm, mode, |g, i, o| {
        let (sc, sd, st) = (widen(scounts, o, "sendcounts")?, widen(sdispls, o, "sdispls")?, types(stypes, o, "sendtypes")?);
        let (rc, rd, rt) = (widen(rcounts, i, "recvcounts")?, widen(rdispls, i, "rdispls")?, types(rtypes, i, "recvtypes")?);
        Ok((blocks(g, &Side::Typed(sb, &sc, &sd, st), o)?, blocks(g, &Side::Typed(rb, &rc, &rd, rt), i)?))
    })
}

mpi_api! {
    fn Cart_create(comm_old: MPI_Comm, ndims: c_int, dims: *const c_int, periods: *const c_int, _reorder: c_int, comm_cart: *mut MPI_Comm) -> c_int {
        api("MPI_Cart_create", Some(comm_old as usize), |g| {
            let h = comm_handle(g, comm_old as usize)?;
            if ndims < 0 {
                return Err(err(ErrorClass::Dims, format!("negative ndims {ndims}")));
            }
            if comm_cart.is_null() {
                return Err(err(ErrorClass::Arg, "comm_cart pointer is NULL"));
            }
            // A call that fails leaves MPI_COMM_NULL, as MPICH does.
            *comm_cart = abi::MPI_COMM_NULL as MPI_Comm;
            let d = ints(dims, ndims as usize, "dims")?;
            let p: Vec<bool> = ints(periods, ndims as usize, "periods")?.iter().map(|&x| x != 0).collect();
            let n = g.eng.cart_create(h, d, &p)?;
            out_comm(g, n, comm_cart)
        })
    }

    fn Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
        api("MPI_Dims_create", None, |_| {
            if ndims < 0 {
                return Err(err(ErrorClass::Dims, format!("negative ndims {ndims}")));
            }
            if ndims > 0 && dims.is_null() {
                return Err(err(ErrorClass::Arg, "dims is NULL"));
            }
            let d: &mut [c_int] = if ndims == 0 { &mut [] } else { std::slice::from_raw_parts_mut(dims, ndims as usize) };
            topo::dims_create(nnodes, d)
        })
    }

    fn Cartdim_get(comm: MPI_Comm, ndims: *mut c_int) -> c_int {
        api("MPI_Cartdim_get", Some(comm as usize), |g| {
            let (_, d, _) = cart_of(g, comm)?;
            if ndims.is_null() {
                return Err(err(ErrorClass::Arg, "ndims is NULL"));
            }
            *ndims = d.len() as c_int;
            Ok(())
        })
    }

    fn Cart_get(comm: MPI_Comm, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) -> c_int {
        api("MPI_Cart_get", Some(comm as usize), |g| {
            let (h, d, p) = cart_of(g, comm)?;
            if maxdims < d.len() as c_int {
                return Err(err(ErrorClass::Arg, format!("maxdims {maxdims} is smaller than the {} dimensions", d.len())));
            }
            let me = g.eng.comm(h)?.rank;
            out_ints(dims, &d, maxdims, "dims")?;
            out_ints(periods, &p.iter().map(|&x| x as c_int).collect::<Vec<_>>(), maxdims, "periods")?;
            out_ints(coords, &topo::cart_coords(&d, me), maxdims, "coords")
        })
    }

    fn Cart_rank(comm: MPI_Comm, coords: *const c_int, rank: *mut c_int) -> c_int {
        api("MPI_Cart_rank", Some(comm as usize), |g| {
            let (_, d, p) = cart_of(g, comm)?;
            let c = ints(coords, d.len(), "coords")?;
            if rank.is_null() {
                return Err(err(ErrorClass::Arg, "rank is NULL"));
            }
            *rank = topo::cart_rank(&d, &p, c)?;
            Ok(())
        })
    }

    fn Cart_coords(comm: MPI_Comm, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
        api("MPI_Cart_coords", Some(comm as usize), |g| {
            let (h, d, _) = cart_of(g, comm)?;
            check_rank(g, h, rank)?;
            if maxdims < d.len() as c_int {
                return Err(err(ErrorClass::Arg, format!("maxdims {maxdims} is smaller than the {} dimensions", d.len())));
            }
            out_ints(coords, &topo::cart_coords(&d, rank), maxdims, "coords")
        })
    }

    fn Cart_shift(comm: MPI_Comm, direction: c_int, disp: c_int, rank_source: *mut c_int, rank_dest: *mut c_int) -> c_int {
        api("MPI_Cart_shift", Some(comm as usize), |g| {
            let (h, d, p) = cart_of(g, comm)?;
            if !(0..d.len() as c_int).contains(&direction) {
                return Err(err(ErrorClass::Arg, format!("direction {direction} is not a dimension (ndims {})", d.len())));
            }
            if rank_source.is_null() || rank_dest.is_null() {
                return Err(err(ErrorClass::Arg, "rank_source or rank_dest is NULL"));
            }
            let me = g.eng.comm(h)?.rank;
            let (s, t) = topo::cart_shift(&d, &p, me, direction as usize, disp);
            *rank_source = s;
            *rank_dest = t;
            Ok(())
        })
    }

    fn Cart_sub(comm: MPI_Comm, remain_dims: *const c_int, newcomm: *mut MPI_Comm) -> c_int {
        api("MPI_Cart_sub", Some(comm as usize), |g| {
            let (h, d, _) = cart_of(g, comm)?;
            let r: Vec<bool> = ints(remain_dims, d.len(), "remain_dims")?.iter().map(|&x| x != 0).collect();
            if newcomm.is_null() {
                return Err(err(ErrorClass::Arg, "newcomm pointer is NULL"));
            }
            let n = g.eng.cart_sub(h, &r)?;
            out_comm(g, n, newcomm)
        })
    }

    fn Cart_map(comm: MPI_Comm, ndims: c_int, dims: *const c_int, _periods: *const c_int, newrank: *mut c_int) -> c_int {
        api("MPI_Cart_map", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if ndims < 0 {
                return Err(err(ErrorClass::Dims, format!("negative ndims {ndims}")));
            }
            let d = ints(dims, ndims as usize, "dims")?;
            if let Some(&x) = d.iter().find(|&&x| x <= 0) {
                return Err(err(ErrorClass::Dims, format!("Cartesian dimension of size {x}")));
            }
            let n = topo::cart_size(d).ok_or_else(|| err(ErrorClass::Dims, "the grid has too many processes"))?;
            let c = g.eng.comm(h)?;
            if n > c.size() {
                return Err(err(ErrorClass::Topology, format!("the grid needs {n} processes but the communicator has {}", c.size())));
            }
            if newrank.is_null() {
                return Err(err(ErrorClass::Arg, "newrank is NULL"));
            }
            *newrank = topo::map_rank(c.rank, n);
            Ok(())
        })
    }

    fn Graph_create(comm_old: MPI_Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, _reorder: c_int, comm_graph: *mut MPI_Comm) -> c_int {
        api("MPI_Graph_create", Some(comm_old as usize), |g| {
            let h = comm_handle(g, comm_old as usize)?;
            if nnodes < 0 {
                return Err(err(ErrorClass::Arg, format!("negative nnodes {nnodes}")));
            }
            if comm_graph.is_null() {
                return Err(err(ErrorClass::Arg, "comm_graph pointer is NULL"));
            }
            let idx = ints(index, nnodes as usize, "index")?;
            let nedges = idx.last().copied().unwrap_or(0);
            if nedges < 0 {
                return Err(err(ErrorClass::Arg, format!("negative edge count {nedges}")));
            }
            let e = ints(edges, nedges as usize, "edges")?;
            let n = g.eng.graph_create(h, idx, e)?;
            out_comm(g, n, comm_graph)
        })
    }

    fn Graphdims_get(comm: MPI_Comm, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
        api("MPI_Graphdims_get", Some(comm as usize), |g| {
            let (_, idx, e) = graph_of(g, comm)?;
            if nnodes.is_null() || nedges.is_null() {
                return Err(err(ErrorClass::Arg, "nnodes or nedges is NULL"));
            }
            *nnodes = idx.len() as c_int;
            *nedges = e.len() as c_int;
            Ok(())
        })
    }

    fn Graph_get(comm: MPI_Comm, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) -> c_int {
        api("MPI_Graph_get", Some(comm as usize), |g| {
            let (_, idx, e) = graph_of(g, comm)?;
            out_ints(index, &idx, maxindex, "index")?;
            out_ints(edges, &e, maxedges, "edges")
        })
    }

    fn Graph_neighbors_count(comm: MPI_Comm, rank: c_int, nneighbors: *mut c_int) -> c_int {
        api("MPI_Graph_neighbors_count", Some(comm as usize), |g| {
            let (h, idx, e) = graph_of(g, comm)?;
            check_rank(g, h, rank)?;
            if nneighbors.is_null() {
                return Err(err(ErrorClass::Arg, "nneighbors is NULL"));
            }
            *nneighbors = topo::graph_neighbors(&idx, &e, rank).len() as c_int;
            Ok(())
        })
    }

    fn Graph_neighbors(comm: MPI_Comm, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) -> c_int {
        api("MPI_Graph_neighbors", Some(comm as usize), |g| {
            let (h, idx, e) = graph_of(g, comm)?;
            check_rank(g, h, rank)?;
            out_ints(neighbors, topo::graph_neighbors(&idx, &e, rank), maxneighbors, "neighbors")
        })
    }

    fn Graph_map(comm: MPI_Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, newrank: *mut c_int) -> c_int {
        api("MPI_Graph_map", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if nnodes < 1 {
                return Err(err(ErrorClass::Arg, format!("nnodes {nnodes} must be positive")));
            }
            let idx = ints(index, nnodes as usize, "index")?;
            let e = ints(edges, idx.last().copied().unwrap_or(0).max(0) as usize, "edges")?;
            topo::check_graph(idx, e)?;
            let c = g.eng.comm(h)?;
            if nnodes > c.size() {
                return Err(err(ErrorClass::Topology, format!("the graph has {nnodes} nodes but the communicator {} ranks", c.size())));
            }
            if newrank.is_null() {
                return Err(err(ErrorClass::Arg, "newrank is NULL"));
            }
            *newrank = topo::map_rank(c.rank, nnodes);
            Ok(())
        })
    }

    fn Dist_graph_create_adjacent(comm_old: MPI_Comm, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, info: MPI_Info, _reorder: c_int, comm_dist_graph: *mut MPI_Comm) -> c_int {
        api("MPI_Dist_graph_create_adjacent", Some(comm_old as usize), |g| {
            let h = comm_handle(g, comm_old as usize)?;
            info_arg(g, info)?;
            if indegree < 0 || outdegree < 0 {
                return Err(err(ErrorClass::Arg, format!("negative degree (in {indegree}, out {outdegree})")));
            }
            if comm_dist_graph.is_null() {
                return Err(err(ErrorClass::Arg, "comm_dist_graph pointer is NULL"));
            }
            let s = ints(sources, indegree as usize, "sources")?;
            let d = ints(destinations, outdegree as usize, "destinations")?;
            let sw = weights(sourceweights, s.len())?;
            let dw = weights(destweights, d.len())?;
            let weighted = sw.is_some() || dw.is_some();
            let n = g.eng.dist_graph_create_adjacent(h, s, sw.unwrap_or(&[]), d, dw.unwrap_or(&[]), weighted)?;
            out_comm(g, Some(n), comm_dist_graph)
        })
    }

    fn Dist_graph_create(comm_old: MPI_Comm, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights_: *const c_int, info: MPI_Info, _reorder: c_int, comm_dist_graph: *mut MPI_Comm) -> c_int {
        api("MPI_Dist_graph_create", Some(comm_old as usize), |g| {
            let h = comm_handle(g, comm_old as usize)?;
            info_arg(g, info)?;
            if n < 0 {
                return Err(err(ErrorClass::Arg, format!("negative source count {n}")));
            }
            if comm_dist_graph.is_null() {
                return Err(err(ErrorClass::Arg, "comm_dist_graph pointer is NULL"));
            }
            let s = ints(sources, n as usize, "sources")?;
            let deg = ints(degrees, n as usize, "degrees")?;
            if let Some(&x) = deg.iter().find(|&&x| x < 0) {
                return Err(err(ErrorClass::Arg, format!("negative degree {x}")));
            }
            let total: usize = deg.iter().map(|&x| x as usize).sum();
            let d = ints(destinations, total, "destinations")?;
            let w = weights(weights_, total)?;
            let mut edges = Vec::with_capacity(total);
            let mut k = 0;
            for (i, &src) in s.iter().enumerate() {
                for _ in 0..deg[i] {
                    edges.push((src, d[k], w.and_then(|w| w.get(k).copied()).unwrap_or(1)));
                    k += 1;
                }
            }
            let n = g.eng.dist_graph_create(h, &edges, w.is_some())?;
            out_comm(g, Some(n), comm_dist_graph)
        })
    }

    fn Dist_graph_neighbors_count(comm: MPI_Comm, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) -> c_int {
        api("MPI_Dist_graph_neighbors_count", Some(comm as usize), |g| {
            let (h, t) = topo_of(g, comm)?;
            if indegree.is_null() || outdegree.is_null() || weighted.is_null() {
                return Err(err(ErrorClass::Arg, "indegree, outdegree or weighted is NULL"));
            }
            let w = match t.as_deref() {
                Some(Topology::DistGraph { weighted, .. }) => *weighted,
                Some(_) => false,
                None => return Err(err(ErrorClass::Topology, "the communicator has no topology")),
            };
            let (i, o) = degrees(g, h)?;
            *indegree = i as c_int;
            *outdegree = o as c_int;
            *weighted = w as c_int;
            Ok(())
        })
    }

    fn Dist_graph_neighbors(comm: MPI_Comm, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) -> c_int {
        api("MPI_Dist_graph_neighbors", Some(comm as usize), |g| {
            let (h, t) = topo_of(g, comm)?;
            let (ins, outs) = g.eng.neighbors(h)?;
            out_ints(sources, &ins, maxindegree, "sources")?;
            out_ints(destinations, &outs, maxoutdegree, "destinations")?;
            if let Some(Topology::DistGraph { sweights, dweights, weighted: true, .. }) = t.as_deref() {
                if sourceweights as usize != abi::MPI_UNWEIGHTED {
                    out_ints(sourceweights, sweights, maxindegree, "sourceweights")?;
                }
                if destweights as usize != abi::MPI_UNWEIGHTED {
                    out_ints(destweights, dweights, maxoutdegree, "destweights")?;
                }
            }
            Ok(())
        })
    }

    fn Topo_test(comm: MPI_Comm, status: *mut c_int) -> c_int {
        api("MPI_Topo_test", Some(comm as usize), |g| {
            let (_, t) = topo_of(g, comm)?;
            if status.is_null() {
                return Err(err(ErrorClass::Arg, "status is NULL"));
            }
            *status = match t.as_deref() {
                Some(Topology::Cart { .. }) => abi::MPI_CART,
                Some(Topology::Graph { .. }) => abi::MPI_GRAPH,
                Some(Topology::DistGraph { .. }) => abi::MPI_DIST_GRAPH,
                None => abi::MPI_UNDEFINED,
            };
            Ok(())
        })
    }

    fn Neighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgather("MPI_Neighbor_allgather", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Blocking)
    }
    fn Neighbor_allgather_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgather("MPI_Neighbor_allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Blocking)
    }
    fn Ineighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgather("MPI_Ineighbor_allgather", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Start(request))
    }
    fn Ineighbor_allgather_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgather("MPI_Ineighbor_allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Start(request))
    }
    fn Neighbor_allgather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgather("MPI_Neighbor_allgather_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Init(request))
    }
    fn Neighbor_allgather_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgather("MPI_Neighbor_allgather_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Init(request))
    }

    fn Neighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgatherv("MPI_Neighbor_allgatherv", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Blocking)
    }
    fn Neighbor_allgatherv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgatherv("MPI_Neighbor_allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Blocking)
    }
    fn Ineighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgatherv("MPI_Ineighbor_allgatherv", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Start(request))
    }
    fn Ineighbor_allgatherv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgatherv("MPI_Ineighbor_allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Start(request))
    }
    fn Neighbor_allgatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgatherv("MPI_Neighbor_allgatherv_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Init(request))
    }
    fn Neighbor_allgatherv_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgatherv("MPI_Neighbor_allgatherv_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Init(request))
    }

    fn Neighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoall("MPI_Neighbor_alltoall", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Blocking)
    }
    fn Neighbor_alltoall_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoall("MPI_Neighbor_alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Blocking)
    }
    fn Ineighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoall("MPI_Ineighbor_alltoall", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Start(request))
    }
    fn Ineighbor_alltoall_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoall("MPI_Ineighbor_alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Start(request))
    }
    fn Neighbor_alltoall_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoall("MPI_Neighbor_alltoall_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Init(request))
    }
    fn Neighbor_alltoall_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoall("MPI_Neighbor_alltoall_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Init(request))
    }

    fn Neighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallv("MPI_Neighbor_alltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Blocking)
    }
    fn Neighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallv("MPI_Neighbor_alltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Blocking)
    }
    fn Ineighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallv("MPI_Ineighbor_alltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Start(request))
    }
    fn Ineighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallv("MPI_Ineighbor_alltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Start(request))
    }
    fn Neighbor_alltoallv_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallv("MPI_Neighbor_alltoallv_init", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Init(request))
    }
    fn Neighbor_alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallv("MPI_Neighbor_alltoallv_init_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Init(request))
    }

    fn Neighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallw("MPI_Neighbor_alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Blocking)
    }
    fn Neighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallw("MPI_Neighbor_alltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Blocking)
    }
    fn Ineighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallw("MPI_Ineighbor_alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Start(request))
    }
    fn Ineighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallw("MPI_Ineighbor_alltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Start(request))
    }
    fn Neighbor_alltoallw_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallw("MPI_Neighbor_alltoallw_init", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Init(request))
    }
    fn Neighbor_alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallw("MPI_Neighbor_alltoallw_init_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Init(request))
    }
}

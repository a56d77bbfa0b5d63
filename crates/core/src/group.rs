//! Groups (ordered sets of world ranks) and the communicators built from them.
//!
//! Group algebra is pure: a group is a list of world ranks, indexed by group rank.
//! Communicator construction (split, create, create_group, intercommunicators, merge) is
//! collective and lives on [`Engine`]; it needs agreement on a context id:
//! - over a whole intracommunicator: a max-reduction of every member's next free id;
//! - over a subgroup only (Comm_create_group): the same reduction over the group's members,
//!   addressed through the parent's collective context with a tag derived from the user's;
//! - across both sides of an intercommunicator: each side reduces locally, the two leaders
//!   exchange their maxima, and each leader broadcasts the larger one to its side.
//!
//! Context ids: a communicator takes `ctx` (point-to-point) and `ctx + 1` (collectives). An
//! intercommunicator takes four: its own pair and `ctx + 2, ctx + 3` for the hidden
//! intracommunicator over its local group (`Comm::local`), which intercommunicator
//! operations use for local agreement. Disjoint groups may share ids safely.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::comm::Comm;
use crate::engine::{Engine, PROC_NULL};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::mpi_err;
use crate::slab::Handle;

/// Rank value meaning "not a member" (MPI_UNDEFINED).
pub const UNDEFINED: i32 = -32766;

/// A group: world ranks indexed by group rank.
pub type Group = Arc<Vec<u32>>;

/// Result of comparing two groups (or communicators).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// Same members in the same order (or the same communicator).
    Ident,
    /// Same members and order, different communicators.
    Congruent,
    /// Same members, different order.
    Similar,
    /// Different members.
    Unequal,
}

/// Rank of world rank `w` in `g`, if a member.
pub fn rank_of(g: &[u32], w: u32) -> Option<i32> {
    g.iter().position(|&x| x == w).map(|p| p as i32)
}

/// Compare two groups: Ident (same order), Similar (same set) or Unequal.
pub fn compare(a: &[u32], b: &[u32]) -> Comparison {
    if a == b {
        return Comparison::Ident;
    }
    if a.len() != b.len() {
        return Comparison::Unequal;
    }
    let sa: HashSet<u32> = a.iter().copied().collect();
    if b.iter().all(|x| sa.contains(x)) {
        Comparison::Similar
    } else {
        Comparison::Unequal
    }
}

/// For each rank of `g1` in `ranks`, its rank in `g2` (UNDEFINED if absent; PROC_NULL stays).
pub fn translate(g1: &[u32], ranks: &[i32], g2: &[u32]) -> MpiResult<Vec<i32>> {
    let pos: HashMap<u32, i32> = g2.iter().enumerate().map(|(i, &w)| (w, i as i32)).collect();
    ranks
        .iter()
        .map(|&r| {
            if r == PROC_NULL {
                return Ok(PROC_NULL);
            }
            let w = usize::try_from(r).ok().and_then(|i| g1.get(i)).copied();
            match w {
                Some(w) => Ok(pos.get(&w).copied().unwrap_or(UNDEFINED)),
                None => mpi_err!(Rank, "rank {r} is not in the first group (size {})", g1.len()),
            }
        })
        .collect()
}

/// Members of `a`, then members of `b` not in `a`.
pub fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    let sa: HashSet<u32> = a.iter().copied().collect();
    a.iter().copied().chain(b.iter().copied().filter(|x| !sa.contains(x))).collect()
}

/// Members of `a` that are also in `b`, in `a`'s order.
pub fn intersection(a: &[u32], b: &[u32]) -> Vec<u32> {
    let sb: HashSet<u32> = b.iter().copied().collect();
    a.iter().copied().filter(|x| sb.contains(x)).collect()
}

/// Members of `a` that are not in `b`, in `a`'s order.
pub fn difference(a: &[u32], b: &[u32]) -> Vec<u32> {
    let sb: HashSet<u32> = b.iter().copied().collect();
    a.iter().copied().filter(|x| !sb.contains(x)).collect()
}

fn check_distinct(g: &[u32], ranks: &[i32]) -> MpiResult<()> {
    let mut seen = vec![false; g.len()];
    for &r in ranks {
        let Some(i) = usize::try_from(r).ok().filter(|&i| i < g.len()) else {
            return mpi_err!(Rank, "rank {r} is not in the group (size {})", g.len());
        };
        if seen[i] {
            return mpi_err!(Rank, "rank {r} appears more than once");
        }
        seen[i] = true;
    }
    Ok(())
}

/// The members of `g` at `ranks`, in that order (ranks must be distinct and valid).
pub fn incl(g: &[u32], ranks: &[i32]) -> MpiResult<Vec<u32>> {
    check_distinct(g, ranks)?;
    Ok(ranks.iter().map(|&r| g[r as usize]).collect())
}

/// The members of `g` except those at `ranks` (distinct and valid), in `g`'s order.
pub fn excl(g: &[u32], ranks: &[i32]) -> MpiResult<Vec<u32>> {
    check_distinct(g, ranks)?;
    let drop: HashSet<i32> = ranks.iter().copied().collect();
    Ok(g.iter().enumerate().filter(|(i, _)| !drop.contains(&(*i as i32))).map(|(_, &w)| w).collect())
}

/// Expand (first, last, stride) triplets into the ranks they denote.
pub fn expand_ranges(size: usize, ranges: &[[i32; 3]]) -> MpiResult<Vec<i32>> {
    let mut out = Vec::new();
    for &[first, last, stride] in ranges {
        if stride == 0 {
            return mpi_err!(Arg, "range ({first}, {last}, {stride}) has stride 0");
        }
        for end in [first, last] {
            if end < 0 || end as usize >= size {
                return mpi_err!(Rank, "range ({first}, {last}, {stride}) names rank {end} outside the group (size {size})");
            }
        }
        let diff = last as i64 - first as i64;
        if diff != 0 && (diff < 0) != (stride < 0) {
            return mpi_err!(
                Arg,
                "range ({first}, {last}, {stride}) is empty: the stride points away from the last rank"
            );
        }
        for k in 0..=diff / stride as i64 {
            out.push((first as i64 + k * stride as i64) as i32);
        }
    }
    Ok(out)
}

/// MPI_Group_range_incl.
pub fn range_incl(g: &[u32], ranges: &[[i32; 3]]) -> MpiResult<Vec<u32>> {
    incl(g, &expand_ranges(g.len(), ranges)?)
}

/// MPI_Group_range_excl.
pub fn range_excl(g: &[u32], ranges: &[[i32; 3]]) -> MpiResult<Vec<u32>> {
    excl(g, &expand_ranges(g.len(), ranges)?)
}

// ---- internal collectives used to build communicators ----------------------------------

/// Tags on a communicator's collective context used by communicator construction.
const TAG_ALLGATHER: i32 = 0x7ffe_0010;
pub(crate) const TAG_BCAST_LEN: i32 = 0x7ffe_0040;
pub(crate) const TAG_BCAST_DATA: i32 = 0x7ffe_0041;
const TAG_GATHER: i32 = 0x7ffe_0042;
const TAG_LEADERS: i32 = 0x7ffe_0050;

/// Collective-context tag of Comm_create_group's agreement for user tag `tag` (negative, so
/// it never meets user-level or library collective tags).
fn create_group_tag(tag: i32) -> i32 {
    i32::MIN | (tag & 0x1fff_ffff)
}

/// Collective-context tag of Intercomm_create's leader exchange for user tag `tag`.
fn intercomm_tag(tag: i32) -> i32 {
    i32::MIN | 0x2000_0000 | (tag & 0x1fff_ffff)
}

fn u64_at(b: &[u8], off: usize) -> MpiResult<u64> {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| MpiError::new(ErrorClass::Intern, "short message during communicator construction"))
}

fn u32_at(b: &[u8], off: usize) -> MpiResult<u32> {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| MpiError::new(ErrorClass::Intern, "short message during communicator construction"))
}

fn i32_at(b: &[u8], off: usize) -> MpiResult<i32> {
    u32_at(b, off).map(|v| v as i32)
}

fn encode_ranks(out: &mut Vec<u8>, g: &[u32]) {
    out.extend_from_slice(&(g.len() as u64).to_le_bytes());
    for &w in g {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

fn decode_ranks(b: &[u8], off: usize) -> MpiResult<(Vec<u32>, usize)> {
    let n = u64_at(b, off)? as usize;
    let mut v = Vec::with_capacity(n.min(b.len() / 4));
    for i in 0..n {
        v.push(u32_at(b, off + 8 + 4 * i)?);
    }
    Ok((v, off + 8 + 4 * n))
}

/// One process's part in a split: (color, key, world rank), indexed by old rank.
type SplitEntry = (i32, i32, u32);

/// Members of one color after a split, sorted by key, then old rank; returns the world
/// ranks in new-rank order.
fn split_members(entries: &[SplitEntry], color: i32) -> Vec<u32> {
    let mut m: Vec<(i32, usize, u32)> =
        entries.iter().enumerate().filter(|(_, e)| e.0 == color).map(|(i, e)| (e.1, i, e.2)).collect();
    m.sort_unstable();
    m.into_iter().map(|(_, _, w)| w).collect()
}

impl Engine {
    /// Gather `mine` (the same length on every rank) from every member of intracomm `c`,
    /// in rank order (Bruck's algorithm: ⌈log2 n⌉ rounds).
    pub fn allgather_fixed(&mut self, c: Handle, mine: &[u8]) -> MpiResult<Vec<u8>> {
        let comm = self.comm(c)?;
        if comm.remote.is_some() {
            return mpi_err!(Intern, "allgather over an intercommunicator");
        }
        let (rank, n) = (comm.rank as usize, comm.size() as usize);
        let b = mine.len();
        // buf holds blocks of ranks rank, rank+1, ... (mod n).
        let mut buf = vec![0u8; b * n];
        buf[..b].copy_from_slice(mine);
        let mut have = 1;
        let mut round = 0;
        while have < n {
            let cnt = have.min(n - have);
            let to = ((rank + n - have) % n) as i32;
            let from = ((rank + have) % n) as i32;
            let out = buf[..cnt * b].to_vec();
            let s = self.coll_isend(c, to, TAG_ALLGATHER + round, &out)?;
            let mut inb = vec![0u8; cnt * b];
            self.coll_recv(c, from, TAG_ALLGATHER + round, &mut inb)?;
            self.wait(s)?;
            self.release(s);
            buf[have * b..(have + cnt) * b].copy_from_slice(&inb);
            have += cnt;
            round += 1;
        }
        // Rotate so block i belongs to rank i.
        let mut out = vec![0u8; b * n];
        for i in 0..n {
            let r = (rank + i) % n;
            out[r * b..(r + 1) * b].copy_from_slice(&buf[i * b..(i + 1) * b]);
        }
        Ok(out)
    }

    /// Broadcast a byte vector of any length from `root` over intracomm `c` (binomial tree;
    /// the length travels first).
    pub fn bcast_bytes(&mut self, c: Handle, root: i32, data: &mut Vec<u8>) -> MpiResult<()> {
        if self.setup_running_shared(c) {
            // An agreement on a segment of `c` in the background (an earlier MPI_Ibcast's)
            // takes these tags too: it ends first, or this call could take its name.
            self.block_until(|e| !e.setup_running_shared(c))?;
        }
        let comm = self.comm(c)?;
        let (rank, n) = (comm.rank, comm.size());
        let rel = (rank - root + n) % n;
        let mut len = (data.len() as u64).to_le_bytes();
        // Receive from the parent.
        let mut mask = 1;
        while mask < n {
            if rel & mask != 0 {
                let parent = (rel - mask + root) % n;
                self.coll_recv(c, parent, TAG_BCAST_LEN, &mut len)?;
                data.resize(u64::from_le_bytes(len) as usize, 0);
                self.coll_recv(c, parent, TAG_BCAST_DATA, data)?;
                break;
            }
            mask <<= 1;
        }
        // Forward to the children.
        mask >>= 1;
        while mask > 0 {
            if rel + mask < n {
                let child = (rel + mask + root) % n;
                self.coll_send(c, child, TAG_BCAST_LEN, &len)?;
                self.coll_send(c, child, TAG_BCAST_DATA, data)?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// Gather byte vectors of any length at `root` of intracomm `c` (linear; only for setup).
    fn gather_bytes(&mut self, c: Handle, root: i32, mine: &[u8]) -> MpiResult<Vec<Vec<u8>>> {
        let lens = self.allgather_fixed(c, &(mine.len() as u64).to_le_bytes())?;
        let comm = self.comm(c)?;
        let (rank, n) = (comm.rank, comm.size());
        if rank != root {
            self.coll_send(c, root, TAG_GATHER, mine)?;
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(n as usize);
        for r in 0..n {
            if r == rank {
                out.push(mine.to_vec());
                continue;
            }
            let mut buf = vec![0u8; u64_at(&lens, 8 * r as usize)? as usize];
            self.coll_recv(c, r, TAG_GATHER, &mut buf)?;
            out.push(buf);
        }
        Ok(out)
    }

    /// Every member's byte vector, in rank order, at every member of intracomm `c`.
    pub fn allgather_bytes(&mut self, c: Handle, mine: &[u8]) -> MpiResult<Vec<Vec<u8>>> {
        let parts = self.gather_bytes(c, 0, mine)?;
        let mut flat = Vec::new();
        for p in &parts {
            flat.extend_from_slice(&(p.len() as u64).to_le_bytes());
            flat.extend_from_slice(p);
        }
        self.bcast_bytes(c, 0, &mut flat)?;
        let n = self.comm(c)?.size() as usize;
        let mut out = Vec::with_capacity(n);
        let mut off = 0;
        for _ in 0..n {
            let len = u64_at(&flat, off)? as usize;
            let part = flat
                .get(off + 8..off + 8 + len)
                .ok_or_else(|| MpiError::new(ErrorClass::Intern, "short allgather message"))?;
            out.push(part.to_vec());
            off += 8 + len;
        }
        Ok(out)
    }

    /// Maximum of `v` over the processes at `ranks` (ranks of intracomm `c`, this process at
    /// index `me`), exchanged on `c`'s collective context with `tag`: recursive doubling
    /// among the listed processes only.
    fn allreduce_max_among(&mut self, c: Handle, ranks: &[i32], me: usize, tag: i32, v: u64) -> MpiResult<u64> {
        let size = ranks.len();
        let mut pof2 = 1;
        while pof2 * 2 <= size {
            pof2 *= 2;
        }
        let mut acc = v;
        let mut buf = [0u8; 8];
        if me >= pof2 {
            self.coll_send(c, ranks[me - pof2], tag, &acc.to_le_bytes())?;
            self.coll_recv(c, ranks[me - pof2], tag, &mut buf)?;
            return Ok(u64::from_le_bytes(buf));
        }
        if me + pof2 < size {
            self.coll_recv(c, ranks[me + pof2], tag, &mut buf)?;
            acc = acc.max(u64::from_le_bytes(buf));
        }
        let mut mask = 1;
        while mask < pof2 {
            let partner = ranks[me ^ mask];
            let s = self.coll_isend(c, partner, tag, &acc.to_le_bytes())?;
            self.coll_recv(c, partner, tag, &mut buf)?;
            self.wait(s)?;
            self.release(s);
            acc = acc.max(u64::from_le_bytes(buf));
            mask <<= 1;
        }
        if me + pof2 < size {
            self.coll_send(c, ranks[me + pof2], tag, &acc.to_le_bytes())?;
        }
        Ok(acc)
    }

    // ---- communicator construction ------------------------------------------------------

    fn new_intra(&mut self, ctx: u32, group: Vec<u32>, errhandler: u64) -> MpiResult<Handle> {
        let me = self.rank;
        let rank = rank_of(&group, me).ok_or_else(|| MpiError::new(ErrorClass::Intern, "not a member of the new group"))?;
        Ok(self.add_comm(Comm { ctx, rank, group: Arc::new(group), errhandler, ..Default::default() }))
    }

    pub(crate) fn new_inter(&mut self, ctx: u32, local: Vec<u32>, remote: Vec<u32>, errhandler: u64) -> MpiResult<Handle> {
        let me = self.rank;
        let rank = rank_of(&local, me).ok_or_else(|| MpiError::new(ErrorClass::Intern, "not a member of the new group"))?;
        let local = Arc::new(local);
        let lc = self.add_comm(Comm { ctx: ctx + 2, rank, group: local.clone(), errhandler, ..Default::default() });
        Ok(self.add_comm(Comm {
            ctx,
            rank,
            group: local,
            remote: Some(Arc::new(remote)),
            errhandler,
            local: Some(lc),
            ..Default::default()
        }))
    }

    /// The hidden intracommunicator over an intercommunicator's local group.
    fn local_of(&self, c: Handle) -> MpiResult<Handle> {
        self.comm(c)?.local.ok_or_else(|| MpiError::new(ErrorClass::Comm, "not an intercommunicator"))
    }

    /// Agree on a context id block across both groups of intercomm `c`, and swap one payload
    /// between the groups: the local leader's `payload` reaches every remote process. Returns
    /// (context id, remote leader's payload).
    fn inter_agree(&mut self, c: Handle, payload: &[u8]) -> MpiResult<(u32, Vec<u8>)> {
        let local = self.local_of(c)?;
        let lrank = self.comm(local)?.rank;
        let next = self.next_context() as u64;
        let m = self.allreduce_max_u64(local, next)?;
        let mut msg = Vec::new();
        if lrank == 0 {
            let mut out = m.to_le_bytes().to_vec();
            out.extend_from_slice(payload);
            let mut len = [0u8; 8];
            let s1 = self.coll_isend(c, 0, TAG_LEADERS, &(out.len() as u64).to_le_bytes())?;
            self.coll_recv(c, 0, TAG_LEADERS, &mut len)?;
            let s2 = self.coll_isend(c, 0, TAG_LEADERS + 1, &out)?;
            let mut theirs = vec![0u8; u64::from_le_bytes(len) as usize];
            self.coll_recv(c, 0, TAG_LEADERS + 1, &mut theirs)?;
            for s in [s1, s2] {
                self.wait(s)?;
                self.release(s);
            }
            let ctx = m.max(u64_at(&theirs, 0)?);
            msg = ctx.to_le_bytes().to_vec();
            msg.extend_from_slice(theirs.get(8..).unwrap_or_default());
        }
        self.bcast_bytes(local, 0, &mut msg)?;
        let ctx = u64_at(&msg, 0)? as u32;
        self.claim_contexts(ctx, 4);
        Ok((ctx, msg.get(8..).unwrap_or_default().to_vec()))
    }

    /// MPI_Comm_dup for intra- and intercommunicators: same groups, fresh context, no name,
    /// no attributes; topology and error handler carried over.
    pub fn dup_comm(&mut self, c: Handle) -> MpiResult<Handle> {
        let old = self.comm(c)?.clone();
        match &old.remote {
            None => {
                let ctx = self.new_context(c)?;
                Ok(self.add_comm(Comm { ctx, name: String::new(), ..old }))
            }
            Some(remote) => {
                let (ctx, _) = self.inter_agree(c, &[])?;
                let n = self.new_inter(ctx, old.group.to_vec(), remote.to_vec(), old.errhandler)?;
                let topo = old.topo.clone();
                self.comm_mut(n)?.topo = topo;
                Ok(n)
            }
        }
    }

    /// Free communicator `c` and, for an intercommunicator, its hidden local communicator.
    /// Operations in progress on it complete normally (MPI_Comm_free): then it stays until
    /// they have ([`Engine::release_deferred`]); the returned description is the same. So
    /// does a communicator whose channel broadcasts other ranks may still need this rank
    /// for ([`Engine::channel_retiring`]).
    pub fn release_comm(&mut self, c: Handle) -> MpiResult<Comm> {
        if self.comm_in_use(c) || self.channel_retiring(c) {
            let comm = self.comm(c)?.clone();
            self.coll.freed_later.push(c);
            return Ok(comm);
        }
        self.release_comm_now(c)
    }

    /// [`Engine::release_comm`] with nothing in progress on `c`.
    pub(crate) fn release_comm_now(&mut self, c: Handle) -> MpiResult<Comm> {
        let comm = self.free_comm(c)?;
        if let Some(l) = comm.local {
            self.free_comm(l)?;
        }
        Ok(comm)
    }

    /// MPI_Comm_split (intra- or intercommunicator). `color` UNDEFINED yields None.
    pub fn comm_split(&mut self, c: Handle, color: i32, key: i32) -> MpiResult<Option<Handle>> {
        if color < 0 && color != UNDEFINED {
            return mpi_err!(Arg, "invalid color {color} (must be non-negative or MPI_UNDEFINED)");
        }
        let comm = self.comm(c)?.clone();
        let me = self.rank;
        let mut mine = Vec::with_capacity(16);
        mine.extend_from_slice(&color.to_le_bytes());
        mine.extend_from_slice(&key.to_le_bytes());
        mine.extend_from_slice(&(self.next_context() as u64).to_le_bytes());
        let decode = |all: &[u8], group: &[u32]| -> MpiResult<(Vec<SplitEntry>, u64)> {
            let mut entries = Vec::with_capacity(group.len());
            let mut max = 0;
            for (i, &w) in group.iter().enumerate() {
                entries.push((i32_at(all, 16 * i)?, i32_at(all, 16 * i + 4)?, w));
                max = max.max(u64_at(all, 16 * i + 8)?);
            }
            Ok((entries, max))
        };
        match &comm.remote {
            None => {
                let all = self.allgather_fixed(c, &mine)?;
                let (entries, max) = decode(&all, &comm.group)?;
                let ctx = max as u32;
                self.claim_contexts(ctx, 2);
                if color == UNDEFINED {
                    return Ok(None);
                }
                let members = split_members(&entries, color);
                debug_assert!(members.contains(&me));
                Ok(Some(self.new_intra(ctx, members, comm.errhandler)?))
            }
            Some(remote) => {
                let local = self.local_of(c)?;
                let all = self.allgather_fixed(local, &mine)?;
                let (entries, _) = decode(&all, &comm.group)?;
                let (ctx, theirs) = self.inter_agree(c, &all)?;
                let (rentries, _) = decode(&theirs, remote)?;
                if color == UNDEFINED {
                    return Ok(None);
                }
                let lm = split_members(&entries, color);
                let rm = split_members(&rentries, color);
                if rm.is_empty() {
                    return Ok(None);
                }
                Ok(Some(self.new_inter(ctx, lm, rm, comm.errhandler)?))
            }
        }
    }

    /// MPI_Comm_create: collective over all of `c`; `group` (world ranks) is this process's
    /// subgroup. Returns None where this process is not in `group`.
    pub fn comm_create(&mut self, c: Handle, group: &[u32]) -> MpiResult<Option<Handle>> {
        let comm = self.comm(c)?.clone();
        let me = self.rank;
        match &comm.remote {
            None => {
                if !group.iter().all(|w| comm.group.contains(w)) {
                    // Still take part in the agreement so the other members do not hang.
                    self.new_context(c)?;
                    return mpi_err!(Group, "the group is not a subgroup of the communicator's group");
                }
                let ctx = self.new_context(c)?;
                if !group.contains(&me) {
                    return Ok(None);
                }
                Ok(Some(self.new_intra(ctx, group.to_vec(), comm.errhandler)?))
            }
            Some(_) => {
                let valid = group.iter().all(|w| comm.group.contains(w));
                let mut payload = Vec::new();
                encode_ranks(&mut payload, if valid { group } else { &[] });
                let (ctx, theirs) = self.inter_agree(c, &payload)?;
                if !valid {
                    return mpi_err!(Group, "the group is not a subgroup of the local group");
                }
                let (remote, _) = decode_ranks(&theirs, 0)?;
                if !group.contains(&me) || remote.is_empty() {
                    return Ok(None);
                }
                Ok(Some(self.new_inter(ctx, group.to_vec(), remote, comm.errhandler)?))
            }
        }
    }

    /// MPI_Comm_create_group: collective over the members of `group` only (world ranks,
    /// a subgroup of intracomm `c`); None if this process is not a member.
    pub fn comm_create_group(&mut self, c: Handle, group: &[u32], tag: i32) -> MpiResult<Option<Handle>> {
        let comm = self.comm(c)?.clone();
        if comm.remote.is_some() {
            return mpi_err!(Comm, "MPI_Comm_create_group needs an intracommunicator");
        }
        let pos: HashMap<u32, i32> = comm.group.iter().enumerate().map(|(i, &w)| (w, i as i32)).collect();
        let mut ranks = Vec::with_capacity(group.len());
        for w in group {
            match pos.get(w) {
                Some(&r) => ranks.push(r),
                None => return mpi_err!(Group, "the group is not a subgroup of the communicator's group"),
            }
        }
        let Some(me) = rank_of(group, self.rank) else { return Ok(None) };
        let next = self.next_context() as u64;
        let ctx = self.allreduce_max_among(c, &ranks, me as usize, create_group_tag(tag), next)? as u32;
        self.claim_contexts(ctx, 2);
        Ok(Some(self.new_intra(ctx, group.to_vec(), comm.errhandler)?))
    }

    /// MPI_Intercomm_create. `peer` and `remote_leader` matter only at the local leader.
    pub fn intercomm_create(
        &mut self,
        local: Handle,
        local_leader: i32,
        peer: Option<Handle>,
        remote_leader: i32,
        tag: i32,
    ) -> MpiResult<Handle> {
        let lc = self.comm(local)?.clone();
        if lc.remote.is_some() {
            return mpi_err!(Comm, "the local communicator must be an intracommunicator");
        }
        if !(0..lc.size()).contains(&local_leader) {
            return mpi_err!(Rank, "local leader {local_leader} is not a rank of the local communicator (size {})", lc.size());
        }
        let next = self.next_context() as u64;
        let m = self.allreduce_max_u64(local, next)?;
        let mut msg = Vec::new();
        if lc.rank == local_leader {
            let peer = peer.ok_or_else(|| MpiError::new(ErrorClass::Comm, "the local leader needs a valid peer communicator"))?;
            // An intercommunicator may serve as the peer communicator (the remote leader is
            // then a rank of its remote group), as between parents and spawned children.
            let pc = self.comm(peer)?;
            if !(0..pc.peer_size()).contains(&remote_leader) {
                return mpi_err!(Rank, "remote leader {remote_leader} is not a rank of the peer communicator (size {})", pc.peer_size());
            }
            // Members travel as job-wide process indices: the two groups may be in
            // different worlds, where local peer indices mean different processes.
            let mut out = m.to_le_bytes().to_vec();
            let procs: Vec<u32> = lc.group.iter().map(|&p| self.proc_index(p)).collect();
            encode_ranks(&mut out, &procs);
            let t = intercomm_tag(tag);
            let s = self.coll_isend(peer, remote_leader, t, &out)?;
            let mut theirs = vec![0u8; 16 + 4 * self.known_peers().max(1 << 16)];
            let st = self.coll_recv(peer, remote_leader, t, &mut theirs)?;
            theirs.truncate(st.bytes as usize);
            self.wait(s)?;
            self.release(s);
            let ctx = m.max(u64_at(&theirs, 0)?);
            msg = ctx.to_le_bytes().to_vec();
            msg.extend_from_slice(&theirs[8..]);
        }
        self.bcast_bytes(local, local_leader, &mut msg)?;
        let ctx = u64_at(&msg, 0)? as u32;
        let (remote, _) = decode_ranks(&msg, 8)?;
        let remote = self.connect_procs(&remote)?;
        self.claim_contexts(ctx, 4);
        if remote.iter().any(|w| lc.group.contains(w)) {
            return mpi_err!(Comm, "the local and remote groups of an intercommunicator must be disjoint");
        }
        self.new_inter(ctx, lc.group.to_vec(), remote, lc.errhandler)
    }

    /// MPI_Intercomm_merge: the group with `high` false comes first; if both sides pass the
    /// same value, the side whose leader has the smaller world rank comes first.
    pub fn intercomm_merge(&mut self, c: Handle, high: bool) -> MpiResult<Handle> {
        let comm = self.comm(c)?.clone();
        let Some(remote) = comm.remote.clone() else {
            return mpi_err!(Comm, "MPI_Intercomm_merge needs an intercommunicator");
        };
        // The leader's `high` speaks for its group; the leader's world rank breaks ties.
        let (ctx, theirs) = self.inter_agree(c, &[high as u8])?;
        let their_high = theirs.first().copied().unwrap_or(0) != 0;
        let local = self.local_of(c)?;
        let mut mine = [high as u8];
        {
            let mut v = mine.to_vec();
            self.bcast_bytes(local, 0, &mut v)?;
            mine[0] = v.first().copied().unwrap_or(0);
        }
        let my_high = mine[0] != 0;
        let local_first = if my_high != their_high { !my_high } else { self.proc_index(comm.group[0]) < self.proc_index(remote[0]) };
        let group: Vec<u32> = if local_first {
            comm.group.iter().chain(remote.iter()).copied().collect()
        } else {
            remote.iter().chain(comm.group.iter()).copied().collect()
        };
        self.new_intra(ctx, group, comm.errhandler)
    }
}

// ---- nonblocking duplication ------------------------------------------------------------
//
// MPI_Comm_idup must not block: the members may reach the call at very different times, and
// several duplications may be in flight at once (also crossing ones on overlapping
// communicators). The agreement therefore runs as collective schedules advanced from
// `Engine::progress`, in a tag space of its own (never the communicator's collective
// sequence, which later collectives on the parent use), and in two phases:
//
// 1. propose: every member proposes an id at or above its next free one (and above the
//    proposals of its other duplications in flight); the maximum is the candidate;
// 2. confirm: a member accepts the candidate if it is still free there (at or above its next
//    free id) and does not overlap the proposal of a duplication of higher priority in flight
//    there, and then takes it; the minimum of the votes decides. A rejected candidate starts
//    another attempt with fresh proposals.
//
// Priority is (parent context id, duplication number on the parent), the same at every
// member, so crossing duplications do not keep rejecting each other: the one of highest
// priority wins. Taking an accepted id moves the next free id past it, and every later
// proposal or blocking agreement lies above that, so no member ever holds two communicators
// with one context id.

/// Context id of a communicator whose nonblocking duplication has not completed yet.
const PENDING_CTX: u32 = u32::MAX - 15;
/// Tag space of nonblocking duplications: `BASE | seq << 14 | stage << 12 | sub`.
const IDUP_TAG_BASE: i32 = 0x4000_0000;
/// Tag space of nonblocking MPI_Comm_create_group agreements on the parent's collective
/// context: `BASE | (user tag & 0x3fff) << 14 | stage << 12 | sub` (negative, like the
/// blocking form's tags, and apart from them).
const CREATE_GROUP_TAG_BASE: i32 = i32::MIN | 0x4000_0000;
/// Tag space of nonblocking MPI_Intercomm_create agreements, on the local communicator's and
/// (between the leaders) the peer communicator's collective contexts:
/// `BASE | (user tag & 0x3fff) << 14 | stage << 12 | sub`, above the duplications' space and
/// below the fixed tags of the blocking constructors.
const INTERCOMM_TAG_BASE: i32 = 0x5000_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Propose,
    Confirm,
}

/// One nonblocking duplication in flight.
pub(crate) struct Idup {
    req: Handle,
    parent: Handle,
    new: Handle,
    /// The new hidden local communicator (intercommunicators).
    new_local: Option<Handle>,
    seq: u32,
    /// Tag space of the agreement's messages: [`IDUP_TAG_BASE`], or
    /// [`CREATE_GROUP_TAG_BASE`] for a nonblocking MPI_Comm_create_group.
    tag_base: i32,
    /// Views made for this agreement (of the group only for MPI_Comm_create_group, of the
    /// local communicator and the leaders' link for MPI_Intercomm_create), forgotten at the end.
    views: Vec<Handle>,
    /// (parent context id, seq): lower goes first when candidates collide.
    prio: (u32, u32),
    proposal: u32,
    candidate: u32,
    phase: Phase,
    /// The value being reduced (stable address for the schedules).
    acc: Box<u64>,
    /// Schedules of the current phase still to run, in order.
    stages: std::collections::VecDeque<crate::coll::Schedule>,
    /// MPI_Comm_create_group: the members' ranks in the parent, in group order, and this
    /// process's index among them. The agreement runs among the members but its messages
    /// name their senders by parent rank, so a member still agreeing on one group never
    /// takes a message of another group's agreement that a process already started (the
    /// groups of successive calls differ, and a rank of one group is another's rank of the
    /// other).
    among: Option<(Arc<Vec<i32>>, i32)>,
}

// SAFETY: schedules hold pointers into `acc` (owned here) only; the engine runs under one lock.
unsafe impl Send for Idup {}

/// Nonblocking duplications in flight, and the per-parent sequence numbers that keep their
/// messages apart.
#[derive(Default)]
pub(crate) struct Idups {
    pub(crate) active: Vec<Idup>,
    seqs: HashMap<u32, u32>,
}

fn u64_reduction(op: crate::op::PredefOp) -> MpiResult<crate::op::Reduction> {
    use crate::datatype::{BasicKind, Block, Datatype};
    static U64: std::sync::LazyLock<crate::datatype::TypeRef> = std::sync::LazyLock::new(|| {
        crate::datatype::TypeRef::forever(Datatype::predefined(
            "MPI_UINT64_T", 8, 8, BasicKind::Int { bytes: 8, signed: false }, vec![Block { off: 0, len: 8 }]))
    });
    let t = U64.clone();
    crate::op::Reduction::new(crate::op::Op::Predef(op), t, crate::op::Elem::Num(crate::op::Num::U64), 0)
}

impl Engine {
    /// MPI_Comm_idup: returns the new communicator (usable once the request completes) and
    /// the request.
    pub fn comm_idup(&mut self, c: Handle) -> MpiResult<(Handle, Handle)> {
        let old = self.comm(c)?.clone();
        let (new, new_local) = match &old.remote {
            None => (self.add_comm(Comm { ctx: PENDING_CTX, name: String::new(), ..old.clone() }), None),
            Some(remote) => {
                let lc = self.add_comm(Comm { ctx: PENDING_CTX, rank: old.rank, group: old.group.clone(), errhandler: old.errhandler, ..Default::default() });
                let n = self.add_comm(Comm {
                    ctx: PENDING_CTX,
                    rank: old.rank,
                    group: old.group.clone(),
                    remote: Some(remote.clone()),
                    errhandler: old.errhandler,
                    local: Some(lc),
                    ..Default::default()
                });
                (n, Some(lc))
            }
        };
        let seq = self.idups.seqs.entry(old.ctx).or_insert(0);
        let this = *seq;
        *seq = seq.wrapping_add(1);
        let req = self.idup_start(c, new, new_local, this, IDUP_TAG_BASE, Vec::new(), (old.ctx, this), None)?;
        Ok((new, req))
    }

    /// Starts the agreement on the context(s) of `new` (and `new_local`) over `parent`,
    /// messages tagged from `tag_base` + `seq`, colliding candidates ordered by `prio`;
    /// returns its request. On failure it forgets `views` and releases `new`, which the
    /// caller made for it.
    #[allow(clippy::too_many_arguments)]
    fn idup_start(
        &mut self,
        parent: Handle,
        new: Handle,
        new_local: Option<Handle>,
        seq: u32,
        tag_base: i32,
        views: Vec<Handle>,
        prio: (u32, u32),
        among: Option<(Arc<Vec<i32>>, i32)>,
    ) -> MpiResult<Handle> {
        let proposal = self.idup_proposal();
        let req = self.coll_request(false);
        let mut d = Idup {
            req,
            parent,
            new,
            new_local,
            seq,
            tag_base,
            views,
            prio,
            proposal,
            candidate: 0,
            phase: Phase::Propose,
            acc: Box::new(proposal as u64),
            stages: Default::default(),
            among,
        };
        if let Err(e) = self.idup_phase(&mut d) {
            for &v in &d.views {
                self.forget_comm(v);
            }
            let _ = self.release_comm(new);
            self.release(req);
            return Err(e);
        }
        self.idups.active.push(d);
        self.idup_progress();
        Ok(req)
    }

    /// Nonblocking MPI_Comm_create_group: collective over the members of `group` only
    /// (world ranks, a subgroup of intracomm `c`). Returns None if this process is not a
    /// member, else the new communicator (usable once the request completes) and the
    /// request. The context is agreed as [`Engine::comm_idup`] agrees one, among the
    /// members only, over a view of `c` restricted to them; concurrent calls on one parent
    /// are told apart by `tag`, as the standard asks of the application.
    pub fn comm_icreate_group(&mut self, c: Handle, group: &[u32], tag: i32) -> MpiResult<Option<(Handle, Handle)>> {
        let parent = self.comm(c)?.clone();
        if parent.remote.is_some() {
            return mpi_err!(Comm, "MPI_Comm_create_group needs an intracommunicator");
        }
        if let Some(w) = group.iter().find(|w| !parent.group.contains(w)) {
            return mpi_err!(Group, "the group is not a subgroup of the communicator's group (process {w} is not in it)");
        }
        let Some(me) = rank_of(group, self.rank) else { return Ok(None) };
        let members = Arc::new(group.to_vec());
        let ranks: Vec<i32> = group.iter().filter_map(|w| parent.group.iter().position(|p| p == w).map(|r| r as i32)).collect();
        // Messages of the view travel on the parent's context with ranks of the parent
        // (see `Idup::among`).
        let view = self.add_view(Comm { ctx: parent.ctx, rank: parent.rank, group: parent.group.clone(), errhandler: parent.errhandler, ..Default::default() });
        let new = self.add_comm(Comm { ctx: PENDING_CTX, rank: me, group: members, errhandler: parent.errhandler, ..Default::default() });
        let seq = tag as u32 & 0x3fff;
        // Below every duplication's priority on the same parent (seq there counts up).
        let req = self.idup_start(view, new, None, seq, CREATE_GROUP_TAG_BASE, vec![view], (parent.ctx, u32::MAX - seq), Some((Arc::new(ranks), me)))?;
        Ok(Some((new, req)))
    }

    /// Nonblocking MPI_Intercomm_create, first step, at the local leader only: start the
    /// swap of the two groups' members (job-wide process indices) with the remote leader over
    /// `peer`. `out` holds this side's message and `theirs` receives the other's until both
    /// requests complete; then [`Engine::intercomm_group_message`] makes what the leader
    /// broadcasts to its group.
    pub fn intercomm_leaders_start(
        &mut self,
        local: Handle,
        peer: Handle,
        remote_leader: i32,
        tag: i32,
        out: &mut Vec<u8>,
        theirs: &mut Vec<u8>,
    ) -> MpiResult<[Handle; 2]> {
        let lc = self.comm(local)?.clone();
        let pc = self.comm(peer)?;
        if !(0..pc.peer_size()).contains(&remote_leader) {
            return mpi_err!(Rank, "remote leader {remote_leader} is not a rank of the peer communicator (size {})", pc.peer_size());
        }
        out.clear();
        let procs: Vec<u32> = lc.group.iter().map(|&p| self.proc_index(p)).collect();
        encode_ranks(out, &procs);
        *theirs = vec![0u8; 8 + 4 * self.known_peers().max(1 << 16)];
        let t = intercomm_tag(tag);
        let s = self.coll_isend(peer, remote_leader, t, out)?;
        let r = match self.coll_irecv(peer, remote_leader, t, theirs) {
            Ok(r) => r,
            Err(e) => {
                let _ = self.cancel(s);
                self.release(s);
                return Err(e);
            }
        };
        Ok([s, r])
    }

    /// What the local leader broadcasts to its group once the leaders swapped their groups:
    /// the peer communicator's context (the priority of the agreement, the same on both
    /// sides), the leader's tag and the remote group (`theirs`, the remote leader's message).
    pub fn intercomm_group_message(&self, peer: Handle, tag: i32, theirs: &[u8]) -> MpiResult<Vec<u8>> {
        let mut msg = Vec::with_capacity(8 + theirs.len());
        msg.extend_from_slice(&self.comm(peer)?.ctx.to_le_bytes());
        msg.extend_from_slice(&tag.to_le_bytes());
        msg.extend_from_slice(theirs);
        Ok(msg)
    }

    /// Nonblocking MPI_Intercomm_create, last step, at every member of both groups: agree on
    /// the new intercommunicator's contexts as [`Engine::comm_idup`] agrees on those of an
    /// intercommunicator's duplicate. The local group reduces over a view of `local` in which
    /// the leader is rank 0, and the leaders swap their groups' results over a view of the
    /// peer communicator whose remote group is the remote leader alone (`leader`: the peer
    /// communicator and the remote leader's rank there, at the local leader only). `msg` is
    /// the leader's broadcast ([`Engine::intercomm_group_message`]). Returns the new
    /// intercommunicator (usable once the request completes) and the request.
    pub fn intercomm_icreate(&mut self, local: Handle, local_leader: i32, leader: Option<(Handle, i32)>, msg: &[u8]) -> MpiResult<(Handle, Handle)> {
        let lc = self.comm(local)?.clone();
        if lc.remote.is_some() {
            return mpi_err!(Comm, "the local communicator must be an intracommunicator");
        }
        let n = lc.size();
        if !(0..n).contains(&local_leader) {
            return mpi_err!(Rank, "local leader {local_leader} is not a rank of the local communicator (size {n})");
        }
        let prio_ctx = u32_at(msg, 0)?;
        let tag = i32_at(msg, 4)?;
        let (procs, _) = decode_ranks(msg, 8)?;
        let remote = self.connect_procs(&procs)?;
        // Every member of both groups sees the same two lists, so all fail here together.
        if remote.iter().any(|w| lc.group.contains(w)) {
            return mpi_err!(Comm, "the local and remote groups of an intercommunicator must be disjoint");
        }
        let rotated: Vec<u32> = (0..n).map(|i| lc.group[((i + local_leader) % n) as usize]).collect();
        let rank = (lc.rank - local_leader).rem_euclid(n);
        let rotated = Arc::new(rotated);
        let lv = self.add_view(Comm { ctx: lc.ctx, rank, group: rotated.clone(), errhandler: lc.errhandler, ..Default::default() });
        // Only the leader sends or receives on the link; elsewhere it is never used for
        // traffic and takes the local communicator's context.
        let link = match leader {
            Some((peer, rl)) => {
                let pc = self.comm(peer)?;
                pc.peer_world(rl).map(|w| (pc.ctx, w))
            }
            None => Some((lc.ctx, lc.group[local_leader as usize])),
        };
        let Some((link_ctx, remote_leader)) = link else {
            self.forget_comm(lv);
            return mpi_err!(Rank, "the remote leader is not a rank of the peer communicator");
        };
        let iv = self.add_view(Comm {
            ctx: link_ctx,
            rank,
            group: rotated,
            remote: Some(Arc::new(vec![remote_leader])),
            errhandler: lc.errhandler,
            local: Some(lv),
            ..Default::default()
        });
        let nl = self.add_comm(Comm { ctx: PENDING_CTX, rank: lc.rank, group: lc.group.clone(), errhandler: lc.errhandler, ..Default::default() });
        let new = self.add_comm(Comm {
            ctx: PENDING_CTX,
            rank: lc.rank,
            group: lc.group.clone(),
            remote: Some(Arc::new(remote)),
            errhandler: lc.errhandler,
            local: Some(nl),
            ..Default::default()
        });
        let seq = tag as u32 & 0x3fff;
        // The priority is the same at every member of both groups; apart from the
        // duplications' and group creations' priorities on the same context.
        let req = self.idup_start(iv, new, Some(nl), seq, INTERCOMM_TAG_BASE, vec![iv, lv], (prio_ctx, u32::MAX / 2 - seq), None)?;
        Ok((new, req))
    }

    /// Nonblocking MPI_Comm_split, last step: give `n`, a nonblocking duplicate of the
    /// split's parent (its contexts agreed among every member of the parent), the groups of
    /// this process's `color`. `local` and `remote` are the (color, key) pairs, 8 bytes each,
    /// of every member of the parent's local and (intercommunicators) remote group, in rank
    /// order. All colors share the contexts: their groups are disjoint. Returns None, and
    /// releases `n`, where this process gets no communicator.
    pub fn comm_split_adopt(&mut self, n: Handle, color: i32, local: &[u8], remote: Option<&[u8]>) -> MpiResult<Option<Handle>> {
        let comm = self.comm(n)?.clone();
        let entries = |all: &[u8], group: &[u32]| -> MpiResult<Vec<SplitEntry>> {
            group.iter().enumerate().map(|(i, &w)| Ok((i32_at(all, 8 * i)?, i32_at(all, 8 * i + 4)?, w))).collect()
        };
        let lm = split_members(&entries(local, &comm.group)?, color);
        let rm = match (&comm.remote, remote) {
            (Some(g), Some(r)) => Some(split_members(&entries(r, g)?, color)),
            (None, None) => None,
            _ => return mpi_err!(Intern, "split: the remote group's entries do not match the communicator"),
        };
        let me = self.rank;
        let rank = rank_of(&lm, me);
        let (Some(rank), true) = (rank.filter(|_| color != UNDEFINED), rm.as_ref().is_none_or(|r| !r.is_empty())) else {
            self.release_comm(n)?;
            return Ok(None);
        };
        self.adopt_groups(n, comm.local, rank, Arc::new(lm), rm.map(Arc::new))?;
        Ok(Some(n))
    }

    /// The last step of a nonblocking constructor: `n` (and `local`, its local part if it is
    /// an intercommunicator) gets the group `group`, with this process at `rank`, and the
    /// remote group `remote`.
    fn adopt_groups(&mut self, n: Handle, local: Option<Handle>, rank: i32, group: Arc<Vec<u32>>, remote: Option<Arc<Vec<u32>>>) -> MpiResult<()> {
        if let Some(l) = local {
            let lc = self.comm_mut(l)?;
            lc.rank = rank;
            lc.group = group.clone();
        }
        let c = self.comm_mut(n)?;
        c.rank = rank;
        c.group = group;
        c.remote = remote;
        c.topo = None;
        Ok(())
    }

    /// Nonblocking MPI_Comm_create on an intercommunicator, last step: give `n`, a
    /// nonblocking duplicate of the intercommunicator (its contexts agreed by both groups),
    /// the groups `local` and `remote` (world ranks). Returns None, and releases `n`, where
    /// this process is not in `local` or `remote` is empty.
    pub fn intercomm_create_adopt(&mut self, n: Handle, local: Vec<u32>, remote: Vec<u32>) -> MpiResult<Option<Handle>> {
        let comm = self.comm(n)?.clone();
        let Some(rank) = rank_of(&local, self.rank).filter(|_| !remote.is_empty()) else {
            self.release_comm(n)?;
            return Ok(None);
        };
        self.adopt_groups(n, comm.local, rank, Arc::new(local), Some(Arc::new(remote)))?;
        Ok(Some(n))
    }

    /// Nonblocking MPI_Intercomm_merge, last step: turn `n`, a nonblocking duplicate of the
    /// intercommunicator being merged, into the merged intracommunicator (on the first two of
    /// its four agreed contexts). The side whose `high` is false comes first; equal values
    /// put first the side whose leader has the smaller job-wide index.
    pub fn intercomm_merge_adopt(&mut self, n: Handle, my_high: bool, their_high: bool) -> MpiResult<Handle> {
        let comm = self.comm(n)?.clone();
        let Some(remote) = comm.remote.clone() else {
            return mpi_err!(Comm, "MPI_Intercomm_merge needs an intercommunicator");
        };
        let local_first = if my_high != their_high { !my_high } else { self.proc_index(comm.group[0]) < self.proc_index(remote[0]) };
        let group: Vec<u32> = if local_first {
            comm.group.iter().chain(remote.iter()).copied().collect()
        } else {
            remote.iter().chain(comm.group.iter()).copied().collect()
        };
        let rank = rank_of(&group, self.rank).ok_or_else(|| MpiError::new(ErrorClass::Intern, "not a member of the merged group"))?;
        if let Some(l) = comm.local {
            self.free_comm(l)?;
        }
        let c = self.comm_mut(n)?;
        c.rank = rank;
        c.group = Arc::new(group);
        c.remote = None;
        c.local = None;
        c.topo = None;
        Ok(n)
    }

    /// Build the schedules of `d`'s current phase (its value is already in `d.acc`).
    fn idup_phase(&mut self, d: &mut Idup) -> MpiResult<()> {
        use crate::coll::{bcast, reduce, Schedule};
        let red = u64_reduction(match d.phase {
            Phase::Propose => crate::op::PredefOp::Max,
            Phase::Confirm => crate::op::PredefOp::Min,
        })?;
        let code = if d.phase == Phase::Propose { 0 } else { 2 };
        let tag = |stage: i32| d.tag_base | (((d.seq & 0x3fff) as i32) << 14) | ((code + stage) << 12);
        let acc: *mut u8 = (&mut *d.acc as *mut u64).cast();
        let parent = self.comm(d.parent)?.clone();
        let mk = |comm: Handle, tag_base: i32| {
            let mut s = Schedule::default();
            s.comm = comm;
            s.tag_base = tag_base;
            s.red = Some(red.clone());
            s
        };
        d.stages.clear();
        match parent.local {
            None => {
                let mut s = mk(d.parent, tag(0));
                match &d.among {
                    None => reduce::recursive_doubling(&mut s, parent.rank, parent.size(), acc, 1, &red),
                    Some((ranks, me)) => {
                        // Run among the members, then address them by parent rank.
                        reduce::recursive_doubling(&mut s, *me, ranks.len() as i32, acc, 1, &red);
                        for st in &mut s.steps {
                            if let crate::coll::sched::Step::Send { peer, .. } | crate::coll::sched::Step::Recv { peer, .. } = st {
                                if let Some(&r) = ranks.get(*peer as usize) {
                                    *peer = r;
                                }
                            }
                        }
                    }
                }
                d.stages.push_back(s);
            }
            Some(local) => {
                let size = parent.size();
                let mut s = mk(local, tag(0));
                reduce::recursive_doubling(&mut s, parent.rank, size, acc, 1, &red);
                d.stages.push_back(s);
                if parent.rank == 0 {
                    // The leaders swap their group's result over the intercommunicator.
                    let mut x = mk(d.parent, tag(0));
                    let t = red.dtype.clone();
                    let tmp = x.temp(8);
                    x.send(0, 0, acc, 1, &t);
                    x.recv(0, 0, tmp, 1, &t);
                    x.round();
                    x.reduce(tmp, acc, 1);
                    x.round();
                    d.stages.push_back(x);
                }
                let mut b = mk(local, tag(1));
                bcast::binomial(&mut b, parent.rank, size, 0, acc, 1, &red.dtype);
                d.stages.push_back(b);
            }
        }
        Ok(())
    }

    /// A proposal at or above the next free id and the proposals of duplications in flight.
    fn idup_proposal(&self) -> u32 {
        self.idups.active.iter().map(|d| d.proposal + 4).fold(self.next_context(), u32::max)
    }

    /// Advance `d`; true when it has completed (successfully). `others` are the (priority,
    /// proposal) of the other duplications in flight here.
    fn idup_advance(&mut self, d: &mut Idup, others: &[((u32, u32), u32)]) -> MpiResult<bool> {
        loop {
            while let Some(s) = d.stages.front_mut() {
                if !self.sched_advance(s)? {
                    return Ok(false);
                }
                if let Some(e) = s.error() {
                    return Err(MpiError::new(e, "a transfer of the context agreement failed"));
                }
                d.stages.pop_front();
            }
            match d.phase {
                Phase::Propose => {
                    d.candidate = *d.acc as u32;
                    let c = d.candidate;
                    let ok = c >= self.next_context()
                        && !others.iter().any(|&(prio, p)| prio < d.prio && c < p + 4 && p < c + 4);
                    if ok {
                        self.claim_contexts(d.candidate, 4);
                    }
                    *d.acc = ok as u64;
                    d.phase = Phase::Confirm;
                }
                Phase::Confirm if *d.acc == 1 => {
                    self.comm_mut(d.new)?.ctx = d.candidate;
                    if let Some(l) = d.new_local {
                        self.comm_mut(l)?.ctx = d.candidate + 2;
                    }
                    return Ok(true);
                }
                Phase::Confirm => {
                    // A member could not take the candidate: try again higher up.
                    d.proposal = others.iter().map(|&(_, p)| p + 4).fold(self.next_context(), u32::max);
                    *d.acc = d.proposal as u64;
                    d.phase = Phase::Propose;
                }
            }
            self.idup_phase(d)?;
        }
    }

    /// Advance every nonblocking duplication (called from `progress`); true if one finished.
    pub(crate) fn idup_progress(&mut self) -> bool {
        let mut list = std::mem::take(&mut self.idups.active);
        let mut finished = false;
        let mut i = 0;
        while i < list.len() {
            let others: Vec<((u32, u32), u32)> =
                list.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, d)| (d.prio, d.proposal)).collect();
            match self.idup_advance(&mut list[i], &others) {
                Ok(false) => i += 1,
                Ok(true) => {
                    let d = list.swap_remove(i);
                    for v in d.views {
                        self.forget_comm(v);
                    }
                    self.coll_request_done(d.req, None);
                    finished = true;
                }
                Err(e) => {
                    tracing::warn!("MPI_Comm_idup failed: {e}");
                    let mut d = list.swap_remove(i);
                    for s in d.stages.iter_mut() {
                        self.sched_abandon(s);
                    }
                    for v in std::mem::take(&mut d.views) {
                        self.forget_comm(v);
                    }
                    self.coll_request_done(d.req, Some(e.class));
                    finished = true;
                }
            }
        }
        list.append(&mut self.idups.active);
        self.idups.active = list;
        finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algebra() {
        let a = [0, 1, 2, 3, 4];
        let b = [6, 4, 2, 0];
        assert_eq!(union(&a, &b), vec![0, 1, 2, 3, 4, 6]);
        assert_eq!(union(&b, &a), vec![6, 4, 2, 0, 1, 3]);
        assert_eq!(intersection(&a, &b), vec![0, 2, 4]);
        assert_eq!(intersection(&b, &a), vec![4, 2, 0]);
        assert_eq!(difference(&a, &b), vec![1, 3]);
        assert_eq!(difference(&b, &a), vec![6]);
        assert!(intersection(&[1], &[2]).is_empty());
    }

    #[test]
    fn compare_groups() {
        assert_eq!(compare(&[1, 2, 3], &[1, 2, 3]), Comparison::Ident);
        assert_eq!(compare(&[1, 2, 3], &[3, 1, 2]), Comparison::Similar);
        assert_eq!(compare(&[1, 2, 3], &[1, 2]), Comparison::Unequal);
        assert_eq!(compare(&[1, 2, 3], &[1, 2, 4]), Comparison::Unequal);
        assert_eq!(compare(&[], &[]), Comparison::Ident);
    }

    #[test]
    fn incl_excl() {
        let g = [10, 11, 12, 13, 14];
        assert_eq!(incl(&g, &[4, 0, 2]).unwrap(), vec![14, 10, 12]);
        assert_eq!(excl(&g, &[4, 0, 2]).unwrap(), vec![11, 13]);
        assert_eq!(incl(&g, &[]).unwrap(), Vec::<u32>::new());
        assert_eq!(incl(&g, &[1, 1]).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(incl(&g, &[5]).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(excl(&g, &[-1]).unwrap_err().class, ErrorClass::Rank);
    }

    #[test]
    fn ranges() {
        let g: Vec<u32> = (100..110).collect();
        assert_eq!(range_incl(&g, &[[0, 9, 3]]).unwrap(), vec![100, 103, 106, 109]);
        assert_eq!(range_incl(&g, &[[9, 0, -4]]).unwrap(), vec![109, 105, 101]);
        assert_eq!(range_incl(&g, &[[1, 0, -3]]).unwrap(), vec![101]);
        assert_eq!(range_incl(&g, &[[0, 1, 3]]).unwrap(), vec![100]);
        assert_eq!(range_incl(&g, &[[2, 2, 1], [5, 6, 1]]).unwrap(), vec![102, 105, 106]);
        assert_eq!(range_excl(&g, &[[0, 8, 2]]).unwrap(), vec![101, 103, 105, 107, 109]);
        assert_eq!(range_incl(&g, &[[0, 3, 0]]).unwrap_err().class, ErrorClass::Arg);
        assert_eq!(range_incl(&g, &[[0, 10, 1]]).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(range_incl(&g, &[[0, 3, 1], [3, 4, 1]]).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(range_incl(&g, &[[5, 2, 1]]).unwrap_err().class, ErrorClass::Arg);
    }

    #[test]
    fn translate_ranks() {
        let a = [5, 6, 7, 8];
        let b = [8, 7, 1];
        assert_eq!(translate(&a, &[0, 3, 2, PROC_NULL], &b).unwrap(), vec![UNDEFINED, 0, 1, PROC_NULL]);
        assert_eq!(translate(&a, &[4], &b).unwrap_err().class, ErrorClass::Rank);
    }

    #[test]
    fn split_orders_by_key_then_rank() {
        let e = [(0, 5, 10), (1, 0, 11), (0, 5, 12), (0, 1, 13), (UNDEFINED, 0, 14)];
        assert_eq!(split_members(&e, 0), vec![13, 10, 12]);
        assert_eq!(split_members(&e, 1), vec![11]);
        assert!(split_members(&e, 2).is_empty());
    }

    /// Group algebra against set semantics on random inputs.
    #[test]
    fn algebra_matches_sets() {
        use rand::{Rng, SeedableRng};
        let seed: u64 = std::env::var("STEADFAST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..500 {
            let pick = |rng: &mut rand_chacha::ChaCha8Rng| {
                let mut v: Vec<u32> = (0..16).filter(|_| rng.gen_bool(0.5)).collect();
                for i in (1..v.len()).rev() {
                    let j = rng.gen_range(0..=i);
                    v.swap(i, j);
                }
                v
            };
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let u = union(&a, &b);
            let i = intersection(&a, &b);
            let d = difference(&a, &b);
            let msg = format!("replay: STEADFAST_SEED={seed} cargo test -p steadfast-core algebra_matches_sets");
            assert_eq!(u.len(), i.len() + d.len() + difference(&b, &a).len(), "{msg}");
            assert!(u.starts_with(&a), "{msg}");
            assert!(i.iter().all(|x| a.contains(x) && b.contains(x)), "{msg}");
            assert!(d.iter().all(|x| a.contains(x) && !b.contains(x)), "{msg}");
            let back = translate(&a, &(0..a.len() as i32).collect::<Vec<_>>(), &u).unwrap();
            assert_eq!(back, (0..a.len() as i32).collect::<Vec<_>>(), "{msg}");
        }
    }
}

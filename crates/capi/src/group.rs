//! Group entry points: a group handle is a slab entry holding the members' world ranks;
//! MPI_GROUP_EMPTY is the predefined empty group, also returned for every empty result.

use std::ffi::c_int;
use std::sync::Arc;

use steadfast_core::group::{self, Comparison, Group};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Group};
use crate::global::{api, comm_handle, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// The members behind group handle `h`.
pub fn group_of(g: &Global, h: MPI_Group) -> Result<Group, MpiError> {
    match h as usize {
        abi::MPI_GROUP_EMPTY => Ok(Arc::new(Vec::new())),
        abi::MPI_GROUP_NULL => Err(err(ErrorClass::Group, "MPI_GROUP_NULL is not a valid group here")),
        v => g.tables.groups.get(Handle(v as u64)).cloned().ok_or_else(|| err(ErrorClass::Group, format!("invalid group handle {v:#x}"))),
    }
}

/// Store a group and write its handle (MPI_GROUP_EMPTY when it has no members).
pub unsafe fn out_group(g: &mut Global, members: Group, out: *mut MPI_Group) -> Result<(), MpiError> {
    if out.is_null() {
        return Err(err(ErrorClass::Arg, "newgroup pointer is NULL"));
    }
    *out = if members.is_empty() { abi::MPI_GROUP_EMPTY } else { g.tables.groups.insert(members).0 as usize } as MPI_Group;
    Ok(())
}

fn comparison(c: Comparison) -> c_int {
    match c {
        Comparison::Ident => abi::MPI_IDENT,
        Comparison::Congruent => abi::MPI_CONGRUENT,
        Comparison::Similar => abi::MPI_SIMILAR,
        Comparison::Unequal => abi::MPI_UNEQUAL,
    }
}

unsafe fn int_slice<'a>(p: *const c_int, n: c_int, what: &str) -> Result<&'a [c_int], MpiError> {
    if n < 0 {
        return Err(err(ErrorClass::Arg, format!("{what}: negative count {n}")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, n as usize))
}

unsafe fn ranges_slice<'a>(p: *mut [c_int; 3], n: c_int) -> Result<&'a [[c_int; 3]], MpiError> {
    if n < 0 {
        return Err(err(ErrorClass::Arg, format!("negative range count {n}")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(err(ErrorClass::Arg, "ranges is NULL"));
    }
    Ok(std::slice::from_raw_parts(p, n as usize))
}

type Binary = fn(&[u32], &[u32]) -> Vec<u32>;

unsafe fn binary(func: &str, a: MPI_Group, b: MPI_Group, out: *mut MPI_Group, op: Binary) -> c_int {
    api(func, None, |g| {
        let (x, y) = (group_of(g, a)?, group_of(g, b)?);
        out_group(g, Arc::new(op(&x, &y)), out)
    })
}

mpi_api! {
    fn Comm_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
        api("MPI_Comm_group", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            let members = g.eng.comm(h)?.group.clone();
            out_group(g, members, group)
        })
    }

    fn Comm_remote_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
        api("MPI_Comm_remote_group", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            let Some(members) = g.eng.comm(h)?.remote.clone() else {
                return Err(err(ErrorClass::Comm, "MPI_Comm_remote_group needs an intercommunicator"));
            };
            out_group(g, members, group)
        })
    }

    fn Group_size(group: MPI_Group, size: *mut c_int) -> c_int {
        api("MPI_Group_size", None, |g| {
            let m = group_of(g, group)?;
            if size.is_null() {
                return Err(err(ErrorClass::Arg, "size pointer is NULL"));
            }
            *size = m.len() as c_int;
            Ok(())
        })
    }

    fn Group_rank(group: MPI_Group, rank: *mut c_int) -> c_int {
        api("MPI_Group_rank", None, |g| {
            let m = group_of(g, group)?;
            if rank.is_null() {
                return Err(err(ErrorClass::Arg, "rank pointer is NULL"));
            }
            *rank = group::rank_of(&m, g.eng.rank).unwrap_or(abi::MPI_UNDEFINED);
            Ok(())
        })
    }

    fn Group_translate_ranks(group1: MPI_Group, n: c_int, ranks1: *const c_int, group2: MPI_Group, ranks2: *mut c_int) -> c_int {
        api("MPI_Group_translate_ranks", None, |g| {
            let (a, b) = (group_of(g, group1)?, group_of(g, group2)?);
            let r1 = int_slice(ranks1, n, "ranks1")?;
            if n > 0 && ranks2.is_null() {
                return Err(err(ErrorClass::Arg, "ranks2 is NULL"));
            }
            let r2 = group::translate(&a, r1, &b)?;
            for (i, v) in r2.into_iter().enumerate() {
                *ranks2.add(i) = v;
            }
            Ok(())
        })
    }

    fn Group_compare(group1: MPI_Group, group2: MPI_Group, result: *mut c_int) -> c_int {
        api("MPI_Group_compare", None, |g| {
            let (a, b) = (group_of(g, group1)?, group_of(g, group2)?);
            if result.is_null() {
                return Err(err(ErrorClass::Arg, "result pointer is NULL"));
            }
            *result = comparison(group::compare(&a, &b));
            Ok(())
        })
    }

    fn Group_union(group1: MPI_Group, group2: MPI_Group, newgroup: *mut MPI_Group) -> c_int {
        binary("MPI_Group_union", group1, group2, newgroup, group::union)
    }

    fn Group_intersection(group1: MPI_Group, group2: MPI_Group, newgroup: *mut MPI_Group) -> c_int {
        binary("MPI_Group_intersection", group1, group2, newgroup, group::intersection)
    }

    fn Group_difference(group1: MPI_Group, group2: MPI_Group, newgroup: *mut MPI_Group) -> c_int {
        binary("MPI_Group_difference", group1, group2, newgroup, group::difference)
    }

    fn Group_incl(group: MPI_Group, n: c_int, ranks: *const c_int, newgroup: *mut MPI_Group) -> c_int {
        api("MPI_Group_incl", None, |g| {
            let m = group_of(g, group)?;
            let r = int_slice(ranks, n, "ranks")?;
            let out = group::incl(&m, r)?;
            out_group(g, Arc::new(out), newgroup)
        })
    }

    fn Group_excl(group: MPI_Group, n: c_int, ranks: *const c_int, newgroup: *mut MPI_Group) -> c_int {
        api("MPI_Group_excl", None, |g| {
            let m = group_of(g, group)?;
            let r = int_slice(ranks, n, "ranks")?;
            let out = group::excl(&m, r)?;
            out_group(g, Arc::new(out), newgroup)
        })
    }

    fn Group_range_incl(group: MPI_Group, n: c_int, ranges: *mut [c_int; 3], newgroup: *mut MPI_Group) -> c_int {
        api("MPI_Group_range_incl", None, |g| {
            // Argument checks before the ranges' (as MPICH orders them).
            if newgroup.is_null() {
                return Err(err(ErrorClass::Arg, "newgroup pointer is NULL"));
            }
            let m = group_of(g, group)?;
            let r = ranges_slice(ranges, n)?;
            let out = group::range_incl(&m, r)?;
            out_group(g, Arc::new(out), newgroup)
        })
    }

    fn Group_range_excl(group: MPI_Group, n: c_int, ranges: *mut [c_int; 3], newgroup: *mut MPI_Group) -> c_int {
        api("MPI_Group_range_excl", None, |g| {
            // Argument checks before the ranges' (as MPICH orders them).
            if newgroup.is_null() {
                return Err(err(ErrorClass::Arg, "newgroup pointer is NULL"));
            }
            let m = group_of(g, group)?;
            let r = ranges_slice(ranges, n)?;
            let out = group::range_excl(&m, r)?;
            out_group(g, Arc::new(out), newgroup)
        })
    }

    fn Group_free(group: *mut MPI_Group) -> c_int {
        api("MPI_Group_free", None, |g| {
            if group.is_null() {
                return Err(err(ErrorClass::Arg, "group pointer is NULL"));
            }
            let h = *group as usize;
            // MPI_GROUP_EMPTY comes back from operations with empty results, so freeing it
            // is accepted (and does nothing).
            if h != abi::MPI_GROUP_EMPTY {
                group_of(g, *group)?;
                g.tables.groups.remove(Handle(h as u64));
            }
            *group = abi::MPI_GROUP_NULL as MPI_Group;
            Ok(())
        })
    }
}

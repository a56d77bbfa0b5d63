//! `steadfast run` inside a Slurm allocation (`salloc`, `sbatch`): the ranks go on the
//! allocated nodes, started through `srun` the way Open MPI and MPICH's Hydra do, instead
//! of all on the node the launcher runs on.
//!
//! The allocation is read from the variables Slurm sets for the job: `SLURM_JOB_NODELIST`
//! (a host list, `n[1-3,7],login`) and `SLURM_TASKS_PER_NODE` (`2(x3),1`; else
//! `SLURM_JOB_CPUS_PER_NODE`) for the slots of each node. Inside a job step (the launcher
//! itself started by `srun`, `SLURM_STEP_ID` set) nothing is placed: that step's tasks are
//! the job. Each remote rank becomes a one-task step on its node ([`AGENT`]); `--overlap`
//! lets the steps share the allocation's CPUs (oversubscribed jobs, and several ranks on
//! one node), and `--mpi=none` keeps Slurm's PMI out of the way (the rank joins through the
//! launcher's control connection, as under ssh).

/// The remote-start agent for allocated nodes: one one-task step per rank, never killed
/// by Slurm because another step's task failed (the launcher's policy decides).
pub const AGENT: &str =
    "srun --overlap --nodes=1 --ntasks=1 --nodelist={host} --mpi=none --kill-on-bad-exit=0 --quiet";

/// `STEADFAST_SLURM`: `0` keeps `steadfast run` from placing ranks on a Slurm allocation's
/// nodes (every rank on this host, as before).
pub const SLURM_VAR: &str = "STEADFAST_SLURM";

/// The nodes of the allocation this launcher runs in, as `--hosts` entries (`name:slots`);
/// `Ok(None)` outside an allocation, inside a job step, or with `STEADFAST_SLURM=0`.
pub fn allocation_hosts(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<Vec<String>>, String> {
    let set = |k: &str| get(k).filter(|v| !v.trim().is_empty());
    if set(SLURM_VAR).is_some_and(|v| v.trim() == "0") {
        return Ok(None);
    }
    let Some(_job) = set("SLURM_JOB_ID").or_else(|| set("SLURM_JOBID")) else {
        return Ok(None);
    };
    if set("SLURM_STEP_ID").or_else(|| set("SLURM_STEPID")).is_some_and(|s| !is_batch_step(&s)) {
        return Ok(None);
    }
    let Some(list) = set("SLURM_JOB_NODELIST").or_else(|| set("SLURM_NODELIST")) else {
        return Ok(None);
    };
    let nodes = expand_hostlist(list.trim()).map_err(|e| format!("SLURM_JOB_NODELIST={list:?}: {e}"))?;
    let slots = match set("SLURM_TASKS_PER_NODE").or_else(|| set("SLURM_JOB_CPUS_PER_NODE")) {
        Some(v) => {
            let s = expand_counts(v.trim()).map_err(|e| format!("SLURM_TASKS_PER_NODE={v:?}: {e}"))?;
            if s.len() != nodes.len() {
                return Err(format!(
                    "SLURM_TASKS_PER_NODE={v:?} names {} nodes, SLURM_JOB_NODELIST {}",
                    s.len(),
                    nodes.len()
                ));
            }
            Some(s)
        }
        None => None,
    };
    Ok(Some(
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| match &slots {
                Some(s) => format!("{n}:{}", s[i]),
                None => n.clone(),
            })
            .collect(),
    ))
}

/// Places the ranks of `cfg` on the allocation's nodes when `steadfast run` runs inside one
/// and was given neither `--hosts` nor another agent: sets `cfg.hosts` and `cfg.agent`.
/// Returns whether it did. An allocation of only this host changes nothing (the ranks
/// start directly). More ranks than the allocation has slots are spread evenly, in blocks.
pub fn place_on_allocation(cfg: &mut super::LaunchConfig, get: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    if !cfg.hosts.is_empty() || cfg.agent != super::DEFAULT_AGENT {
        return Ok(false);
    }
    let Some(mut hosts) = allocation_hosts(get)? else {
        return Ok(false);
    };
    if hosts.iter().all(|h| super::is_this_host(super::host_name(h))) {
        return Ok(false);
    }
    let slots: u64 = hosts
        .iter()
        .filter_map(|h| h.rsplit_once(':').and_then(|(_, n)| n.parse::<u64>().ok()))
        .sum();
    if u64::from(cfg.np) > slots {
        hosts = hosts.iter().map(|h| super::host_name(h).to_owned()).collect();
    }
    tracing::debug!(?hosts, "placing ranks on the Slurm allocation through srun");
    cfg.hosts = hosts;
    cfg.agent = AGENT.to_owned();
    Ok(true)
}

/// The batch script of `sbatch` runs as step `batch` (Slurm sets no numeric step id there):
/// it is where a launcher should place ranks.
fn is_batch_step(id: &str) -> bool {
    let id = id.trim();
    id == "batch" || id == "4294967294"
}

/// Expands a Slurm host list: comma-separated names, each with at most one bracketed range
/// list (`n[1-3,07-08]x` → n1 n2 n3 n07 n08 …; leading zeros keep their width).
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    // Split on commas outside brackets.
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut items = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1).ok_or("unbalanced ']'")?,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '['".into());
    }
    items.push(&list[start..]);
    for item in items.into_iter().filter(|s| !s.is_empty()) {
        let Some(open) = item.find('[') else {
            out.push(item.to_owned());
            continue;
        };
        let close = item.find(']').ok_or("unbalanced '['")?;
        let (pre, ranges, post) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
        if post.contains('[') {
            return Err(format!("{item:?}: more than one bracketed range (give --hosts)"));
        }
        for r in ranges.split(',') {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let width = a.len();
            let lo: u64 = a.parse().map_err(|_| format!("{item:?}: bad number {a:?}"))?;
            let hi: u64 = b.parse().map_err(|_| format!("{item:?}: bad number {b:?}"))?;
            if hi < lo || hi - lo > 100_000 {
                return Err(format!("{item:?}: bad range {r:?}"));
            }
            for n in lo..=hi {
                out.push(format!("{pre}{n:0width$}{post}"));
            }
        }
    }
    if out.is_empty() {
        return Err("no node".into());
    }
    Ok(out)
}

/// Expands Slurm's per-node counts: `2(x3),1` → 2 2 2 1.
pub fn expand_counts(v: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in v.split(',') {
        let (n, times) = match part.split_once("(x") {
            Some((n, rest)) => {
                let t = rest.strip_suffix(')').ok_or_else(|| format!("bad count {part:?}"))?;
                (n, t.parse::<u32>().map_err(|_| format!("bad repeat in {part:?}"))?)
            }
            None => (part, 1),
        };
        let n: u32 = n.trim().parse().map_err(|_| format!("bad count {part:?}"))?;
        out.extend(std::iter::repeat_n(n, times as usize));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn host_lists_expand() {
        assert_eq!(expand_hostlist("a,b").unwrap(), ["a", "b"]);
        assert_eq!(expand_hostlist("sfc-n[1-3]").unwrap(), ["sfc-n1", "sfc-n2", "sfc-n3"]);
        assert_eq!(expand_hostlist("n[08-10,3]x,login").unwrap(), ["n08x", "n09x", "n10x", "n3x", "login"]);
        assert!(expand_hostlist("n[1-3").is_err());
        assert!(expand_hostlist("n[3-1]").is_err());
        assert!(expand_hostlist("r[1-2]n[1-2]").is_err());
    }

    #[test]
    fn counts_expand() {
        assert_eq!(expand_counts("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert_eq!(expand_counts("4").unwrap(), [4]);
        assert!(expand_counts("2(x").is_err());
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn allocation_from_the_job_variables() {
        let alloc = [("SLURM_JOB_ID", "7"), ("SLURM_JOB_NODELIST", "n[1-2]"), ("SLURM_TASKS_PER_NODE", "3,2")];
        assert_eq!(allocation_hosts(&env(&alloc)).unwrap().unwrap(), ["n1:3", "n2:2"]);
        // The batch script of sbatch places ranks; a task of an srun step does not.
        let mut batch = alloc.to_vec();
        batch.push(("SLURM_STEP_ID", "batch"));
        assert!(allocation_hosts(&env(&batch)).unwrap().is_some());
        let mut step = alloc.to_vec();
        step.push(("SLURM_STEP_ID", "0"));
        assert_eq!(allocation_hosts(&env(&step)).unwrap(), None);
        let mut off = alloc.to_vec();
        off.push((SLURM_VAR, "0"));
        assert_eq!(allocation_hosts(&env(&off)).unwrap(), None);
        assert_eq!(allocation_hosts(&env(&[])).unwrap(), None);
        let bad = [("SLURM_JOB_ID", "7"), ("SLURM_JOB_NODELIST", "n[1-2]"), ("SLURM_TASKS_PER_NODE", "3")];
        assert!(allocation_hosts(&env(&bad)).is_err());
    }
}

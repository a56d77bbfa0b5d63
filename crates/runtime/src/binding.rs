//! Binding ranks to CPUs (`steadfast run --bind-to`, `STEADFAST_BIND_TO`).
//!
//! The launcher only names the policy; each rank binds itself as the MPI library loads
//! (before `main`, so every thread it starts later inherits the binding), on whatever host
//! it runs: rank `i` of a host (its local rank) takes unit `i mod units` of the CPUs it was
//! allowed to run on, a unit being one hardware thread (`hwthread`) or the hardware threads
//! of one core (`core`). More ranks than units wrap around, as Open MPI's
//! `--bind-to core:overload-allowed` and Hydra's `-bind-to` do.

use std::collections::BTreeMap;

/// The binding policy `STEADFAST_BIND_TO` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindTo {
    /// No binding (the default): the kernel places and moves ranks.
    None,
    /// One core (all its hardware threads) per rank.
    Core,
    /// One hardware thread per rank.
    Hwthread,
}

impl BindTo {
    /// Parses a policy name (`none`, `core`, `hwthread`); None for anything else.
    pub fn parse(s: &str) -> Option<BindTo> {
        match s.trim() {
            "" | "none" => Some(BindTo::None),
            "core" | "cores" => Some(BindTo::Core),
            "hwthread" | "hwthreads" | "cpu" => Some(BindTo::Hwthread),
            _ => None,
        }
    }

    /// The name `parse` takes back.
    pub fn name(self) -> &'static str {
        match self {
            BindTo::None => "none",
            BindTo::Core => "core",
            BindTo::Hwthread => "hwthread",
        }
    }
}

/// The CPUs local rank `local_rank` binds to under `policy`, out of `allowed` (the CPUs the
/// process may run on, ascending). `core_of(cpu)` names the core a CPU belongs to (None:
/// unknown, the CPU counts as a core of its own). Empty for `BindTo::None` or when nothing
/// is allowed.
pub fn cpus_for(policy: BindTo, local_rank: u32, allowed: &[usize], core_of: impl Fn(usize) -> Option<(u32, u32)>) -> Vec<usize> {
    if allowed.is_empty() {
        return Vec::new();
    }
    match policy {
        BindTo::None => Vec::new(),
        BindTo::Hwthread => vec![allowed[local_rank as usize % allowed.len()]],
        BindTo::Core => {
            // Cores in the order of their first allowed CPU, each with its allowed CPUs.
            let mut order: Vec<(u32, u32)> = Vec::new();
            let mut cores: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
            for (i, &cpu) in allowed.iter().enumerate() {
                // A CPU of unknown core is a core of its own (keyed past every real id).
                let key = core_of(cpu).unwrap_or((u32::MAX, i as u32));
                let cpus = cores.entry(key).or_default();
                if cpus.is_empty() {
                    order.push(key);
                }
                cpus.push(cpu);
            }
            let key = order[local_rank as usize % order.len()];
            cores.remove(&key).unwrap_or_default()
        }
    }
}

/// The core of `cpu` on this host as (package, core id), from sysfs.
pub fn core_of(cpu: usize) -> Option<(u32, u32)> {
    let read = |what: &str| -> Option<u32> {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{what}")).ok()?.trim().parse().ok()
    };
    Some((read("physical_package_id").unwrap_or(0), read("core_id")?))
}

/// The CPUs this process may run on, ascending.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// Restricts this process (its calling thread and every thread it starts later) to `cpus`.
pub fn bind_to(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: as above; CPU_SET only touches the set for indices below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Applies `STEADFAST_BIND_TO` for local rank `STEADFAST_LOCAL_RANK` (what the launcher
/// sets): Ok(None) when there is nothing to do, Ok(Some(cpus)) when bound, Err with a
/// message for the user when the policy is unknown or binding failed (the process then
/// runs unbound).
pub fn apply_from_env() -> Result<Option<Vec<usize>>, String> {
    let Some(policy) = std::env::var(crate::env::BIND_TO).ok().filter(|v| !v.is_empty()) else { return Ok(None) };
    let policy = BindTo::parse(&policy).ok_or_else(|| format!("ignoring {}={policy:?} (none, core or hwthread)", crate::env::BIND_TO))?;
    if policy == BindTo::None {
        return Ok(None);
    }
    // Under another launcher there is no local rank: nothing says which unit is ours.
    let Some(local) = std::env::var(crate::env::LOCAL_RANK).ok().and_then(|v| v.trim().parse::<u32>().ok()) else {
        return Ok(None);
    };
    let allowed = allowed_cpus().map_err(|e| format!("cannot read the CPU affinity: {e}"))?;
    let cpus = cpus_for(policy, local, &allowed, core_of);
    if cpus.is_empty() {
        return Ok(None);
    }
    bind_to(&cpus).map_err(|e| format!("cannot bind to CPUs {cpus:?}: {e}"))?;
    CPUS_BEFORE_BINDING.store(allowed.len(), std::sync::atomic::Ordering::Relaxed);
    Ok(Some(cpus))
}

/// The CPUs this process could use before [`apply_from_env`] bound it (0: not bound).
static CPUS_BEFORE_BINDING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// For a process bound to one unit of CPUs, by this module or by Slurm's task binding
/// (`SLURM_CPU_BIND_TYPE`), the CPUs its host's ranks share: what it could use before, or
/// the host's online CPUs. None when it is not bound: then its own CPUs (affinity, quota)
/// are what it shares. Bound, a rank sees one CPU, and comparing its host's ranks with that
/// called every bound job oversubscribed (a bound 2-rank ping-pong took three times as
/// long, yielding instead of spinning).
pub fn bound_cpus() -> Option<usize> {
    let slurm = std::env::var(SLURM_CPU_BIND_TYPE).ok();
    bound_cpus_from(CPUS_BEFORE_BINDING.load(std::sync::atomic::Ordering::Relaxed), slurm.as_deref(), host_cpus())
}

/// Slurm's record of how it bound a task (`none`, `mask_cpu:`, `map_cpu:`, ...).
const SLURM_CPU_BIND_TYPE: &str = "SLURM_CPU_BIND_TYPE";

/// [`bound_cpus`] from its inputs: the count before this module bound the process (0: it
/// did not), Slurm's binding type and the host's online CPUs.
fn bound_cpus_from(before_binding: usize, slurm_bind: Option<&str>, host: usize) -> Option<usize> {
    if before_binding > 0 {
        return Some(before_binding);
    }
    match slurm_bind.map(str::trim) {
        Some(t) if !t.is_empty() && !t.starts_with("none") => Some(host),
        _ => None,
    }
}

/// CPUs online on this host (the same for every process on it, whatever its affinity).
pub fn host_cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *CPUS.get_or_init(|| usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).ok().filter(|&n| n > 0).unwrap_or(1))
}

/// `STEADFAST_LOCAL_SIZE`, the ranks on this host, where our launcher set it.
pub fn local_size() -> Option<u32> {
    std::env::var(crate::env::LOCAL_SIZE).ok().and_then(|v| v.trim().parse::<u32>().ok()).filter(|&n| n >= 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_name_themselves() {
        for p in [BindTo::None, BindTo::Core, BindTo::Hwthread] {
            assert_eq!(BindTo::parse(p.name()), Some(p));
        }
        assert_eq!(BindTo::parse("socket"), None);
    }

    #[test]
    fn bound_ranks_count_the_cpus_they_had_before() {
        // Bound here: what the process had before.
        assert_eq!(bound_cpus_from(2, None, 2), Some(2));
        // Unbound, Slurm saying it did not bind either.
        assert_eq!(bound_cpus_from(0, None, 64), None);
        assert_eq!(bound_cpus_from(0, Some("none"), 64), None);
        assert_eq!(bound_cpus_from(0, Some("none,quiet"), 64), None);
        // Bound by Slurm, one CPU each: the host's.
        assert_eq!(bound_cpus_from(0, Some("mask_cpu:"), 16), Some(16));
        assert_eq!(bound_cpus_from(0, Some("cores"), 2), Some(2));
    }

    #[test]
    fn hwthreads_go_round_the_allowed_cpus() {
        let allowed = [2, 3, 6, 7];
        let got: Vec<_> = (0..6).map(|r| cpus_for(BindTo::Hwthread, r, &allowed, |_| None)).collect();
        assert_eq!(got, vec![vec![2], vec![3], vec![6], vec![7], vec![2], vec![3]]);
        assert!(cpus_for(BindTo::None, 0, &allowed, |_| None).is_empty());
        assert!(cpus_for(BindTo::Core, 0, &[], |_| None).is_empty());
    }

    #[test]
    fn cores_take_all_their_hardware_threads() {
        // Two cores with two threads each, numbered as Linux often does (0,2 and 1,3).
        let core = |c: usize| Some((0, (c % 2) as u32));
        let allowed = [0, 1, 2, 3];
        assert_eq!(cpus_for(BindTo::Core, 0, &allowed, core), vec![0, 2]);
        assert_eq!(cpus_for(BindTo::Core, 1, &allowed, core), vec![1, 3]);
        assert_eq!(cpus_for(BindTo::Core, 2, &allowed, core), vec![0, 2]);
        // Only part of a core allowed: the core is what is left of it.
        assert_eq!(cpus_for(BindTo::Core, 0, &[2, 3], core), vec![2]);
        // Unknown topology: every CPU a core.
        assert_eq!(cpus_for(BindTo::Core, 1, &allowed, |_| None), vec![1]);
    }
}

//! Bootstrap through the process managers clusters use: PMI-1 (MPICH's Hydra), PMI-2
//! (Slurm's `srun --mpi=pmi2`) and PMIx (`srun --mpi=pmix`, PRRTE).
//!
//! Which bootstrap a process uses is decided from its environment by [`detect`]:
//! `steadfast run` (the `STEADFAST_*` contract of [`crate::env`]) wins, then PMIx
//! (`PMIX_RANK`), then PMI-2 (`PMI_FD` with Slurm's `PMI_JOBID`), then PMI-1 (`PMI_FD` or
//! `PMI_PORT` with `PMI_RANK`); none of them means a singleton. `STEADFAST_BOOTSTRAP`
//! (`auto`, `launcher`, `pmi1`, `pmi2`, `pmix`) forces one.
//!
//! Under PMI, [`PmiBootstrap`] gives the engine the same services as the launcher's
//! connection: the key-value space (values are percent-encoded, since PMI-1 values end
//! at a space), the fence, abort and finalize. What the launcher would have put in the
//! environment is derived here: ranks exchange their host names through the key-value
//! space, so ranks on one host use shared memory (in a job directory named after the PMI
//! job id) and ranks on other hosts use TCP (`STEADFAST_NET_PATH` chooses otherwise).

pub mod pmi1;
pub mod pmi2;
pub mod pmix;

use std::fmt;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use crate::client::Bootstrap;
use crate::env::{self, FtMode, PathKind};
use crate::error::BootstrapError;

/// `STEADFAST_BOOTSTRAP`: `auto` (default), `launcher`, `pmi1`, `pmi2` or `pmix`.
pub const BOOTSTRAP: &str = "STEADFAST_BOOTSTRAP";

/// Where a process learns its rank and finds its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `steadfast run` / our `mpiexec`.
    Launcher,
    /// PMI-1 wire protocol (Hydra).
    Pmi1,
    /// PMI-2 through `libpmi2.so` (Slurm).
    Pmi2,
    /// PMIx through `libpmix.so`.
    Pmix,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Launcher => "launcher",
            Kind::Pmi1 => "pmi1",
            Kind::Pmi2 => "pmi2",
            Kind::Pmix => "pmix",
        })
    }
}

/// Which bootstrap the environment asks for; `Ok(None)` is a singleton.
pub fn detect(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<Kind>, BootstrapError> {
    let forced = get(BOOTSTRAP).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    match forced.as_deref() {
        None | Some("auto") => {}
        Some("launcher") => return Ok(Some(Kind::Launcher)),
        Some("pmi1") => return Ok(Some(Kind::Pmi1)),
        Some("pmi2") => return Ok(Some(Kind::Pmi2)),
        Some("pmix") => return Ok(Some(Kind::Pmix)),
        Some(other) => {
            return Err(BootstrapError::BadVar {
                name: BOOTSTRAP,
                reason: format!("{other:?}: expected auto, launcher, pmi1, pmi2 or pmix"),
            })
        }
    }
    let has = |k: &str| get(k).is_some_and(|v| !v.is_empty());
    Ok(if has(env::RANK) {
        Some(Kind::Launcher)
    } else if has("PMIX_RANK") && has("PMIX_NAMESPACE") {
        Some(Kind::Pmix)
    } else if has("PMI_RANK") && has("PMI_FD") && has("PMI_JOBID") {
        // Slurm's pmi2 plugin sets PMI_JOBID; Hydra does not.
        Some(Kind::Pmi2)
    } else if has("PMI_RANK") && (has("PMI_FD") || has("PMI_PORT")) {
        Some(Kind::Pmi1)
    } else {
        None
    })
}

/// What a PMI client knows right after initialisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmiInfo {
    /// Rank in the job.
    pub rank: u32,
    /// Processes in the job.
    pub size: u32,
    /// The process manager's name for the job (kvs name, job id, namespace).
    pub jobid: String,
}

/// The services of one PMI flavour.
pub trait PmiClient: Send + fmt::Debug {
    /// Rank, size and job id.
    fn info(&self) -> PmiInfo;
    /// Publishes `key = value` (visible to others after the next fence).
    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError>;
    /// Value of `key` as put by rank `owner` (when known) before the last fence.
    fn get(&mut self, owner: Option<u32>, key: &str) -> Result<String, BootstrapError>;
    /// Barrier over the job that also makes earlier puts visible.
    fn fence(&mut self) -> Result<(), BootstrapError>;
    /// Asks the process manager to end the job.
    fn abort(&mut self, code: i32, msg: &str);
    /// Leaves the job cleanly.
    fn finalize(&mut self) -> Result<(), BootstrapError>;
}

/// Percent-encodes every byte outside `[A-Za-z0-9._:,/-]` so any value survives PMI-1's
/// space-separated lines.
pub fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"._:,/-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Inverse of [`encode`]; `None` for a malformed escape.
pub fn decode(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The rank that published `key`: our keys end in `.<rank>` (`tcp.3`, `ft.3`, `host.3`).
fn owner_of(key: &str) -> Option<u32> {
    key.rsplit_once('.').and_then(|(_, r)| r.parse().ok())
}

/// FNV-1a, 64 bits: a stable name for the job directory and the job key.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(b"\0") {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Host index of every rank (in order of first appearance) as a `STEADFAST_HOSTMAP` value
/// (`0*4,1*4`), plus this rank's local rank and the number of ranks on its host.
fn layout(hosts: &[String], rank: u32) -> (Vec<u32>, u32, u32) {
    let mut names: Vec<&str> = Vec::new();
    let idx: Vec<u32> = hosts
        .iter()
        .map(|h| match names.iter().position(|n| *n == h) {
            Some(i) => i as u32,
            None => {
                names.push(h);
                names.len() as u32 - 1
            }
        })
        .collect();
    let me = idx[rank as usize];
    let local_rank = idx[..rank as usize].iter().filter(|&&h| h == me).count() as u32;
    let local_size = idx.iter().filter(|&&h| h == me).count() as u32;
    (idx, local_rank, local_size)
}

/// Run-length form of a host index list (`0,0,1,1` → `0*2,1*2`).
fn hostmap_string(idx: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j < idx.len() && idx[j] == idx[i] {
            j += 1;
        }
        parts.push(format!("{}*{}", idx[i], j - i));
        i = j;
    }
    parts.join(",")
}

/// The job as a PMI process manager describes it, plus what Steadfast derives from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmiJob {
    /// Which PMI flavour.
    pub kind: Kind,
    /// World rank.
    pub rank: u32,
    /// World size.
    pub size: u32,
    /// Rank among the ranks on this host.
    pub local_rank: u32,
    /// Ranks on this host.
    pub local_size: u32,
    /// The process manager's job id.
    pub jobid: String,
    /// `/dev/shm/steadfast-pmi-<hash of job id and uid>`.
    pub jobdir: PathBuf,
    /// Derived from the job id and the user id (PMI hands out no secret; see docs).
    pub job_key: u64,
    /// Path between ranks of one host (`STEADFAST_PATH`, default shm).
    pub path: PathKind,
    /// `STEADFAST_FT`, default abort.
    pub ft: FtMode,
    /// Host index per rank when the job spans several hosts (else `None`).
    pub hostmap: Option<String>,
    /// Path between hosts: `STEADFAST_NET_PATH`, else tcp.
    pub net_path: PathKind,
    /// `STEADFAST_ROUTES` for multi-host jobs: `auto` unless set (every non-loopback
    /// interface; there is no launcher address to pick the interface towards).
    pub routes: Option<String>,
}

/// Where a rank is in MPI_Finalize, for [`LeaveOnFailure`].
const RUNNING: u8 = 0;
/// In the finalize fence: every rank reached MPI_Finalize once it returns.
const IN_FINAL_FENCE: u8 = 1;
/// The finalize fence returned: the job's work is done.
const FINAL_FENCE_DONE: u8 = 2;

/// How long a rank in the finalize fence waits for it to end after a failure is declared
/// before it leaves as in abort mode (a rank may really have died inside MPI_Finalize, and
/// the fence would then never end).
const FINAL_FENCE_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A rank's bootstrap over PMI.
#[derive(Debug)]
pub struct PmiBootstrap {
    client: Box<dyn PmiClient>,
    job: PmiJob,
    fences: u32,
    stage: Arc<AtomicU8>,
}

impl PmiBootstrap {
    /// Initialises PMI of `kind` and learns the job's layout (one fence: host names).
    pub fn init(kind: Kind, get: &dyn Fn(&str) -> Option<String>) -> Result<PmiBootstrap, BootstrapError> {
        let (kind, client): (Kind, Box<dyn PmiClient>) = match kind {
            Kind::Pmi1 => (kind, Box::new(pmi1::Pmi1::from_env(get)?)),
            Kind::Pmix => (kind, Box::new(pmix::Pmix::init(get)?)),
            Kind::Pmi2 => match pmi2::Pmi2::init(get) {
                Ok(c) => (kind, Box::new(c)),
                // Slurm's pmi2 plugin also answers PMI-1 on the same descriptor.
                Err(e) if get(BOOTSTRAP).is_none() && get("PMI_FD").is_some() => {
                    tracing::debug!(error = %e, "no PMI-2 library; speaking PMI-1 to the same server");
                    (Kind::Pmi1, Box::new(pmi1::Pmi1::from_env(get)?))
                }
                Err(e) => return Err(e),
            },
            Kind::Launcher => {
                return Err(BootstrapError::Pmi("the launcher bootstrap is not a PMI one".into()))
            }
        };
        Self::with_client(kind, client, get)
    }

    /// Builds the bootstrap over an initialised client (tests use an in-memory one).
    pub fn with_client(
        kind: Kind,
        mut client: Box<dyn PmiClient>,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<PmiBootstrap, BootstrapError> {
        let info = client.info();
        client.put(&format!("host.{}", info.rank), &encode(&hostname()))?;
        client.fence()?;
        let mut hosts = Vec::with_capacity(info.size as usize);
        for r in 0..info.size {
            let raw = client.get(Some(r), &format!("host.{r}"))?;
            hosts.push(decode(&raw).ok_or_else(|| BootstrapError::Pmi(format!("bad host name of rank {r}: {raw:?}")))?);
        }
        let (idx, local_rank, local_size) = layout(&hosts, info.rank);
        let multi = idx.iter().any(|&h| h != 0);
        let parse_var = |name: &'static str, dflt: &str| -> Result<String, BootstrapError> {
            Ok(get(name).filter(|v| !v.trim().is_empty()).unwrap_or_else(|| dflt.to_owned()))
        };
        let bad = |name: &'static str, e: env::UnknownValue| BootstrapError::BadVar {
            name,
            reason: e.to_string(),
        };
        let path: PathKind = parse_var(env::PATH, "shm")?.trim().parse().map_err(|e| bad(env::PATH, e))?;
        let ft: FtMode = parse_var(env::FT, "abort")?.trim().parse().map_err(|e| bad(env::FT, e))?;
        let net_path: PathKind =
            parse_var("STEADFAST_NET_PATH", "tcp")?.trim().parse().map_err(|e| bad("STEADFAST_NET_PATH", e))?;
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() }.to_string();
        // The host name too: emulated nodes (network and UTS namespaces) may share /dev/shm,
        // and each host's ranks must get a directory of their own.
        let tag = fnv(&[b"dir", info.jobid.as_bytes(), uid.as_bytes(), hosts[info.rank as usize].as_bytes()]);
        let job = PmiJob {
            kind,
            rank: info.rank,
            size: info.size,
            local_rank,
            local_size,
            jobdir: PathBuf::from(format!("/dev/shm/steadfast-pmi-{tag:016x}")),
            job_key: fnv(&[b"key", info.jobid.as_bytes(), uid.as_bytes()]),
            jobid: info.jobid,
            path,
            ft,
            hostmap: multi.then(|| hostmap_string(&idx)),
            net_path,
            routes: if multi {
                Some(parse_var("STEADFAST_ROUTES", "auto")?)
            } else {
                None
            },
        };
        tracing::debug!(?job, "joined a PMI job");
        Ok(PmiBootstrap {
            client,
            job,
            fences: 0,
            stage: Arc::new(AtomicU8::new(RUNNING)),
        })
    }

    /// What the membership control thread should do with failures: in abort mode, leave
    /// (a PMI process manager does not end the job when a rank dies unless told to, e.g.
    /// `srun -K1`); in run-through mode, nothing (`None`).
    pub fn failure_link(&self) -> Option<Box<dyn crate::ft::LauncherLink>> {
        (self.job.ft == FtMode::Abort).then(|| {
            Box::new(LeaveOnFailure {
                rank: self.job.rank,
                stage: Arc::clone(&self.stage),
                watching: Arc::new(AtomicBool::new(false)),
            }) as _
        })
    }

    /// The job.
    pub fn job(&self) -> &PmiJob {
        &self.job
    }

    /// Publishes `key = value`; visible to the others after the next fence.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        self.client.put(key, &encode(value))
    }

    /// Value of `key` (put before the last fence).
    pub fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        let raw = self.client.get(owner_of(key), key)?;
        decode(&raw).ok_or_else(|| BootstrapError::Pmi(format!("bad value for {key}: {raw:?}")))
    }

    /// PMI fence. The engine fences twice: at start-up (address exchange) and in
    /// MPI_Finalize. In run-through mode the second one is skipped: a PMI fence waits for
    /// every process of the job and would never end after a failure. The engine has just
    /// run a barrier over the live ranks (or learned of a failure), and the membership
    /// service tells the survivors a finalized rank left on purpose.
    pub fn fence(&mut self) -> Result<(), BootstrapError> {
        self.fences += 1;
        if self.fences > 1 && self.job.ft == FtMode::RunThrough {
            return Ok(());
        }
        if self.fences > 1 {
            self.stage.store(IN_FINAL_FENCE, Ordering::SeqCst);
        }
        let r = self.client.fence();
        if self.fences > 1 && r.is_ok() {
            self.stage.store(FINAL_FENCE_DONE, Ordering::SeqCst);
        }
        r
    }

    /// Prints `msg`, asks the process manager to end the job and exits with `code` (1 if
    /// `code` is 0). Exits here because Slurm's `PMI2_Abort` exits the process itself
    /// (status 1: PMI-2 carries no exit code), so the message must come first.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        eprintln!("steadfast: rank {}: {msg}", self.job.rank);
        self.client.abort(code, msg);
        std::process::exit(if code == 0 { 1 } else { code & 0xff });
    }

    /// Leaves the PMI job.
    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        self.client.finalize()
    }
}

impl Drop for PmiBootstrap {
    fn drop(&mut self) {
        // No launcher removes the job directory: the last rank of the host to leave does
        // (each rank removed its own segment when its path closed; rmdir fails while
        // others remain).
        remove_dir_if_empty(&self.job.jobdir);
    }
}

/// Abort mode under PMI: when the membership service declares a rank failed, every
/// survivor leaves with status 1, so the process manager ends the job the way
/// `steadfast run` would have (and no survivor waits forever for the dead rank).
///
/// Except at the very end: once the finalize fence has begun, every rank reached
/// MPI_Finalize, and the first ranks out of the fence exit while a slower one still runs
/// its membership service, which may then find them gone (a connection refused counts as a
/// failure) and declare them failed. Such a failure no longer matters: the rank waits for
/// its fence to end and leaves normally; only if the fence does not end within
/// [`FINAL_FENCE_GRACE`] (a rank really died inside MPI_Finalize) does it leave with status 1.
#[derive(Debug)]
pub struct LeaveOnFailure {
    rank: u32,
    stage: Arc<AtomicU8>,
    watching: Arc<AtomicBool>,
}

impl crate::ft::LauncherLink for LeaveOnFailure {
    fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    fn try_poll(&mut self) -> Option<Vec<crate::event::LauncherEvent>> {
        Some(Vec::new())
    }
    fn on_failures(&mut self, failed: &[u32]) {
        let list: Vec<String> = failed.iter().map(u32::to_string).collect();
        match self.stage.load(Ordering::SeqCst) {
            FINAL_FENCE_DONE => {
                tracing::debug!(failed = %list.join(","), "failure after the finalize fence: the job is done");
                return;
            }
            IN_FINAL_FENCE => {
                if !self.watching.swap(true, Ordering::SeqCst) {
                    let (stage, rank) = (Arc::clone(&self.stage), self.rank);
                    let spawned = std::thread::Builder::new().name("steadfast-final-fence".into()).spawn(move || {
                        let start = std::time::Instant::now();
                        while start.elapsed() < FINAL_FENCE_GRACE {
                            if stage.load(Ordering::SeqCst) == FINAL_FENCE_DONE {
                                return;
                            }
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                        eprintln!(
                            "steadfast: rank {rank}: rank(s) {} failed and the finalize fence did not end; ending the job",
                            list.join(",")
                        );
                        // SAFETY: _exit ends the process; nothing runs after it.
                        unsafe { libc::_exit(1) };
                    });
                    if spawned.is_ok() {
                        return;
                    }
                } else {
                    return;
                }
            }
            _ => {}
        }
        let list: Vec<String> = failed.iter().map(u32::to_string).collect();
        eprintln!(
            "steadfast: rank {}: rank(s) {} failed; ending the job (abort mode; STEADFAST_FT=run-through keeps the survivors running)",
            self.rank,
            list.join(",")
        );
        // The failure ends the job (abort mode): leave at once, from this thread, without
        // waiting for the application thread, which may be blocked on the dead rank.
        // SAFETY: _exit ends the process; nothing runs after it.
        unsafe { libc::_exit(1) };
    }
}

fn remove_dir_if_empty(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}

/// The bootstrap a process uses.
#[derive(Debug)]
pub enum Selected {
    /// Connected to `steadfast run`.
    Launcher(Bootstrap),
    /// Joined a PMI job.
    Pmi(PmiBootstrap),
}

/// Chooses and starts the bootstrap from the process environment; `Ok(None)` = singleton.
pub fn from_env() -> Result<Option<Selected>, BootstrapError> {
    let get = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    match detect(&get)? {
        None => Ok(None),
        Some(Kind::Launcher) => match Bootstrap::from_env()? {
            Some(b) => Ok(Some(Selected::Launcher(b))),
            None => Err(BootstrapError::MissingVar(env::RANK)),
        },
        Some(k) => PmiBootstrap::init(k, &get).map(|b| Some(Selected::Pmi(b))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::{Arc, Barrier, Mutex};

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn detects_the_process_manager() {
        assert_eq!(detect(&vars(&[])).unwrap(), None);
        assert_eq!(detect(&vars(&[("STEADFAST_RANK", "0"), ("PMI_FD", "3"), ("PMI_RANK", "0")])).unwrap(), Some(Kind::Launcher));
        assert_eq!(detect(&vars(&[("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "x")])).unwrap(), Some(Kind::Pmix));
        assert_eq!(
            detect(&vars(&[("PMI_FD", "3"), ("PMI_RANK", "0"), ("PMI_JOBID", "4.0")])).unwrap(),
            Some(Kind::Pmi2)
        );
        assert_eq!(detect(&vars(&[("PMI_FD", "3"), ("PMI_RANK", "0")])).unwrap(), Some(Kind::Pmi1));
        assert_eq!(detect(&vars(&[("PMI_PORT", "h:1"), ("PMI_RANK", "0")])).unwrap(), Some(Kind::Pmi1));
        assert_eq!(
            detect(&vars(&[("STEADFAST_BOOTSTRAP", "pmi1"), ("PMI_JOBID", "4.0")])).unwrap(),
            Some(Kind::Pmi1)
        );
        assert!(matches!(
            detect(&vars(&[("STEADFAST_BOOTSTRAP", "slurm")])),
            Err(BootstrapError::BadVar { name: BOOTSTRAP, .. })
        ));
    }

    #[test]
    fn encoding_roundtrips() {
        for v in ["127.0.0.1:4000", "default=10.0.0.1:5;r1=10.1.0.1:6", "a b%c\nd", ""] {
            let e = encode(v);
            assert!(!e.contains(' ') && !e.contains('=') && !e.contains('\n'), "{e}");
            assert_eq!(decode(&e).as_deref(), Some(v));
        }
        assert_eq!(decode("%4"), None);
        assert_eq!(decode("%zz"), None);
    }

    #[test]
    fn layout_and_hostmap() {
        let h = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let hosts = h(&["b", "b", "a", "a", "b"]);
        let (idx, lr, ls) = layout(&hosts, 4);
        assert_eq!(idx, vec![0, 0, 1, 1, 0]);
        assert_eq!((lr, ls), (2, 3));
        assert_eq!(hostmap_string(&idx), "0*2,1*2,0*1");
        assert_eq!(owner_of("tcp.12"), Some(12));
        assert_eq!(owner_of("key"), None);
    }

    /// An in-memory process manager shared by threads, one client per rank.
    #[derive(Debug)]
    struct Mem {
        rank: u32,
        size: u32,
        kv: Arc<Mutex<HashMap<String, String>>>,
        staged: Vec<(String, String)>,
        barrier: Arc<Barrier>,
        fences: Arc<Mutex<u32>>,
    }

    impl PmiClient for Mem {
        fn info(&self) -> PmiInfo {
            PmiInfo { rank: self.rank, size: self.size, jobid: "mem.7".into() }
        }
        fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
            self.staged.push((key.into(), value.into()));
            Ok(())
        }
        fn get(&mut self, _owner: Option<u32>, key: &str) -> Result<String, BootstrapError> {
            self.kv.lock().unwrap().get(key).cloned().ok_or_else(|| BootstrapError::Pmi(format!("no {key}")))
        }
        fn fence(&mut self) -> Result<(), BootstrapError> {
            self.kv.lock().unwrap().extend(self.staged.drain(..));
            *self.fences.lock().unwrap() += 1;
            self.barrier.wait();
            Ok(())
        }
        fn abort(&mut self, _code: i32, _msg: &str) {}
        fn finalize(&mut self) -> Result<(), BootstrapError> {
            Ok(())
        }
    }

    #[test]
    fn a_failure_after_the_finalize_fence_does_not_end_the_rank() {
        let client = Mem {
            rank: 0,
            size: 1,
            kv: Arc::new(Mutex::new(HashMap::new())),
            staged: Vec::new(),
            barrier: Arc::new(Barrier::new(1)),
            fences: Arc::new(Mutex::new(0)),
        };
        let get = vars(&[("STEADFAST_FT", "abort")]);
        let mut b = PmiBootstrap::with_client(Kind::Pmi2, Box::new(client), &get).unwrap();
        let mut link = b.failure_link().expect("abort mode leaves on failures");
        b.fence().unwrap();
        assert_eq!(b.stage.load(Ordering::SeqCst), RUNNING);
        b.fence().unwrap();
        assert_eq!(b.stage.load(Ordering::SeqCst), FINAL_FENCE_DONE);
        // Would _exit(1) before the finalize fence; returns after it.
        link.on_failures(&[1]);
    }

    #[test]
    fn exchange_and_run_through_finalize_fence() {
        let size = 3;
        let kv = Arc::new(Mutex::new(HashMap::new()));
        let barrier = Arc::new(Barrier::new(size as usize));
        let fences = Arc::new(Mutex::new(0));
        let threads: Vec<_> = (0..size)
            .map(|rank| {
                let client = Mem {
                    rank,
                    size,
                    kv: kv.clone(),
                    staged: Vec::new(),
                    barrier: barrier.clone(),
                    fences: fences.clone(),
                };
                std::thread::spawn(move || {
                    let get = vars(&[("STEADFAST_FT", "run-through")]);
                    let mut b = PmiBootstrap::with_client(Kind::Pmi2, Box::new(client), &get).unwrap();
                    b.put(&format!("udp.{rank}"), &format!("default=127.0.0.1:{}", 4000 + rank)).unwrap();
                    b.fence().unwrap();
                    for q in 0..size {
                        assert_eq!(b.get(&format!("udp.{q}")).unwrap(), format!("default=127.0.0.1:{}", 4000 + q));
                    }
                    // The finalize fence does not reach the process manager in run-through.
                    b.fence().unwrap();
                    b.job().clone()
                })
            })
            .collect();
        let jobs: Vec<PmiJob> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(*fences.lock().unwrap(), 2 * size);
        for (r, j) in jobs.iter().enumerate() {
            assert_eq!(j.rank, r as u32);
            assert_eq!((j.local_rank, j.local_size), (r as u32, size));
            assert_eq!(j.hostmap, None);
            assert_eq!(j.ft, FtMode::RunThrough);
            assert_eq!(j.path, PathKind::Shm);
            assert_eq!(j.job_key, jobs[0].job_key);
            assert_eq!(j.jobdir, jobs[0].jobdir);
        }
    }
}

/// Loads the PMI client library `what` names: the one `configured` names, else the first
/// of `defaults` that loads.
pub(crate) fn load_library(what: &str, configured: Option<String>, defaults: &[&str]) -> Result<libloading::Library, BootstrapError> {
    let names: Vec<String> = match configured.filter(|s| !s.is_empty()) {
        Some(n) => vec![n],
        None => defaults.iter().map(|d| (*d).to_owned()).collect(),
    };
    let mut last = String::new();
    for n in &names {
        // SAFETY: loading the client library the environment asked for runs only its own
        // initialisers, which set up its own state.
        match unsafe { libloading::Library::new(n) } {
            Ok(l) => return Ok(l),
            Err(e) => last = e.to_string(),
        }
    }
    Err(BootstrapError::Pmi(format!("cannot load the {what} library ({}): {last}", names.join(", "))))
}

/// The address of function `name` in `lib` (the caller gives it its prototype).
pub(crate) fn symbol(lib: &libloading::Library, what: &str, name: &str) -> Result<*const (), BootstrapError> {
    // SAFETY: looking a symbol up has no side effect.
    unsafe { lib.get::<*const ()>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| BootstrapError::Pmi(format!("{what} library lacks {name}: {e}")))
}

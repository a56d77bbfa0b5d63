//! Environment management: init, finalize, abort, versions, timers, error strings.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use steadfast_core::{Engine, ErrorClass, JobInfo, MpiError};

use crate::abi;
use crate::global::{self, api, api_anytime, lock, Global, PHASE, PHASE_DONE, PHASE_LIVE, PHASE_NONE};
use crate::mpi_api;

/// Library version string reported by MPI_Get_library_version.
pub const LIBRARY_VERSION: &str = concat!(
    "Steadfast ",
    env!("CARGO_PKG_VERSION"),
    " (fault-tolerant MPI; MPI 5.0 standard ABI 1.0; paths: shm, tcp)"
);

/// The bootstrap, shared with the membership control thread (which reads the launcher's
/// failure notices on the same connection).
struct Boot(steadfast_runtime::ft::SharedBootstrap);

impl steadfast_core::Bootstrap for Boot {
    fn put(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.0.lock().put(key, value).map_err(|e| e.to_string())
    }
    fn get(&mut self, key: &str) -> Result<String, String> {
        self.0.lock().get(key).map_err(|e| e.to_string())
    }
    fn fence(&mut self) -> Result<(), String> {
        self.0.lock().fence().map_err(|e| e.to_string())
    }
    fn abort(&mut self, code: i32, msg: &str) {
        self.0.lock().abort(code, msg)
    }
    fn finalize(&mut self) -> Result<(), String> {
        self.0.lock().finalize().map_err(|e| e.to_string())
    }
    fn launcher_link(&self) -> Option<Box<dyn steadfast_runtime::ft::LauncherLink>> {
        Some(Box::new(self.0.clone()))
    }
    fn rejoin(&mut self) -> Result<(), String> {
        self.0.lock().rejoin().map_err(|e| e.to_string())
    }
    fn poll_events(&mut self) -> Vec<steadfast_runtime::LauncherEvent> {
        self.0.lock().poll_events()
    }
    fn send_recovery(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.0.lock().send_recovery(bytes).map_err(|e| e.to_string())
    }
    fn output_mark(&mut self, wave: u64) -> Result<(), String> {
        self.0.lock().output_mark(wave).map_err(|e| e.to_string())
    }
    fn checkpoint_now(&mut self) -> Result<(), String> {
        self.0.lock().checkpoint_now().map_err(|e| e.to_string())
    }
    fn put_job(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.0.lock().put_job(key, value).map_err(|e| e.to_string())
    }
    fn get_job(&mut self, key: &str) -> Result<String, String> {
        self.0.lock().get_job(key).map_err(|e| e.to_string())
    }
    fn spawn_unsupported(&self) -> Option<String> {
        None
    }
    fn spawn(&mut self, ctx: u32, parents: Vec<u32>, cmds: Vec<steadfast_runtime::wire::SpawnCmd>) -> Result<(u32, Vec<i32>, String), String> {
        self.0.lock().spawn(ctx, parents, cmds).map_err(|e| e.to_string())
    }
}

/// The bootstrap of a job started by a PMI process manager (Slurm, Hydra, PRRTE).
struct PmiBoot(steadfast_runtime::pmi::PmiBootstrap);

impl steadfast_core::Bootstrap for PmiBoot {
    fn spawn_unsupported(&self) -> Option<String> {
        Some("this job was started by a PMI process manager (Slurm, Hydra, PRRTE), which Steadfast cannot ask to start processes; start the job with steadfast run / mpiexec to spawn".into())
    }
    fn put(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.0.put(key, value).map_err(|e| e.to_string())
    }
    fn get(&mut self, key: &str) -> Result<String, String> {
        self.0.get(key).map_err(|e| e.to_string())
    }
    fn fence(&mut self) -> Result<(), String> {
        self.0.fence().map_err(|e| e.to_string())
    }
    fn abort(&mut self, code: i32, msg: &str) {
        self.0.abort(code, msg)
    }
    fn finalize(&mut self) -> Result<(), String> {
        self.0.finalize().map_err(|e| e.to_string())
    }
    fn launcher_link(&self) -> Option<Box<dyn steadfast_runtime::ft::LauncherLink>> {
        self.0.failure_link()
    }
}

fn core_path(p: steadfast_runtime::PathKind) -> steadfast_core::PathKind {
    match p {
        steadfast_runtime::PathKind::Shm => steadfast_core::PathKind::Shm,
        steadfast_runtime::PathKind::Tcp => steadfast_core::PathKind::Tcp,
        steadfast_runtime::PathKind::Udp => steadfast_core::PathKind::Udp,
    }
}

/// The engine's view of the job and its bootstrap, whichever started the process.
fn job_and_boot(
    b: Option<steadfast_runtime::pmi::Selected>,
) -> (Option<JobInfo>, Option<Box<dyn steadfast_core::Bootstrap>>) {
    use steadfast_runtime::pmi::Selected;
    match b {
        None => (None, None),
        Some(Selected::Launcher(b)) => {
            let job = JobInfo {
                rank: b.rank(),
                size: b.size(),
                jobdir: b.jobdir().to_path_buf(),
                job_key: b.job_key(),
                path: core_path(b.path()),
                run_through: b.ft().runs_through(),
                relaunch: b.ft().relaunches(),
                coordinated: b.ft() == steadfast_runtime::FtMode::Coordinated,
                incarnation: b.job_env().incarnation,
                proc_base: b.job_env().proc_base,
                path_overrides: None,
            };
            (Some(job), Some(Box::new(Boot(steadfast_runtime::ft::SharedBootstrap::new(b)))))
        }
        Some(Selected::Pmi(b)) => {
            let j = b.job();
            let job = JobInfo {
                rank: j.rank,
                size: j.size,
                jobdir: j.jobdir.clone(),
                job_key: j.job_key,
                path: core_path(j.path),
                run_through: j.ft.runs_through(),
                // Under a scheduler nobody starts a failed rank again.
                relaunch: false,
                coordinated: false,
                incarnation: 0,
                proc_base: 0,
                path_overrides: Some(steadfast_core::PathOverrides {
                    hostmap: j.hostmap.clone(),
                    net_path: Some(j.net_path.to_string()),
                    routes: j.routes.clone(),
                }),
            };
            (Some(job), Some(Box::new(PmiBoot(b))))
        }
    }
}

/// `--ft coordinated`: checkpoints of this process go to the launcher's directory; a
/// process restored from one reconnects through the environment it was started with.
fn enable_coordinated(eng: &mut Engine, jobdir: std::path::PathBuf) -> Result<(), MpiError> {
    let dir = steadfast_config::lookup(steadfast_runtime::env::CKPT_DIR)
        .ok_or_else(|| MpiError::new(ErrorClass::Other, "--ft coordinated without a checkpoint directory"))?;
    eng.enable_coordinated(dir.into(), jobdir, reconnect_from_env())
}

/// How a process restored from an image reconnects: through the environment it was
/// started with.
fn reconnect_from_env() -> steadfast_core::engine::Reconnect {
    Box::new(|| {
        let b = steadfast_runtime::Bootstrap::from_env()
            .map_err(|e| MpiError::new(ErrorClass::Other, format!("reconnecting to the launcher: {e}")))?
            .ok_or_else(|| MpiError::new(ErrorClass::Other, "restored without a launcher"))?;
        match job_and_boot(Some(steadfast_runtime::pmi::Selected::Launcher(b))) {
            (Some(job), Some(boot)) => Ok((job, boot)),
            _ => Err(MpiError::new(ErrorClass::Other, "restored without a job")),
        }
    })
}

fn init_logging() {
    if let Some(filter) = steadfast_config::lookup("STEADFAST_LOG") {
        let fmt = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter));
        if let Some(prefix) = steadfast_config::lookup("STEADFAST_LOG_FILE").filter(|p| !p.is_empty()) {
            let rank = steadfast_config::lookup(steadfast_runtime::env::RANK).unwrap_or_else(|| "x".into());
            let path = format!("{prefix}.{rank}.{}", std::process::id());
            match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => {
                    let _ = fmt.with_ansi(false).with_writer(std::sync::Mutex::new(f)).try_init();
                }
                Err(e) => eprintln!("steadfast: STEADFAST_LOG_FILE: cannot open {path}: {e}; logging to stderr"),
            }
            if tracing::dispatcher::has_been_set() {
                return;
            }
        }
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(steadfast_config::lookup("STEADFAST_LOG").unwrap_or_default()))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// The World Model is initialised (MPI_Init and not yet MPI_Finalize).
pub static WORLD_ACTIVE: AtomicBool = AtomicBool::new(false);
/// Sessions initialised and not yet finalised (the Sessions Model).
pub static SESSIONS: AtomicUsize = AtomicUsize::new(0);

fn do_init(required: c_int) -> Result<c_int, c_int> {
    let provided = start_engine(required, true)?;
    WORLD_ACTIVE.store(true, Ordering::Release);
    Ok(provided)
}

/// Start the engine for MPI_Init (`world`) or MPI_Session_init; the engine is shared by both
/// models, so whichever comes second finds it running.
pub fn start_engine(required: c_int, world: bool) -> Result<c_int, c_int> {
    let mut guard = lock();
    match PHASE.load(Ordering::Acquire) {
        PHASE_NONE => {}
        PHASE_LIVE if !world || !WORLD_ACTIVE.load(Ordering::Acquire) => {
            return Ok(guard.as_ref().map_or(abi::MPI_THREAD_SINGLE, |g| g.thread_level));
        }
        PHASE_LIVE => {
            eprintln!("steadfast: MPI_Init called twice");
            return Err(abi::MPI_ERR_OTHER);
        }
        _ => {
            eprintln!("steadfast: MPI_Init called after MPI_Finalize");
            return Err(abi::MPI_ERR_OTHER);
        }
    }
    init_logging();
    let (job, boot) = match steadfast_runtime::pmi::from_env() {
        Ok(b) => job_and_boot(b),
        Err(e) => {
            eprintln!("steadfast: cannot join the job: {e}");
            std::process::exit(1);
        }
    };
    let coordinated = job.as_ref().filter(|j| j.coordinated).map(|j| j.jobdir.clone());
    let jobdir_of_logging = job.as_ref().map(|j| j.jobdir.clone());
    // Message logging needs the launcher to start a failed rank again.
    let logging = job
        .as_ref()
        .filter(|j| j.relaunch)
        .and_then(|_| steadfast_config::lookup(steadfast_runtime::env::FT))
        .and_then(|v| v.parse::<steadfast_runtime::FtMode>().ok())
        .and_then(|m| match m {
            steadfast_runtime::FtMode::Pessimistic => Some(steadfast_logging::Mode::Pessimistic),
            steadfast_runtime::FtMode::Causal => Some(steadfast_logging::Mode::Causal),
            steadfast_runtime::FtMode::ChannelMemory => Some(steadfast_logging::Mode::ChannelMemory),
            _ => None,
        });
    let mut eng = match Engine::init(job, boot) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("steadfast: MPI_Init failed: {e}");
            std::process::exit(1);
        }
    };
    if let Some(jobdir) = coordinated {
        if let Err(e) = enable_coordinated(&mut eng, jobdir) {
            // An abort, so that the launcher ends the job: a rank started again would be
            // refused the same way.
            let (rank, class) = (eng.rank, global::abi_class(e.class));
            eng.abort(class, &format!("rank {rank}: MPI_Init failed: {e} ({})", global::class_name(class)));
        }
    }
    if let Some(mode) = logging.filter(|_| eng.size > 1) {
        let images = steadfast_config::lookup(steadfast_runtime::env::MLOG_IMAGES)
            .filter(|d| !d.is_empty())
            .zip(jobdir_of_logging.clone())
            .map(|(dir, jobdir)| steadfast_core::engine::LogImages::new(dir.into(), jobdir, reconnect_from_env()));
        if let Err(e) = eng.enable_logging(mode, images) {
            let (rank, class) = (eng.rank, global::abi_class(e.class));
            eng.abort(class, &format!("rank {rank}: MPI_Init failed: {e} ({})", global::class_name(class)));
        }
    }
    for c in [eng.world, eng.self_comm] {
        if let Ok(c) = eng.comm_mut(c) {
            c.errhandler = abi::MPI_ERRORS_ARE_FATAL as u64;
        }
    }
    // One lock guards the library. Below MPI_THREAD_MULTIPLE it is held across blocking
    // calls (the engine sleeps on the path's doorbell); with it, blocking calls wait with the
    // lock released between rounds of progress (global::wait_released).
    let provided = required.clamp(abi::MPI_THREAD_SINGLE, abi::MPI_THREAD_MULTIPLE);
    global::MULTIPLE.store(provided == abi::MPI_THREAD_MULTIPLE, Ordering::Relaxed);
    // From the next entry on, the lock is a formality below MPI_THREAD_MULTIPLE (this
    // call's guard still releases the lock word it took).
    global::SOLO.store(provided != abi::MPI_THREAD_MULTIPLE, Ordering::Relaxed);
    let predef_types = global::predefined_types();
    let predef_contig = global::predefined_contig(&predef_types);
    *guard = Some(Global {
        eng,
        predef_types,
        predef_contig,
        types: Default::default(),
        errors: Default::default(),
        thread_level: provided,
        pending: Vec::new(),
        main_thread: std::thread::current().id(),
        bsend_buf: None,
        tables: Default::default(),
    });
    if let Some(g) = guard.as_mut() {
        // A spawned process reaches its parents inside MPI_Init, as they wait for it.
        if let Err(e) = crate::dynamic::connect_parent(g) {
            let (rank, class) = (g.eng.rank, global::abi_class(e.class));
            g.eng.abort(class, &format!("rank {rank}: MPI_Init failed: reaching the parents: {e}"));
        }
    }
    PHASE.store(PHASE_LIVE, Ordering::Release);
    Ok(provided)
}

/// Finalise the engine (MPI_Finalize, or the last MPI_Session_finalize without the World
/// Model).
pub fn stop_engine(func: &str) -> c_int {
    let rc = api(func, None, |g| g.eng.finalize());
    if rc == abi::MPI_SUCCESS {
        *lock() = None;
        global::SOLO.store(false, Ordering::Relaxed);
        WORLD_ACTIVE.store(false, Ordering::Release);
        PHASE.store(PHASE_DONE, Ordering::Release);
    }
    rc
}

mpi_api! {
    fn Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
        match do_init(abi::MPI_THREAD_SINGLE) {
            Ok(_) => abi::MPI_SUCCESS,
            Err(c) => c,
        }
    }

    fn Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) -> c_int {
        if provided.is_null() {
            eprintln!("steadfast: MPI_Init_thread: provided is NULL");
            return abi::MPI_ERR_ARG;
        }
        match do_init(required) {
            Ok(p) => {
                *provided = p;
                abi::MPI_SUCCESS
            }
            Err(c) => c,
        }
    }

    fn Finalize() -> c_int {
        crate::attr::finalize_attributes();
        if SESSIONS.load(Ordering::Acquire) > 0 {
            // Sessions still use the engine: the last MPI_Session_finalize stops it.
            let rc = api("MPI_Finalize", None, |_| Ok(()));
            WORLD_ACTIVE.store(false, Ordering::Release);
            return rc;
        }
        stop_engine("MPI_Finalize")
    }

    fn Initialized(flag: *mut c_int) -> c_int {
        api_anytime(|| {
            if flag.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            *flag = (PHASE.load(Ordering::Acquire) != PHASE_NONE) as c_int;
            Ok(())
        })
    }

    fn Finalized(flag: *mut c_int) -> c_int {
        api_anytime(|| {
            if flag.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            *flag = (PHASE.load(Ordering::Acquire) == PHASE_DONE) as c_int;
            Ok(())
        })
    }

    fn Abort(comm: abi::MPI_Comm, errorcode: c_int) -> c_int {
        let mut guard = lock();
        let msg = format!("MPI_Abort called with error code {errorcode} on communicator {:#x}", comm as usize);
        match guard.as_mut() {
            Some(g) => g.eng.abort(errorcode, &msg),
            None => {
                eprintln!("steadfast: {msg}");
                std::process::exit(if errorcode == 0 { 1 } else { errorcode & 0xff });
            }
        }
    }

    fn Query_thread(provided: *mut c_int) -> c_int {
        api("MPI_Query_thread", None, |g| {
            if provided.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "provided is NULL"));
            }
            *provided = g.thread_level;
            Ok(())
        })
    }

    fn Is_thread_main(flag: *mut c_int) -> c_int {
        api("MPI_Is_thread_main", None, |g| {
            if flag.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "flag is NULL"));
            }
            *flag = global::is_main_thread(g) as c_int;
            Ok(())
        })
    }

    fn Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
        api_anytime(|| {
            if version.is_null() || subversion.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            *version = abi::MPI_VERSION;
            *subversion = abi::MPI_SUBVERSION;
            Ok(())
        })
    }

    fn Get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int {
        api_anytime(|| {
            if version.is_null() || resultlen.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            *resultlen = write_cstr(version, LIBRARY_VERSION, abi::MPI_MAX_LIBRARY_VERSION_STRING as usize);
            Ok(())
        })
    }

    fn Abi_get_version(abi_major: *mut c_int, abi_minor: *mut c_int) -> c_int {
        api_anytime(|| {
            if abi_major.is_null() || abi_minor.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            *abi_major = abi::MPI_ABI_VERSION;
            *abi_minor = abi::MPI_ABI_SUBVERSION;
            Ok(())
        })
    }

    fn Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api_anytime(|| {
            if name.is_null() || resultlen.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            *resultlen = write_cstr(name, &hostname(), abi::MPI_MAX_PROCESSOR_NAME as usize);
            Ok(())
        })
    }

    fn Wtime() -> f64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

    fn Wtick() -> f64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts);
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

    fn Pcontrol(_level: c_int) -> c_int {
        abi::MPI_SUCCESS
    }

    fn Alloc_mem(size: abi::MPI_Aint, _info: abi::MPI_Info, baseptr: *mut c_void) -> c_int {
        api("MPI_Alloc_mem", None, |_| {
            if size < 0 {
                return Err(MpiError::new(ErrorClass::Size, format!("negative size {size}")));
            }
            if baseptr.is_null() {
                return Err(MpiError::new(ErrorClass::Arg, "baseptr is NULL"));
            }
            let p = libc::malloc((size as usize).max(1));
            if p.is_null() {
                return Err(MpiError::new(ErrorClass::NoMem, format!("cannot allocate {size} bytes")));
            }
            *(baseptr as *mut *mut c_void) = p;
            Ok(())
        })
    }

    fn Free_mem(base: *mut c_void) -> c_int {
        api("MPI_Free_mem", None, |_| {
            libc::free(base);
            Ok(())
        })
    }
}

/// Copy `s` into a C buffer of `cap` bytes with a terminating NUL; returns the length written.
///
/// # Safety
/// `dst` must be valid for `cap` bytes.
pub unsafe fn write_cstr(dst: *mut c_char, s: &str, cap: usize) -> c_int {
    let n = s.len().min(cap.saturating_sub(1));
    std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, dst, n);
    *dst.add(n) = 0;
    n as c_int
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is 256 bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut c_char, buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

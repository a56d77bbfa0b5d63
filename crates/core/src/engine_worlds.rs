//! Processes of other worlds of the job: the worlds `MPI_Comm_spawn` starts at run time
//! and, seen from one of them, its parents.
//!
//! Every process of a job has a job-wide index: the job's first world holds `0..N`, and
//! each spawned world the next block (`STEADFAST_PROC_BASE` is its first). The engine keeps
//! addressing peers by a local index: `0..size` are its own world's ranks (what the path
//! built at start-up serves), and the processes of other worlds get the indices from `size`
//! on, in the order this process first needed them. Their traffic goes over a TCP path of
//! its own (`steadfast_paths::bridge`), opened the first time this process takes part in a
//! spawn (or at start-up in a spawned process) and published in the launcher's job-wide
//! key-value space as `bridge.<index>`; the path built at start-up is left as it was.
//! Communicators only ever see local indices, so everything above (matching, collectives,
//! intercommunicators) works across worlds unchanged.

use super::*;

impl Engine {
    /// Job-wide process index of local peer index `peer` (`u32::MAX` for none).
    pub fn proc_index(&self, peer: u32) -> u32 {
        if peer < self.size {
            return self.proc_base + peer;
        }
        self.others.get((peer - self.size) as usize).copied().unwrap_or(u32::MAX)
    }

    /// Peers known here: the world's ranks and the processes of other worlds reached so far.
    pub fn known_peers(&self) -> usize {
        self.size as usize + self.others.len()
    }

    /// Job-wide index of this world's rank 0 (0 in the job's first world).
    pub fn proc_base(&self) -> u32 {
        self.proc_base
    }

    /// Sets the job-wide index of this world's rank 0 (before any other world is reached).
    pub fn set_proc_base(&mut self, base: u32) {
        self.proc_base = base;
    }

    /// Why processes cannot be started or reached from here, if they cannot.
    pub fn worlds_unsupported(&self) -> Option<String> {
        let Some(b) = self.boot.as_ref() else {
            return Some("this process was not started by a launcher (a singleton)".into());
        };
        if let Some(why) = b.spawn_unsupported() {
            return Some(why);
        }
        if self.st.ft.run_through || self.relaunch || self.coord.is_some() {
            return Some("dynamic processes are not supported in fault-tolerant modes (--ft run-through, relaunch, coordinated, pessimistic, causal)".into());
        }
        None
    }

    /// Opens this process's path to other worlds and publishes it, once.
    pub fn open_bridge(&mut self) -> MpiResult<()> {
        if self.bridged {
            return Ok(());
        }
        if let Some(why) = self.worlds_unsupported() {
            return mpi_err!(Spawn, "{why}");
        }
        let me = self.proc_base + self.rank;
        // The other worlds are on this host unless the job spans several: listen where
        // the launcher reaches us.
        let ip = match self.cfg.paths.control {
            Some(c) if !c.ip().is_loopback() => steadfast_paths::udp::local_address_towards(c)
                .map_err(|e| MpiError::new(ErrorClass::Spawn, format!("no address towards the launcher: {e}")))?,
            _ => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        };
        let key = self.job_key;
        let tcp = steadfast_paths::tcp::TcpPath::bind(&std::net::SocketAddr::new(ip, 0).to_string(), me, me + 1, key)
            .map_err(|e| MpiError::new(ErrorClass::Spawn, format!("opening the path to other worlds: {e}")))?;
        let contact = tcp.contact().map_err(|e| MpiError::new(ErrorClass::Spawn, e.to_string()))?;
        let b = self.boot.as_mut().ok_or_else(|| MpiError::new(ErrorClass::Spawn, "no launcher"))?;
        b.put_job(&format!("{}{me}", steadfast_runtime::server::BRIDGE_KEY), &contact).map_err(|e| MpiError::new(ErrorClass::Spawn, format!("publishing the path to other worlds: {e}")))?;
        let inner = self.net.take();
        self.net = Some(Box::new(steadfast_paths::bridge::Bridged::new(inner, self.size, tcp)));
        self.bridged = true;
        Ok(())
    }

    /// Local peer indices of the processes with job-wide indices `procs`, reaching those
    /// of other worlds first (their addresses come from the launcher; this blocks until
    /// each has published it).
    pub fn connect_procs(&mut self, procs: &[u32]) -> MpiResult<Vec<u32>> {
        let mut out = Vec::with_capacity(procs.len());
        for &p in procs {
            if (self.proc_base..self.proc_base + self.size).contains(&p) {
                out.push(p - self.proc_base);
                continue;
            }
            if let Some(i) = self.others.iter().position(|&o| o == p) {
                out.push(self.size + i as u32);
                continue;
            }
            self.open_bridge()?;
            let b = self.boot.as_mut().ok_or_else(|| MpiError::new(ErrorClass::Spawn, "no launcher"))?;
            let contact = b.get_job(&format!("{}{p}", steadfast_runtime::server::BRIDGE_KEY)).map_err(|e| MpiError::new(ErrorClass::Spawn, format!("reaching process {p}: {e}")))?;
            if contact.is_empty() {
                return mpi_err!(Spawn, "process {p} ended before it reached MPI_Init (is it an MPI program?)");
            }
            let local = self.size + self.others.len() as u32;
            let bridge = self.net.as_mut().ok_or_else(|| MpiError::new(ErrorClass::Spawn, "no path"))?;
            let got = bridge_add(bridge.as_mut(), p, &contact)?;
            debug_assert_eq!(got, local);
            self.others.push(p);
            self.grow_peers(local as usize + 1);
            out.push(local);
        }
        Ok(out)
    }

    /// Per-peer state for `n` local indices.
    fn grow_peers(&mut self, n: usize) {
        let st = &mut self.st;
        if st.outq.len() < n {
            st.outq.resize_with(n, VecDeque::new);
        }
        if st.pids.len() < n {
            st.pids.resize(n, 0);
        }
        if st.cma_ok.len() < n {
            st.cma_ok.resize(n, false);
        }
        if st.ft.dead.len() < n {
            st.ft.dead.resize(n, false);
        }
        if self.launcher_incarnation.len() < n {
            self.launcher_incarnation.resize(n, 0);
        }
        st.door.grow(n);
    }

    /// `MPI_Comm_spawn` at the root: the launcher starts `cmds` as a new world whose
    /// parents are `parents` (job-wide indices) over intercommunicator context `ctx`.
    /// Returns the new world's first job-wide index, one code per process (0: started)
    /// and the launcher's explanation.
    pub fn spawn_world(&mut self, ctx: u32, parents: Vec<u32>, cmds: Vec<steadfast_runtime::wire::SpawnCmd>) -> MpiResult<(u32, Vec<i32>, String)> {
        if let Some(why) = self.worlds_unsupported() {
            return mpi_err!(Spawn, "{why}");
        }
        let b = self.boot.as_mut().ok_or_else(|| MpiError::new(ErrorClass::Spawn, "no launcher"))?;
        b.spawn(ctx, parents, cmds).map_err(|e| MpiError::new(ErrorClass::Spawn, format!("the launcher: {e}")))
    }
}

/// Adds a process to the bridge `path` (which [`Engine::open_bridge`] installed).
fn bridge_add(path: &mut dyn Path, proc_index: u32, contact: &str) -> MpiResult<u32> {
    let any: &mut dyn std::any::Any = path.as_any_mut().ok_or_else(|| MpiError::new(ErrorClass::Spawn, "the path cannot reach other worlds"))?;
    let bridge = any
        .downcast_mut::<steadfast_paths::bridge::Bridged>()
        .ok_or_else(|| MpiError::new(ErrorClass::Spawn, "the path cannot reach other worlds"))?;
    bridge.add_peer(proc_index, contact).map_err(|e| MpiError::new(ErrorClass::Spawn, format!("process {proc_index}: {e}")))
}

impl Engine {
    /// The intercommunicator between this process's group `local` and processes of
    /// another world `remote` (local peer indices from [`Engine::connect_procs`]), over
    /// context `ctx` agreed beforehand (taken here, with the three after it).
    pub fn worlds_intercomm(&mut self, ctx: u32, local: Vec<u32>, remote: Vec<u32>, errhandler: u64) -> MpiResult<Handle> {
        self.claim_contexts(ctx, 4);
        self.new_inter(ctx, local, remote, errhandler)
    }
}

/// Context of the two-process communicators ports and `MPI_Comm_join` use to meet a process
/// that may be in another world, before any communicator joins them (with `+ 1` for their
/// collective traffic and `+ 2` for the hidden local one). Far above every agreed context.
pub const PORT_CTX: u32 = u32::MAX - 63;

impl Engine {
    /// An intercommunicator between this process alone and the process with job-wide index
    /// `peer` alone, on [`PORT_CTX`]: what two roots that met through a port (or a socket)
    /// talk over until they built a real intercommunicator. The same context serves every
    /// such pair, so callers keep their exchanges apart by tag. Release it with
    /// [`Engine::drop_port_channel`].
    pub fn port_channel(&mut self, peer: u32) -> MpiResult<Handle> {
        let l = self.connect_procs(&[peer])?[0];
        let me = self.rank;
        self.new_inter(PORT_CTX, vec![me], vec![l], 0)
    }

    /// Forgets a [`Engine::port_channel`]. Messages on the shared context stay queued for
    /// the other pairs that use it.
    pub fn drop_port_channel(&mut self, h: Handle) {
        if let Ok(c) = self.comm(h) {
            if let Some(l) = c.local {
                self.st.comms.remove(l);
            }
        }
        self.st.comms.remove(h);
    }
}

impl Engine {
    /// Adds the processes of other worlds whose packets the bridge holds because nobody
    /// told this process about them (they reached it through a port or `MPI_Comm_join`).
    /// They published their address before sending, so looking it up does not wait.
    pub(crate) fn adopt_strangers(&mut self) {
        let Some(net) = self.net.as_mut() else { return };
        let Some(bridge) = net.as_any_mut().and_then(|a| a.downcast_mut::<steadfast_paths::bridge::Bridged>()) else { return };
        let strangers = bridge.strangers();
        if strangers.is_empty() {
            return;
        }
        if let Err(e) = self.connect_procs(&strangers) {
            tracing::warn!("cannot reach processes {strangers:?} of another world: {e}");
        }
    }
}

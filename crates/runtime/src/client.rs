//! Bootstrap client: the rank's side of the control connection to `steadfast run`.

use crate::env::{FtMode, JobEnv, PathKind};
use crate::error::BootstrapError;
use crate::event::LauncherEvent;
use crate::wire::{handshake_mac, mac_eq, ClientMsg, FrameBuf, ServerMsg, HANDSHAKE_CHALLENGE, HANDSHAKE_PROOF, PROTOCOL_VERSION};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long `connect` keeps retrying a refused connection (the launcher listens before
/// it spawns, so refusals only happen if it died; a short bound is enough).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `abort` waits for the launcher's acknowledgement before returning anyway.
const ABORT_ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// A rank's connection to its launcher plus the job description from the environment.
#[derive(Debug)]
pub struct Bootstrap {
    env: JobEnv,
    stream: TcpStream,
    rbuf: FrameBuf,
    events: VecDeque<LauncherEvent>,
    fence_epoch: u64,
    finalized: bool,
    /// Set once the connection is known dead, so later calls fail fast.
    lost: bool,
}

impl Bootstrap {
    /// Reads the job from the environment and connects to the launcher. `Ok(None)` means
    /// the process was started without a launcher (singleton).
    pub fn from_env() -> Result<Option<Bootstrap>, BootstrapError> {
        match JobEnv::from_env()? {
            None => Ok(None),
            Some(env) => Self::connect(env).map(Some),
        }
    }

    /// Connects to `env.control` and authenticates with `env.job_key`.
    pub fn connect(env: JobEnv) -> Result<Bootstrap, BootstrapError> {
        let stream =
            TcpStream::connect_timeout(&env.control, CONNECT_TIMEOUT).map_err(|source| {
                BootstrapError::Connect {
                    addr: env.control,
                    source,
                }
            })?;
        // Requests are small and latency-bound (fence, get): do not let Nagle delay them.
        stream.set_nodelay(true)?;
        let mut bs = Bootstrap {
            env,
            stream,
            rbuf: FrameBuf::new(),
            events: VecDeque::new(),
            fence_epoch: 0,
            finalized: false,
            lost: false,
        };
        // Challenge-response: the job key itself never crosses the wire.
        let mut nonce = [0u8; 16];
        getrandom::getrandom(&mut nonce)
            .map_err(|e| BootstrapError::Protocol(format!("no random nonce: {e}")))?;
        // The launcher knows a process by its job-wide index (its world rank in the job's
        // first world).
        let (version, rank, key) = (PROTOCOL_VERSION, bs.env.proc_index(), bs.env.job_key);
        bs.send(&ClientMsg::Hello { version, rank, nonce })?;
        match bs.recv_reply() {
            Ok(ServerMsg::Challenge { nonce: theirs, mac }) => {
                let expected = handshake_mac(key, HANDSHAKE_CHALLENGE, version, rank, &nonce, &theirs);
                let genuine = mac_eq(&mac, &expected);
                // The proof goes out either way: a MAC over fresh nonces tells an impostor
                // nothing a recorded handshake would not, and a launcher that does know the
                // key (so our own key is wrong) can then name the cause in its refusal.
                let proof = handshake_mac(key, HANDSHAKE_PROOF, version, rank, &nonce, &theirs);
                bs.send(&ClientMsg::Proof { mac: proof })?;
                if !genuine {
                    // Our key is wrong, or this is not our launcher: nothing more is said.
                    return Err(BootstrapError::Rejected);
                }
            }
            Ok(other) => return Err(unexpected(&other)),
            Err(BootstrapError::Disconnected) | Err(BootstrapError::Launcher(_)) => {
                return Err(BootstrapError::Rejected)
            }
            Err(e) => return Err(e),
        }
        match bs.recv_reply() {
            Ok(ServerMsg::Welcome { size }) if size == bs.env.size => {}
            Ok(ServerMsg::Welcome { size }) => {
                return Err(BootstrapError::Protocol(format!(
                    "launcher says world size is {size}, environment says {}",
                    bs.env.size
                )))
            }
            Ok(other) => return Err(unexpected(&other)),
            Err(BootstrapError::Disconnected) | Err(BootstrapError::Launcher(_)) => {
                return Err(BootstrapError::Rejected)
            }
            Err(e) => return Err(e),
        }
        tracing::debug!(rank = bs.env.rank, control = %bs.env.control, "bootstrap connected");
        Ok(bs)
    }

    /// World rank.
    pub fn rank(&self) -> u32 {
        self.env.rank
    }
    /// World size.
    pub fn size(&self) -> u32 {
        self.env.size
    }
    /// Rank among the ranks on this host.
    pub fn local_rank(&self) -> u32 {
        self.env.local_rank
    }
    /// Number of ranks on this host.
    pub fn local_size(&self) -> u32 {
        self.env.local_size
    }
    /// Job identifier (hex string).
    pub fn jobid(&self) -> &str {
        &self.env.jobid
    }
    /// Job secret shared by all ranks of the job.
    pub fn job_key(&self) -> u64 {
        self.env.job_key
    }
    /// Private per-job directory (removed by the launcher at job end).
    pub fn jobdir(&self) -> &Path {
        &self.env.jobdir
    }
    /// Data path the ranks should use.
    pub fn path(&self) -> PathKind {
        self.env.path
    }
    /// Fault-tolerance mode of the job.
    pub fn ft(&self) -> FtMode {
        self.env.ft
    }
    /// Address of the launcher's control server.
    pub fn control_addr(&self) -> SocketAddr {
        self.env.control
    }
    /// The whole environment contract.
    pub fn job_env(&self) -> &JobEnv {
        &self.env
    }
    /// File descriptor of the control connection; readable when a launcher message
    /// (e.g. an event) is waiting, so a progress engine can include it in its poll set.
    pub fn event_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
    /// Absolute path for a file named `name` inside the job directory.
    pub fn jobdir_file(&self, name: &str) -> PathBuf {
        self.env.jobdir.join(name)
    }

    /// Publishes `key = value` for every rank. A later put of the same key replaces the
    /// value for later gets. Does not wait for the launcher: ordering on the connection
    /// guarantees a put is visible to any rank that passes a later fence with us.
    /// Keys are the world's own: a world started by `MPI_Comm_spawn` has its own keys
    /// (the launcher's space is shared by every world of the job; see [`Bootstrap::put_job`]).
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        let key = self.world_key(key);
        self.put_job(&key, value)
    }

    /// Returns the value of `key` in this world's keys, blocking until some rank has put it.
    pub fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        let key = self.world_key(key);
        self.get_job(&key)
    }

    /// `key` in this world's part of the key-value space: as is in the job's first world,
    /// `w<base>/key` in a world started by `MPI_Comm_spawn`.
    fn world_key(&self, key: &str) -> String {
        match self.env.proc_base {
            0 => key.to_owned(),
            b => format!("w{b}/{key}"),
        }
    }

    /// Publishes `key = value` in the key-value space every world of the job shares.
    pub fn put_job(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::Put {
            key: key.to_owned(),
            value: value.to_owned(),
        })
    }

    /// Returns the value of `key` in the job-wide key-value space, blocking until put.
    pub fn get_job(&mut self, key: &str) -> Result<String, BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::Get {
            key: key.to_owned(),
        })?;
        match self.recv_reply()? {
            ServerMsg::Value { key: k, value } if k == key => Ok(value),
            other => Err(unexpected(&other)),
        }
    }

    /// `MPI_Comm_spawn` at the root: asks the launcher to start `cmds` as a new world whose
    /// parents are `parents` (job-wide indices) over intercommunicator context `ctx`.
    /// Returns the new world's first job-wide index, one code per process (0: started) and
    /// the launcher's explanation when some did not start.
    pub fn spawn(&mut self, ctx: u32, parents: Vec<u32>, cmds: Vec<crate::wire::SpawnCmd>) -> Result<(u32, Vec<i32>, String), BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::Spawn { ctx, parents, cmds })?;
        match self.recv_reply()? {
            ServerMsg::Spawned { base, codes, msg } => Ok((base, codes, msg)),
            other => Err(unexpected(&other)),
        }
    }

    /// Barrier over all live ranks; puts made before it are visible to gets after it.
    pub fn fence(&mut self) -> Result<(), BootstrapError> {
        self.check_usable()?;
        let epoch = self.fence_epoch;
        self.send(&ClientMsg::Fence { epoch })?;
        match self.recv_reply()? {
            ServerMsg::FenceDone { epoch: e } if e == epoch => {
                self.fence_epoch += 1;
                Ok(())
            }
            other => Err(unexpected(&other)),
        }
    }

    /// A restarted rank announces that it joins the running job (after publishing its
    /// addresses); its fences continue at the job's current epoch.
    pub fn rejoin(&mut self) -> Result<(), BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::Rejoin)?;
        match self.recv_reply()? {
            ServerMsg::RejoinAck { fence_epoch } => {
                self.fence_epoch = fence_epoch;
                Ok(())
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Asks the launcher to print `msg`, tear the job down and exit with `code` (1 if
    /// `code` is 0). Returns once the launcher acknowledged (or after a few seconds if it
    /// did not); the caller should then exit. The launcher kills this process too.
    pub fn abort(&mut self, code: i32, msg: &str) {
        if self.lost {
            return;
        }
        let sent = self.send(&ClientMsg::Abort {
            code,
            msg: msg.to_owned(),
        });
        if sent.is_err() {
            return;
        }
        if self
            .stream
            .set_read_timeout(Some(ABORT_ACK_TIMEOUT))
            .is_err()
        {
            return;
        }
        match self.recv_reply() {
            Ok(ServerMsg::AbortAck) => {}
            other => tracing::debug!(?other, "no abort acknowledgement"),
        }
        let _ = self.stream.set_read_timeout(None);
    }

    /// Tells the launcher this rank reached MPI_Finalize and waits for it to be recorded,
    /// so the rank's later exit is not mistaken for a failure. Later calls fail.
    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::Finalize)?;
        match self.recv_reply()? {
            ServerMsg::FinalizeAck => {
                self.finalized = true;
                Ok(())
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Sends a coordinated-checkpoint protocol message to the checkpoint scheduler.
    pub fn send_recovery(&mut self, bytes: &[u8]) -> Result<(), BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::Recovery { bytes: bytes.to_vec() })
    }

    /// At the cut of checkpoint wave `wave`: waits until the launcher has taken in every
    /// byte this process wrote to its output before the call, so that after a rollback to
    /// this wave the launcher forwards only what comes after it.
    pub fn output_mark(&mut self, wave: u64) -> Result<(), BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::OutputMark { wave })?;
        match self.recv_reply()? {
            ServerMsg::OutputMarked { wave: w } if w == wave => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Asks the checkpoint scheduler for a wave now (`MPIX_Checkpoint`).
    pub fn checkpoint_now(&mut self) -> Result<(), BootstrapError> {
        self.check_usable()?;
        self.send(&ClientMsg::CheckpointNow)
    }

    /// Returns the launcher's asynchronous notices received so far, without blocking.
    /// A lost connection is reported once as [`LauncherEvent::Disconnected`].
    pub fn poll_events(&mut self) -> Vec<LauncherEvent> {
        if !self.lost {
            let read = self.read_available();
            // Frames that are not events cannot arrive without a request outstanding.
            loop {
                match self.next_frame() {
                    Ok(Some(ServerMsg::Event(ev))) => self.events.push_back(ev),
                    Ok(Some(other)) => {
                        tracing::warn!(?other, "unsolicited launcher message dropped");
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "bad frame from launcher");
                        self.mark_lost();
                        break;
                    }
                }
            }
            // Report the loss after the events that arrived before it.
            if let Err(e) = read {
                tracing::debug!(error = %e, "control connection lost while polling");
                self.mark_lost();
            }
        }
        self.events.drain(..).collect()
    }

    fn check_usable(&self) -> Result<(), BootstrapError> {
        if self.finalized {
            Err(BootstrapError::Finalized)
        } else if self.lost {
            Err(BootstrapError::Disconnected)
        } else {
            Ok(())
        }
    }

    fn mark_lost(&mut self) {
        if !self.lost {
            self.lost = true;
            self.events.push_back(LauncherEvent::Disconnected);
        }
    }

    fn send(&mut self, msg: &ClientMsg) -> Result<(), BootstrapError> {
        let frame = msg.encode()?;
        match self.stream.write_all(&frame) {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::debug!(error = %e, "write to launcher failed");
                self.mark_lost();
                Err(BootstrapError::Disconnected)
            }
        }
    }

    /// Decodes the next buffered frame, if complete.
    fn next_frame(&mut self) -> Result<Option<ServerMsg>, BootstrapError> {
        match self.rbuf.next_body()? {
            None => Ok(None),
            Some(body) => Ok(Some(ServerMsg::decode(&body)?)),
        }
    }

    /// Blocks until a non-event message arrives; events met on the way are queued.
    fn recv_reply(&mut self) -> Result<ServerMsg, BootstrapError> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.next_frame() {
                Ok(Some(ServerMsg::Event(ev))) => {
                    self.events.push_back(ev);
                    continue;
                }
                Ok(Some(ServerMsg::Error { msg })) => {
                    self.mark_lost();
                    return Err(BootstrapError::Launcher(msg));
                }
                Ok(Some(msg)) => return Ok(msg),
                Ok(None) => {}
                Err(e) => {
                    self.mark_lost();
                    return Err(e);
                }
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.mark_lost();
                    return Err(BootstrapError::Disconnected);
                }
                Ok(n) => self.rbuf.extend(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                        self.mark_lost();
                    }
                    return Err(BootstrapError::Io(e));
                }
            }
        }
    }

    /// Reads whatever bytes are available right now into the frame buffer.
    fn read_available(&mut self) -> Result<(), BootstrapError> {
        self.stream.set_nonblocking(true)?;
        let mut chunk = [0u8; 4096];
        let result = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break Err(BootstrapError::Disconnected),
                Ok(n) => self.rbuf.extend(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Err(BootstrapError::Io(e)),
            }
        };
        self.stream.set_nonblocking(false)?;
        result
    }
}

fn unexpected(msg: &ServerMsg) -> BootstrapError {
    BootstrapError::Protocol(format!("unexpected reply {msg:?}"))
}

//! The background control thread of one rank: drives the membership state machine with the
//! failure detector's inputs, over the control channel, and publishes views on the board.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use steadfast_membership::{Body, Event, Member, Membership, Message, Time, ViewId};

use super::board::{StopMode, ViewBoard};
use super::config::FtConfig;
use super::frame::{FrameKey, Kind};
use super::link::LauncherLink;
use super::mesh::{Mesh, MeshEvent, Tag};
use super::monitor::{Action, Monitor};
use super::trace::{RunDelay, Trace};
use super::{mono_now, FtError, EXIT_EXCLUDED};
use crate::event::LauncherEvent;

/// How often the launcher link is read even without a readiness signal (notices queued by
/// the other thread's blocking requests do not make the descriptor readable).
const LINK_RECHECK: Duration = Duration::from_millis(100);
/// Retry delay while the other thread holds the launcher link.
const LINK_BUSY_RETRY: Duration = Duration::from_millis(2);
/// Longest sleep of the loop, so a clock anomaly can never stall it for long.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// Loop turns allowed per [`PACE_WINDOW`] before the loop is paced (1 ms sleeps).
const PACE_LIMIT: u32 = 2000;
/// See [`PACE_LIMIT`].
const PACE_WINDOW: Duration = Duration::from_millis(100);
/// How long a graceful stop waits for its BYE frames to leave.
const GOODBYE_LIMIT: Duration = Duration::from_millis(200);

/// Why a rank was suspected (trace and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspectSource {
    /// The launcher saw the process exit.
    Launcher,
    /// Its control-channel connection broke.
    Connection,
    /// The MPI library reported it (reliable-layer retransmission exhaustion).
    Reliable,
    /// It stayed silent past the query timeout.
    Heartbeat,
}

impl SuspectSource {
    fn name(self) -> &'static str {
        match self {
            SuspectSource::Launcher => "launcher",
            SuspectSource::Connection => "connection",
            SuspectSource::Reliable => "reliable",
            SuspectSource::Heartbeat => "heartbeat",
        }
    }
}

/// A rank's control channel, bound but not yet running: publish [`Prepared::local_addr`]
/// before the job's fence, then [`Prepared::start`] with everybody's address.
#[derive(Debug)]
pub struct Prepared {
    cfg: FtConfig,
    rank: u32,
    size: u32,
    key: FrameKey,
    listener: TcpListener,
    addr: SocketAddr,
}

/// Binds the control channel of `rank` in a job of `size` ranks keyed with `job_key`.
pub fn prepare(cfg: FtConfig, rank: u32, size: u32, job_key: u64) -> Result<Prepared, FtError> {
    cfg.protocol
        .validate()
        .map_err(|e| FtError::Config(e.to_string()))?;
    if rank >= size {
        return Err(FtError::Config(format!(
            "rank {rank} is not below the size {size}"
        )));
    }
    let listener = TcpListener::bind((cfg.host, 0)).map_err(|e| FtError::Bind(cfg.host, e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| FtError::Bind(cfg.host, e))?;
    Ok(Prepared {
        cfg,
        rank,
        size,
        key: FrameKey::from_job_key(job_key),
        listener,
        addr,
    })
}

impl Prepared {
    /// The address peers connect to (publish it as [`super::kv_key`]`(rank)`).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts the control thread; `peers[r]` is rank r's control address.
    pub fn start(
        self,
        peers: Vec<Option<SocketAddr>>,
        link: Option<Box<dyn LauncherLink>>,
    ) -> Result<ControlThread, FtError> {
        let now = mono_now();
        let (wake_tx, wake_rx) = UnixStream::pair().map_err(FtError::Spawn)?;
        wake_tx.set_nonblocking(true).map_err(FtError::Spawn)?;
        wake_rx.set_nonblocking(true).map_err(FtError::Spawn)?;
        let board = Arc::new(ViewBoard::new(self.size, Some(wake_tx)));
        let machine = Membership::new(self.cfg.protocol.clone(), self.rank, self.size, now)
            .map_err(|e| FtError::Config(e.to_string()))?;
        let mut mesh =
            Mesh::new(self.rank, self.size, 0, self.key, self.listener).map_err(FtError::Spawn)?;
        mesh.set_addrs(peers);
        let mut trace = Trace::new(self.cfg.trace_dir.as_ref(), self.rank);
        trace.line(|| {
            format!(
                "start {} {} {} {}",
                now.as_nanos(),
                self.rank,
                self.size,
                self.cfg.protocol.fanout_log2
            )
        });
        let ctl = Control {
            me: self.rank,
            monitor: Monitor::new(self.cfg.heartbeat, self.cfg.suspect),
            cfg: self.cfg,
            machine,
            mesh,
            board: board.clone(),
            link,
            link_busy: false,
            link_check_at: now,
            link_muted: false,
            link_readable: false,
            noticed: BTreeMap::new(),
            wake_rx,
            trace,
            wake_runq: None,
        };
        let handle = std::thread::Builder::new()
            .name(format!("steadfast-ft-{}", self.rank))
            .spawn(move || ctl.run())
            .map_err(FtError::Spawn)?;
        Ok(ControlThread {
            board,
            handle: Some(handle),
        })
    }
}

/// The running control thread; dropping it stops it gracefully.
#[derive(Debug)]
pub struct ControlThread {
    board: Arc<ViewBoard>,
    handle: Option<JoinHandle<()>>,
}

impl ControlThread {
    /// The board the thread publishes views on.
    pub fn board(&self) -> &Arc<ViewBoard> {
        &self.board
    }

    /// Leaves normally (MPI_Finalize): peers are told, so they do not suspect this rank.
    pub fn stop(mut self) {
        self.finish(StopMode::Graceful);
    }

    /// Fault injection for tests: `Crash` closes every socket at once; `Freeze` keeps them
    /// open but stops answering (a hung process). Both keep the board as it was.
    #[doc(hidden)]
    pub fn inject(&self, fault: StopMode) {
        self.board.request_stop(fault);
    }

    fn finish(&mut self, mode: StopMode) {
        self.board.request_stop(mode);
        // Also ends a thread frozen by fault injection.
        self.board.end();
        if let Some(h) = self.handle.take() {
            if h.join().is_err() {
                tracing::error!("the membership control thread panicked");
            }
        }
    }
}

impl Drop for ControlThread {
    fn drop(&mut self) {
        self.finish(StopMode::Graceful);
    }
}

/// Poll-set entries of the loop.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Wake,
    Launcher,
    Mesh(Tag),
}

struct Control {
    me: u32,
    cfg: FtConfig,
    machine: Membership,
    mesh: Mesh,
    monitor: Monitor,
    board: Arc<ViewBoard>,
    link: Option<Box<dyn LauncherLink>>,
    link_busy: bool,
    link_check_at: Time,
    /// The launcher descriptor was readable but gave nothing: leave it out of the poll set
    /// until the next periodic check (a descriptor stuck readable must not spin the loop).
    link_muted: bool,
    /// The last poll reported the launcher descriptor readable.
    link_readable: bool,
    /// Launcher-noticed exits not reported yet: rank → when to report it anyway.
    noticed: BTreeMap<u32, Time>,
    wake_rx: UnixStream,
    trace: Trace,
    /// Run-queue wait of the last wake-up from `poll` (traces only).
    wake_runq: Option<u64>,
}

impl Control {
    fn run(mut self) {
        let sched = if self.cfg.realtime {
            set_realtime()
        } else if let Some("deadline") = self.cfg.deadline.map(|(r, p)| set_deadline(r, p)) {
            "deadline"
        } else if let Some(slice) = self.cfg.slice {
            set_short_slice(slice)
        } else {
            "default"
        };
        self.trace
            .line(|| format!("sched {} {}", mono_now().as_nanos(), sched));
        let runq = RunDelay::open(self.trace.on() && self.cfg.trace_sched);
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut slots: Vec<Slot> = Vec::new();
        let mut mesh_tags: Vec<Tag> = Vec::new();
        let now = mono_now();
        self.pump(now);
        // Whether the wake-up socket may hold bytes (it is read only then: a syscall less
        // per turn of the loop).
        let mut wake_ready = true;
        // Iterations in a row that found a deadline already due: a component that failed to
        // move its deadline must not turn the loop into a spin (the thread may be real-time).
        let mut due_in_a_row = 0u32;
        let mut window = (now, 0u32);
        // When the last poll returned, and the run-queue wait so far (traces only).
        let mut awake_since: Option<(u64, u64)> = None;
        let stop = loop {
            let now = mono_now();
            // Safety net under real-time priority: whatever the cause, a loop that turns far
            // faster than any protocol needs is paced, so it cannot starve other threads.
            if now.saturating_sub(window.0) >= PACE_WINDOW {
                window = (now, 0);
            }
            window.1 += 1;
            if window.1 == PACE_LIMIT {
                tracing::warn!("control loop turning too fast; pacing it");
            }
            if window.1 >= PACE_LIMIT {
                std::thread::sleep(Duration::from_millis(1));
            }
            if let Some(mode) = self.on_wake(now, std::mem::take(&mut wake_ready)) {
                break mode;
            }
            self.timers(now);
            self.pump(now);

            fds.clear();
            slots.clear();
            mesh_tags.clear();
            fds.push(pollfd(self.wake_rx.as_raw_fd()));
            slots.push(Slot::Wake);
            // Only the coordinator acts on a notice at once; the others hold it for the
            // grace anyway, so they read the link at its periodic check (LINK_RECHECK) rather
            // than being woken by it: a notice arrives while the view change it is about is
            // still under way, and waking every rank for it took CPU from that change.
            if !self.link_busy && !self.link_muted && self.coordinates() {
                if let Some(fd) = self.link.as_ref().and_then(|l| l.event_fd()) {
                    fds.push(pollfd(fd));
                    slots.push(Slot::Launcher);
                }
            }
            self.mesh.poll_set(&mut fds, &mut mesh_tags);
            slots.extend(mesh_tags.iter().map(|&t| Slot::Mesh(t)));
            debug_assert_eq!(fds.len(), slots.len());

            let mut timeout = self.next_wakeup(now).saturating_sub(now).min(MAX_SLEEP);
            if timeout.is_zero() {
                due_in_a_row += 1;
                if due_in_a_row > 100 {
                    tracing::warn!("control loop keeps finding due deadlines; pacing it");
                    timeout = Duration::from_millis(1);
                }
            } else {
                due_in_a_row = 0;
            }
            // Round up to whole milliseconds so a deadline 0.4 ms away is not a busy loop.
            let ms = timeout.as_micros().div_ceil(1000) as i32;
            let runq_before = runq.read();
            if let (Some((t0, q0)), Some(q1)) = (awake_since, runq_before) {
                // A turn of the loop that took long: was the thread preempted (run-queue
                // wait) or blocked (the rest)?
                let t1 = super::mono_ns();
                if t1.saturating_sub(t0) > 100_000 {
                    self.trace
                        .line(|| format!("busy {} {} {}", t1, t1 - t0, q1.saturating_sub(q0)));
                }
            }
            // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd structs.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            let runq_after = runq.read();
            self.wake_runq = runq_after
                .zip(runq_before)
                .map(|(a, b)| a.saturating_sub(b));
            awake_since = runq_after.map(|q| (super::mono_ns(), q));
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != ErrorKind::Interrupted {
                    tracing::error!(error = %e, "control thread poll failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            let now = mono_now();
            for (pfd, slot) in fds.iter().zip(slots.iter()) {
                if pfd.revents == 0 {
                    continue;
                }
                match *slot {
                    Slot::Wake => wake_ready = true,
                    Slot::Launcher => {
                        self.link_check_at = now;
                        self.link_readable = true;
                    }
                    Slot::Mesh(tag) => {
                        self.mesh.ready(now, tag, pfd.revents);
                        // Handle each socket's frames at once: the next socket's may depend on them.
                        self.pump(now);
                    }
                }
            }
        };
        self.shutdown(stop);
    }

    fn next_wakeup(&self, now: Time) -> Time {
        let link = if self.link.is_none() {
            None
        } else if self.link_busy {
            Some(now + LINK_BUSY_RETRY)
        } else {
            Some(self.link_check_at)
        };
        [
            self.machine.poll_timeout(),
            self.monitor.next_deadline(),
            self.mesh.next_deadline(),
            self.noticed.values().min().copied(),
            link,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(now + MAX_SLEEP)
    }

    /// Drains the wake-up socket and the board's inbox; returns a stop request.
    fn on_wake(&mut self, now: Time, drain: bool) -> Option<StopMode> {
        let mut buf = [0u8; 64];
        while drain && matches!((&self.wake_rx).read(&mut buf), Ok(n) if n > 0) {}
        let inbox = self.board.take_inbox();
        for r in inbox.suspects {
            self.suspect(now, r, None, SuspectSource::Reliable);
        }
        inbox.stop
    }

    fn timers(&mut self, now: Time) {
        if self.machine.poll_timeout().is_some_and(|t| t <= now) {
            self.machine.handle_timeout(now);
        }
        let mut actions = Vec::new();
        self.monitor.poll(now, &mut actions);
        for a in actions {
            match a {
                Action::Query(id) => {
                    let payload = self.view_stamp();
                    self.mesh.send(now, id, Kind::HowAreYou, &payload);
                }
                Action::Suspect(m) => {
                    self.suspect(now, m.id, Some(m.incarnation), SuspectSource::Heartbeat)
                }
            }
        }
        self.mesh.expire(now);
        let due: Vec<u32> = self
            .noticed
            .iter()
            .filter(|(_, &t)| t <= now)
            .map(|(&r, _)| r)
            .collect();
        for r in due {
            self.noticed.remove(&r);
            self.suspect(now, r, None, SuspectSource::Launcher);
        }
        if self.link.is_some() && (self.link_busy || now >= self.link_check_at) {
            self.poll_launcher(now);
        }
    }

    fn poll_launcher(&mut self, now: Time) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        match link.try_poll() {
            None => self.link_busy = true,
            Some(events) => {
                self.link_busy = false;
                self.link_check_at = now + LINK_RECHECK;
                self.link_muted = self.link_readable && events.is_empty();
                self.link_readable = false;
                for ev in events {
                    match ev {
                        LauncherEvent::RankExited {
                            rank,
                            finalized: false,
                            status,
                        } => {
                            tracing::debug!(rank, %status, "launcher: rank exited");
                            self.on_notice(now, rank);
                        }
                        LauncherEvent::RankExited { .. } => {}
                        LauncherEvent::Recovery { .. } => {}
                        // Relaunch mode runs without the membership service (the engine
                        // takes the launcher's notices itself).
                        LauncherEvent::RankRejoined { .. } => {}
                        LauncherEvent::Disconnected => {
                            // The launcher is gone (the job is ending); its descriptor would
                            // stay readable at end-of-file, so stop watching it.
                            tracing::debug!("launcher connection lost; no more launcher notices");
                            self.link = None;
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Whether this rank is the coordinator (the lowest member not noticed dead), the one
    /// that acts on a launcher notice at once.
    fn coordinates(&self) -> bool {
        self.coordinator() == Some(self.me)
    }

    fn coordinator(&self) -> Option<u32> {
        let v = self.machine.view()?;
        v.members()
            .map(|m| m.id)
            .find(|id| !self.noticed.contains_key(id))
    }

    /// The launcher tells every survivor, so the reports would all converge on the root:
    /// only the coordinator (the lowest member not noticed dead) acts at once, the others
    /// after the grace if no view without the rank arrived (the coordinator may be dead too,
    /// or have missed the notice).
    fn on_notice(&mut self, now: Time, rank: u32) {
        self.trace
            .line(|| format!("notice {} {}", now.as_nanos(), rank));
        let Some(v) = self.machine.view() else { return };
        if rank == self.me || !v.contains(rank) || self.mesh.is_departed(rank) {
            return;
        }
        self.noticed
            .entry(rank)
            .or_insert(now + self.cfg.notice_grace);
        if self.coordinates() {
            let all: Vec<u32> = std::mem::take(&mut self.noticed).into_keys().collect();
            for r in all {
                self.suspect(now, r, None, SuspectSource::Launcher);
            }
        }
    }

    fn suspect(&mut self, now: Time, rank: u32, incarnation: Option<u32>, source: SuspectSource) {
        if rank == self.me || self.mesh.is_departed(rank) {
            return;
        }
        let in_view = self.machine.view().is_some_and(|v| v.contains(rank));
        self.trace
            .line(|| format!("suspect {} {} {}", now.as_nanos(), rank, source.name()));
        if !in_view {
            return;
        }
        tracing::debug!(me = self.me, rank, source = source.name(), "suspect");
        self.monitor.forget(rank);
        match incarnation {
            Some(i) => self.machine.suspect_member(now, Member::new(rank, i)),
            None => self.machine.suspect(now, rank),
        }
        // The caller pumps: the reports leave with the next `pump`.
    }

    fn send_out(&mut self, now: Time) {
        while let Some(t) = self.machine.poll_transmit() {
            self.mesh
                .send(now, t.to, Kind::Membership, &t.message.encode());
        }
    }

    /// Moves everything until quiet: socket events into the machine, the machine's messages
    /// onto the sockets, its events onto the board.
    fn pump(&mut self, now: Time) {
        loop {
            self.send_out(now);
            let mut busy = false;
            while let Some(ev) = self.machine.poll_event() {
                busy = true;
                self.on_event(now, ev);
            }
            if let Some(ev) = self.mesh.next_event() {
                busy = true;
                self.on_mesh(now, ev);
            }
            if !busy {
                break;
            }
        }
    }

    fn on_mesh(&mut self, now: Time, ev: MeshEvent) {
        match ev {
            MeshEvent::Broken {
                peer,
                incarnation,
                why,
            } => {
                tracing::debug!(me = self.me, peer, %why, "control connection broke");
                self.suspect(now, peer, incarnation, SuspectSource::Connection);
            }
            MeshEvent::Frame(f, rx_ns) => {
                let from = f.from;
                self.monitor.heard(now, from);
                match f.kind {
                    Kind::Membership => {
                        let msg = match Message::decode(&f.payload) {
                            Ok(m) => m,
                            Err(e) => {
                                tracing::warn!(from, error = %e, "undecodable membership message dropped");
                                return;
                            }
                        };
                        let name = msg.body.name();
                        let t_ns = rx_ns;
                        let runq = self.wake_runq;
                        self.trace.line(|| {
                            format!(
                                "rx {} {} {} {} {}",
                                t_ns,
                                from,
                                name,
                                t_ns.saturating_sub(f.sent_ns),
                                runq.map_or("-".to_string(), |r| r.to_string())
                            )
                        });
                        self.machine.handle(now, from, msg);
                        // Its answers leave now: handling time includes them (Ocp).
                        self.send_out(now);
                        if self.trace.on() {
                            let done = mono_now().as_nanos() as u64;
                            self.trace.line(|| {
                                format!(
                                    "handled {} {} {} {}",
                                    done,
                                    from,
                                    name,
                                    done.saturating_sub(t_ns)
                                )
                            });
                        }
                    }
                    Kind::HowAreYou => {
                        self.mesh.send(now, from, Kind::IAmAlive, &[]);
                        self.on_view_stamp(now, from, &f.payload);
                    }
                    Kind::Bye => self.monitor.forget(from),
                    Kind::Hello | Kind::IAmAlive => {}
                }
            }
        }
    }

    fn on_event(&mut self, now: Time, ev: Event) {
        match ev {
            Event::ViewInstalled { view_id, members } => {
                let ranks: Vec<u32> = members.iter().map(|m| m.id).collect();
                let t = now.as_nanos();
                self.trace.line(|| {
                    format!(
                        "install {} {} {} {}",
                        t,
                        view_id.epoch,
                        view_id.coordinator,
                        ranks.len()
                    )
                });
                tracing::debug!(me = self.me, %view_id, members = ranks.len(), "view installed");
                if view_id != ViewId::INITIAL {
                    self.board.publish(view_id, ranks, t as u64);
                    if let Some(link) = self.link.as_mut() {
                        let failed = self.board.snapshot().failed;
                        if !failed.is_empty() {
                            link.on_failures(&failed);
                        }
                    }
                }
                if let Some(v) = self.machine.view() {
                    self.noticed.retain(|r, _| v.contains(*r));
                }
                self.rewatch(now);
            }
            Event::StabilizationComplete {
                view_id,
                installed_at,
            } => {
                let ts = now.saturating_sub(installed_at);
                let n = self.machine.view().map_or(0, |v| v.len());
                self.trace.line(|| {
                    format!(
                        "stable {} {} {} {}",
                        now.as_nanos(),
                        view_id.epoch,
                        ts.as_nanos(),
                        n
                    )
                });
                tracing::debug!(me = self.me, %view_id, ts_us = ts.as_micros() as u64, "view stabilized");
            }
            Event::Excluded { view_id } => {
                self.trace
                    .line(|| format!("excluded {} {}", now.as_nanos(), view_id.epoch));
                self.board.set_excluded();
                self.monitor.watch(now, &[]);
                if self.cfg.exit_when_excluded {
                    self.trace.flush();
                    eprintln!(
                        "steadfast: rank {} was declared failed by the other ranks (view {view_id}); leaving the job",
                        self.me
                    );
                    // A process the group declared failed must stay failed (fail-stop).
                    // SAFETY: _exit ends the process at once; nothing runs after it.
                    unsafe { libc::_exit(EXIT_EXCLUDED) };
                }
                tracing::warn!(me = self.me, %view_id, "this rank was excluded from the group");
            }
        }
    }

    /// A query carries the sender's view as a membership `Sync`, so a process left behind
    /// (excluded by a false suspicion, or missing a view change) hears of it from the
    /// neighbour it queries, even in the start-up view where the machine sends no Sync.
    fn view_stamp(&self) -> Vec<u8> {
        match self.machine.view_id() {
            Some(view) => Message {
                sender_incarnation: self.machine.incarnation(),
                body: Body::Sync { view },
            }
            .encode(),
            None => Vec::new(),
        }
    }

    fn on_view_stamp(&mut self, now: Time, from: u32, payload: &[u8]) {
        if payload.is_empty() {
            return;
        }
        match Message::decode(payload) {
            Ok(
                msg @ Message {
                    body: Body::Sync { .. },
                    ..
                },
            ) => {
                let differs =
                    matches!(msg.body, Body::Sync { view } if Some(view) != self.machine.view_id());
                if differs {
                    self.machine.handle(now, from, msg);
                }
            }
            Ok(_) | Err(_) => tracing::warn!(from, "query with a malformed view stamp ignored"),
        }
    }

    /// Watches the tree neighbours of the current view, and opens the connections to the
    /// children now: a crash is then seen through them at once, and the next view change
    /// does not pay for connecting (parents have lower ids, so each edge gets one connection).
    fn rewatch(&mut self, now: Time) {
        let mut watch = Vec::new();
        let children = self
            .machine
            .view()
            .map(|v| v.children(self.me))
            .unwrap_or_default();
        let stamp = self.view_stamp();
        for c in children {
            if !self.mesh.has_route(c) && !self.mesh.is_departed(c) {
                self.mesh.send(now, c, Kind::HowAreYou, &stamp);
            }
        }
        if let Some(v) = self.machine.view() {
            let me = self.me;
            let neighbours = v.parent(me).into_iter().chain(v.children(me));
            for id in neighbours {
                if let Some(inc) = v.incarnation(id) {
                    if !self.mesh.is_departed(id) {
                        watch.push(Member::new(id, inc));
                    }
                }
            }
        }
        self.monitor.watch(now, &watch);
    }

    fn shutdown(mut self, mode: StopMode) {
        let now = mono_now();
        match mode {
            StopMode::Graceful => self.mesh.goodbye(now, GOODBYE_LIMIT),
            StopMode::Crash => {}
            StopMode::Freeze => {
                // Keep every socket open and answer nothing until told to end.
                while !self.board.is_ended() {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        let foreign = self.mesh.foreign;
        self.trace
            .line(|| format!("stop {} {}", mono_now().as_nanos(), foreign));
        self.trace.flush();
    }
}

/// Moves the calling thread to real-time priority 1 (`STEADFAST_FT_RT=1`), if permitted.
/// Round-robin rather than FIFO: control threads of one host share the lowest real-time
/// level, and round-robin keeps them taking turns.
fn set_realtime() -> &'static str {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: plain call on the current thread with a valid parameter block.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_RR, &param) };
    if rc != 0 {
        tracing::debug!(
            errno = rc,
            "real-time priority for the control thread refused; keeping the default"
        );
        return "default";
    }
    "realtime"
}

/// Moves the calling thread to the deadline scheduler with `runtime` of CPU per `period`
/// (see [`super::config::FT_DL_RUNTIME_US`]), if permitted and admitted by the kernel.
fn set_deadline(runtime: Duration, period: Duration) -> &'static str {
    const SCHED_DEADLINE: u32 = 6;
    let ns = |d: Duration| d.as_nanos().min(u64::MAX as u128) as u64;
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: SCHED_DEADLINE,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: ns(runtime),
        deadline: ns(period),
        period: ns(period),
    };
    // Refused with EPERM without privilege or with a CPU affinity narrower than the
    // machine, EBUSY when the kernel's deadline bandwidth is taken.
    set_attr(&attr, "deadline scheduling", "deadline")
}

/// `struct sched_attr` of `sched_setattr(2)` (the first version, 48 bytes).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Asks the fair scheduler for a short time slice for the calling thread
/// (`STEADFAST_FT_SLICE_US`): the thread keeps the normal policy and nice value, so it gets
/// no more CPU than any other thread, but since Linux 6.12 a woken thread with a shorter
/// slice than the running one preempts it instead of queueing behind the rest of the
/// running thread's slice (about 1.5 ms on two cores) — which is what a hop of the
/// membership protocol otherwise waits on a busy machine. Needs no privilege; older
/// kernels ignore the slice.
fn set_short_slice(slice: Duration) -> &'static str {
    // SAFETY: getpriority on the calling thread (tid 0 = self) reads its nice value.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: slice.as_nanos().min(u64::MAX as u128) as u64,
        deadline: 0,
        period: 0,
    };
    set_attr(&attr, "short scheduler slice", "short-slice")
}

/// Applies `attr` to the calling thread; returns `name` (for the trace), or "default" when
/// the kernel refuses, in which case the thread keeps its scheduling.
fn set_attr(attr: &SchedAttr, what: &str, name: &'static str) -> &'static str {
    // SAFETY: sched_setattr on the calling thread (pid 0) with a valid, sized attribute block.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, attr as *const SchedAttr, 0) };
    if rc != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "{what} for the control thread refused; keeping the default"
        );
        return "default";
    }
    name
}

fn pollfd(fd: std::os::fd::RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

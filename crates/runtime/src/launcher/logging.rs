//! The launcher in the message-logging modes (`--ft pessimistic`, `--ft causal`): it hosts
//! the event logger of `steadfast-logging` (determinants from the ranks' control
//! connections, journals under the job's log directory, acknowledgements back), starts a
//! failed rank again (the relaunch policy) while the others run, and forwards the new
//! process's output only past what the earlier processes of that rank forwarded (a
//! re-execution writes the same bytes again).
//!
//! With `--ckpt-interval` it is also the checkpoint scheduler of these modes: every
//! interval it asks one rank (round robin, at random with `--ckpt-policy random`, or with
//! `--ckpt-policy best-effort` the rank whose image would free the most of the others'
//! sender-based logs, from the sizes the ranks reported when last asked) for a process
//! image of itself; a rank that fails later is restored from its newest image the event
//! logger accepted, and its output is forwarded from the image's position on.
//!
//! With `--event-logger HOST:PORT` the event logger is a standalone server
//! (`crate::event_logger`): the launcher relays the ranks' messages to it and its answers
//! back, and keeps the connection up.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use steadfast_logging::{EventLogger, FromLogger, ToLogger};

use super::output::{LineBuffer, OutPos, StreamKind};
use super::Launcher;
use crate::event::LauncherEvent;
use crate::event_logger::{self, Journals, LinkNews, RemoteLogger};
use crate::wire::ServerMsg;

/// Where the event logger runs.
enum Backend {
    /// In the launcher, its journals in the log directory.
    Local(EventLogger, Journals),
    /// A standalone server.
    Remote(RemoteLogger),
}

/// The launcher's message-logging state.
pub(super) struct Logging {
    backend: Backend,
    /// Journals of the launcher's own event logger (`rank-R.events`), and process images.
    pub(super) dir: PathBuf,
    /// Remove `dir` when the job ends well (it was not chosen by the user).
    temporary: bool,
    /// [rank] the number of the image a new process of the rank restores (the logger's
    /// newest acceptance), and the last image the rank reported (number, events it holds).
    kept: Vec<Option<u64>>,
    reported: Vec<Option<(u64, u64)>>,
    /// [rank][stream] output positions.
    out: Vec<[OutPos; 2]>,
    /// Partial last lines of processes that ended, continued by the rank's next process.
    pub(super) carry: Vec<[Option<LineBuffer>; 2]>,
    /// Process images of single ranks (`--ckpt-interval`), else None.
    images: Option<ImageSchedule>,
    /// `--ft channel-memory`: the servers' addresses, as the ranks get them.
    cm_addrs: Option<String>,
    /// Standalone servers: the file of their key.
    cm_key_file: Option<PathBuf>,
    /// The launcher's own servers' counters, for `STEADFAST_STATS=1`.
    cm_stats: Vec<Box<dyn Fn() -> Option<steadfast_logging::channel::ChannelStats> + Send>>,
}

/// Which rank the checkpoint scheduler asks next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImagePolicy {
    RoundRobin,
    Random,
    /// MPICH-V2's best-effort policy: the rank whose image frees the most logged bytes.
    BestEffort,
}

/// The checkpoint scheduler of the logging modes.
struct ImageSchedule {
    interval: Duration,
    policy: ImagePolicy,
    next_at: Instant,
    /// Round robin: the rank asked last.
    last: u32,
    /// Random: the generator's state.
    rng: u64,
    /// [rank] → image number → stdout/stderr positions when it was taken.
    marks: Vec<HashMap<u64, [u64; 2]>>,
    /// Best effort: each rank's last report of its log's bytes by destination.
    sizes: Vec<Vec<u64>>,
}

impl ImageSchedule {
    /// Best effort: of the ranks `live` says may be asked, the one whose image would free
    /// the most bytes of the others' logs (messages sent to it), by the last reports; None
    /// when no report names any logged byte for them (then the turn goes round robin).
    fn best_effort(&self, live: &[bool]) -> Option<(u32, u64)> {
        let np = live.len();
        let mut best: Option<(u64, u32)> = None;
        // In turn order from the rank after the one asked last: among equals, turns go round.
        for i in 0..np {
            let r = (self.last as usize + 1 + i) % np;
            if !live[r] {
                continue;
            }
            let freed: u64 = self.sizes.iter().map(|per_dest| per_dest.get(r).copied().unwrap_or(0)).sum();
            if freed > 0 && best.is_none_or(|(f, _)| freed > f) {
                best = Some((freed, r as u32));
            }
        }
        best.map(|(f, r)| (r, f))
    }
}

impl Logging {
    pub(super) fn new(np: u32, dir: Option<PathBuf>, jobid: &str, images: Option<(Duration, ImagePolicy)>) -> std::io::Result<Logging> {
        let (dir, temporary) = match dir {
            Some(d) => (d, false),
            None => (std::env::temp_dir().join(format!("steadfast-log-{jobid}")), true),
        };
        std::fs::create_dir_all(&dir)?;
        Ok(Logging {
            backend: Backend::Local(EventLogger::new(np), Journals::new(&dir, np, false)),
            dir,
            temporary,
            kept: vec![None; np as usize],
            reported: vec![None; np as usize],
            out: vec![[OutPos::default(); 2]; np as usize],
            carry: (0..np).map(|_| [None, None]).collect(),
            images: images.map(|(interval, policy)| ImageSchedule {
                interval,
                policy,
                next_at: Instant::now() + interval,
                last: np.saturating_sub(1),
                // Seeded by the clock: which rank is asked is no part of the result.
                rng: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1,
                marks: vec![HashMap::new(); np as usize],
                sizes: vec![Vec::new(); np as usize],
            }),
            cm_addrs: None,
            cm_key_file: None,
            cm_stats: Vec::new(),
        })
    }

    /// Relay to the standalone event logger at `addr`, whose key is in `key_file`.
    pub(super) fn use_event_logger(&mut self, addr: &str, key_file: &std::path::Path, np: u32, jobid: &str) -> std::io::Result<()> {
        let key = crate::ckpt_store::read_key_file(key_file)?;
        self.backend = Backend::Remote(RemoteLogger::connect(addr, key, np, jobid)?);
        Ok(())
    }

    /// `--ft channel-memory` with standalone servers at `addrs` whose key is in `key_file`.
    pub(super) fn use_channel_memories(&mut self, addrs: String, key_file: PathBuf) {
        self.cm_addrs = Some(addrs);
        self.cm_key_file = Some(key_file);
    }

    /// `--ft channel-memory`: start `count` channel memory servers on threads of the
    /// launcher, listening on `ip`; server `i` keeps the streams of ranks `r` with
    /// `r mod count == i`. Their key derives from the job key.
    pub(super) fn start_channel_memories(&mut self, np: u32, count: u32, ip: std::net::IpAddr, job_key: u64) -> std::io::Result<()> {
        let count = count.clamp(1, np.max(1));
        let key = steadfast_paths::cm::key_of_job(job_key);
        let mut addrs = Vec::new();
        for i in 0..count {
            let hosted: Vec<u32> = (0..np).filter(|r| r % count == i).collect();
            let server = crate::channel_memory::CmServer::bind(std::net::SocketAddr::new(ip, 0), key, np, hosted)?;
            addrs.push(server.local_addr()?.to_string());
            self.cm_stats.push(Box::new(server.stats_reader()));
            server.spawn()?;
        }
        self.cm_addrs = Some(addrs.join(","));
        Ok(())
    }

    /// Whether ranks take process images of themselves (then they start without address
    /// space randomization, which images need).
    pub(super) fn images_on(&self) -> bool {
        self.images.is_some()
    }

    fn image_path(&self, rank: u32, number: u64) -> PathBuf {
        self.dir.join(format!("rank-{rank}.img-{number}"))
    }

    /// The environment of rank `rank`'s process: where images go, and for a process that
    /// replaces a failed one, the image to restore.
    pub(super) fn rank_env(&self, rank: u32) -> Vec<(OsString, OsString)> {
        let mut v = Vec::new();
        if let Some(a) = &self.cm_addrs {
            v.push((crate::env::CM_ADDRS.into(), a.into()));
        }
        if let Some(f) = &self.cm_key_file {
            v.push((crate::env::CM_KEY_FILE.into(), f.clone().into_os_string()));
        }
        if self.images.is_some() {
            v.push((crate::env::MLOG_IMAGES.into(), self.dir.clone().into_os_string()));
            if let Some(number) = self.kept.get(rank as usize).copied().flatten() {
                v.push(("STEADFAST_RESTORE_IMAGE".into(), self.image_path(rank, number).into_os_string()));
            }
        }
        v
    }

    /// Of `data` just read from rank `rank`'s `kind` stream, the part not forwarded before.
    pub(super) fn fresh<'a>(&mut self, rank: usize, kind: StreamKind, data: &'a [u8]) -> &'a [u8] {
        match self.out.get_mut(rank) {
            Some(o) => o[kind as usize].fresh(data),
            None => data,
        }
    }

    /// Bytes read so far from rank `rank`'s current process on stream `kind`.
    pub(super) fn read_of(&self, rank: usize, kind: StreamKind) -> Option<u64> {
        self.out.get(rank).map(|o| o[kind as usize].read)
    }
}

impl Launcher {
    /// A message from rank `rank` to the event logger.
    pub(super) fn mlog_recovery(&mut self, rank: u32, bytes: &[u8]) {
        let Some(l) = self.mlog.as_mut() else { return };
        let msg = match ToLogger::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(rank, error = %e, "malformed message for the event logger");
                return;
            }
        };
        match &msg {
            ToLogger::LogSizes { bytes } => {
                if let Some(slot) = l.images.as_mut().and_then(|s| s.sizes.get_mut(rank as usize)) {
                    *slot = bytes.clone();
                }
                return;
            }
            ToLogger::Checkpointed { number, clock, .. } => {
                if let Some(r) = l.reported.get_mut(rank as usize) {
                    *r = Some((*number, *clock));
                }
            }
            _ => {}
        }
        let mut answers = Vec::new();
        let mut news = None;
        match &mut l.backend {
            Backend::Local(logger, journals) => {
                logger.handle(rank, msg);
                event_logger::make_durable(logger, journals);
                while let Some(t) = logger.poll_transmit() {
                    answers.push((t.to, t.message));
                }
            }
            Backend::Remote(link) => news = link.send(rank, &msg, bytes),
        }
        for (to, m) in answers {
            self.mlog_answer(to, m);
        }
        if let Some(n) = news {
            self.mlog_link_news(n);
        }
        self.pump_core();
    }

    /// The event logger's answer `msg` to rank `rank`: note an image it kept, pass it on.
    fn mlog_answer(&mut self, rank: u32, msg: FromLogger) {
        let Some(l) = self.mlog.as_mut() else { return };
        if let FromLogger::ImageKept { number } = msg {
            let r = rank as usize;
            let before = l.kept.get(r).copied().flatten();
            if before.is_none_or(|b| number > b) {
                if let Some(k) = l.kept.get_mut(r) {
                    *k = Some(number);
                }
                // The older images of the rank are never restored now.
                if let Some(old) = before {
                    let _ = std::fs::remove_file(l.image_path(rank, old));
                }
                if let Some(m) = l.images.as_mut().and_then(|s| s.marks.get_mut(r)) {
                    m.retain(|n, _| *n >= number);
                }
                if self.cfg.verbose {
                    let events = l.reported.get(r).copied().flatten().filter(|(n, _)| *n == number).map_or(String::new(), |(_, c)| format!(" ({c} events)"));
                    self.stderr_sink.message(&format!("steadfast run: rank {rank} stored process image {number}{events}"));
                }
            }
        }
        self.core.send_to(rank, ServerMsg::Event(LauncherEvent::Recovery { bytes: msg.encode() }));
    }

    /// What the link to a standalone event logger had to say.
    fn mlog_link_news(&mut self, news: LinkNews) {
        let addr = match self.mlog.as_ref().map(|l| &l.backend) {
            Some(Backend::Remote(link)) => link.addr().to_owned(),
            _ => return,
        };
        match news {
            LinkNews::Lost(why) => self.stderr_sink.message(&format!("steadfast run: lost the event logger at {addr} ({why}); connecting again")),
            LinkNews::Back => self.stderr_sink.message(&format!("steadfast run: connected to the event logger at {addr} again")),
            LinkNews::GaveUp(why) => {
                self.stderr_sink.message(&format!("steadfast run: {why}; ending the job"));
                self.exit_code.get_or_insert(super::EXIT_SETUP);
                self.begin_teardown(libc::SIGTERM, Instant::now());
            }
        }
    }

    /// The standalone event logger's descriptor to poll (and whether for writing too).
    pub(super) fn mlog_poll_fd(&self) -> Option<(std::os::fd::RawFd, bool)> {
        match self.mlog.as_ref().map(|l| &l.backend) {
            Some(Backend::Remote(link)) => link.poll_fd(),
            _ => None,
        }
    }

    /// The standalone event logger's connection is ready.
    pub(super) fn mlog_link_ready(&mut self, readable: bool, writable: bool) {
        let Some(Backend::Remote(link)) = self.mlog.as_mut().map(|l| &mut l.backend) else { return };
        let mut news = if writable { link.flush() } else { None };
        let mut answers = Vec::new();
        if readable && news.is_none() {
            let (got, n) = link.readable();
            answers = got;
            news = n;
        }
        for (to, m) in answers {
            self.mlog_answer(to, m);
        }
        if let Some(n) = news {
            self.mlog_link_news(n);
        }
        self.pump_core();
    }

    /// Rank `idx` is about to be started again: its new process writes its output again
    /// from the beginning, or from its image's position. Returns the image's number.
    pub(super) fn mlog_restarting(&mut self, idx: usize) -> Option<u64> {
        // What the ended process's pipes still hold is its output, not the new one's.
        self.pipe_readable(idx, StreamKind::Stdout);
        self.pipe_readable(idx, StreamKind::Stderr);
        let l = self.mlog.as_mut()?;
        let image = l.kept.get(idx).copied().flatten().filter(|_| l.images.is_some());
        let base = image.and_then(|n| l.images.as_ref().and_then(|s| s.marks.get(idx)).and_then(|m| m.get(&n)).copied()).unwrap_or([0, 0]);
        if let Some(o) = l.out.get_mut(idx) {
            o[0].restart(base[0]);
            o[1].restart(base[1]);
        }
        image
    }

    /// A rank is about to take image `number`: take in everything it wrote before (it
    /// writes nothing until answered), so the restored process's output starts right.
    pub(super) fn mlog_output_mark(&mut self, rank: u32, number: u64) {
        self.drain_output(rank);
        if let Some(l) = self.mlog.as_mut() {
            let Some(o) = l.out.get(rank as usize) else { return };
            let at = [o[0].base + o[0].read, o[1].base + o[1].read];
            if let Some(m) = l.images.as_mut().and_then(|s| s.marks.get_mut(rank as usize)) {
                m.insert(number, at);
            }
        }
        self.core.send_to(rank, ServerMsg::OutputMarked { wave: number });
    }

    /// The checkpoint scheduler's timer: ask the next rank for an image.
    pub(super) fn mlog_timer(&mut self, now: Instant) {
        if let Some(Backend::Remote(link)) = self.mlog.as_mut().map(|l| &mut l.backend) {
            if let Some(n) = link.tick(now) {
                self.mlog_link_news(n);
            }
        }
        let np = self.cfg.np;
        let Some(s) = self.mlog.as_mut().and_then(|l| l.images.as_mut()) else { return };
        if now < s.next_at || np == 0 {
            return;
        }
        s.next_at = now + s.interval;
        let mut said = None;
        let live: Vec<bool> = (0..np as usize).map(|r| self.ranks.get(r).is_some_and(|p| p.status.is_none())).collect();
        let rank = match s.policy {
            ImagePolicy::RoundRobin => (s.last + 1) % np,
            ImagePolicy::Random => {
                // xorshift64
                s.rng ^= s.rng << 13;
                s.rng ^= s.rng >> 7;
                s.rng ^= s.rng << 17;
                (s.rng % u64::from(np)) as u32
            }
            ImagePolicy::BestEffort => match s.best_effort(&live) {
                Some((r, freed)) => {
                    said = Some(format!("steadfast run: best effort: asking rank {r} for an image, which would free {freed} logged bytes"));
                    r
                }
                None => (s.last + 1) % np,
            },
        };
        s.last = rank;
        let best_effort = s.policy == ImagePolicy::BestEffort;
        if let Some(m) = said.filter(|_| self.cfg.verbose) {
            self.stderr_sink.message(&m);
        }
        if live.get(rank as usize).copied().unwrap_or(false) {
            tracing::debug!(rank, "asking for a process image");
            let bytes = steadfast_logging::FromLogger::Checkpoint.encode();
            self.core.send_to(rank, ServerMsg::Event(LauncherEvent::Recovery { bytes }));
        }
        if best_effort {
            // Fresh sizes for the next turn (a rank answers when it next enters the library).
            let bytes = steadfast_logging::FromLogger::ReportLog.encode();
            for r in (0..np).filter(|&r| live[r as usize]) {
                self.core.send_to(r, ServerMsg::Event(LauncherEvent::Recovery { bytes: bytes.clone() }));
            }
        }
        self.pump_core();
    }

    pub(super) fn mlog_next_timeout(&self) -> Option<Instant> {
        let l = self.mlog.as_ref()?;
        let link = match &l.backend {
            Backend::Remote(link) => link.next_timeout(),
            Backend::Local(..) => None,
        };
        let images = l.images.as_ref().map(|s| s.next_at);
        link.into_iter().chain(images).min()
    }

    /// The job ended: flush carried partial lines, remove a temporary log directory.
    pub(super) fn mlog_finish(&mut self, ok: bool) {
        let Some(l) = self.mlog.as_mut() else { return };
        let carry = std::mem::take(&mut l.carry);
        let (dir, temporary) = (l.dir.clone(), l.temporary);
        match &l.backend {
            Backend::Local(logger, _) => tracing::debug!(stats = ?logger.stats, "event logger"),
            Backend::Remote(link) => tracing::debug!(addr = link.addr(), reconnects = link.reconnects, "standalone event logger"),
        }
        if steadfast_config::flag("STEADFAST_STATS") == Some(true) {
            for (i, read) in l.cm_stats.iter().enumerate() {
                if let Some(s) = read() {
                    eprintln!(
                        "steadfast stats channel memory {i}: {} messages kept ({} bytes), {} released ({} bytes) after kept images, holding {} bytes at the end, {} passed on, {} restarted readers, {} stale deposits refused",
                        s.stored, s.bytes, s.released, s.released_bytes, s.bytes - s.released_bytes, s.delivered, s.replays, s.stale
                    );
                }
            }
        }
        self.flush_carried(carry);
        if let (true, Some(Backend::Remote(link))) = (ok, self.mlog.as_mut().map(|l| &mut l.backend)) {
            link.finish();
        }
        if ok && temporary {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(sizes: Vec<Vec<u64>>, last: u32) -> ImageSchedule {
        let np = sizes.len();
        ImageSchedule {
            interval: Duration::from_secs(1),
            policy: ImagePolicy::BestEffort,
            next_at: Instant::now(),
            last,
            rng: 1,
            marks: vec![HashMap::new(); np],
            sizes,
        }
    }

    #[test]
    fn best_effort_picks_the_rank_whose_image_frees_the_most() {
        // Rank 0 logged 10 bytes to 1 and 500 to 2; rank 1 logged 100 to 2 and 50 to 0;
        // rank 2 logged 300 to 1. Images would free: rank 0: 50, rank 1: 310, rank 2: 600.
        let s = schedule(vec![vec![0, 10, 500], vec![50, 0, 100], vec![0, 300, 0]], 0);
        assert_eq!(s.best_effort(&[true, true, true]), Some((2, 600)));
        // A rank that is down is not asked; the next best is.
        assert_eq!(s.best_effort(&[true, true, false]), Some((1, 310)));
        // Nothing reported: no choice (the turn goes round robin).
        let s = schedule(vec![Vec::new(); 3], 0);
        assert_eq!(s.best_effort(&[true, true, true]), None);
    }

    #[test]
    fn best_effort_ties_take_turns() {
        let s = schedule(vec![vec![0, 7, 7], vec![7, 0, 0], vec![0, 0, 0]], 0);
        // Ranks 0, 1 and 2 would each free 7 bytes: the one after the last asked.
        assert_eq!(s.best_effort(&[true, true, true]).map(|x| x.0), Some(1));
        let s = schedule(vec![vec![0, 7, 7], vec![7, 0, 0], vec![0, 0, 0]], 1);
        assert_eq!(s.best_effort(&[true, true, true]).map(|x| x.0), Some(2));
        let s = schedule(vec![vec![0, 7, 7], vec![7, 0, 0], vec![0, 0, 0]], 2);
        assert_eq!(s.best_effort(&[true, true, true]).map(|x| x.0), Some(0));
    }
}

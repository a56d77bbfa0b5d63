//! Control threads of several "ranks" in one process, talking over real loopback sockets:
//! each failure-detector input must lead every survivor to the same view, which is exactly
//! the survivors. (The SIGKILL test with real processes is `crates/capi/tests/ft_kill.rs`.)

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steadfast_runtime::event::{ExitStatus, LauncherEvent};
use steadfast_runtime::ft::{self, ControlThread, FtConfig, LauncherLink, StopMode, ViewSnapshot};

/// A launcher stand-in: notices pushed by the test, readiness through a socket pair.
struct FakeLink {
    queue: Arc<Mutex<Vec<LauncherEvent>>>,
    rx: UnixStream,
}

impl LauncherLink for FakeLink {
    fn event_fd(&self) -> Option<RawFd> {
        Some(self.rx.as_raw_fd())
    }
    fn try_poll(&mut self) -> Option<Vec<LauncherEvent>> {
        let mut b = [0u8; 64];
        let mut closed = false;
        loop {
            match std::io::Read::read(&mut &self.rx, &mut b) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let mut ev = std::mem::take(&mut *self.queue.lock().unwrap());
        if closed {
            ev.push(LauncherEvent::Disconnected);
        }
        Some(ev)
    }
}

struct Launcher {
    links: Vec<(Arc<Mutex<Vec<LauncherEvent>>>, UnixStream)>,
}

impl Launcher {
    fn rank_exited(&self, rank: u32, to: &[u32]) {
        for &r in to {
            let (q, tx) = &self.links[r as usize];
            q.lock().unwrap().push(LauncherEvent::RankExited {
                rank,
                status: ExitStatus::Signaled(9),
                finalized: false,
            });
            let _ = std::io::Write::write(&mut &*tx, &[1]);
        }
    }
}

fn config(heartbeat_ms: u64, suspect_ms: u64, k: u8) -> FtConfig {
    let mut c = FtConfig {
        heartbeat: Duration::from_millis(heartbeat_ms),
        suspect: Duration::from_millis(suspect_ms),
        ..FtConfig::default()
    };
    c.protocol.fanout_log2 = k;
    c.protocol.ack_timeout = Duration::from_millis(100);
    c.protocol.report_timeout = Duration::from_millis(200);
    c.protocol.sync_interval = Some(Duration::from_millis(100));
    c
}

fn cluster(n: u32, cfg: &FtConfig) -> (Vec<Option<ControlThread>>, Launcher) {
    let key = 0x5eed_0000_0000_0000 ^ n as u64;
    let prepared: Vec<_> = (0..n)
        .map(|r| ft::prepare(cfg.clone(), r, n, key).expect("bind"))
        .collect();
    let addrs: Vec<_> = prepared.iter().map(|p| Some(p.local_addr())).collect();
    let mut links = Vec::new();
    let threads = prepared
        .into_iter()
        .map(|p| {
            let (tx, rx) = UnixStream::pair().unwrap();
            rx.set_nonblocking(true).unwrap();
            tx.set_nonblocking(true).unwrap();
            let queue = Arc::new(Mutex::new(Vec::new()));
            links.push((queue.clone(), tx));
            let link: Box<dyn LauncherLink> = Box::new(FakeLink { queue, rx });
            Some(p.start(addrs.clone(), Some(link)).expect("start"))
        })
        .collect();
    (threads, Launcher { links })
}

/// Waits until every live thread shows exactly `expect` as members; then they must all
/// hold the same view id. Returns the common view and how long it took.
fn converge(
    threads: &[Option<ControlThread>],
    expect: &[u32],
    limit: Duration,
) -> (ViewSnapshot, Duration) {
    let start = Instant::now();
    loop {
        let views: Vec<(usize, ViewSnapshot)> = threads
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|t| (i, t.board().snapshot())))
            .collect();
        if views.iter().all(|(_, v)| v.members == expect) {
            let first = &views[0].1;
            for (i, v) in &views {
                assert_eq!(
                    v.view_id, first.view_id,
                    "rank {i} holds another view with the same members"
                );
                assert!(!v.excluded, "rank {i} excluded");
            }
            return (first.clone(), start.elapsed());
        }
        if start.elapsed() > limit {
            let summary: Vec<String> = views
                .iter()
                .map(|(i, v)| format!("rank {i}: {} {:?}", v.view_id, v.members))
                .collect();
            panic!(
                "no agreement on {expect:?} within {limit:?}:\n{}",
                summary.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn without(n: u32, gone: &[u32]) -> Vec<u32> {
    (0..n).filter(|r| !gone.contains(r)).collect()
}

/// Let the heartbeats open the tree connections before a fault.
fn settle(cfg: &FtConfig) {
    std::thread::sleep(cfg.heartbeat * 3);
}

#[test]
fn crash_is_seen_through_broken_connections() {
    let cfg = config(20, 2000, 2);
    let (mut t, _l) = cluster(8, &cfg);
    settle(&cfg);
    t[3].take().unwrap().inject(StopMode::Crash);
    let (v, took) = converge(&t, &without(8, &[3]), Duration::from_secs(5));
    assert_eq!(v.failed, vec![3]);
    assert!(v.epoch() >= 1);
    // The query timeout alone would take 2 s: a broken connection was faster.
    assert!(took < Duration::from_millis(1500), "took {took:?}");
}

#[test]
fn hung_process_is_found_by_the_query_timeout() {
    let cfg = config(20, 400, 1);
    let (mut t, _l) = cluster(6, &cfg);
    settle(&cfg);
    let frozen = t[4].take().unwrap();
    frozen.inject(StopMode::Freeze);
    let (v, _) = converge(&t, &without(6, &[4]), Duration::from_secs(5));
    assert_eq!(v.failed, vec![4]);
    drop(frozen);
}

#[test]
fn launcher_notice_is_enough() {
    // Heartbeats are too slow to matter here; the frozen rank keeps its sockets open.
    let cfg = config(5000, 10_000, 2);
    let (mut t, l) = cluster(7, &cfg);
    let frozen = t[5].take().unwrap();
    frozen.inject(StopMode::Freeze);
    l.rank_exited(5, &[0, 1, 2, 3, 4, 6]);
    let (v, took) = converge(&t, &without(7, &[5]), Duration::from_secs(3));
    assert_eq!(v.failed, vec![5]);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    drop(frozen);
}

#[test]
fn reliable_layer_report_excludes_the_rank() {
    // Only the report can exclude rank 2 (its queries are answered, it is never silent).
    let cfg = config(20, 10_000, 2);
    let (t, _l) = cluster(5, &cfg);
    // Rank 2 is alive but rank 4's reliable layer gave up on it: it is excluded, and learns it.
    t[4].as_ref().unwrap().board().report_suspect(2);
    let mut rest: Vec<Option<ControlThread>> = Vec::new();
    let mut excluded = None;
    for (i, x) in t.into_iter().enumerate() {
        if i == 2 {
            excluded = x;
            rest.push(None);
        } else {
            rest.push(x);
        }
    }
    let (v, _) = converge(&rest, &without(5, &[2]), Duration::from_secs(3));
    let ex = excluded.unwrap();
    let seen = ex.board().wait_for(Duration::from_secs(3), |s| s.excluded);
    assert!(seen.excluded, "rank 2 never learned it was excluded");
    assert_eq!(v.failed, vec![2]);
}

#[test]
fn root_and_child_crash_together() {
    let cfg = config(20, 2000, 1);
    let (mut t, l) = cluster(9, &cfg);
    settle(&cfg);
    let a = t[0].take().unwrap();
    let b = t[1].take().unwrap();
    a.inject(StopMode::Crash);
    b.inject(StopMode::Crash);
    l.rank_exited(0, &[5]);
    let (v, _) = converge(&t, &without(9, &[0, 1]), Duration::from_secs(5));
    assert_eq!(v.failed, vec![0, 1]);
    assert_eq!(v.members[0], 2);
}

#[test]
fn graceful_stop_is_no_failure() {
    // Without the goodbye, rank 0 would suspect 3 at once (its connection breaks).
    let cfg = config(20, 1000, 2);
    let (mut t, _l) = cluster(4, &cfg);
    settle(&cfg);
    t[3].take().unwrap().stop();
    std::thread::sleep(Duration::from_millis(400));
    for x in t.iter().flatten() {
        let s = x.board().snapshot();
        assert_eq!(
            s.members,
            vec![0, 1, 2, 3],
            "a rank that said goodbye was suspected"
        );
        assert_eq!(s.epoch(), 0);
    }
}

/// A launcher descriptor stuck readable (end-of-file, never reported as a disconnection)
/// must not spin the control thread, which runs at real-time priority when permitted.
struct StuckLink {
    rx: UnixStream,
    polls: Arc<std::sync::atomic::AtomicU64>,
}

impl LauncherLink for StuckLink {
    fn event_fd(&self) -> Option<RawFd> {
        Some(self.rx.as_raw_fd())
    }
    fn try_poll(&mut self) -> Option<Vec<LauncherEvent>> {
        self.polls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(Vec::new())
    }
}

#[test]
fn stuck_launcher_descriptor_does_not_spin() {
    let cfg = config(5000, 10_000, 2);
    let p = ft::prepare(cfg, 0, 1, 99).expect("bind");
    let addrs = vec![Some(p.local_addr())];
    let (tx, rx) = UnixStream::pair().unwrap();
    drop(tx);
    let polls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let link: Box<dyn LauncherLink> = Box::new(StuckLink {
        rx,
        polls: polls.clone(),
    });
    let t = p.start(addrs, Some(link)).expect("start");
    std::thread::sleep(Duration::from_millis(500));
    t.stop();
    let n = polls.load(std::sync::atomic::Ordering::Relaxed);
    // One periodic check per 100 ms, plus one readiness wake-up after each.
    assert!(n <= 15, "launcher link polled {n} times in 0.5 s");
}

//! Checkpoint-side behaviour that needs a real process: an interrupted writer leaves the
//! previous image untouched, the non-blocking wait, and the thread check with its ignore
//! list. Each test re-runs itself with ADDR_NO_RANDOMIZE set through the launcher helper
//! (`command_no_randomize`), which it thereby tests too. The test harness's own threads are
//! passed as threads to ignore.

use std::path::PathBuf;
use std::process::Command;

use steadfast_ckpt::{checkpoint, command_no_randomize, no_randomize_active, other_threads, Error, Options, Outcome};

/// Runs the named test again in a child process with randomization off; returns true when
/// the caller is that child (and should do the work).
fn inner(name: &str) -> bool {
    if no_randomize_active() {
        return true;
    }
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--exact", name, "--test-threads=1", "--nocapture"]);
    command_no_randomize(&mut cmd);
    let status = cmd.status().expect("re-running the test");
    assert!(status.success(), "{name} under ADDR_NO_RANDOMIZE failed: {status}");
    false
}

fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("steadfast-ckpt-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn harness_threads() -> Options {
    Options { ignore_threads: other_threads(&[]).expect("thread list"), ..Options::default() }
}

#[test]
fn interrupted_write_leaves_previous_image() {
    if !inner("interrupted_write_leaves_previous_image") {
        return;
    }
    let dir = scratch_dir("interrupt");
    let path = dir.join("a.img");
    let opts = harness_threads();
    let mut big = vec![1u8; 128 << 20];
    let Ok(Outcome::Checkpointed(p)) = checkpoint(&path, &opts) else { panic!("first checkpoint") };
    let first_stats = p.wait().expect("first image");
    let mut expected = std::fs::read(&path).expect("first image bytes");
    assert_eq!(expected.len() as u64, first_stats.bytes);

    let mut interrupted = false;
    for round in 0..5u8 {
        big.iter_mut().step_by(4096).for_each(|b| *b = round + 2);
        let Ok(Outcome::Checkpointed(p)) = checkpoint(&path, &opts) else { panic!("second checkpoint") };
        // SAFETY: signalling our own child.
        unsafe { libc::kill(p.pid(), libc::SIGKILL) };
        match p.wait() {
            Err(Error::WriterDied(_)) => {
                interrupted = true;
                break;
            }
            Ok(_) => {
                // The writer won the race: this image is now the one that must survive.
                expected = std::fs::read(&path).expect("image bytes");
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert!(interrupted, "the writer was never caught before it finished");
    let now = std::fs::read(&path).expect("image still there");
    assert!(now == expected, "the interrupted write changed the complete image");
    let mut partial = path.clone().into_os_string();
    partial.push(".partial");
    assert!(!PathBuf::from(partial).exists(), "a partial image was left behind");
    std::hint::black_box(&big);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn try_wait_reports_completion() {
    if !inner("try_wait_reports_completion") {
        return;
    }
    let dir = scratch_dir("trywait");
    let path = dir.join("b.img");
    let Ok(Outcome::Checkpointed(mut p)) = checkpoint(&path, &harness_threads()) else { panic!("checkpoint") };
    let stats = loop {
        match p.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(2)),
            Err(e) => panic!("writer failed: {e}"),
        }
    };
    assert!(matches!(p.try_wait(), Err(Error::Reaped)));
    assert_eq!(std::fs::metadata(&path).expect("image").len(), stats.bytes);
    assert!(stats.data_regions > 0 && stats.regions >= stats.data_regions);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn other_threads_are_refused_unless_ignored() {
    if !inner("other_threads_are_refused_unless_ignored") {
        return;
    }
    let dir = scratch_dir("threads");
    let path = dir.join("c.img");
    let base = harness_threads();
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).expect("send tid");
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().expect("tid");
    match checkpoint(&path, &base) {
        Err(Error::Threads { tids }) => assert_eq!(tids, vec![tid]),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!path.exists());
    let mut with = base.clone();
    with.ignore_threads.push(tid);
    let Ok(Outcome::Checkpointed(p)) = checkpoint(&path, &with) else { panic!("checkpoint with ignore list") };
    p.wait().expect("image");
    assert!(path.exists());
    stop_tx.send(()).expect("stop");
    t.join().expect("join");
    let _ = std::fs::remove_dir_all(&dir);
}

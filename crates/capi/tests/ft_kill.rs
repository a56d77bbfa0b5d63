//! The SIGKILL test of the membership service: 16-rank jobs on this machine where ranks
//! kill themselves (one; two; the root, rank 0; the root and its child at once), over the
//! shared-memory and the TCP path. The launcher keeps the survivors running
//! (`--on-failure continue` / `--ft run-through`); every survivor must report the same view
//! (same epoch, members = exactly the survivors) within a bound, agree with the others over
//! MPI point-to-point, and finish MPI_Finalize — also with output queued for a dead rank.
//!
//! The program is `tests/c/ft/view_kill.c`, compiled against `include/` and this build's
//! `libmpi_abi.so`; the jobs run under the launcher library in this process.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use steadfast_runtime::env::{FtMode, PathKind};
use steadfast_runtime::launcher::{self, LaunchConfig, OnFailure};

const RANKS: u32 = 16;
/// A survivor must see the view without the victims within this long.
const VIEW_BOUND_S: f64 = 10.0;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This build's `libmpi_abi.so`. `cargo test` writes the fresh library to target/<profile>/deps
/// and leaves target/<profile>/libmpi_abi.so as the last `cargo build` made it: take the newer.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory").to_path_buf();
    let candidates = [
        deps.join("libmpi_abi.so"),
        deps.parent()
            .expect("target directory")
            .join("libmpi_abi.so"),
    ];
    candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
        .max()
        .map(|(_, p)| p)
        .unwrap_or_else(|| {
            panic!(
                "no libmpi_abi.so next to {} (build steadfast-capi first)",
                deps.display()
            )
        })
}

fn find_cc() -> Option<String> {
    ["cc", "gcc", "clang"]
        .iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|c| c.to_string())
}

fn compile(cc: &str, dir: &Path) -> PathBuf {
    // The library's soname is libmpi_abi.so.1, which the build does not create: link
    // through a private directory that has it.
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).expect("lib dir");
    for name in ["libmpi_abi.so", "libmpi_abi.so.1"] {
        let link = lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(library(), &link).expect("symlink the library");
    }
    let exe = dir.join("view_kill");
    let out = Command::new(cc)
        .arg("-O1")
        .arg("-Wall")
        .arg(format!("-I{}", repo().join("include").display()))
        .arg("-o")
        .arg(&exe)
        .arg(repo().join("tests/c/ft/view_kill.c"))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lmpi_abi")
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling view_kill.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

struct Outcome {
    epoch: String,
    seconds: f64,
}

/// Runs one job and checks what every survivor wrote.
fn scenario(exe: &Path, base: &Path, victims: &[u32], path: PathKind, flood: bool) -> Outcome {
    let list: Vec<String> = victims.iter().map(|v| v.to_string()).collect();
    let tag = format!(
        "{}-{}{}",
        path,
        list.join("_"),
        if flood { "-flood" } else { "" }
    );
    let out = base.join(&tag);
    std::fs::create_dir_all(&out).expect("create output dir");
    let mut cfg = LaunchConfig::new(
        RANKS,
        exe.as_os_str().to_owned(),
        vec![
            OsString::from(list.join(",")),
            out.as_os_str().to_owned(),
            OsString::from(VIEW_BOUND_S.to_string()),
            OsString::from("0"),
            OsString::from(if flood { "1" } else { "0" }),
        ],
    );
    cfg.path = path;
    // Both ways of keeping the survivors: the plain policy, and the run-through mode.
    match path {
        PathKind::Shm => cfg.on_failure = Some(OnFailure::Continue),
        PathKind::Tcp | PathKind::Udp => cfg.ft = FtMode::RunThrough,
    }
    cfg.timeout = Some(Duration::from_secs(60));
    let started = Instant::now();
    let code = launcher::run(cfg);
    let wall = started.elapsed();
    // The killed ranks make the job's status 128 + SIGKILL; a timeout would be 124.
    assert_eq!(code, 137, "{tag}: launcher exit status (took {wall:?})");

    let survivors: Vec<u32> = (0..RANKS).filter(|r| !victims.contains(r)).collect();
    let mut views = Vec::new();
    for &r in &survivors {
        let file = out.join(format!("view.{r}"));
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{tag}: survivor {r} wrote no view ({e})"));
        views.push((r, text));
    }
    for v in victims {
        assert!(
            !out.join(format!("view.{v}")).exists(),
            "{tag}: killed rank {v} wrote a view"
        );
        assert!(
            out.join(format!("killed.{v}")).exists(),
            "{tag}: rank {v} did not reach its kill"
        );
    }
    // "epoch E members M r0 r1 ... seconds S"
    let parse = |t: &str| -> (String, Vec<u32>, f64) {
        let w: Vec<&str> = t.split_whitespace().collect();
        assert!(
            w.len() >= 6 && w[0] == "epoch" && w[2] == "members",
            "bad view line {t:?}"
        );
        let m: usize = w[3].parse().expect("member count");
        let members = w[4..4 + m]
            .iter()
            .map(|x| x.parse().expect("rank"))
            .collect();
        assert_eq!(w[4 + m], "seconds");
        (
            w[1].to_string(),
            members,
            w[5 + m].parse().expect("seconds"),
        )
    };
    let (epoch, members, _) = parse(&views[0].1);
    assert_eq!(members, survivors, "{tag}: rank {} view", views[0].0);
    assert_ne!(epoch, "0", "{tag}: still the start-up view");
    let mut slowest: f64 = 0.0;
    for (r, text) in &views {
        let (e, m, s) = parse(text);
        assert_eq!(
            (&e, &m),
            (&epoch, &members),
            "{tag}: rank {r} disagrees with rank {}",
            views[0].0
        );
        assert!(s < VIEW_BOUND_S, "{tag}: rank {r} took {s} s");
        slowest = slowest.max(s);
    }
    for &r in &survivors {
        let done = std::fs::read_to_string(out.join(format!("done.{r}"))).unwrap_or_default();
        assert_eq!(
            done.trim(),
            "0",
            "{tag}: survivor {r} did not finish MPI_Finalize cleanly"
        );
    }
    let verdict = std::fs::read_to_string(out.join("verdict")).expect("verdict");
    assert!(verdict.starts_with("ok"), "{tag}: {verdict}");
    eprintln!(
        "{tag}: {} survivors agree on epoch {epoch} after at most {:.1} ms (job {:.2} s)",
        survivors.len(),
        slowest * 1e3,
        wall.as_secs_f64()
    );
    Outcome {
        epoch,
        seconds: slowest,
    }
}

#[test]
fn sixteen_ranks_survive_sigkill_with_one_view() {
    let Some(cc) = find_cc() else {
        eprintln!("SKIPPED sixteen_ranks_survive_sigkill_with_one_view: no C compiler (cc, gcc, clang) found");
        return;
    };
    let base = std::env::temp_dir().join(format!("steadfast-ft-kill-{}", std::process::id()));
    std::fs::create_dir_all(&base).expect("scratch dir");
    let exe = compile(&cc, &base);
    let mut worst: f64 = 0.0;
    for path in [PathKind::Shm, PathKind::Tcp] {
        // One; two; the root; the root and one of its children at once.
        for victims in [&[5u32][..], &[3, 9], &[0], &[0, 1]] {
            let o = scenario(&exe, &base, victims, path, false);
            assert!(!o.epoch.is_empty());
            worst = worst.max(o.seconds);
        }
    }
    // Survivors with output stuck for a dead rank (a full ring) still finish MPI_Finalize.
    scenario(&exe, &base, &[7], PathKind::Shm, true);
    eprintln!(
        "slowest survivor saw its final view {:.1} ms after the kill",
        worst * 1e3
    );
    let _ = std::fs::remove_dir_all(&base);
}

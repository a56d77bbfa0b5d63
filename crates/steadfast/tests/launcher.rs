//! End-to-end tests of `steadfast run` with shell programs and the `bootstrap_probe`
//! example as ranks. Every launcher run is bounded by a watchdog, so a hang fails the
//! test instead of blocking the suite.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

const WATCHDOG: Duration = Duration::from_secs(60);

fn steadfast() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_steadfast"));
    c.env_remove("STEADFAST_LOG");
    c
}

/// Path of the `bootstrap_probe` example, building it if this test was run alone
/// (`cargo test --test launcher` does not build examples).
fn probe() -> &'static Path {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let target_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target directory");
        let path = target_dir.join("examples").join("bootstrap_probe");
        if !path.exists() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            // Built in the profile of this test, so it lands where it is looked for.
            let profile: &[&str] = if cfg!(debug_assertions) { &[] } else { &["--release"] };
            let ok = Command::new(cargo)
                .args([
                    "build",
                    "-j",
                    "2",
                    "-p",
                    "steadfast",
                    "--example",
                    "bootstrap_probe",
                ])
                .args(profile)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(
                ok && path.exists(),
                "cannot build the bootstrap_probe example"
            );
        }
        path
    })
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Run {
    fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

/// Waits for `child`, killing it and failing the test if it outlives the watchdog.
fn wait_bounded(mut child: Child, started: Instant) -> Run {
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if started.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("launcher did not finish within {WATCHDOG:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = started.elapsed();
    let stdout = t_out.join().expect("stdout reader");
    let stderr = t_err.join().expect("stderr reader");
    Run {
        status,
        stdout,
        stderr,
        elapsed,
    }
}

fn run_cmd(mut cmd: Command, stdin: Option<&[u8]>) -> Run {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn steadfast");
    if let Some(data) = stdin {
        let mut sin = child.stdin.take().expect("stdin piped");
        sin.write_all(data).expect("write stdin");
    }
    wait_bounded(child, started)
}

fn run(args: &[&str]) -> Run {
    let mut cmd = steadfast();
    cmd.arg("run").args(args);
    run_cmd(cmd, None)
}

fn probe_run(launcher_args: &[&str], probe_args: &[&str]) -> Run {
    let mut cmd = steadfast();
    cmd.arg("run")
        .args(launcher_args)
        .arg(probe())
        .args(probe_args);
    run_cmd(cmd, None)
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("steadfast-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

#[test]
fn env_vars_and_rank_numbering() {
    let r = run(&[
        "-n",
        "4",
        "sh",
        "-c",
        "echo $STEADFAST_RANK $STEADFAST_SIZE $STEADFAST_LOCAL_RANK $STEADFAST_LOCAL_SIZE \
         $STEADFAST_JOBID $STEADFAST_JOB_KEY $STEADFAST_JOBDIR $STEADFAST_CONTROL \
         $STEADFAST_PATH $STEADFAST_FT $(stat -c %a $STEADFAST_JOBDIR)",
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let rows: Vec<Vec<&str>> = r.lines().iter().map(|l| l.split(' ').collect()).collect();
    assert_eq!(rows.len(), 4);
    let ranks: BTreeSet<&str> = rows.iter().map(|f| f[0]).collect();
    assert_eq!(ranks, ["0", "1", "2", "3"].into_iter().collect());
    for f in &rows {
        assert_eq!(f.len(), 11, "{f:?}");
        assert_eq!(f[1], "4");
        assert_eq!(f[2], f[0], "local rank equals rank on one host");
        assert_eq!(f[3], "4");
        assert_eq!(f[4], rows[0][4], "same job id");
        assert!(f[4].len() >= 16 && f[4].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(f[5].len(), 16);
        assert!(u64::from_str_radix(f[5], 16).is_ok());
        assert_eq!(f[5], rows[0][5], "same key");
        assert_eq!(f[6], rows[0][6], "same job dir");
        assert!(f[7].starts_with("127.0.0.1:"), "{}", f[7]);
        assert_eq!(f[8], "shm");
        assert_eq!(f[9], "abort");
        assert_eq!(f[10], "700", "job dir mode");
    }
    assert!(
        !Path::new(rows[0][6]).exists(),
        "job dir removed after the job"
    );

    let r = run(&[
        "-n",
        "1",
        "--path",
        "tcp",
        "--ft",
        "run-through",
        "sh",
        "-c",
        "echo $STEADFAST_PATH $STEADFAST_FT",
    ]);
    assert_eq!(r.stdout, "tcp run-through\n");
}

#[test]
fn environment_passing_in_both_spellings() {
    let mut cmd = steadfast();
    cmd.env("INHERITED", "from-parent")
        .env("EXPORTED", "exported-value")
        .args([
            "run",
            "-np",
            "2",
            "-x",
            "EXPORTED",
            "-x",
            "A=1",
            "--env",
            "B=2",
            "-genv",
            "C",
            "3 4",
            "--env",
            "A=override",
            "sh",
            "-c",
            "echo \"$INHERITED|$EXPORTED|$A|$B|$C\"",
        ]);
    let r = run_cmd(cmd, None);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        r.lines(),
        vec![
            "from-parent|exported-value|override|2|3 4",
            "from-parent|exported-value|override|2|3 4"
        ]
    );
}

#[test]
fn output_is_forwarded_and_tagged() {
    let r = run(&[
        "-n",
        "2",
        "--tag-output",
        "sh",
        "-c",
        "echo one; echo two >&2; printf tail",
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    for rank in 0..2 {
        assert!(
            r.stdout.contains(&format!("[1,{rank}]<stdout>: one\n")),
            "{}",
            r.stdout
        );
        assert!(
            r.stdout.contains(&format!("[1,{rank}]<stdout>: tail")),
            "{}",
            r.stdout
        );
        assert!(
            r.stderr.contains(&format!("[1,{rank}]<stderr>: two\n")),
            "{}",
            r.stderr
        );
    }
    assert!(
        r.lines().iter().all(|l| l.starts_with("[1,")),
        "{}",
        r.stdout
    );
    // Without tags the bytes pass through unchanged.
    let r = run(&["-n", "1", "sh", "-c", "echo one; printf tail"]);
    assert_eq!(r.stdout, "one\ntail");
}

#[test]
fn lines_of_different_ranks_never_interleave() {
    // Each line is written in two pieces; the launcher must keep them together.
    let r = run(&[
        "-n",
        "4",
        "sh",
        "-c",
        "i=0; while [ $i -lt 300 ]; do printf '%s' $STEADFAST_RANK$STEADFAST_RANK$STEADFAST_RANK; \
         printf '%s\\n' $STEADFAST_RANK$STEADFAST_RANK$STEADFAST_RANK; i=$((i+1)); done",
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let lines = r.lines();
    assert_eq!(lines.len(), 1200);
    for l in lines {
        let c = l.as_bytes()[0];
        assert!(
            l.len() == 6 && l.bytes().all(|b| b == c),
            "mixed line {l:?}"
        );
    }
}

#[test]
fn exit_status_of_failed_rank_and_teardown_of_siblings() {
    let r = run(&[
        "-n",
        "3",
        "sh",
        "-c",
        "[ $STEADFAST_RANK = 2 ] && exit 3; exec sleep 1000",
    ]);
    assert_eq!(r.code(), 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("steadfast run: rank 2 (pid "),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(") exited with status 3"), "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);

    let r = run(&["-n", "3", "true"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
}

#[test]
fn rank_killed_by_signal_is_reported_and_job_dir_removed() {
    let r = run(&[
        "-n",
        "2",
        "sh",
        "-c",
        "echo $STEADFAST_JOBDIR; touch $STEADFAST_JOBDIR/seg-$STEADFAST_RANK; sleep 0.2; \
         [ $STEADFAST_RANK = 1 ] && kill -9 $$; exec sleep 1000",
    ]);
    assert_eq!(r.code(), 137, "{}", r.stderr);
    assert!(
        r.stderr.contains(") killed by signal 9 (SIGKILL)") && r.stderr.contains("rank 1 (pid "),
        "{}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);
    let dir = r.lines()[0].to_owned();
    assert!(!Path::new(&dir).exists(), "job dir {dir} left behind");
}

#[test]
fn ranks_ignoring_sigterm_are_killed_after_the_grace_period() {
    let r = run(&[
        "-n",
        "3",
        "--kill-grace",
        "0.5",
        "sh",
        "-c",
        // Rank 1 fails only once the others ignore SIGTERM (marker files in the job dir).
        "trap '' TERM; d=$STEADFAST_JOBDIR; \
         if [ $STEADFAST_RANK = 1 ]; then \
           while [ ! -e $d/r0 ] || [ ! -e $d/r2 ]; do sleep 0.02; done; exit 5; \
         fi; touch $d/r$STEADFAST_RANK; while :; do sleep 1; done",
    ]);
    assert_eq!(r.code(), 5, "{}", r.stderr);
    assert!(r.stderr.contains("sending SIGKILL"), "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(8), "took {:?}", r.elapsed);
}

#[test]
fn timeout_kills_the_job() {
    let r = run(&["-n", "2", "--timeout", "1", "sleep", "100"]);
    assert_eq!(r.code(), 124, "{}", r.stderr);
    assert!(r.stderr.contains("timed out after 1 s"), "{}", r.stderr);
    assert!(r.elapsed >= Duration::from_millis(900));
    assert!(r.elapsed < Duration::from_secs(8), "took {:?}", r.elapsed);
}

#[test]
fn mpiexec_timeout_variable_kills_the_job() {
    let mut cmd = steadfast();
    cmd.env("MPIEXEC_TIMEOUT", "1")
        .args(["run", "-n", "2", "sleep", "100"]);
    let r = run_cmd(cmd, None);
    assert_eq!(r.code(), 124, "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(8), "took {:?}", r.elapsed);
}

fn signal_forwarding(sig: i32, signame: &str) {
    let mut cmd = steadfast();
    cmd.args([
        "run",
        "-n",
        "2",
        "sh",
        "-c",
        &format!(
            "trap 'echo got-{signame}-$STEADFAST_RANK; exit 7' {signame}; echo ready; \
             while :; do sleep 0.05; done"
        ),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .stdin(Stdio::null());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while seen.iter().filter(|l: &&String| *l == "ready").count() < 2 {
        seen.push(
            rx.recv_timeout(Duration::from_secs(20))
                .expect("ranks start"),
        );
    }
    // SAFETY: plain kill(2) on the launcher we spawned.
    unsafe { libc::kill(child.id() as i32, sig) };
    let mut rest = child.stderr.take().expect("stderr");
    let mut stderr = String::new();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(started.elapsed() < WATCHDOG, "launcher hung after signal");
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = rest.read_to_string(&mut stderr);
    seen.extend(rx.iter());
    assert_eq!(status.code(), Some(128 + sig), "{stderr}");
    for rank in 0..2 {
        assert!(
            seen.contains(&format!("got-{signame}-{rank}")),
            "{seen:?} {stderr}"
        );
    }
    assert!(
        stderr.contains(&format!("received SIG{signame}")),
        "{stderr}"
    );
}

#[test]
fn sigterm_is_forwarded_to_ranks() {
    signal_forwarding(libc::SIGTERM, "TERM");
}

#[test]
fn sigint_is_forwarded_to_ranks() {
    signal_forwarding(libc::SIGINT, "INT");
}

#[test]
fn stdin_goes_to_rank_zero_only() {
    let mut cmd = steadfast();
    cmd.args([
        "run",
        "-n",
        "3",
        "sh",
        "-c",
        "n=$(wc -l); echo rank $STEADFAST_RANK read $n",
    ]);
    let r = run_cmd(cmd, Some(b"alpha\nbeta\ngamma\n"));
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let got: BTreeSet<&str> = r.lines().into_iter().collect();
    let want: BTreeSet<&str> = ["rank 0 read 3", "rank 1 read 0", "rank 2 read 0"]
        .into_iter()
        .collect();
    assert_eq!(got, want);
}

#[test]
fn put_get_fence_across_eight_ranks() {
    let r = probe_run(&["-n", "8"], &["kvs", "3"]);
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    let ok: BTreeSet<String> = r
        .lines()
        .iter()
        .filter(|l| l.starts_with("ok kvs"))
        .map(|l| l.split(' ').nth(3).unwrap_or("").to_owned())
        .collect();
    assert_eq!(ok.len(), 8, "{}", r.stdout);
}

#[test]
fn sixty_four_ranks_start_and_fence_quickly() {
    let r = probe_run(&["-n", "64"], &["kvs", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        r.lines().iter().filter(|l| l.starts_with("ok kvs")).count(),
        64
    );
    eprintln!(
        "64 ranks: start + put/fence/64 gets + finalize in {:?}",
        r.elapsed
    );
    assert!(r.elapsed < Duration::from_secs(30), "took {:?}", r.elapsed);
}

#[test]
fn mpi_abort_tears_down_with_its_code() {
    let r = probe_run(&["-n", "4"], &["abort", "7"]);
    assert_eq!(r.code(), 7, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("steadfast run: rank 1 called MPI_Abort with code 7: probe gives up"),
        "{}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);
    let r = probe_run(&["-n", "2"], &["abort", "0"]);
    assert_eq!(r.code(), 1, "abort code 0 exits 1: {}", r.stderr);
}

#[test]
fn wrong_job_key_is_rejected_and_counted() {
    let r = probe_run(&["-n", "2"], &["badkey"]);
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.lines()
            .iter()
            .filter(|l| l.starts_with("ok rejected"))
            .count(),
        2
    );
    assert_eq!(
        r.lines()
            .iter()
            .filter(|l| l.starts_with("ok accepted"))
            .count(),
        2
    );
    assert!(
        r.stderr
            .contains("refused 2 control connection(s): 2 wrong job key"),
        "{}",
        r.stderr
    );
}

#[test]
fn junk_on_the_control_port_is_refused_and_counted() {
    let r = probe_run(&["-n", "1"], &["garbage"]);
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.stdout, "ok garbage rank 0\n");
    assert!(
        r.stderr.contains("refused 3 control connection(s)"),
        "{}",
        r.stderr
    );
}

#[test]
fn exit_without_finalize_is_a_failure() {
    let r = probe_run(&["-n", "2"], &["nofinalize"]);
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("without calling MPI_Finalize"),
        "{}",
        r.stderr
    );
}

#[test]
fn run_through_keeps_survivors_and_notifies_them() {
    let r = probe_run(
        &["-n", "4", "--ft", "run-through", "-v"],
        &["runthrough", "2"],
    );
    assert_eq!(
        r.code(),
        3,
        "first failure's status: {}\n{}",
        r.stdout,
        r.stderr
    );
    let lines = r.lines();
    for rank in [0, 1, 3] {
        assert!(
            lines.contains(&format!("ok rank {rank} saw rank 2 exit with status 3").as_str()),
            "{}\n{}",
            r.stdout,
            r.stderr
        );
        assert!(lines.contains(&format!("ok survivor {rank} finalized").as_str()));
    }
    assert!(r.stderr.contains("rank 2 (pid "), "{}", r.stderr);
    // Without --verbose the failure shows only in the exit status.
    let q = probe_run(&["-n", "4", "--ft", "run-through"], &["runthrough", "2"]);
    assert_eq!(q.code(), 3);
    assert!(!q.stderr.contains("rank 2 (pid "), "{}", q.stderr);
}

#[test]
fn on_failure_continue_keeps_shell_ranks_running() {
    let r = run(&[
        "-n",
        "3",
        "--on-failure",
        "continue",
        "sh",
        "-c",
        "[ $STEADFAST_RANK = 0 ] && exit 4; sleep 0.5; echo survived",
    ]);
    assert_eq!(r.code(), 4, "{}", r.stderr);
    assert_eq!(r.lines(), vec!["survived", "survived"]);
}

#[test]
fn program_lookup_like_execvp() {
    let r = run(&["-n", "2", "no-such-program-for-steadfast"]);
    assert_eq!(r.code(), 127, "{}", r.stderr);
    assert!(r.stderr.contains("command not found"), "{}", r.stderr);

    let dir = temp_dir("wdir");
    let script = dir.join("hello.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"hello from $(pwd)\"\n").expect("write script");
    let chmod = Command::new("chmod").arg("755").arg(&script).status();
    assert!(chmod.map(|s| s.success()).unwrap_or(false));
    let dir_s = dir.to_str().expect("utf-8 temp dir");
    let r = run(&["-n", "1", "-wdir", dir_s, "./hello.sh"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.stdout, format!("hello from {dir_s}\n"));
    std::fs::write(dir.join("plain.txt"), "x").expect("write");
    let r = run(&["-n", "1", "--wdir", dir_s, "./plain.txt"]);
    assert_eq!(r.code(), 126, "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mpiexec_alias_uses_mpich_spelling() {
    let dir = temp_dir("alias");
    let link = dir.join("mpiexec");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_steadfast"), &link).expect("symlink");
    let mut cmd = Command::new(&link);
    cmd.args(["-np", "2", "sh", "-c", "echo size $STEADFAST_SIZE"]);
    let r = run_cmd(cmd, None);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.lines(), vec!["size 2", "size 2"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn leftover_background_processes_are_cleaned_up() {
    // The background sleep keeps the stdout pipe open; the launcher must not wait for it.
    let r = run(&["-n", "2", "sh", "-c", "sleep 1000 & echo started"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.lines(), vec!["started", "started"]);
    assert!(r.elapsed < Duration::from_secs(8), "took {:?}", r.elapsed);
}

#[test]
fn singleton_without_launcher() {
    let out = Command::new(probe())
        .arg("singleton")
        .env_remove("STEADFAST_RANK")
        .output()
        .expect("run probe");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok singleton\n");
}

#[test]
fn help_describes_the_options() {
    let r = run(&["--help"]);
    assert_eq!(r.code(), 0);
    for opt in [
        "--np",
        "--wdir",
        "--tag-output",
        "--timeout",
        "--ft",
        "--on-failure",
        "-x",
        "--genv",
    ] {
        assert!(r.stdout.contains(opt), "help lacks {opt}:\n{}", r.stdout);
    }
}

/// True if `pid` exists and is not a zombie.
fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().as_bytes().first() != Some(&b'Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

#[test]
fn ranks_die_with_a_sigkilled_launcher() {
    let mut cmd = steadfast();
    cmd.args(["run", "-n", "2", "sh", "-c", "echo $$; exec sleep 1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let pids: Vec<i32> = (0..2)
        .map(|_| {
            lines
                .next()
                .and_then(Result::ok)
                .and_then(|l| l.trim().parse().ok())
                .expect("rank pid")
        })
        .collect();
    assert!(pids.iter().all(|p| process_alive(*p)));
    child.kill().expect("SIGKILL launcher");
    let _ = child.wait();
    let t = Instant::now();
    while pids.iter().any(|p| process_alive(*p)) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "ranks outlived the launcher"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Security: the job key of a multi-host launch never appears on a command line, where
/// any local user could read it from /proc/PID/cmdline. The agent here is a script that
/// records the exact argument vector it is given, then runs it.
#[test]
fn job_key_is_not_on_the_agent_command_line() {
    let dir = temp_dir("agentkey");
    let log = dir.join("argv.log");
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nshift\nprintf '%s\\n' \"$@\" >> '{}'\nexec \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let agent_words = format!("{} {{host}}", agent.display());
    let r = probe_run(
        &[
            "-n",
            "2",
            "--hosts",
            "sf-no-such-host-a:1,sf-no-such-host-b:1",
            "--agent",
            &agent_words,
            "--control-addr",
            "127.0.0.1",
        ],
        &["kvs", "3"],
    );
    let argv = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.lines().iter().filter(|l| l.starts_with("ok kvs")).count(),
        2,
        "{}",
        r.stdout
    );
    assert!(!argv.is_empty(), "the agent was not used");
    assert!(
        !argv.contains("STEADFAST_JOB_KEY="),
        "job key on the agent's command line:\n{argv}"
    );
}

/// Security: the closing message names why connections were refused (a duplicate rank is
/// not a wrong key).
#[test]
fn refusal_message_names_the_cause() {
    let r = probe_run(&["-n", "2"], &["duplicate"]);
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("refused 2 control connection(s): 2 rank already connected or exited"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("wrong job key"), "{}", r.stderr);
}

/// Whether local attacks can run as another user here (root with setpriv).
fn can_setpriv() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ok = root
        && Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: needs root and setpriv to act as another user");
    }
    ok
}

/// Security: another local user holding hundreds of idle connections to the control
/// port cannot keep a rank from joining the job.
#[test]
fn idle_strangers_on_the_control_port_do_not_block_ranks() {
    if !can_setpriv() {
        return;
    }
    // Rank 0 first has user 65534 open 300 silent connections to the control port (held
    // open for 30 s), then bootstraps.
    let script = format!(
        r#"if [ "$STEADFAST_RANK" = 0 ]; then
  exec 3< <(setpriv --reuid=65534 --regid=65534 --clear-groups bash -c '
    h=${{STEADFAST_CONTROL%:*}}; p=${{STEADFAST_CONTROL##*:}}
    for i in $(seq 300); do exec {{fd}}<>/dev/tcp/$h/$p || exit 1; done
    echo ready; exec sleep 30')
  read -r line <&3; [ "$line" = ready ] || exit 9
fi
exec {} kvs 2"#,
        probe().display()
    );
    let r = run(&["-n", "2", "--timeout", "40", "bash", "-c", &script]);
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.lines().iter().filter(|l| l.starts_with("ok kvs")).count(),
        2,
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    // The strangers were refused (or held back by the kernel), never counted as ranks.
    assert!(!r.stderr.contains("rank already connected"), "{}", r.stderr);
}

/// Output longer than the launcher's line buffer is forwarded byte for byte (no newline
/// added every 64 KiB).
#[test]
fn long_lines_are_forwarded_unchanged() {
    let r = run(&[
        "-n",
        "1",
        "sh",
        "-c",
        "head -c 300000 /dev/zero | tr '\\0' a; echo; head -c 200000 /dev/zero | tr '\\0' b",
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let expect = "a".repeat(300_000) + "\n" + &"b".repeat(200_000);
    assert!(
        r.stdout == expect,
        "output altered: {} bytes, {} newlines",
        r.stdout.len(),
        r.stdout.matches('\n').count()
    );
}

/// Security/cleanup: the job directory of a SIGKILLed launcher (no teardown ran) is
/// removed by the next job of the same user; a live job's directory is left alone.
#[test]
fn stale_job_directory_of_a_killed_launcher_is_removed() {
    let mut cmd = steadfast();
    cmd.args(["run", "-n", "1", "sh", "-c", "echo $STEADFAST_JOBDIR; exec sleep 1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let dir = PathBuf::from(lines.next().and_then(Result::ok).expect("job dir"));
    assert!(dir.is_dir());
    // A live job at the same time must survive the sweep.
    let mut live = steadfast();
    live.args(["run", "-n", "1", "sh", "-c", "echo $STEADFAST_JOBDIR; exec sleep 1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null());
    let mut live = live.spawn().expect("spawn");
    let mut live_lines = BufReader::new(live.stdout.take().expect("stdout")).lines();
    let live_dir = PathBuf::from(live_lines.next().and_then(Result::ok).expect("job dir"));
    child.kill().expect("SIGKILL launcher");
    let _ = child.wait();
    // (Other tests' launchers, running in parallel, may sweep it first: also correct.)
    let r = run(&["-n", "1", "true"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let stale_left = dir.exists();
    let live_left = live_dir.is_dir();
    let _ = live.kill();
    let _ = live.wait();
    assert!(!stale_left, "stale job directory {} left behind", dir.display());
    assert!(live_left, "a live job's directory was removed");
}
